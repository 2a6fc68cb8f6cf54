-- Companion measures per GPU and day (metric_tree.md §2.2 "Companion metrics": outside the
-- identity, never summed into goodput): additive numerators and denominators, so every grain
-- above (node, cluster, fleet) is Σnumerator / Σdenominator. One row per installed GPU-day
-- (inventory); a measure with no known input that day is NULL (unknown, never 0).
--   DCGM (whole GPUs only; gpu_instance is NULL):
--     dcgm_gpu_util, dcgm_tensor_active   Σ sample / known samples (all samples, as fct_cluster_day)
--     clock_ratio    Σ SM_CLOCK / max_sm_clock_mhz(sku) over busy samples (GPU_UTIL >= 50 %, the
--                    clock is at its maximum under load and idles at ~345 MHz otherwise) / busy samples
--     power_ratio    Σ POWER_USAGE / tdp_w(sku) over busy samples / busy samples
--     thermal_ok     (elapsed − thermal violation) seconds / elapsed seconds between consecutive known
--                    samples of the THERMAL_VIOLATION counter (interval dated by its end): the share of
--                    time not throttled for temperature (1 − the violation share, so that it is > 0
--                    and a log-scale detector can read it; 1 on a healthy GPU)
--     dcgm_sm_active, dcgm_dram_active   Σ PROF_SM_ACTIVE / PROF_DRAM_ACTIVE / known samples (all samples)
--     throttle_share  Σ violation seconds of the POWER_VIOLATION and THERMAL_VIOLATION counters (their sum
--                    per sample interval capped at the interval) / elapsed seconds of the intervals where at
--                    least one is known; covered_throttle_share = known counters / 2 (0.5: one of the two)
--     xid_events     XID events (int_dcgm_xid_events, not first observations) dated by their sample, on
--                    GPU-days with XID_ERRORS samples (xid_gpu_days = 1; NULL without the field)
--     energy_j       Σ TOTAL_ENERGY_CONSUMPTION deltas (mJ / 1000) where the counter is known, else the
--                    power integral Σ POWER_USAGE × seconds since the previous sample (intervals up to
--                    var companion_max_power_gap_s, default 900 s); energy_elapsed_s = the seconds covered
--   Probes (status pass or fail, value known):
--     probe_gemm_ratio     Σ GEMM TFLOP/s / Σ the SKU's peak (probe 'gemm')
--     probe_hbm_bw_ratio   Σ HBM triad GB/s / Σ the SKU's HBM bandwidth (probe 'hbm_stream')
-- Coverage (coverage_<node_id>) is 1 when the GPU-day has the measure, else 0; Σ over GPUs
-- rolled up with gpu_count gives the share of GPU-days measured.
-- Built by day (docs/incremental.md): a day reads that day's calendar row, samples, counter deltas and probes.
{{ daily_microbatch_config('metric_date', 'metric_date') }}
with

gpus as (
    select * from {{ ref('stg_inventory__gpus') }}
),

days as (
    select * from {{ ref('int_calendar_days') }}
    where {{ in_batch('day') }}
),

specs as (
    select * from {{ ref('gpu_sku_specs') }}
    where dtype = '{{ var("peak_dtype", "bf16") }}'
),

gpu_days as (
    select distinct
        gpus.cluster,
        gpus.node,
        gpus.sku,
        gpus.gpu_uuid,
        days.day as metric_date
    from gpus
    inner join days
        on gpus.valid_from_at < days.day_end_at
        and (gpus.valid_to_at is null or gpus.valid_to_at > days.day_start_at)
),

samples as (
    -- one row per GPU and sample instant with the gauges side by side
    select
        gpu_uuid,
        sampled_at,
        max(case when field = 'DCGM_FI_DEV_GPU_UTIL' then value end) as gpu_util,
        max(case when field = 'DCGM_FI_PROF_PIPE_TENSOR_ACTIVE' then value end) as tensor_active,
        max(case when field = 'DCGM_FI_DEV_SM_CLOCK' then value end) as sm_clock_mhz,
        max(case when field = 'DCGM_FI_DEV_POWER_USAGE' then value end) as power_w,
        max(case when field = 'DCGM_FI_PROF_SM_ACTIVE' then value end) as sm_active,
        max(case when field = 'DCGM_FI_PROF_DRAM_ACTIVE' then value end) as dram_active,
        max(case when field = 'DCGM_FI_DEV_XID_ERRORS' then value end) as xid_code
    from {{ ref('int_dcgm_samples') }}
    where value is not null
        and gpu_instance is null
        and field in (
            'DCGM_FI_DEV_GPU_UTIL', 'DCGM_FI_PROF_PIPE_TENSOR_ACTIVE', 'DCGM_FI_DEV_SM_CLOCK', 'DCGM_FI_DEV_POWER_USAGE',
            'DCGM_FI_PROF_SM_ACTIVE', 'DCGM_FI_PROF_DRAM_ACTIVE', 'DCGM_FI_DEV_XID_ERRORS'
        )
    group by all
),

power_samples as (
    -- every known POWER_USAGE sample (the macro below keeps the batch's; the look-back reads power_day_last)
    select gpu_uuid, sampled_at, value as power_w
    from {{ ref('int_dcgm_samples').render() }}
    where field = 'DCGM_FI_DEV_POWER_USAGE' and value is not null and gpu_instance is null
),

power_day_last as (
    -- each GPU's last known POWER_USAGE sample of every day (per node and index; the look-back takes the latest)
    select gpu_uuid, sampled_at, value as power_w
    from {{ ref('int_dcgm_series_day_last').render() }}
    where field = 'DCGM_FI_DEV_POWER_USAGE' and gpu_instance is null
),

power_series as (
    -- the batch's samples, plus each GPU's last sample before the batch (built by day: the interval that
    -- crosses midnight belongs to the day of its end, exactly as in a build of all days at once)
    {{ batch_with_last_before('power_samples', ['gpu_uuid'], 'sampled_at', ['power_w'], 'power_day_last') }}
),

power_intervals as (
    -- the power integral: each known POWER_USAGE sample times the seconds since the GPU's previous one
    select
        gpu_uuid,
        sampled_at,
        power_w,
        {{ epoch_seconds('sampled_at') }} - {{ epoch_seconds('previous_sampled_at') }} as elapsed_s
    from (
        select
            gpu_uuid,
            sampled_at,
            power_w,
            in_batch,
            lag(sampled_at) over (partition by gpu_uuid order by sampled_at) as previous_sampled_at
        from power_series
    ) as power_samples
    where in_batch
),

power_energy as (
    select
        gpu_uuid,
        cast(sampled_at as date) as metric_date,
        sum(power_w * elapsed_s) as energy_j,
        sum(elapsed_s) as energy_elapsed_s
    from power_intervals
    where elapsed_s > 0 and elapsed_s <= {{ var('companion_max_power_gap_s', 900) }}
    group by all
),

counter_energy as (
    select
        gpu_uuid,
        cast(sampled_at as date) as metric_date,
        sum(delta / 1000.0) as energy_j,
        sum({{ epoch_seconds('sampled_at') }} - {{ epoch_seconds('previous_sampled_at') }}) as energy_elapsed_s
    from {{ ref('int_dcgm_counter_deltas') }}
    where field = 'DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION'
        and gpu_instance is null
        and delta is not null
        and sampled_at > previous_sampled_at
    group by all
),

throttle_intervals as (
    -- per sample instant: violation seconds of the power and thermal counters, summed and capped at the interval
    select
        gpu_uuid,
        sampled_at,
        max({{ epoch_seconds('sampled_at') }} - {{ epoch_seconds('previous_sampled_at') }}) as elapsed_s,
        sum(least(delta / 1e9, {{ epoch_seconds('sampled_at') }} - {{ epoch_seconds('previous_sampled_at') }})) as violation_s
    from {{ ref('int_dcgm_counter_deltas') }}
    where field in ('DCGM_FI_DEV_POWER_VIOLATION', 'DCGM_FI_DEV_THERMAL_VIOLATION')
        and gpu_instance is null
        and delta is not null
        and sampled_at > previous_sampled_at
    group by all
),

throttle as (
    select
        intervals.gpu_uuid,
        cast(intervals.sampled_at as date) as metric_date,
        sum(least(intervals.violation_s, intervals.elapsed_s)) as throttle_s,
        sum(intervals.elapsed_s) as throttle_elapsed_s
    from throttle_intervals as intervals
    group by all
),

throttle_counters as (
    select
        gpu_uuid,
        cast(sampled_at as date) as metric_date,
        count(distinct field) as counters_known
    from {{ ref('int_dcgm_counter_deltas') }}
    where field in ('DCGM_FI_DEV_POWER_VIOLATION', 'DCGM_FI_DEV_THERMAL_VIOLATION')
        and gpu_instance is null
        and delta is not null
    group by all
),

xids as (
    select
        gpu_uuid,
        cast(sampled_at as date) as metric_date,
        count(*) as xid_events
    from {{ ref('int_dcgm_xid_events') }}
    where gpu_instance is null and not is_first_observation
    group by all
),

gauges as (
    select
        gpu_uuid,
        cast(sampled_at as date) as metric_date,
        sum(gpu_util / 100.0) as dcgm_gpu_util_sum,
        count(gpu_util) as dcgm_gpu_util_samples,
        sum(tensor_active) as dcgm_tensor_active_sum,
        count(tensor_active) as dcgm_tensor_active_samples,
        sum(case when gpu_util >= 50 then sm_clock_mhz end) as busy_sm_clock_mhz_sum,
        count(case when gpu_util >= 50 then sm_clock_mhz end) as busy_sm_clock_samples,
        sum(case when gpu_util >= 50 then power_w end) as busy_power_w_sum,
        count(case when gpu_util >= 50 then power_w end) as busy_power_samples,
        sum(sm_active) as dcgm_sm_active_sum,
        count(sm_active) as dcgm_sm_active_samples,
        sum(dram_active) as dcgm_dram_active_sum,
        count(dram_active) as dcgm_dram_active_samples,
        count(xid_code) as xid_samples
    from samples
    group by all
),

thermal as (
    select
        gpu_uuid,
        cast(sampled_at as date) as metric_date,
        sum({{ epoch_seconds('sampled_at') }} - {{ epoch_seconds('previous_sampled_at') }}) as thermal_elapsed_s,
        sum(
            greatest(
                {{ epoch_seconds('sampled_at') }} - {{ epoch_seconds('previous_sampled_at') }}
                - least(delta / 1e9, {{ epoch_seconds('sampled_at') }} - {{ epoch_seconds('previous_sampled_at') }}),
                0
            )
        ) as thermal_ok_s
    from {{ ref('int_dcgm_counter_deltas') }}
    where field = 'DCGM_FI_DEV_THERMAL_VIOLATION'
        and gpu_instance is null
        and delta is not null
        and sampled_at > previous_sampled_at
    group by all
),

probes as (
    select
        gpu_uuid,
        cast(started_at as date) as metric_date,
        sum(case when probe = 'gemm' then value end) as probe_gemm_value,
        sum(case when probe = 'gemm' then peak end) as probe_gemm_peak,
        sum(case when probe = 'hbm_stream' then value end) as probe_hbm_value,
        sum(case when probe = 'hbm_stream' then peak end) as probe_hbm_peak
    from {{ ref('stg_probe_results__results') }}
    where value is not null
        and peak > 0
        and status in ('pass', 'fail')
        and probe in ('gemm', 'hbm_stream')
        and {{ in_batch('cast(started_at as date)') }}
    group by all
),

final as (
    select
        ----------  ids
        gpu_days.cluster,
        gpu_days.node,
        gpu_days.sku,
        gpu_days.gpu_uuid,
        ----------  numerics (all additive)
        1 as gpu_count,
        gauges.dcgm_gpu_util_sum,
        nullif(gauges.dcgm_gpu_util_samples, 0) as dcgm_gpu_util_samples,
        gauges.dcgm_tensor_active_sum,
        nullif(gauges.dcgm_tensor_active_samples, 0) as dcgm_tensor_active_samples,
        gauges.busy_sm_clock_mhz_sum / specs.max_sm_clock_mhz as clock_ratio_sum,
        nullif(gauges.busy_sm_clock_samples, 0) as clock_ratio_samples,
        gauges.busy_power_w_sum / specs.tdp_w as power_ratio_sum,
        nullif(gauges.busy_power_samples, 0) as power_ratio_samples,
        thermal.thermal_ok_s,
        nullif(thermal.thermal_elapsed_s, 0) as thermal_elapsed_s,
        probes.probe_gemm_value,
        probes.probe_gemm_peak,
        probes.probe_hbm_value,
        probes.probe_hbm_peak,
        gauges.dcgm_sm_active_sum,
        nullif(gauges.dcgm_sm_active_samples, 0) as dcgm_sm_active_samples,
        gauges.dcgm_dram_active_sum,
        nullif(gauges.dcgm_dram_active_samples, 0) as dcgm_dram_active_samples,
        throttle.throttle_s,
        nullif(throttle.throttle_elapsed_s, 0) as throttle_elapsed_s,
        case when gauges.xid_samples > 0 then coalesce(xids.xid_events, 0) end as xid_events,
        case when gauges.xid_samples > 0 then 1 end as xid_gpu_days,
        coalesce(counter_energy.energy_j, power_energy.energy_j) as energy_j,
        coalesce(counter_energy.energy_elapsed_s, power_energy.energy_elapsed_s) as energy_elapsed_s,
        ----------  coverage: 1 when the GPU-day has the measure
        {% for node_id, denominator in [
            ('dcgm_gpu_util', 'gauges.dcgm_gpu_util_samples'),
            ('dcgm_tensor_active', 'gauges.dcgm_tensor_active_samples'),
            ('clock_ratio', 'gauges.busy_sm_clock_samples'),
            ('power_ratio', 'gauges.busy_power_samples'),
            ('thermal_ok', 'thermal.thermal_elapsed_s'),
            ('probe_gemm_ratio', 'probes.probe_gemm_peak'),
            ('probe_hbm_bw_ratio', 'probes.probe_hbm_peak'),
            ('dcgm_sm_active', 'gauges.dcgm_sm_active_samples'),
            ('dcgm_dram_active', 'gauges.dcgm_dram_active_samples'),
            ('xid_count', 'gauges.xid_samples'),
        ] %}
        case when coalesce({{ denominator }}, 0) > 0 then 1.0 else 0.0 end as covered_{{ node_id }},
        {% endfor %}
        coalesce(throttle_counters.counters_known, 0) / 2.0 as covered_throttle_share,
        ----------  dates
        gpu_days.metric_date
    from gpu_days
    left join specs on gpu_days.sku = specs.sku
    left join gauges on gpu_days.gpu_uuid = gauges.gpu_uuid and gpu_days.metric_date = gauges.metric_date
    left join thermal on gpu_days.gpu_uuid = thermal.gpu_uuid and gpu_days.metric_date = thermal.metric_date
    left join probes on gpu_days.gpu_uuid = probes.gpu_uuid and gpu_days.metric_date = probes.metric_date
    left join power_energy
        on gpu_days.gpu_uuid = power_energy.gpu_uuid and gpu_days.metric_date = power_energy.metric_date
    left join counter_energy
        on gpu_days.gpu_uuid = counter_energy.gpu_uuid and gpu_days.metric_date = counter_energy.metric_date
    left join throttle on gpu_days.gpu_uuid = throttle.gpu_uuid and gpu_days.metric_date = throttle.metric_date
    left join throttle_counters
        on gpu_days.gpu_uuid = throttle_counters.gpu_uuid and gpu_days.metric_date = throttle_counters.metric_date
    left join xids on gpu_days.gpu_uuid = xids.gpu_uuid and gpu_days.metric_date = xids.metric_date
)

select * from final
