-- The capacity lens per node and day (metric_tree.md §2.2 grains: gpu-hour → node-day → cluster-day
-- → fleet-day): the node-day ledger in GPU-seconds and peak-FLOP-seconds, useful FLOPs and the spine
-- factors, each Σ/Σ; fct_cluster_day sums these node-days. useful_flop extrapolates the node's
-- FLOPs-known productive time to all of its productive time (coverage_program_goodput says how much
-- was measured; with coverage 1 on every node the nodes' useful_flop add up to the cluster's exactly,
-- tests/singular/assert_node_days_roll_up_to_cluster_days.sql).
-- Built by day (docs/incremental.md): a day's rows read that day's rows of the models above.
{{ daily_microbatch_config('metric_date', 'metric_date') }}
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
        ledger.cluster,
        ledger.node,
        ledger.sku,
        ledger.metric_date,
        ledger.gpu_count,
        {% for state in capacity_ledger_states() %}
        ledger.{{ state }}_gs,
        ledger.{{ state }}_gs * specs.peak_flops_dense as {{ state }}_pfs,
        {% endfor %}
        ledger.productive_flops_known_gs * specs.peak_flops_dense as productive_flops_known_pfs,
        ledger.useful_flop_known,
        dcgm.dcgm_gpu_util_sum,
        dcgm.dcgm_gpu_util_samples,
        dcgm.dcgm_tensor_active_sum,
        dcgm.dcgm_tensor_active_samples
    from ledger
    left join specs on ledger.sku = specs.sku
    left join dcgm on ledger.node = dcgm.node and ledger.metric_date = dcgm.metric_date
),

with_useful as (
    select
        *,
        {{ useful_flop_extrapolated() }}
    from node_days
),

final as (
    select
        *,
        coverage_program_goodput as coverage_goodput,
        {{ capacity_factors() }},
        {{ goodput_h100_equivalent() }},
        {{ is_provisional('metric_date') }} as is_provisional
    from with_useful
)

select * from final
