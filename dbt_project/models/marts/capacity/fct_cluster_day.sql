-- The capacity lens per cluster and day: the sums of fct_node_day's additive columns (GPU-seconds,
-- peak-FLOP-seconds = GPU-seconds x dense peak of the SKU at the reporting dtype, FLOPs, DCGM sums),
-- useful FLOPs and the factors goodput = availability x allocation x runtime_goodput x
-- program_goodput, each Σ/Σ. useful_flop extrapolates the FLOPs of jobs with metadata to the
-- productive time of jobs without it, over the cluster's sums; coverage_program_goodput says how
-- much of productive time was measured.
-- Built by day (docs/incremental.md): a day's rows read that day's rows of the models above.
{{ daily_microbatch_config('metric_date', 'metric_date') }}
with

node_days as (
    select * from {{ ref('fct_node_day') }}
),

summed as (
    select
        cluster,
        metric_date,
        count(distinct node) as node_count,
        sum(gpu_count) as gpu_count,
        {{ sorted_distinct_string_agg('sku', "','") }} as skus,
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
    from node_days
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
        coverage_program_goodput as coverage_goodput,
        {{ capacity_factors(display=true) }},
        {{ goodput_h100_equivalent() }},
        {{ is_provisional('metric_date') }} as is_provisional
    from with_useful
)

select * from final
