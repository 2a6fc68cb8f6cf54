-- Installed GPU-seconds per node and day, from the inventory's validity intervals.
with

gpus as (
    select * from {{ ref('stg_inventory__gpus') }}
),

days as (
    select * from {{ ref('int_calendar_days') }}
),

gpu_days as (
    select
        gpus.cluster,
        gpus.node,
        gpus.sku,
        gpus.gpu_uuid,
        days.day,
        {{ overlap_seconds('gpus.valid_from_at', "coalesce(gpus.valid_to_at, days.day_end_at)", 'days.day_start_at', 'days.day_end_at') }} as installed_gs
    from gpus
    inner join days
        on gpus.valid_from_at < days.day_end_at
        and (gpus.valid_to_at is null or gpus.valid_to_at > days.day_start_at)
),

final as (
    select
        cluster,
        node,
        sku,
        day,
        count(distinct gpu_uuid) as gpu_count,
        sum(installed_gs) as installed_gs
    from gpu_days
    group by all
)

select * from final
