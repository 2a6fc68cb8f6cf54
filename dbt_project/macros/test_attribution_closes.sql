{#- Attribution closure (metric_tree.md §2.5 identity 7). Within each group, the values of a
    node's children add up to the node's own value: Σ_k dg_additive_k = G1 - G0 and
    Σ_k dln_k = ln(G1/G0) under the root, Σ leaf = the parent factor's figure under a factor. -#}
{% test children_sum_to_parent(model, group_by, value, node='factor', parent='parent_factor', rel_tol=1e-9, abs_tol=1e-12) %}
with

children as (
    select
        {{ group_by | join(', ') }},
        {{ parent }} as node,
        sum({{ value }}) as children_total,
        count(*) as child_count
    from {{ model }}
    where {{ parent }} is not null
    group by all
),

parents as (
    select
        {{ group_by | join(', ') }},
        {{ node }} as node,
        {{ value }} as parent_value
    from {{ model }}
),

final as (
    select *
    from children
    inner join parents using ({{ group_by | join(', ') }}, node)
    where parent_value is not null
      and (children_total is null
           or abs(children_total - parent_value) > greatest({{ rel_tol }} * abs(parent_value), {{ abs_tol }}))
)

select * from final
{% endtest %}

{#- The parts, summed over each group, add up to the group's whole (mix + rate = ΔG). -#}
{% test group_parts_sum_to_whole(model, group_by, parts, whole, rel_tol=1e-9, abs_tol=1e-12) %}
with

grouped as (
    select
        {{ group_by | join(', ') }},
        {% for part in parts %}sum({{ part }}){{ " + " if not loop.last }}{% endfor %} as parts_total,
        min({{ whole }}) as whole_min,
        max({{ whole }}) as whole_max
    from {{ model }}
    group by all
),

final as (
    select *
    from grouped
    where whole_min is not null
      and (whole_min <> whole_max
           or parts_total is null
           or abs(parts_total - whole_min) > greatest({{ rel_tol }} * abs(whole_min), {{ abs_tol }}))
)

select * from final
{% endtest %}
