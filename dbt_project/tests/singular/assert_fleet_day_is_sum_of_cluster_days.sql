{{ config(meta={'dagster': {'ref': {'name': 'fct_fleet_day'}}}) }}
-- Roll-up consistency cluster → fleet (metric_tree.md §2.5, identity 5): Σ over the clusters of the
-- known FLOPs and of the installed and productive capacity equals the fleet-day's, and fleet goodput
-- recomputed from the cluster-days' numerators and denominators equals the stored value where every
-- cluster's FLOPs are fully known (useful_flop is extrapolated per cluster and for the fleet from the
-- summed known FLOPs, so with partial coverage the clusters' extrapolations need not add up to the
-- fleet's; a cluster without any FLOPs metadata must not count as zero). Tolerance 1e-9 relative.
with

cluster_sums as (
    select
        metric_date,
        sum(installed_pfs) as installed_pfs,
        sum(productive_pfs) as productive_pfs,
        sum(productive_flops_known_pfs) as productive_flops_known_pfs,
        sum(useful_flop_known) as useful_flop_known,
        sum(useful_flop) as useful_flop,
        bool_and(coalesce(coverage_program_goodput, 1) = 1) as fully_covered
    from {{ ref('fct_cluster_day') }}
    group by metric_date
),

compared as (
    select
        fleet.metric_date,
        fleet.goodput,
        cluster_sums.useful_flop / nullif(cluster_sums.installed_pfs, 0) as goodput_from_clusters,
        {%- for measure in ['installed_pfs', 'productive_pfs', 'useful_flop_known', 'productive_flops_known_pfs'] %}
        {{ differs_relatively('cluster_sums.' ~ measure, 'fleet.' ~ measure) }} as bad_{{ measure }},
        {%- endfor %}
        cluster_sums.fully_covered
            and {{ differs_relatively(
                'cluster_sums.useful_flop / nullif(cluster_sums.installed_pfs, 0)', 'fleet.goodput', floor=1e-12
            ) }} as bad_goodput
    from {{ ref('fct_fleet_day') }} as fleet
    full outer join cluster_sums on fleet.metric_date = cluster_sums.metric_date
)

select *
from compared
where metric_date is null
    or coalesce(bad_installed_pfs, true)
    or coalesce(bad_productive_pfs, true)
    or coalesce(bad_useful_flop_known, true)
    or coalesce(bad_productive_flops_known_pfs, true)
    or coalesce(bad_goodput, false)
