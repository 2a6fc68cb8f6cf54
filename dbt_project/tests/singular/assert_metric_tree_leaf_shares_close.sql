{{ config(meta={'dagster': {'ref': {'name': 'metric_tree_hourly'}}}) }}
-- Leaf closure in the long interface (metric_tree.md §2.5 identity 3), generated from the seed: for every
-- add_leaf node X under a factor F whose own children are add_leaf nodes (down_share under availability,
-- idle_share under allocation, badput_share under runtime_goodput), F + Σ children of X = 1 wherever F's
-- denominator is not 0: A + Σ down_* = 1, U + Σ idle_* = 1, R + Σ badput_* = 1. At every grain, day and
-- hour of metric_tree_daily and metric_tree_hourly. Tolerance 1e-9.
with

nodes as (
    select * from {{ ref('metric_tree_nodes') }}
),

groups as (
    select leaves.node_id as leaf_id, shares.parent_node_id as factor_id
    from nodes as leaves
    inner join nodes as shares on leaves.parent_node_id = shares.node_id
    where leaves.kind = 'add_leaf' and shares.kind = 'add_leaf' and shares.lens = 'capacity'
),

trees as (
    select 'daily' as tree, grain, entity_id, cast(metric_date as {{ type_timestamptz() }}) as period_at, node_id, value
    from {{ ref('metric_tree_daily') }}
    where lens = 'capacity'
    union all
    select 'hourly', grain, entity_id, hour_start_at, node_id, value
    from {{ ref('metric_tree_hourly') }}
),

leaf_sums as (
    select trees.tree, trees.grain, trees.entity_id, trees.period_at, groups.factor_id, sum(trees.value) as leaves
    from trees
    inner join groups on trees.node_id = groups.leaf_id
    group by trees.tree, trees.grain, trees.entity_id, trees.period_at, groups.factor_id
),

compared as (
    select leaf_sums.*, factors.value as factor
    from leaf_sums
    inner join trees as factors
        on factors.tree = leaf_sums.tree
        and factors.grain = leaf_sums.grain
        and factors.entity_id = leaf_sums.entity_id
        and factors.period_at = leaf_sums.period_at
        and factors.node_id = leaf_sums.factor_id
    where factors.value is not null
)

select *
from compared
where leaves is null or abs(factor + leaves - 1) > 1e-9
