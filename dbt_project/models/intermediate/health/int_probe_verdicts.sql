-- Probe rules (seed probe_rules) applied to every probe result row: one row per (result, matching rule).
-- value rules test the row's value or fraction_of_peak; variance rules its deviation from the cohort
-- median (same day, SKU, device kind, probe, metric and node software stack); failure_check rules its
-- status or throttle class. Unknown inputs leave `fired` NULL and the verdict 'unknown', never a pass.
-- A fired compute or memory rule on a throughput row carries its root cause from the clock-normalised row of the
-- same run and GPU (below): thermal, silicon, clock or unknown.
-- Built by day of the probe (docs/incremental.md): cohorts are per day, so a day's verdicts read that day's results,
-- plus the whole days holding each series' previous run before the batch (its `fired`, which the re-run rule needs,
-- depends on its own day's cohort); only the batch's rows are kept. A day built alone equals a full build.
{{ daily_microbatch_config('probe_date', 'probe_date') }}
with

probe_results as (
    select *, cast(started_at as date) as probe_date
    from {{ ref('stg_probe_results__results') }}
),

previous_run_days as (
    -- the day of each (GPU, probe, metric)'s last run before the batch (none outside a day-built run)
    select distinct cast(max(started_at) as date) as probe_date
    from probe_results
    where {{ before_batch('probe_date') }}
    group by gpu_uuid, probe, metric
),

results as (
    select
        r.*,
        {{ in_batch('r.probe_date') }} as in_batch,
        coalesce(s.driver, 'unknown') || '/' || coalesce(s.cuda, 'unknown') || '/' || coalesce(s.torch, 'unknown')
            as software_stack
    from probe_results as r
    left join {{ ref('stg_node_software__versions') }} as s
        on s.node = r.node
        and r.started_at >= s.valid_from_at
        and (s.valid_to_at is null or r.started_at < s.valid_to_at)
    where ({{ in_batch("r.probe_date") }}) or r.probe_date in (select probe_date from previous_run_days)
),

-- rows that may form a baseline: measured, not invalidated by an idle window
baseline_rows as (
    select * from results
    where value is not null and status in ('pass', 'fail') and coalesce(throttle_class, '') <> 'idle_in_window'
),

cohorts as (
    select
        probe_date, sku, device_kind, probe, metric, software_stack,
        count(*) as cohort_n,
        median(value) as cohort_median
    from baseline_rows
    group by all
),

cohort_mad as (
    select
        b.probe_date, b.sku, b.device_kind, b.probe, b.metric, b.software_stack,
        median(abs(b.value - c.cohort_median)) as cohort_mad
    from baseline_rows as b
    inner join cohorts as c using (probe_date, sku, device_kind, probe, metric, software_stack)
    group by all
),

scored as (
    select
        r.*,
        c.cohort_n,
        c.cohort_median,
        case when c.cohort_median <> 0 then r.value / c.cohort_median - 1 end as deviation,
        case when m.cohort_mad > 0 then (r.value - c.cohort_median) / (1.4826 * m.cohort_mad) end as robust_z
    from results as r
    left join cohorts as c using (probe_date, sku, device_kind, probe, metric, software_stack)
    left join cohort_mad as m using (probe_date, sku, device_kind, probe, metric, software_stack)
),

rules as (
    select
        *,
        split_part(criteria, ' ', 2) as op,
        case when split_part(criteria, ' ', 2) <> 'in' then try_cast(split_part(criteria, ' ', 3) as double) end
            as threshold,
        case when split_part(criteria, ' ', 2) = 'in' then {{ split_to_list("split_part(criteria, ' ', 3)", "'|'") }} end
            as allowed
    from {{ ref('probe_rules') }}
),

-- the rules matching each (probe, metric) pair: the patterns are tested once per pair, not once per result row
rule_matches as (
    select
        pairs.probe as result_probe,
        pairs.metric as result_metric,
        u.rule, u.function, u.field, u.criteria, u.category, u.severity, u.confirm_rerun, u.op, u.threshold,
        u.allowed
    from (select distinct probe, metric from scored) as pairs
    inner join rules as u
        on {{ regex_full_match('pairs.probe', 'u.probe') }}
        and {{ regex_partial_match('pairs.metric', 'u.metric_pattern') }}
),

matched as (
    select
        s.*,
        u.rule, u.function, u.field, u.criteria, u.category, u.severity, u.confirm_rerun, u.op, u.threshold,
        u.allowed,
        case
            when u.function = 'variance' and s.cohort_n >= {{ var('probe_cohort_min_n', 3) }} then s.deviation
            when u.function = 'variance' then null
            when u.field = 'fraction_of_peak' then s.fraction_of_peak
            when u.field = 'value' then s.value
        end as observed,
        case when u.field = 'status' then s.status when u.field = 'throttle_class' then s.throttle_class end
            as observed_text
    from scored as s
    inner join rule_matches as u on u.result_probe = s.probe and u.result_metric = s.metric
    -- CPU rows carry no physical limit and never share a cohort with GPUs; only failure checks apply
    where s.device_kind = 'cuda' or u.function = 'failure_check'
),

tested as (
    select
        *,
        case
            when op = 'in' then coalesce({{ list_has('allowed', 'observed_text') }}, false)
            when observed is null then null
            when op = '<' then observed < threshold
            when op = '<=' then observed <= threshold
            when op = '>' then observed > threshold
            when op = '>=' then observed >= threshold
        end as fired
    from matched
),

-- The clock-normalised companion of a throughput row (probes.md section 1): a GEMM's `<m>_tflops` has
-- `<m>_eff_clock` (throughput over what its SMs allow at the mean SM clock of the timed window), an HBM kernel's
-- `<m>_gbps` has `<m>_eff_mem_clock`. Their floor rules tell a slow kernel or slow silicon (eff low too) from a clock
-- held down by the power cap or heat (eff normal).
clock_normalised as (
    select run_id, gpu_uuid, probe, metric as clock_metric, value as clock_value, fired as clock_low
    from tested
    where rule in ('eff_clock_floor', 'eff_mem_clock_floor')
),

explained as (
    select
        t.*,
        c.clock_metric,
        c.clock_value,
        case
            when not coalesce(t.fired, false) or t.category not in ('Compute', 'Memory') then null
            when right(t.metric, 7) <> '_tflops' and right(t.metric, 5) <> '_gbps' then null
            when t.throttle_class in ('thermal', 'hw_slowdown') then 'thermal'
            when c.clock_low then 'silicon'
            when not c.clock_low then 'clock'
            else 'unknown'
        end as root_cause
    from tested as t
    left join clock_normalised as c
        on t.run_id = c.run_id
        and t.gpu_uuid = c.gpu_uuid
        and t.probe = c.probe
        and c.clock_metric = case
            when right(t.metric, 7) = '_tflops' then substr(t.metric, 1, length(t.metric) - 7) || '_eff_clock'
            when right(t.metric, 5) = '_gbps' then substr(t.metric, 1, length(t.metric) - 5) || '_eff_mem_clock'
        end
),

confirmed as (
    select
        *,
        lag(fired) over (partition by gpu_uuid, probe, metric, rule order by started_at) as fired_previous_run,
        -- the confirming re-run of the same day (the suite re-runs a failed probe at once); within the day so that a
        -- day built alone equals a full build
        lead(fired) over (partition by gpu_uuid, probe, metric, rule, probe_date order by started_at)
            as fired_next_run_same_day
    from explained
)

select
    run_id,
    node,
    gpu_uuid,
    gpu_index,
    sku,
    device_kind,
    probe_date,
    started_at,
    probe,
    metric,
    unit,
    rule,
    function,
    field,
    criteria,
    category,
    severity,
    confirm_rerun,
    status as result_status,
    throttle_class,
    value,
    fraction_of_peak,
    peak,
    ci_low,
    ci_high,
    software_stack,
    cohort_n,
    cohort_median,
    deviation,
    robust_z,
    observed,
    fired,
    coalesce(fired and confirm_rerun and fired_previous_run, false) as rerun_confirmed,
    coalesce(
        fired and confirm_rerun and not coalesce(fired_previous_run, false) and not fired_next_run_same_day, false
    ) as rerun_cleared,
    root_cause,
    clock_metric,
    clock_value,
    case
        when fired is null then 'unknown'
        when not fired then 'pass'
        when severity = 'fail' and confirm_rerun and not coalesce(fired_previous_run, false) then 'warn'
        else severity
    end as verdict,
    case
        when fired then
            rule || ' (' || category || '): ' || probe || '/' || metric || ' '
            || case
                when op = 'in' then field || ' = ' || coalesce(observed_text, 'NULL')
                when function = 'variance' then
                    'value ' || {{ format_general('value', 4) }} || ' ' || unit || ' is ' || printf('%+.1f%%', 100 * deviation)
                    || ' vs cohort median ' || {{ format_general('cohort_median', 4) }} || ' (n=' || cohort_n || ')'
                    || coalesce(', robust z ' || printf('%.1f', robust_z), '')
                else field || ' = ' || {{ format_general('observed', 4) }}
                    || coalesce(' (value ' || {{ format_general('value', 4) }} || ' ' || unit || ', 95% CI '
                        || {{ format_general('ci_low', 4) }} || '-' || {{ format_general('ci_high', 4) }} || ')', '')
            end
            || ' breaks ' || criteria
            || case root_cause
                when 'thermal' then '; root cause: a defect-class clock event (' || throttle_class || ') during the probe'
                when 'silicon' then '; root cause: ' || clock_metric || ' = ' || {{ format_general('clock_value', 3) }}
                    || ' is low too, so the kernel or the silicon is slow at the clock it ran'
                when 'clock' then '; root cause: ' || clock_metric || ' = ' || {{ format_general('clock_value', 3) }}
                    || ' is normal, so the clock was held down (power cap or heat), not the silicon'
                when 'unknown' then '; root cause unknown: no clock-normalised figure (the clock was not sampled)'
                else '' end
            || case
                when not confirm_rerun or coalesce(fired_previous_run, false) then ''
                when fired_next_run_same_day = false then '; not confirmed: the re-run the same day passed'
                else '; awaiting a confirming re-run' end
    end as evidence
from confirmed
where in_batch
