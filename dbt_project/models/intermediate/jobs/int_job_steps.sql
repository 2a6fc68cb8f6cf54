-- One row per training step (rank 0's timeline), with the time it took, the blocking events
-- inside it, and whether a later attempt redid it (wasted progress), following Google's
-- goodput recorder: a step lasts until the next step_start (or job_end) of the same attempt.
-- The last step of an attempt that died has no end: its time is unknown and stays in badput.
with

events as (
    select * from {{ ref('stg_step_events__events') }}
    where rank = 0
),

job_meta as (
    select * from {{ ref('stg_job_meta__jobs') }}
),

boundaries as (
    select
        job_id,
        attempt,
        event,
        step,
        event_at,
        lead(event_at) over (
            partition by job_id, attempt
            order by event_at, case event when 'step_start' then 0 else 1 end
        ) as next_boundary_at
    from events
    where event in ('step_start', 'job_end')
),

steps as (
    select
        job_id,
        attempt,
        step,
        event_at as step_start_at,
        next_boundary_at as step_end_at
    from boundaries
    where event = 'step_start'
),

blocking_edges as (
    select
        job_id,
        attempt,
        regexp_replace(event, '_(start|end)$', '') as kind,
        right(event, 6) = '_start' as is_start,
        event_at,
        row_number() over (
            partition by job_id, attempt, event order by event_at
        ) as occurrence
    from events
    where event in ('ckpt_save_start', 'ckpt_save_end', 'custom_start', 'custom_end')
),

blocking_intervals as (
    select
        starts.job_id,
        starts.attempt,
        starts.kind,
        starts.event_at as start_at,
        ends.event_at as end_at
    from blocking_edges as starts
    inner join blocking_edges as ends
        on starts.job_id = ends.job_id
        and starts.attempt = ends.attempt
        and starts.kind = ends.kind
        and starts.occurrence = ends.occurrence
        and not ends.is_start
    where starts.is_start and ends.event_at >= starts.event_at
),

blocking_per_step as (
    select
        steps.job_id,
        steps.attempt,
        steps.step,
        steps.step_start_at,
        sum(case when blocking_intervals.kind = 'ckpt_save' then
            {{ overlap_seconds('blocking_intervals.start_at', 'blocking_intervals.end_at', 'steps.step_start_at', 'steps.step_end_at') }}
            else 0 end) as ckpt_save_s,
        sum(case when blocking_intervals.kind = 'custom' then
            {{ overlap_seconds('blocking_intervals.start_at', 'blocking_intervals.end_at', 'steps.step_start_at', 'steps.step_end_at') }}
            else 0 end) as custom_blocking_s
    from steps
    inner join blocking_intervals
        on steps.job_id = blocking_intervals.job_id
        and steps.attempt = blocking_intervals.attempt
        and blocking_intervals.start_at < steps.step_end_at
        and blocking_intervals.end_at > steps.step_start_at
    group by all
),

classified as (
    select
        steps.*,
        max(steps.attempt) over (partition by steps.job_id, steps.step) = steps.attempt as is_retained,
        {{ interval_seconds('steps.step_end_at - steps.step_start_at') }} as duration_s,
        coalesce(blocking_per_step.ckpt_save_s, 0) as ckpt_save_s,
        coalesce(blocking_per_step.custom_blocking_s, 0) as custom_blocking_s
    from steps
    left join blocking_per_step
        on steps.job_id = blocking_per_step.job_id
        and steps.attempt = blocking_per_step.attempt
        and steps.step = blocking_per_step.step
        and steps.step_start_at = blocking_per_step.step_start_at
),

final as (
    select
        ----------  ids
        classified.job_id,
        classified.attempt,
        classified.step,
        ----------  numerics
        classified.duration_s,
        classified.ckpt_save_s,
        classified.custom_blocking_s,
        case when classified.is_retained
            then classified.duration_s - classified.ckpt_save_s - classified.custom_blocking_s else 0 end as productive_s,
        case when not classified.is_retained
            then classified.duration_s - classified.ckpt_save_s - classified.custom_blocking_s else 0 end as wasted_progress_s,
        case when classified.is_retained then job_meta.model_flops_per_step else 0 end as useful_flop,
        ----------  booleans
        classified.is_retained,
        job_meta.model_flops_per_step is not null as has_flops_metadata,
        ----------  timestamps
        classified.step_start_at,
        classified.step_end_at
    from classified
    left join job_meta on classified.job_id = job_meta.job_id
    where classified.step_end_at is not null
)

select * from final
