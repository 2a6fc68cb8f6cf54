{{ config(meta={'dagster': {'ref': {'name': 'fct_fleet_day'}}}) }}
-- Roll-up consistency: fleet goodput recomputed from the cluster-day numerators and
-- denominators equals the stored fleet value (metric_tree.md §2.5, identity 5).
with

cluster_sums as (
    select
        metric_date,
        sum(useful_flop) / nullif(sum(installed_pfs), 0) as goodput_from_clusters
    from {{ ref('fct_cluster_day') }}
    group by metric_date
)

select fleet.metric_date, fleet.goodput, cluster_sums.goodput_from_clusters
from {{ ref('fct_fleet_day') }} as fleet
inner join cluster_sums on fleet.metric_date = cluster_sums.metric_date
where abs(fleet.goodput - cluster_sums.goodput_from_clusters) > 1e-9 * greatest(abs(fleet.goodput), 1e-12)
