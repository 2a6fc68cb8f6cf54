-- Per GPU and day: expected in-service DCGM points, known samples among them, known-missing
-- (out-of-service) points, and the longest silent run (consecutive in-service points without a
-- sample, measured over the whole run, which may span days) touching the day.
-- Reads int_quality_dcgm_gpu_day_runs (built by day: each day's counts and its silent runs cut at midnight), not
-- the grid: a run that spans midnight is a day's tail run, then whole silent days, then a later day's head run,
-- joined here over consecutive days with in-service points (days without any are skipped, as the grid's
-- in-service points skip them). Ties between equally long runs go to the earliest.
{% set step_s = var('dcgm_step_s', 300) %}
with

day_runs as (
    select * from {{ ref('int_quality_dcgm_gpu_day_runs') }}
),

service_days as (
    -- days with in-service points; a head run continues the previous such day's tail run when both exist
    select
        *,
        known_points = 0 as fully_silent,
        head_silent_points is not null
            and lag(tail_silent_points) over (partition by gpu_uuid order by day) is not null as head_linked
    from day_runs
    where expected_points > 0
),

grouped as (
    -- a group: a day, then the whole silent days its tail run runs through
    select
        *,
        sum(case when fully_silent and head_linked then 0 else 1 end)
            over (partition by gpu_uuid order by day rows between unbounded preceding and current row) as run_group
    from service_days
),

group_starts as (
    select *, min(day) over (partition by gpu_uuid, run_group) as group_first_day
    from grouped
),

group_spans as (
    -- the run that starts with the group's first day's tail run and covers its whole silent days
    select
        gpu_uuid,
        run_group,
        sum(case when day = group_first_day then tail_silent_points else expected_points end) as silent_points,
        max(case when day = group_first_day then tail_silent_from_at end) as silent_from_at,
        max(tail_silent_to_at) as silent_to_at
    from group_starts
    group by gpu_uuid, run_group
),

group_runs as (
    -- ... and ends with the head run of the next group's first day when it continues
    select
        spans.gpu_uuid,
        spans.run_group,
        spans.silent_points + coalesce(case when next_day.head_linked then next_day.head_silent_points end, 0)
            as silent_points,
        spans.silent_from_at,
        coalesce(case when next_day.head_linked then next_day.head_silent_to_at end, spans.silent_to_at)
            as silent_to_at
    from group_spans as spans
    left join group_starts as next_day
        on next_day.gpu_uuid = spans.gpu_uuid
        and next_day.run_group = spans.run_group + 1
        and next_day.day = next_day.group_first_day
    where spans.silent_from_at is not null
),

candidates as (
    -- the runs touching a day: its head run (or the run it continues), its tail run (the run its group starts) and
    -- its longest inner run
    select days.gpu_uuid, days.day, runs.silent_points, runs.silent_from_at, runs.silent_to_at
    from group_starts as days
    inner join group_runs as runs
        on runs.gpu_uuid = days.gpu_uuid
        and runs.run_group = case when days.head_linked and not days.fully_silent then days.run_group - 1 end
    union all
    select gpu_uuid, day, head_silent_points, head_silent_from_at, head_silent_to_at
    from group_starts
    where head_silent_points is not null and not head_linked and not fully_silent
    union all
    select days.gpu_uuid, days.day, runs.silent_points, runs.silent_from_at, runs.silent_to_at
    from group_starts as days
    inner join group_runs as runs on runs.gpu_uuid = days.gpu_uuid and runs.run_group = days.run_group
    where days.tail_silent_points is not null
    union all
    select gpu_uuid, day, inner_silent_points, inner_silent_from_at, inner_silent_to_at
    from group_starts
    where inner_silent_points is not null
),

longest as (
    select
        *,
        row_number() over (partition by gpu_uuid, day order by silent_points desc, silent_from_at) as run_rank
    from candidates
),

window_end as (
    select max(last_grid_point_at) + interval '{{ step_s }} seconds' as window_end_at from day_runs
),

final as (
    select
        day_runs.cluster,
        day_runs.node,
        day_runs.gpu_uuid,
        day_runs.day,
        day_runs.expected_points,
        day_runs.known_points,
        day_runs.out_of_service_points,
        coalesce(longest.silent_points * {{ step_s }} / 3600.0, 0) as longest_silent_h,
        longest.silent_from_at,
        longest.silent_to_at,
        longest.silent_to_at = window_end.window_end_at as silent_at_window_end
    from day_runs
    cross join window_end
    left join longest
        on longest.gpu_uuid = day_runs.gpu_uuid and longest.day = day_runs.day and longest.run_rank = 1
)

select * from final
