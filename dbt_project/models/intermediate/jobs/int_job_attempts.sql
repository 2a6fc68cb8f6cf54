-- One row per job attempt (a Slurm allocation of the job, in start order) with the GPUs it
-- held, the SKU and dense peak of its nodes, and the queue interval that preceded it: from
-- eligibility for the first attempt (queue_initial), from the end of the previous attempt for
-- a requeued one (queue_requeue: the job was waiting to resume, whatever Slurm's hold).
-- An allocation still running at the end of the window ends there, as in int_allocation_nodes.
with

allocations as (
    select * from {{ ref('stg_sacct__allocations') }}
    where start_at is not null
),

days as (
    select max(day_end_at) as window_end_at from {{ ref('int_calendar_days') }}
),

node_skus as (
    select node, min(sku) as sku from {{ ref('stg_inventory__gpus') }} group by node
),

specs as (
    select * from {{ ref('gpu_sku_specs') }}
    where dtype = '{{ var("peak_dtype", "bf16") }}'
),

ordered as (
    select
        allocations.*,
        coalesce(allocations.end_at, greatest(days.window_end_at, allocations.start_at)) as attempt_end_at,
        allocations.end_at is null as is_open,
        row_number() over (
            partition by allocations.job_id order by allocations.start_at, allocations.slurm_job_id
        ) as attempt,
        count(*) over (partition by allocations.job_id) as attempt_count
    from allocations
    cross join days
    where {{ list_length('allocations.nodes') }} > 0
),

with_queue as (
    select
        *,
        lag(attempt_end_at) over (partition by job_id order by attempt) as previous_end_at
    from ordered
),

final as (
    select
        ----------  ids
        with_queue.cluster,
        with_queue.job_id,
        with_queue.attempt,
        with_queue.slurm_job_id,
        ----------  strings
        with_queue.state,
        node_skus.sku,
        case when with_queue.attempt = 1 then 'queue_initial' else 'queue_requeue' end as queue_kind,
        ----------  numerics
        with_queue.alloc_gpus as gpus,
        with_queue.n_nodes,
        with_queue.attempt_count,
        specs.peak_flops_dense,
        ----------  booleans
        with_queue.is_open,
        with_queue.attempt < with_queue.attempt_count as was_requeued,
        ----------  timestamps
        least(
            case when with_queue.attempt = 1 then coalesce(with_queue.eligible_at, with_queue.submit_at)
                else with_queue.previous_end_at end,
            with_queue.start_at
        ) as queue_start_at,
        with_queue.start_at,
        with_queue.attempt_end_at as end_at
    from with_queue
    left join node_skus on {{ list_element('with_queue.nodes', 1) }} = node_skus.node
    left join specs on node_skus.sku = specs.sku
)

select * from final
