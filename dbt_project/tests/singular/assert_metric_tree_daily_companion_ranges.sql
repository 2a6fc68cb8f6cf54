{{ config(meta={'dagster': {'ref': {'name': 'metric_tree_daily'}}}) }}
-- Ranges of the companions in the long interface (docs/companions.md): shares in [0, 1], counts and
-- energy non-negative, MTTI positive, runtime_goodput_vs_expected in [-1, 1], goodput_ref at most goodput
-- on SKUs no faster than the H100 reference (every SKU of gpu_sku_specs' bf16 dense peak <= H100's), and
-- the residual equal to runtime goodput minus expected over the same job-days (1e-9). Unknown (NULL) passes.
with

tree as (
    select * from {{ ref('metric_tree_daily') }}
    where kind = 'companion'
),

reference_peak as (
    select max(peak_flops_dense) as peak from {{ ref('gpu_sku_specs') }} where sku = 'H100-SXM' and dtype = 'bf16'
),

fastest_peak as (
    select max(peak_flops_dense) as peak from {{ ref('gpu_sku_specs') }} where dtype = 'bf16'
),

goodput as (
    select grain, entity_id, metric_date, value from {{ ref('metric_tree_daily') }} where node_id = 'goodput'
),

expected as (
    select * from {{ ref('int_expected_runtime_goodput') }}
),

out_of_range as (
    select tree.grain, tree.entity_id, tree.metric_date, tree.node_id, tree.value, 'range' as failure
    from tree
    where (tree.node_id in ('dcgm_sm_active', 'dcgm_dram_active', 'throttle_share', 'expected_runtime_goodput')
            and (tree.value < -1e-9 or tree.value > 1 + 1e-9))
        or (tree.node_id in ('xid_count', 'xid_node_faults', 'interruptions', 'energy_per_useful_pflop')
            and tree.value < 0)
        or (tree.node_id = 'mtti_h' and tree.value <= 0)
        or (tree.node_id = 'runtime_goodput_vs_expected' and abs(tree.value) > 1 + 1e-9)
        or (tree.coverage < -1e-9 or tree.coverage > 1 + 1e-9)
    union all
    select tree.grain, tree.entity_id, tree.metric_date, tree.node_id, tree.value, 'goodput_ref above goodput'
    from tree
    inner join goodput
        on tree.grain = goodput.grain and tree.entity_id = goodput.entity_id and tree.metric_date = goodput.metric_date
    cross join reference_peak
    cross join fastest_peak
    where tree.node_id = 'goodput_ref'
        and fastest_peak.peak <= reference_peak.peak
        and tree.value > goodput.value * (1 + 1e-9) + 1e-12
    union all
    select tree.grain, tree.entity_id, tree.metric_date, tree.node_id, tree.value, 'residual is not R - expected R'
    from tree
    inner join expected
        on tree.grain = expected.grain and tree.entity_id = expected.entity_id and tree.metric_date = expected.metric_date
    where tree.node_id = 'runtime_goodput_vs_expected'
        and abs(tree.value - (expected.runtime_goodput - expected.expected_runtime_goodput)) > 1e-9
)

select * from out_of_range
