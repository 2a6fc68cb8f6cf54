-- Node health per node and UTC day: the probe verdicts (what ran, the worst verdict, failing and warning rules
-- with their evidence), DCGM health (XIDs, ECC, remapped rows, throttle seconds), straggler blame from traces,
-- repeated failures over the last 7 days, and the drain list: a node is drained for a fail-class probe verdict
-- (hard failures at once, the rest once a re-run confirmed them), a critical XID, an uncorrectable ECC error,
-- a failed row remap, or as a lemon (failing on var lemon_min_fail_days = 2 of the last 7 days).

with

verdicts as (
    select
        *,
        -- a first firing that the same day's confirming re-run cleared counts as a pass for the node's day
        case when rerun_cleared then 1 when verdict = 'fail' then 3 when verdict = 'warn' then 2 when verdict = 'pass' then 1
            else 0 end as verdict_rank
    from {{ ref('int_probe_verdicts') }}
),

probe_days as (
    select
        node,
        probe_date as health_date,
        count(distinct probe) as probes_run,
        count(distinct gpu_uuid) filter (where device_kind = 'cuda') as gpus_probed,
        count(distinct run_id) as runs,
        count(*) as rule_checks,
        count(*) filter (where verdict = 'unknown') as unknown_checks,
        max(verdict_rank) as worst_rank,
        count(distinct gpu_uuid) filter (where verdict = 'fail') as failing_gpus,
        {{ sorted_distinct_list('rule', "verdict = 'fail'") }} as failing_rule_list,
        {{ sorted_distinct_list('rule', "verdict = 'warn' and not rerun_cleared") }} as warning_rule_list,
        {{ sorted_distinct_list('rule', 'rerun_cleared') }} as unconfirmed_rule_list,
        {{ sorted_distinct_string_agg(
            "'gpu ' || coalesce(cast(gpu_index as string), '?') || ' ' || gpu_uuid || ': ' || evidence", "'; '", "verdict = 'fail'"
        ) }} as failing_evidence,
        {{ sorted_distinct_string_agg(
            "'gpu ' || coalesce(cast(gpu_index as string), '?') || ' ' || gpu_uuid || ': ' || evidence", "'; '",
            "verdict = 'warn' and not rerun_cleared"
        ) }} as warning_evidence,
        {{ sorted_distinct_list('category', "verdict = 'fail'") }} as failing_categories
    from verdicts
    group by node, probe_date
),

spine as (
    select node, health_date from probe_days
    union
    select node, health_date from {{ ref('int_node_day_dcgm_health') }}
    union
    select node, health_date from {{ ref('int_node_day_straggler_blame') }}
),

joined as (
    select
        s.node,
        s.health_date,
        coalesce(p.probes_run, 0) as probes_run,
        coalesce(p.gpus_probed, 0) as gpus_probed,
        coalesce(p.runs, 0) as runs,
        coalesce(p.rule_checks, 0) as rule_checks,
        coalesce(p.unknown_checks, 0) as unknown_checks,
        coalesce(p.worst_rank, 0) as worst_rank,
        coalesce(p.failing_gpus, 0) as failing_gpus,
        p.failing_rule_list,
        p.warning_rule_list,
        p.unconfirmed_rule_list,
        p.failing_evidence,
        p.warning_evidence,
        p.failing_categories,
        d.xid_events,
        d.critical_xid_events,
        d.xid_codes,
        d.ecc_sbe_errors,
        d.ecc_dbe_errors,
        d.uncorrectable_remapped_rows,
        d.row_remap_failure,
        d.thermal_throttle_s,
        d.power_throttle_s,
        b.traced_steps,
        b.straggler_steps
    from spine as s
    left join probe_days as p using (node, health_date)
    left join {{ ref('int_node_day_dcgm_health') }} as d using (node, health_date)
    left join {{ ref('int_node_day_straggler_blame') }} as b using (node, health_date)
),

judged as (
    select
        *,
        concat_ws(
            '; ',
            case when worst_rank = 3 then
                failing_gpus || ' GPU(s) failed ' || {{ join_list('failing_rule_list', "', '") }}
                || ' (' || {{ join_list('failing_categories', "', '") }} || ')' end,
            case when critical_xid_events > 0 then
                critical_xid_events || ' critical XID event(s) in DCGM (codes ' || {{ join_list('xid_codes', "', '") }}
                || ')' end,
            case when ecc_dbe_errors > 0 then printf('%.0f', ecc_dbe_errors) || ' uncorrectable ECC error(s) in DCGM' end,
            case when row_remap_failure > 0 then 'row remap failure reported by DCGM' end
        ) as failures_today
    from joined
),

with_history as (
    select
        *,
        failures_today <> '' as failed_today,
        count(*) filter (where failures_today <> '') over (
            partition by node order by health_date range between interval 6 days preceding and current row
        ) as fail_days_7d
    from judged
)

select
    node,
    health_date,
    probes_run,
    gpus_probed,
    runs,
    rule_checks,
    unknown_checks,
    case worst_rank when 3 then 'fail' when 2 then 'warn' when 1 then 'pass' else 'unknown' end as worst_verdict,
    failing_gpus,
    {{ join_list('failing_rule_list', "','") }} as failing_rules,
    {{ join_list('warning_rule_list', "','") }} as warning_rules,
    {{ join_list('unconfirmed_rule_list', "','") }} as unconfirmed_rules,
    failing_evidence,
    warning_evidence,
    xid_events,
    critical_xid_events,
    {{ join_list('xid_codes', "','") }} as xid_codes,
    ecc_sbe_errors,
    ecc_dbe_errors,
    uncorrectable_remapped_rows,
    row_remap_failure,
    thermal_throttle_s,
    power_throttle_s,
    traced_steps,
    straggler_steps,
    failed_today,
    fail_days_7d,
    fail_days_7d >= {{ var('lemon_min_fail_days', 2) }} as lemon,
    failed_today or fail_days_7d >= {{ var('lemon_min_fail_days', 2) }} as drain_recommended,
    case
        when failed_today or fail_days_7d >= {{ var('lemon_min_fail_days', 2) }} then
            'drain: ' || concat_ws(
                '; ',
                nullif(failures_today, ''),
                case when fail_days_7d >= {{ var('lemon_min_fail_days', 2) }} then
                    'lemon: failed on ' || fail_days_7d || ' of the last 7 days' end
            )
    end as drain_reason
from with_history
