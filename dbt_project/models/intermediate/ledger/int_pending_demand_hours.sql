-- Pending GPU demand per cluster and hour, in GPU-seconds, from the pending-queue snapshots: a snapshot at ts
-- stands for the queue during [ts, ts + var pending_snapshot_s) (default 3600 s, the snapshot cadence; the
-- queue between snapshots is not observed), and a job counts from the time it is eligible. The hour ledger
-- names idle GPU-seconds up to this demand idle_fragmented.
with

snapshots as (
    select * from {{ ref('stg_pending_queue__snapshots') }}
    where requested_gpus > 0
        and (eligible_since_at is null or eligible_since_at <= snapshot_at)
),

hours as (
    select * from {{ ref('int_calendar_hours') }}
),

spans as (
    select
        cluster,
        job_id,
        requested_gpus,
        snapshot_at as start_at,
        snapshot_at + interval {{ var('pending_snapshot_s', 3600) }} second as end_at
    from snapshots
),

final as (
    select
        ----------  ids
        spans.cluster,
        ----------  numerics
        count(distinct spans.job_id) as pending_jobs,
        sum(spans.requested_gpus
            * {{ overlap_seconds('spans.start_at', 'spans.end_at', 'hours.hour_start_at', 'hours.hour_end_at') }}
        ) as pending_gs,
        ----------  timestamps
        hours.hour_start_at
    from spans
    inner join hours on spans.start_at < hours.hour_end_at and spans.end_at > hours.hour_start_at
    group by spans.cluster, hours.hour_start_at
)

select * from final
