-- Job interruptions (metric_tree.md §2.2 companions `interruptions`, `mtti_h`; §2.6 failure history):
-- one row per interrupted attempt and node it is charged to. An attempt is interrupted when Slurm
-- ended it failed (NODE_FAIL, FAILED, TIMEOUT, OUT_OF_MEMORY, PREEMPTED, BOOT_FAIL) or it was
-- requeued (a later attempt of the job exists): the job lens's fault_detection rule. The cause node
-- is the allocation's node whose earliest `down` state started between the attempt's start and
-- var interruption_cause_window_s (default 600 s) after its end; the interruption counts 1 there.
-- Without an identified cause node it is shared equally among the allocation's nodes (shares
-- 1/n), so node-days add up to cluster-days. Dated by the attempt's end (UTC day).
with

attempts as (
    select * from {{ ref('int_job_attempts') }}
    where not is_open
        and (was_requeued or state in ('NODE_FAIL', 'FAILED', 'TIMEOUT', 'OUT_OF_MEMORY', 'PREEMPTED', 'BOOT_FAIL'))
),

allocation_nodes as (
    select distinct slurm_job_id, node from {{ ref('int_allocation_nodes') }}
),

down_starts as (
    select node, reason, start_at from {{ ref('stg_node_events__states') }}
    where state = 'down' and start_at is not null
),

candidates as (
    select
        attempts.job_id,
        attempts.attempt,
        allocation_nodes.node,
        down_starts.reason,
        down_starts.start_at,
        row_number() over (
            partition by attempts.job_id, attempts.attempt order by down_starts.start_at, allocation_nodes.node
        ) as candidate_rank
    from attempts
    inner join allocation_nodes on attempts.slurm_job_id = allocation_nodes.slurm_job_id
    inner join down_starts
        on down_starts.node = allocation_nodes.node
        and down_starts.start_at >= attempts.start_at
        and {{ epoch_seconds('down_starts.start_at') }}
            <= {{ epoch_seconds('attempts.end_at') }} + {{ var('interruption_cause_window_s', 600) }}
),

causes as (
    select * from candidates where candidate_rank = 1
),

charged as (
    select
        attempts.cluster,
        attempts.job_id,
        attempts.attempt,
        attempts.slurm_job_id,
        attempts.state,
        allocation_nodes.node,
        causes.node as cause_node,
        causes.reason as cause_reason,
        attempts.end_at as interrupted_at,
        case
            when causes.node is null then 1.0 / count(*) over (partition by attempts.job_id, attempts.attempt)
            when causes.node = allocation_nodes.node then 1.0
            else 0.0
        end as interruption_share
    from attempts
    inner join allocation_nodes on attempts.slurm_job_id = allocation_nodes.slurm_job_id
    left join causes on attempts.job_id = causes.job_id and attempts.attempt = causes.attempt
),

final as (
    select
        ----------  ids
        cluster,
        node,
        job_id,
        attempt,
        slurm_job_id,
        ----------  strings
        state,
        cause_reason,
        ----------  numerics
        interruption_share,
        ----------  booleans
        cause_node is not null as is_cause_identified,
        ----------  timestamps
        interrupted_at,
        ----------  dates
        cast(interrupted_at as date) as metric_date
    from charged
    where interruption_share > 0
)

select * from final
