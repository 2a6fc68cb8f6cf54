-- The UTC days the warehouse reports on: from the first to the last day with scheduler or job
-- activity. Days outside it are not known to be idle, so they are left out rather than zeroed.
with

activity as (
    select cast(start_at as date) as day from {{ ref('stg_sacct__allocations') }} where start_at is not null
    union all
    select cast(end_at - interval 1 microsecond as date) from {{ ref('stg_sacct__allocations') }} where end_at is not null
    union all
    select cast(event_at as date) from {{ ref('stg_step_events__events') }}
),

bounds as (
    select min(day) as first_day, max(day) as last_day from activity
),

days as (
    select cast(day_at as date) as day
    from (
        select {{ unnest_series('first_day', 'last_day', 'interval 1 day') }} as day_at
        from bounds
        where first_day is not null
    )
)

select
    day,
    cast(day as {{ type_timestamptz() }}) as day_start_at,
    cast(day as {{ type_timestamptz() }}) + interval 1 day as day_end_at
from days
