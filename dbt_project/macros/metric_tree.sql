{#- The long interface's rows (metric_tree_daily, metric_tree_hourly): one per grain, entity, time and node of the seed
    metric_tree_nodes (CTE `nodes`), its numerator and denominator looked up by measure name in the CTE `measures`
    (grain, entity_id, <time columns>, measure, amount), value = Σ numerator / Σ denominator, coverage = the measure
    coverage_<node_id> where one exists, else 1. `time_columns` are carried to the output; `join_on` are the time
    columns that identify a row (hour_start_at alone at hour grain); `where` filters node and grain pairs. -#}
{% macro metric_tree_rows(time_columns, join_on, where='true') -%}
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
        ----------  dates and timestamps
        {%- for column in time_columns %}
        numerators.{{ column }}{{ ',' if not loop.last }}
        {%- endfor %}
    from nodes
    inner join measures as numerators on numerators.measure = nodes.numerator
    inner join measures as denominators
        on denominators.measure = nodes.denominator
        and denominators.grain = numerators.grain
        and denominators.entity_id = numerators.entity_id
        {%- for column in join_on %}
        and denominators.{{ column }} = numerators.{{ column }}
        {%- endfor %}
    left join measures as coverages
        on coverages.measure = 'coverage_' || nodes.node_id
        and coverages.grain = numerators.grain
        and coverages.entity_id = numerators.entity_id
        {%- for column in join_on %}
        and coverages.{{ column }} = numerators.{{ column }}
        {%- endfor %}
    where {{ where }}
{%- endmacro %}
