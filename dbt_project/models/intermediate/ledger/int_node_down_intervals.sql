-- Intervals when a node could not take work (down, repair, maintenance, drain), with
-- overlapping or touching intervals of one node merged so no second is counted twice.
with

states as (
    select * from {{ ref('stg_node_events__states') }}
    where state in ('down', 'repair', 'maintenance', 'drain')
),

days as (
    select max(day_end_at) as window_end_at from {{ ref('int_calendar_days') }}
),

bounded as (
    select
        states.node,
        states.state,
        states.reason,
        states.start_at,
        coalesce(states.end_at, greatest(days.window_end_at, states.start_at)) as end_at
    from states
    cross join days
),

ordered as (
    select
        *,
        max(end_at) over (
            partition by node order by start_at, end_at rows between unbounded preceding and 1 preceding
        ) as previous_max_end_at
    from bounded
),

islands as (
    select
        *,
        sum(case when previous_max_end_at is null or start_at > previous_max_end_at then 1 else 0 end)
            over (partition by node order by start_at, end_at rows unbounded preceding) as island
    from ordered
),

final as (
    select
        node,
        island,
        min(start_at) as start_at,
        max(end_at) as end_at,
        {{ sorted_distinct_string_agg('state', "','") }} as states,
        {{ sorted_distinct_string_agg('reason', "'; '") }} as reasons
    from islands
    group by node, island
)

select * from final
