-- DCGM companions per node and day: sums and counts of known samples (NULL samples, e.g. while
-- a node is down or profiling is paused, are unknown and not counted). Whole GPUs only: a MIG
-- instance's ratios are relative to the instance (gpu_instance is NULL for a whole GPU). Built by day
-- (docs/incremental.md): a day's row reads that day's samples only.
{{ daily_microbatch_config('metric_date', 'metric_date') }}
with

samples as (
    select * from {{ ref('int_dcgm_samples') }}
    where value is not null and gpu_instance is null
),

final as (
    select
        node,
        cast(sampled_at as date) as metric_date,
        sum(case when field = 'DCGM_FI_DEV_GPU_UTIL' then value / 100.0 end) as dcgm_gpu_util_sum,
        count(case when field = 'DCGM_FI_DEV_GPU_UTIL' then 1 end) as dcgm_gpu_util_samples,
        sum(case when field = 'DCGM_FI_PROF_PIPE_TENSOR_ACTIVE' then value end) as dcgm_tensor_active_sum,
        count(case when field = 'DCGM_FI_PROF_PIPE_TENSOR_ACTIVE' then 1 end) as dcgm_tensor_active_samples
    from samples
    group by all
)

select * from final
