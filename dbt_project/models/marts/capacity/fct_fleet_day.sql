-- The capacity lens for the whole fleet per day: sums of the cluster-day numerators and
-- denominators (a fleet ratio is never a mean of cluster ratios). useful_flop extrapolates the
-- fleet's known FLOPs to its productive time, as fct_cluster_day does from its nodes: summing the
-- clusters' useful_flop would count a cluster without any FLOPs metadata (useful_flop NULL) as zero
-- useful work while its productive time stays in the denominators.
-- Built by day (docs/incremental.md): a day's rows read that day's rows of the models above.
{{ daily_microbatch_config('metric_date', 'metric_date') }}
with

cluster_days as (
    select * from {{ ref('fct_cluster_day') }}
),

summed as (
    select
        'fleet' as fleet,
        metric_date,
        count(*) as cluster_count,
        sum(node_count) as node_count,
        sum(gpu_count) as gpu_count,
        {{ sorted_distinct_string_agg('skus', "','") }} as skus,
        {% for state in capacity_ledger_states() %}
        sum({{ state }}_gs) as {{ state }}_gs,
        sum({{ state }}_pfs) as {{ state }}_pfs,
        {% endfor %}
        sum(productive_flops_known_pfs) as productive_flops_known_pfs,
        sum(useful_flop_known) as useful_flop_known,
        sum(dcgm_gpu_util_sum) as dcgm_gpu_util_sum,
        sum(dcgm_gpu_util_samples) as dcgm_gpu_util_samples,
        sum(dcgm_tensor_active_sum) as dcgm_tensor_active_sum,
        sum(dcgm_tensor_active_samples) as dcgm_tensor_active_samples
    from cluster_days
    group by all
),

with_useful as (
    select
        *,
        {{ useful_flop_extrapolated() }}
    from summed
),

final as (
    select
        *,
        {{ safe_divide('productive_flops_known_pfs', 'productive_pfs') }} as coverage_goodput,
        {{ capacity_factors() }},
        {{ goodput_h100_equivalent() }},
        {{ is_provisional('metric_date') }} as is_provisional
    from with_useful
)

select * from final
