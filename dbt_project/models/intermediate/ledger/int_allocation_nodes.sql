-- One row per Slurm allocation and node it ran on, with the GPUs it held there.
with

allocations as (
    select * from {{ ref('stg_sacct__allocations') }}
    where start_at is not null
),

days as (
    select max(day_end_at) as window_end_at from {{ ref('int_calendar_days') }}
),

exploded as (
    select
        allocations.cluster,
        allocations.slurm_job_id,
        allocations.job_id,
        allocations.state,
        {{ unnest_list('allocations.nodes') }} as node,
        allocations.alloc_gpus,
        {{ list_length('allocations.nodes') }} as node_count,
        allocations.start_at,
        coalesce(allocations.end_at, greatest(days.window_end_at, allocations.start_at)) as end_at
    from allocations
    cross join days
    where {{ list_length('allocations.nodes') }} > 0
),

final as (
    select
        cluster,
        slurm_job_id,
        job_id,
        state,
        node,
        alloc_gpus,
        cast(alloc_gpus as double) / node_count as gpus_on_node,
        start_at,
        end_at
    from exploded
)

select * from final
