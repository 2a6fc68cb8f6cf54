-- The job lens's time ledger per job attempt and UTC day, in seconds of the job's wall clock
-- (multiply by gpus for GPU-seconds). Rank 0's events are attributed to the attempt (Slurm
-- allocation) whose [start, end] holds them, and steps to the one that holds their start, the
-- same rule as the capacity ledger, so the two lenses reconcile. Intervals are split across
-- days in proportion to time. Leaves (metric_tree.md §1.1, §2.2):
--   queue_initial      eligible -> first start          queue_requeue  previous end -> restart
--   job_startup        allocation start -> first event after job_start (launch, imports)
--   device_init, training_prep, ckpt_restore            their recorded start/end events
--   data_loading_sync  the first data load of the attempt (later loads overlap steps: async)
--   program_startup    first-step excess: max(0, first step - mean of the attempt's other steps)
--   ckpt_save, custom_blocking   blocking saves and custom events (eval) inside steps
--   wasted_progress    steps a later attempt redid (after the last checkpoint)
--   fault_detection    restart detection: the last recorded step start of an attempt that died
--                      (failed or requeued, no job_end) -> the allocation's end (NODE_FAIL)
--   productive         retained step time net of the above
-- The residual badput_other = allocated - productive - Σ leaves is taken in the marts.
{% set interval_states = ['queue_initial', 'queue_requeue', 'allocated', 'job_startup', 'device_init',
                           'training_prep', 'ckpt_restore', 'data_loading_sync', 'fault_detection'] %}
with

attempts as (
    select * from {{ ref('int_job_attempts') }}
),

days as (
    select * from {{ ref('int_calendar_days') }}
),

job_meta as (
    select * from {{ ref('stg_job_meta__jobs') }}
),

events as (
    select
        attempts.job_id,
        attempts.attempt,
        step_events.event,
        step_events.event_at
    from {{ ref('stg_step_events__events') }} as step_events
    inner join attempts
        on step_events.job_id = attempts.job_id
        and step_events.event_at >= attempts.start_at
        and step_events.event_at <= attempts.end_at
    where step_events.rank = 0
),

attempt_events as (
    select
        job_id,
        attempt,
        min(event_at) filter (where event <> 'job_start') as first_event_at,
        max(event_at) filter (where event = 'step_start') as last_step_start_at,
        bool_or(event = 'job_end') as has_job_end
    from events
    group by all
),

phase_edges as (
    select
        job_id,
        attempt,
        regexp_replace(event, '_(start|end)$', '') as kind,
        right(event, 6) = '_start' as is_start,
        event_at,
        row_number() over (partition by job_id, attempt, event order by event_at) as occurrence
    from events
    where event in (
        'device_init_start', 'device_init_end', 'training_prep_start', 'training_prep_end',
        'ckpt_restore_start', 'ckpt_restore_end', 'data_loading_start', 'data_loading_end'
    )
),

intervals as (
    -- phases with recorded start and end
    select
        starts.job_id,
        starts.attempt,
        case starts.kind when 'data_loading' then 'data_loading_sync' else starts.kind end as leaf,
        starts.event_at as start_at,
        ends.event_at as end_at
    from phase_edges as starts
    inner join phase_edges as ends
        on starts.job_id = ends.job_id
        and starts.attempt = ends.attempt
        and starts.kind = ends.kind
        and starts.occurrence = ends.occurrence
        and not ends.is_start
    where starts.is_start
        and ends.event_at >= starts.event_at
        and (starts.kind <> 'data_loading' or starts.occurrence = 1)
    union all
    -- launch: allocation start to the first event after job_start
    select attempts.job_id, attempts.attempt, 'job_startup', attempts.start_at, attempt_events.first_event_at
    from attempts
    inner join attempt_events on attempts.job_id = attempt_events.job_id and attempts.attempt = attempt_events.attempt
    where attempt_events.first_event_at is not null
    union all
    -- restart detection: an attempt that died hangs from its last step start until the allocation ends
    select attempts.job_id, attempts.attempt, 'fault_detection', attempt_events.last_step_start_at, attempts.end_at
    from attempts
    inner join attempt_events on attempts.job_id = attempt_events.job_id and attempts.attempt = attempt_events.attempt
    where not attempt_events.has_job_end
        and attempt_events.last_step_start_at is not null
        and (attempts.was_requeued
             or attempts.state in ('NODE_FAIL', 'FAILED', 'TIMEOUT', 'OUT_OF_MEMORY', 'PREEMPTED', 'BOOT_FAIL'))
    union all
    select job_id, attempt, 'allocated', start_at, end_at from attempts
    union all
    select job_id, attempt, queue_kind, queue_start_at, start_at from attempts
),

interval_days as (
    select
        intervals.job_id,
        intervals.attempt,
        days.day,
        {% for state in interval_states %}
        sum(case when intervals.leaf = '{{ state }}' then
            {{ overlap_seconds('intervals.start_at', 'intervals.end_at', 'days.day_start_at', 'days.day_end_at') }}
            end) as {{ state }}_s{{ ',' if not loop.last }}
        {% endfor %}
    from intervals
    inner join days
        on intervals.start_at < days.day_end_at and intervals.end_at > days.day_start_at
    group by all
),

first_step_excess as (
    -- steps with their attempt and Google's PROGRAM_STARTUP (the first step's excess), int_job_attempt_steps
    select * from {{ ref('int_job_attempt_steps') }}
),

step_days as (
    select
        first_step_excess.job_id,
        first_step_excess.job_attempt as attempt,
        days.day,
        {{ overlap_seconds('first_step_excess.step_start_at', 'first_step_excess.step_end_at', 'days.day_start_at', 'days.day_end_at') }}
            / nullif(first_step_excess.duration_s, 0) as time_share,
        {{ star_except("first_step_excess.", ["job_id", "attempt"]) }}
    from first_step_excess
    inner join days
        on first_step_excess.step_start_at < days.day_end_at and first_step_excess.step_end_at > days.day_start_at
),

work_days as (
    select
        job_id,
        attempt,
        day,
        sum((productive_s - program_startup_s) * time_share) as productive_s,
        sum(program_startup_s * time_share) as program_startup_s,
        sum(ckpt_save_s * time_share) as ckpt_save_s,
        sum(custom_blocking_s * time_share) as custom_blocking_s,
        sum(wasted_progress_s * time_share) as wasted_progress_s,
        sum(coalesce(useful_flop, 0) * time_share) as useful_flop,
        count(*) as step_count
    from step_days
    group by all
),

attempt_days as (
    select job_id, attempt, day from interval_days
    union
    select job_id, attempt, day from work_days
),

final as (
    select
        ----------  ids
        attempts.cluster,
        attempts.job_id,
        attempts.attempt,
        ----------  strings
        attempts.sku,
        attempts.state,
        ----------  numerics (seconds of wall clock; x gpus = GPU-seconds)
        attempts.gpus,
        attempts.peak_flops_dense,
        {% for state in job_lens_measured_states() %}
        coalesce({{ 'interval_days' if state in interval_states else 'work_days' }}.{{ state }}_s, 0) as {{ state }}_s,
        {% endfor %}
        coalesce(work_days.useful_flop, 0) as useful_flop,
        coalesce(work_days.step_count, 0) as step_count,
        ----------  booleans
        attempt_events.job_id is not null as has_step_events,
        job_meta.model_flops_per_step is not null as has_flops_metadata,
        ----------  dates
        attempt_days.day as metric_date
    from attempt_days
    inner join attempts on attempt_days.job_id = attempts.job_id and attempt_days.attempt = attempts.attempt
    left join interval_days
        on attempt_days.job_id = interval_days.job_id
        and attempt_days.attempt = interval_days.attempt
        and attempt_days.day = interval_days.day
    left join work_days
        on attempt_days.job_id = work_days.job_id
        and attempt_days.attempt = work_days.attempt
        and attempt_days.day = work_days.day
    left join attempt_events on attempts.job_id = attempt_events.job_id and attempts.attempt = attempt_events.attempt
    left join job_meta on attempts.job_id = job_meta.job_id
)

select * from final
