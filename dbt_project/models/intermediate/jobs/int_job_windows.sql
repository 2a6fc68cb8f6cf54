-- The step-log side of the program-goodput ladder (metric_tree.md §2.2 "The P ladder", §2.7) per job
-- attempt and UTC hour: windows are hour-aligned so that they meet an hourly GPU ledger, and hours
-- partition days, so Σ windows of a day = the job-day. A step belongs to the attempt (Slurm allocation)
-- holding its start, and is split across the hours it touches in proportion to time, exactly as
-- int_job_attempt_days splits it across days: Σ productive_s and Σ useful_flop over a day's windows are
-- the job-day's. Only retained steps count (redone steps are badput, not program time), each net of
-- blocking saves, custom events and the first-step excess (productive time, Google's rules).
--   n_steps     Σ time share of the retained steps in the window (step-equivalents, fractional)
--   t_mean      productive_s / n_steps
--   t_typical   Google's "ideal step time": steps above median + k·MAD of the window's steps are
--               dropped (k = var ladder_mad_k, default 3, scipy's raw-scale MAD), then the time-share
--               weighted mean of the rest; t_typical <= t_mean by construction
--   t_sol       model_flops_per_step / (gpus x dense peak): the step at the speed of light
with

attempts as (
    select * from {{ ref('int_job_attempts') }}
),

job_meta as (
    select * from {{ ref('stg_job_meta__jobs') }}
),

first_step_excess as (
    -- steps with their attempt and the first-step excess of the job lens (int_job_attempt_steps), taken out of
    -- productive time
    select
        attempts.cluster,
        attempts.sku,
        attempts.gpus,
        attempts.peak_flops_dense,
        steps.job_attempt,
        steps.job_id,
        steps.step,
        steps.step_start_at,
        steps.step_end_at,
        steps.duration_s,
        steps.productive_s,
        steps.is_retained,
        steps.net_s,
        steps.step_rank,
        steps.attempt_steps,
        steps.program_startup_s
    from {{ ref('int_job_attempt_steps') }} as steps
    inner join attempts
        on steps.job_id = attempts.job_id
        and steps.job_attempt = attempts.attempt
),

retained as (
    select
        *,
        productive_s - program_startup_s as step_productive_s
    from first_step_excess
    where is_retained and step_end_at > step_start_at
),

step_hours as (
    select
        retained.*,
        {{ unnest_series(
            "date_trunc('hour', retained.step_start_at)",
            "date_trunc('hour', retained.step_end_at - interval 1 microsecond)",
            'interval 1 hour'
        ) }} as window_start_at
    from retained
),

step_windows as (
    select
        *,
        {{ overlap_seconds('step_start_at', 'step_end_at', 'window_start_at', 'window_start_at + interval 1 hour') }}
            / duration_s as time_share
    from step_hours
),

window_medians as (
    select job_id, job_attempt, window_start_at, median(step_productive_s) as median_step_s
    from step_windows
    where time_share > 0
    group by job_id, job_attempt, window_start_at
),

window_mads as (
    select
        step_windows.job_id,
        step_windows.job_attempt,
        step_windows.window_start_at,
        median(abs(step_windows.step_productive_s - window_medians.median_step_s)) as mad_step_s
    from step_windows
    inner join window_medians
        on step_windows.job_id = window_medians.job_id
        and step_windows.job_attempt = window_medians.job_attempt
        and step_windows.window_start_at = window_medians.window_start_at
    where step_windows.time_share > 0
    group by step_windows.job_id, step_windows.job_attempt, step_windows.window_start_at
),

flagged as (
    select
        step_windows.*,
        window_medians.median_step_s,
        window_mads.mad_step_s,
        window_medians.median_step_s + {{ var('ladder_mad_k', 3) }} * window_mads.mad_step_s as typical_max_s,
        step_windows.step_productive_s
            <= window_medians.median_step_s + {{ var('ladder_mad_k', 3) }} * window_mads.mad_step_s as is_typical
    from step_windows
    inner join window_medians
        on step_windows.job_id = window_medians.job_id
        and step_windows.job_attempt = window_medians.job_attempt
        and step_windows.window_start_at = window_medians.window_start_at
    inner join window_mads
        on step_windows.job_id = window_mads.job_id
        and step_windows.job_attempt = window_mads.job_attempt
        and step_windows.window_start_at = window_mads.window_start_at
    where step_windows.time_share > 0
),

windows as (
    select
        cluster,
        job_id,
        job_attempt as attempt,
        window_start_at,
        min(sku) as sku,
        max(gpus) as gpus,
        max(peak_flops_dense) as peak_flops_dense,
        count(*) as step_count,
        sum(case when is_typical then 1 else 0 end) as typical_step_count,
        sum(time_share) as n_steps,
        sum(case when is_typical then time_share else 0 end) as n_steps_typical,
        sum(step_productive_s * time_share) as productive_s,
        sum(case when is_typical then step_productive_s * time_share else 0 end) as typical_productive_s,
        max(median_step_s) as median_step_s,
        max(mad_step_s) as mad_step_s,
        max(typical_max_s) as typical_max_s
    from flagged
    group by cluster, job_id, job_attempt, window_start_at
),

final as (
    select
        ----------  ids
        windows.cluster,
        windows.job_id,
        windows.attempt,
        ----------  strings
        windows.sku,
        ----------  numerics
        windows.gpus,
        windows.peak_flops_dense,
        windows.step_count,
        windows.typical_step_count,
        windows.n_steps,
        windows.n_steps_typical,
        windows.productive_s,
        windows.median_step_s,
        windows.mad_step_s,
        windows.typical_max_s,
        {{ safe_divide('windows.productive_s', 'windows.n_steps') }} as t_mean_s,
        -- nothing filtered: t_typical is t_mean itself (not a second sum that may differ in the last bit)
        case when windows.typical_step_count = windows.step_count then {{ safe_divide('windows.productive_s', 'windows.n_steps') }}
            else {{ safe_divide('windows.typical_productive_s', 'windows.n_steps_typical') }} end as t_typical_s,
        job_meta.model_flops_per_step / (windows.gpus * windows.peak_flops_dense) as t_sol_s,
        job_meta.model_flops_per_step * windows.n_steps as useful_flop,
        windows.productive_s * windows.gpus as productive_gs,
        windows.productive_s * windows.gpus * windows.peak_flops_dense as productive_pfs,
        ----------  booleans
        job_meta.model_flops_per_step is not null as has_flops_metadata,
        ----------  dates
        cast(windows.window_start_at as date) as metric_date,
        ----------  timestamps
        windows.window_start_at,
        windows.window_start_at + interval 1 hour as window_end_at
    from windows
    left join job_meta on windows.job_id = job_meta.job_id
)

select * from final
