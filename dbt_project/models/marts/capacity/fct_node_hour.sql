-- The capacity lens per node and UTC hour (docs/ledger.md): int_node_hour_ledger in GPU-seconds and
-- peak-FLOP-seconds (GPU-seconds x dense peak of the SKU at the reporting dtype), useful FLOPs extrapolated
-- to the node-hour's productive time, and the spine factors, each Σ/Σ. The atomic additive table of the
-- capacity lens (metric_tree.md §2.7 fct_gpu_hour, at node grain: sacct names no GPU indices); Σ of a
-- node-day's hours equals fct_node_day for every additive column.
-- Built by day (docs/incremental.md): a day's rows read that day's rows of the models above.
{{ daily_microbatch_config('metric_date', 'metric_date') }}
with

ledger as (
    select * from {{ ref('int_node_hour_ledger') }}
),

specs as (
    select * from {{ ref('gpu_sku_specs') }}
    where dtype = '{{ var("peak_dtype", "bf16") }}'
),

node_hours as (
    select
        ledger.cluster,
        ledger.node,
        ledger.sku,
        ledger.metric_date,
        ledger.hour_start_at,
        ledger.gpu_count,
        {%- for state in capacity_ledger_states() %}
        ledger.{{ state }}_gs,
        ledger.{{ state }}_gs * specs.peak_flops_dense as {{ state }}_pfs,
        {%- endfor %}
        ledger.productive_flops_known_gs * specs.peak_flops_dense as productive_flops_known_pfs,
        ledger.useful_flop_known,
        ledger.cluster_pending_gs
    from ledger
    left join specs on ledger.sku = specs.sku
),

with_useful as (
    select
        *,
        {{ useful_flop_extrapolated() }}
    from node_hours
),

final as (
    select
        *,
        coverage_program_goodput as coverage_goodput,
        {{ capacity_factors() }}
    from with_useful
)

select * from final
