{{ config(meta={'dagster': {'ref': {'name': 'metric_tree_hourly'}}}) }}
-- The hour grain rolls up to the day (docs/ledger.md): for every capacity-lens node (mult, add_leaf) at the
-- node, cluster and fleet grains, Σ numerator and Σ denominator over a day's hours in metric_tree_hourly equal
-- metric_tree_daily's, and neither side has a row the other lacks. useful_flop is extrapolated per row from the
-- FLOPs-known productive time, so it adds up only where the day's coverage is 1: there its sums are compared
-- too, elsewhere only the denominator. Tolerance 1e-9 relative.
with

hourly as (
    select grain, entity_id, metric_date, node_id, sum(numerator) as numerator, sum(denominator) as denominator
    from {{ ref('metric_tree_hourly') }}
    group by grain, entity_id, metric_date, node_id
),

daily as (
    select grain, entity_id, metric_date, node_id, numerator, denominator, coverage
    from {{ ref('metric_tree_daily') }}
    where lens = 'capacity' and kind in ('mult', 'add_leaf') and grain in ('node', 'cluster', 'fleet')
),

compared as (
    select
        coalesce(daily.grain, hourly.grain) as grain,
        coalesce(daily.entity_id, hourly.entity_id) as entity_id,
        coalesce(daily.metric_date, hourly.metric_date) as metric_date,
        coalesce(daily.node_id, hourly.node_id) as node_id,
        daily.numerator as daily_numerator,
        hourly.numerator as hourly_numerator,
        daily.denominator as daily_denominator,
        hourly.denominator as hourly_denominator,
        daily.coverage
    from daily
    full outer join hourly
        on daily.grain = hourly.grain
        and daily.entity_id = hourly.entity_id
        and daily.metric_date = hourly.metric_date
        and daily.node_id = hourly.node_id
)

select *
from compared
where daily_denominator is null
    or hourly_denominator is null
    or {{ differs_relatively('hourly_denominator', 'daily_denominator') }}
    or (coverage = 1 and {{ differs_relatively('coalesce(hourly_numerator, 0)', 'coalesce(daily_numerator, 0)') }})
