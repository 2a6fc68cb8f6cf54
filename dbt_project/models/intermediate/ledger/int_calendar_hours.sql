-- The UTC hours of the reporting window (int_calendar_days): 24 per day, the grain of the hour ledger, each with
-- its index (hours since the Unix epoch) so intervals can be joined to their hours by equality.
with

days as (
    select * from {{ ref('int_calendar_days') }}
),

hours as (
    select
        day,
        {{ unnest_series('day_start_at', 'day_end_at - interval 1 hour', 'interval 1 hour') }} as hour_start_at
    from days
)

select
    day,
    hour_start_at,
    hour_start_at + interval 1 hour as hour_end_at,
    {{ hour_index('hour_start_at') }} as hour_index
from hours
