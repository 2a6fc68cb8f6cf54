{{ config(meta={'dagster': {'ref': {'name': 'fct_node_day'}}}) }}
-- Roll-up consistency node → cluster (metric_tree.md §2.5, identity 5): Σ over a cluster's nodes of
-- every additive measure equals the cluster-day's, and goodput recomputed from the node-days'
-- numerators and denominators equals the stored cluster value where every node's FLOPs are known
-- (useful_flop is extrapolated per node, so with partial coverage the nodes' extrapolations need not
-- add up to the cluster's). Tolerance 1e-9 relative.
with

node_sums as (
    select
        cluster,
        metric_date,
        {% for state in capacity_ledger_states() %}
        sum({{ state }}_gs) as {{ state }}_gs,
        sum({{ state }}_pfs) as {{ state }}_pfs,
        {% endfor %}
        sum(productive_flops_known_pfs) as productive_flops_known_pfs,
        sum(useful_flop_known) as useful_flop_known,
        sum(useful_flop) as useful_flop,
        bool_and(coalesce(coverage_program_goodput, 1) = 1) as fully_covered
    from {{ ref('fct_node_day') }}
    group by all
),

compared as (
    select
        clusters.cluster,
        clusters.metric_date,
        {% for measure in capacity_ledger_states() | map('string') %}
        {%- for column in [measure ~ '_gs', measure ~ '_pfs'] %}
        {{ differs_relatively('node_sums.' ~ column, 'clusters.' ~ column) }} as bad_{{ column }},
        {%- endfor %}
        {% endfor %}
        {%- for column in ['useful_flop_known', 'productive_flops_known_pfs'] %}
        {{ differs_relatively('node_sums.' ~ column, 'clusters.' ~ column) }} as bad_{{ column }},
        {%- endfor %}
        node_sums.fully_covered
            and {{ differs_relatively(
                'node_sums.useful_flop / nullif(node_sums.installed_pfs, 0)', 'clusters.goodput', floor=1e-12
            ) }} as bad_goodput
    from {{ ref('fct_cluster_day') }} as clusters
    full outer join node_sums
        on clusters.cluster = node_sums.cluster and clusters.metric_date = node_sums.metric_date
)

select *
from compared
where cluster is null
    or {% for measure in capacity_ledger_states() %}coalesce(bad_{{ measure }}_gs, true) or coalesce(bad_{{ measure }}_pfs, true) or {% endfor %}
    coalesce(bad_useful_flop_known, true) or coalesce(bad_productive_flops_known_pfs, true) or coalesce(bad_goodput, false)
