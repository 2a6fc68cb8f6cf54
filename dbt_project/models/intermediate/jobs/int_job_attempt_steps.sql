-- Every step of int_job_steps with the attempt (Slurm allocation) holding its start, its rank in that
-- attempt and the first-step excess (Google's PROGRAM_STARTUP): the first step's time beyond the mean of
-- the attempt's other steps, net of blocking saves and custom events, only when that step is retained.
-- The job lens (int_job_attempt_days, per day) and the program-goodput ladder (int_job_windows, per hour)
-- both take their steps from here, so the two cannot drift apart.
with

attempts as (
    select * from {{ ref('int_job_attempts') }}
),

steps as (
    select * from {{ ref('int_job_steps') }}
),

attempt_steps as (
    select
        attempts.attempt as job_attempt,
        steps.*,
        steps.duration_s - steps.ckpt_save_s - steps.custom_blocking_s as net_s,
        row_number() over (partition by steps.job_id, attempts.attempt order by steps.step_start_at) as step_rank,
        count(*) over (partition by steps.job_id, attempts.attempt) as attempt_steps
    from steps
    inner join attempts
        on steps.job_id = attempts.job_id
        and steps.step_start_at >= attempts.start_at
        and steps.step_start_at < attempts.end_at
),

final as (
    select
        *,
        case when step_rank = 1 and is_retained and attempt_steps > 1 then
            greatest(0, least(productive_s,
                net_s - (sum(net_s) over (partition by job_id, job_attempt) - net_s) / (attempt_steps - 1)))
            else 0 end as program_startup_s
    from attempt_steps
)

select * from final
