{{ config(meta={'dagster': {'ref': {'name': 'metric_tree_daily'}}}) }}
-- Roll-up consistency along the hierarchy in the long interface: for every capacity-lens node,
-- Σ numerator and Σ denominator over a cluster's nodes equal the cluster's (the spine and its leaves;
-- the extrapolated useful_flop only where every node's FLOPs are known), and for every companion
-- node, Σ over a node's GPUs equals the node's and Σ over a cluster's nodes equals the cluster's.
-- A value is Σnumerator / Σdenominator at every grain. Tolerance 1e-9 relative.
with

tree as (
    select * from {{ ref('metric_tree_daily') }}
    where lens = 'capacity'
),

gpus as (
    select distinct gpu_uuid, node, cluster from {{ ref('stg_inventory__gpus') }}
),

nodes as (
    select distinct node, cluster from {{ ref('stg_inventory__gpus') }}
),

coverage as (
    select node, metric_date, coalesce(coverage_program_goodput, 1) = 1 as fully_covered
    from {{ ref('fct_node_day') }}
),

children as (
    -- GPUs into nodes (companions) and nodes into clusters (every capacity node)
    select 'node' as parent_grain, gpus.node as parent_id, tree.metric_date, tree.node_id,
        sum(tree.numerator) as numerator, sum(tree.denominator) as denominator, true as fully_covered
    from tree
    inner join gpus on tree.grain = 'gpu' and tree.entity_id = gpus.gpu_uuid
    group by all
    union all
    select 'cluster', nodes.cluster, tree.metric_date, tree.node_id,
        sum(tree.numerator), sum(tree.denominator), bool_and(coalesce(coverage.fully_covered, true))
    from tree
    inner join nodes on tree.grain = 'node' and tree.entity_id = nodes.node
    left join coverage on coverage.node = tree.entity_id and coverage.metric_date = tree.metric_date
    group by all
),

compared as (
    select
        parents.grain,
        parents.entity_id,
        parents.metric_date,
        parents.node_id,
        parents.numerator,
        children.numerator as children_numerator,
        parents.denominator,
        children.denominator as children_denominator
    from children
    inner join tree as parents
        on parents.grain = children.parent_grain
        and parents.entity_id = children.parent_id
        and parents.metric_date = children.metric_date
        and parents.node_id = children.node_id
    -- useful_flop is extrapolated per node: comparable only with every node's FLOPs known
    where children.fully_covered
        or parents.node_id not in ('goodput', 'program_goodput', 'goodput_ref', 'energy_per_useful_pflop')
)

select *
from compared
where {{ differs_relatively('coalesce(children_numerator, 0)', 'coalesce(numerator, 0)', floor=1e-9) }}
    or {{ differs_relatively('coalesce(children_denominator, 0)', 'coalesce(denominator, 0)', floor=1e-9) }}
