-- Every 5-minute DCGM grid point of every installed whole GPU over the reporting window: whether the
-- node was in service then (not down, repair, maintenance or drain) and whether a known sample (a
-- non-NULL value of any field) exists at that point. Out-of-service points are known-missing.
-- Built by day (docs/incremental.md): a day reads its calendar row and samples, and the node down intervals (all).
{% set step_s = var('dcgm_step_s', 300) %}
{{ daily_microbatch_config('day', 'day') }}
with

days as (
    select * from {{ ref('int_calendar_days') }}
    where {{ in_batch('day') }}
),

gpus as (
    select * from {{ ref('stg_inventory__gpus') }}
),

grid as (
    select
        gpus.cluster,
        gpus.node,
        gpus.gpu_uuid,
        days.day,
        {{ unnest_series(
            'days.day_start_at', "days.day_end_at - interval '" ~ step_s ~ " seconds'", "interval '" ~ step_s ~ " seconds'"
        ) }} as point_at,
        gpus.valid_from_at,
        gpus.valid_to_at
    from gpus
    inner join days
        on gpus.valid_from_at < days.day_end_at
        and (gpus.valid_to_at is null or gpus.valid_to_at > days.day_start_at)
),

installed as (
    select * from grid
    where point_at >= valid_from_at and (valid_to_at is null or point_at < valid_to_at)
),

down as (
    select * from {{ ref('int_node_down_intervals') }}
),

known as (
    select distinct gpu_uuid, sampled_at
    from {{ ref('int_dcgm_samples') }}
    where value is not null and gpu_instance is null
),

final as (
    select
        installed.cluster,
        installed.node,
        installed.gpu_uuid,
        installed.day,
        installed.point_at,
        not exists (
            select 1 from down
            where down.node = installed.node and installed.point_at >= down.start_at and installed.point_at < down.end_at
        ) as in_service,
        known.sampled_at is not null as has_sample
    from installed
    left join known
        on known.gpu_uuid = installed.gpu_uuid and known.sampled_at = installed.point_at
)

select * from final
