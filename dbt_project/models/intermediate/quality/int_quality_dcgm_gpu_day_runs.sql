-- Per GPU and day: the DCGM grid's point counts and the day's silent runs (consecutive in-service points without a
-- sample) cut at the day's edges: the head run (it holds the day's first in-service point), the tail run (it holds
-- the last) and the longest inner run (neither). int_quality_dcgm_gpu_days joins heads and tails across days into
-- the runs that span midnight. A fully silent day's head and tail are the same run, the whole day.
-- Built by day (docs/incremental.md): a day reads that day's grid points only.
{% set step_s = var('dcgm_step_s', 300) %}
{{ daily_microbatch_config('day', 'day') }}
with

grid as (
    select * from {{ ref('int_quality_dcgm_grid') }}
),

in_service as (
    select
        gpu_uuid,
        day,
        point_at,
        has_sample,
        -- islands of consecutive points with the same has_sample, per GPU and day
        row_number() over (partition by gpu_uuid, day order by point_at)
            - row_number() over (partition by gpu_uuid, day, has_sample order by point_at) as island
    from grid
    where in_service
),

service_edges as (
    select gpu_uuid, day, min(point_at) as first_point_at, max(point_at) as last_point_at
    from in_service
    group by gpu_uuid, day
),

runs as (
    select
        in_service.gpu_uuid,
        in_service.day,
        min(in_service.point_at) as silent_from_at,
        max(in_service.point_at) + interval '{{ step_s }} seconds' as silent_to_at,
        count(*) as silent_points,
        min(in_service.point_at) = min(service_edges.first_point_at) as is_head,
        max(in_service.point_at) = max(service_edges.last_point_at) as is_tail
    from in_service
    inner join service_edges on service_edges.gpu_uuid = in_service.gpu_uuid and service_edges.day = in_service.day
    where not in_service.has_sample
    group by in_service.gpu_uuid, in_service.day, in_service.island
),

inner_runs as (
    select
        *,
        row_number() over (partition by gpu_uuid, day order by silent_points desc, silent_from_at) as inner_rank
    from runs
    where not is_head and not is_tail
),

counts as (
    select
        cluster,
        node,
        gpu_uuid,
        day,
        count(*) filter (where in_service) as expected_points,
        count(*) filter (where in_service and has_sample) as known_points,
        count(*) filter (where not in_service) as out_of_service_points,
        max(point_at) as last_grid_point_at
    from grid
    group by cluster, node, gpu_uuid, day
),

final as (
    select
        counts.cluster,
        counts.node,
        counts.gpu_uuid,
        counts.day,
        counts.expected_points,
        counts.known_points,
        counts.out_of_service_points,
        counts.last_grid_point_at,
        heads.silent_points as head_silent_points,
        heads.silent_from_at as head_silent_from_at,
        heads.silent_to_at as head_silent_to_at,
        tails.silent_points as tail_silent_points,
        tails.silent_from_at as tail_silent_from_at,
        tails.silent_to_at as tail_silent_to_at,
        inner_runs.silent_points as inner_silent_points,
        inner_runs.silent_from_at as inner_silent_from_at,
        inner_runs.silent_to_at as inner_silent_to_at
    from counts
    left join runs as heads on heads.gpu_uuid = counts.gpu_uuid and heads.day = counts.day and heads.is_head
    left join runs as tails on tails.gpu_uuid = counts.gpu_uuid and tails.day = counts.day and tails.is_tail
    left join inner_runs
        on inner_runs.gpu_uuid = counts.gpu_uuid and inner_runs.day = counts.day and inner_runs.inner_rank = 1
)

select * from final
