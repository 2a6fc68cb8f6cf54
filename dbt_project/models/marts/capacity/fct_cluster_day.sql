-- The capacity lens per cluster and day: additive GPU-seconds and peak-FLOP-seconds (pfs =
-- GPU-seconds x dense peak of the SKU at the reporting dtype), useful FLOPs, and the factors
-- goodput = availability x allocation x runtime_goodput x program_goodput, each Σ/Σ.
-- useful_flop extrapolates the FLOPs of jobs with metadata to the productive time of jobs
-- without it; coverage_program_goodput says how much of productive time was measured.
with

ledger as (
    select * from {{ ref('int_node_day_ledger') }}
),

specs as (
    select * from {{ ref('gpu_sku_specs') }}
    where dtype = '{{ var("peak_dtype", "bf16") }}'
),

dcgm as (
    select * from {{ ref('int_dcgm_node_days') }}
),

node_days as (
    select
        ledger.*,
        specs.peak_flops_dense,
        dcgm.dcgm_gpu_util_sum,
        dcgm.dcgm_gpu_util_samples,
        dcgm.dcgm_tensor_active_sum,
        dcgm.dcgm_tensor_active_samples
    from ledger
    left join specs on ledger.sku = specs.sku
    left join dcgm on ledger.node = dcgm.node and ledger.metric_date = dcgm.metric_date
),

summed as (
    select
        cluster,
        metric_date,
        count(distinct node) as node_count,
        sum(gpu_count) as gpu_count,
        string_agg(distinct sku, ',' order by sku) as skus,
        {% for state in capacity_ledger_states() %}
        sum({{ state }}_gs) as {{ state }}_gs,
        sum({{ state }}_gs * peak_flops_dense) as {{ state }}_pfs,
        {% endfor %}
        sum(productive_flops_known_gs * peak_flops_dense) as productive_flops_known_pfs,
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
        {{ capacity_factors() }},
        {{ goodput_h100_equivalent() }}
    from with_useful
)

select * from final
