-- Per GPU and day: expected in-service DCGM points, known samples among them, known-missing
-- (out-of-service) points, and the longest silent run (consecutive in-service points without a
-- sample, measured over the whole run, which may span days) touching the day.
{% set step_s = var('dcgm_step_s', 300) %}
with

grid as (
    select * from {{ ref('int_quality_dcgm_grid') }}
),

in_service as (
    select
        *,
        -- islands of consecutive missing in-service points per GPU
        row_number() over (partition by gpu_uuid order by point_at)
            - row_number() over (partition by gpu_uuid, has_sample order by point_at) as island
    from grid
    where in_service
),

silent_runs as (
    select
        gpu_uuid,
        island,
        min(point_at) as silent_from_at,
        max(point_at) + interval '{{ step_s }} seconds' as silent_to_at,
        count(*) * {{ step_s }} / 3600.0 as silent_h
    from in_service
    where not has_sample
    group by gpu_uuid, island
),

point_runs as (
    select in_service.gpu_uuid, in_service.day, silent_runs.silent_h, silent_runs.silent_from_at,
        silent_runs.silent_to_at
    from in_service
    inner join silent_runs
        on silent_runs.gpu_uuid = in_service.gpu_uuid and silent_runs.island = in_service.island
    where not in_service.has_sample
),

longest as (
    select gpu_uuid, day, max_by(silent_h, silent_h) as silent_h, max_by(silent_from_at, silent_h) as silent_from_at,
        max_by(silent_to_at, silent_h) as silent_to_at
    from point_runs
    group by all
),

window_end as (
    select max(point_at) + interval '{{ step_s }} seconds' as window_end_at from grid
),

final as (
    select
        grid.cluster,
        grid.node,
        grid.gpu_uuid,
        grid.day,
        count(*) filter (where grid.in_service) as expected_points,
        count(*) filter (where grid.in_service and grid.has_sample) as known_points,
        count(*) filter (where not grid.in_service) as out_of_service_points,
        coalesce(any_value(longest.silent_h), 0) as longest_silent_h,
        any_value(longest.silent_from_at) as silent_from_at,
        any_value(longest.silent_to_at) as silent_to_at,
        any_value(longest.silent_to_at) = any_value(window_end.window_end_at) as silent_at_window_end
    from grid
    cross join window_end
    left join longest on longest.gpu_uuid = grid.gpu_uuid and longest.day = grid.day
    group by grid.cluster, grid.node, grid.gpu_uuid, grid.day
)

select * from final
