-- The long interface of the metric tree: one row per grain, entity, day and tree node, built
-- from the seed metric_tree_nodes (the tree's shape as data) and the capacity facts. A node's
-- coverage is the measure coverage_<node_id> where one exists, else 1.
with

nodes as (
    select * from {{ ref('metric_tree_nodes') }}
),

wide as (
    select
        'cluster' as grain,
        cluster as entity_id,
        metric_date,
        {% for measure in capacity_measures() %}cast({{ measure }} as double) as {{ measure }}{{ "," if not loop.last }}
        {% endfor %}
    from {{ ref('fct_cluster_day') }}
    union all by name
    select
        'fleet' as grain,
        fleet as entity_id,
        metric_date,
        {% for measure in capacity_measures() %}cast({{ measure }} as double) as {{ measure }}{{ "," if not loop.last }}
        {% endfor %}
    from {{ ref('fct_fleet_day') }}
),

measures as (
    select grain, entity_id, metric_date, measure, amount
    from wide
    unpivot include nulls (
        amount for measure in ({{ capacity_measures() | join(', ') }})
    )
),

final as (
    select
        ----------  ids
        numerators.grain,
        numerators.entity_id,
        nodes.node_id,
        nodes.parent_node_id,
        nodes.lens,
        nodes.kind,
        nodes.unit,
        ----------  numerics
        numerators.amount as numerator,
        denominators.amount as denominator,
        {{ safe_divide('numerators.amount', 'denominators.amount') }} as value,
        coalesce(coverages.amount, 1.0) as coverage,
        nodes.direction,
        ----------  dates
        numerators.metric_date
    from nodes
    inner join measures as numerators on numerators.measure = nodes.numerator
    inner join measures as denominators
        on denominators.measure = nodes.denominator
        and denominators.grain = numerators.grain
        and denominators.entity_id = numerators.entity_id
        and denominators.metric_date = numerators.metric_date
    left join measures as coverages
        on coverages.measure = 'coverage_' || nodes.node_id
        and coverages.grain = numerators.grain
        and coverages.entity_id = numerators.entity_id
        and coverages.metric_date = numerators.metric_date
)

select * from final
