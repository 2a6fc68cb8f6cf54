-- Idle time a job leaves behind between its attempts: for every attempt that has a next attempt, one row per
-- node of that attempt with the GPUs it held there and the interval from the attempt's end to the next
-- attempt's start (int_job_attempts' queue_requeue). The hour ledger counts the GPUs idle on that node then,
-- up to these, as idle_requeue_gap.
with

attempts as (
    select * from {{ ref('int_job_attempts') }}
),

allocation_nodes as (
    select * from {{ ref('int_allocation_nodes') }}
),

with_next as (
    select
        cluster,
        job_id,
        attempt,
        slurm_job_id,
        end_at,
        lead(start_at) over (partition by job_id order by attempt) as next_start_at
    from attempts
),

final as (
    select
        ----------  ids
        with_next.cluster,
        allocation_nodes.node,
        with_next.job_id,
        with_next.attempt,
        ----------  numerics
        allocation_nodes.gpus_on_node,
        ----------  timestamps
        with_next.end_at as start_at,
        with_next.next_start_at as end_at
    from with_next
    inner join allocation_nodes
        on with_next.cluster = allocation_nodes.cluster
        and with_next.slurm_job_id = allocation_nodes.slurm_job_id
    where with_next.next_start_at > with_next.end_at
)

select * from final
