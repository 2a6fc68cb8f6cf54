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
        max(case when field = 'DCGM_FI_DEV_POWER_USAGE' then value end) as power_w
    from {{ ref('int_dcgm_samples') }}
    where value is not null
        and gpu_instance is null
        and field in (
            'DCGM_FI_DEV_GPU_UTIL', 'DCGM_FI_PROF_PIPE_TENSOR_ACTIVE', 'DCGM_FI_DEV_SM_CLOCK', 'DCGM_FI_DEV_POWER_USAGE'
        )
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
        count(case when gpu_util >= 50 then power_w end) as busy_power_samples
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
        ----------  coverage: 1 when the GPU-day has the measure
        {% for node_id, denominator in [
            ('dcgm_gpu_util', 'gauges.dcgm_gpu_util_samples'),
            ('dcgm_tensor_active', 'gauges.dcgm_tensor_active_samples'),
            ('clock_ratio', 'gauges.busy_sm_clock_samples'),
            ('power_ratio', 'gauges.busy_power_samples'),
            ('thermal_ok', 'thermal.thermal_elapsed_s'),
            ('probe_gemm_ratio', 'probes.probe_gemm_peak'),
            ('probe_hbm_bw_ratio', 'probes.probe_hbm_peak'),
        ] %}
        case when coalesce({{ denominator }}, 0) > 0 then 1.0 else 0.0 end as covered_{{ node_id }},
        {% endfor %}
        ----------  dates
        gpu_days.metric_date
    from gpu_days
    left join specs on gpu_days.sku = specs.sku
    left join gauges on gpu_days.gpu_uuid = gauges.gpu_uuid and gpu_days.metric_date = gauges.metric_date
    left join thermal on gpu_days.gpu_uuid = thermal.gpu_uuid and gpu_days.metric_date = thermal.metric_date
    left join probes on gpu_days.gpu_uuid = probes.gpu_uuid and gpu_days.metric_date = probes.metric_date
)

select * from final
