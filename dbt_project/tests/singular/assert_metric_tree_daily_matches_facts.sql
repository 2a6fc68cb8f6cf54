{{ config(meta={'dagster': {'ref': {'name': 'metric_tree_daily'}}}) }}
-- The long interface says what the facts say: goodput per cluster-day in metric_tree_daily
-- equals fct_cluster_day.goodput, and per node-day fct_node_day.goodput.
select 'cluster' as grain, facts.cluster as entity_id, facts.metric_date, facts.goodput, tree.value
from {{ ref('fct_cluster_day') }} as facts
inner join {{ ref('metric_tree_daily') }} as tree
    on tree.grain = 'cluster'
    and tree.entity_id = facts.cluster
    and tree.metric_date = facts.metric_date
    and tree.node_id = 'goodput'
where abs(coalesce(facts.goodput, -1) - coalesce(tree.value, -1)) > 1e-12
union all
select 'node', facts.node, facts.metric_date, facts.goodput, tree.value
from {{ ref('fct_node_day') }} as facts
inner join {{ ref('metric_tree_daily') }} as tree
    on tree.grain = 'node'
    and tree.entity_id = facts.node
    and tree.metric_date = facts.metric_date
    and tree.node_id = 'goodput'
where abs(coalesce(facts.goodput, -1) - coalesce(tree.value, -1)) > 1e-12
