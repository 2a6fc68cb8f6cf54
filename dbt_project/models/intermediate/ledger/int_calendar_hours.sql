-- The UTC hours of the reporting window (int_calendar_days): 24 per day, the grain of the hour ledger.
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
    hour_start_at + interval 1 hour as hour_end_at
from hours
