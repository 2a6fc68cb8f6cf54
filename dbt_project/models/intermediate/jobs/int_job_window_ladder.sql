-- The trace side of the program-goodput ladder (metric_tree.md §2.2 "The P ladder", §1.3 the OSDI
-- what-if, §1.2 HTA) per int_job_windows row: three ratios measured on the window's traced steps, and
-- where they come from.
--
-- A traced step is a complete profiler step (not the capture's last) of a job's rank, matched to the
-- retained training step of the same job and number (its trace time, when absolute, must lie in that
-- step's attempt) and to the window holding that step's start; MAD-anomalous steps (above the window's
-- typical_max_s) are left out so that rank_balance does not count transient spikes twice. Per traced step,
-- over its traced ranks (a rank traced on several devices counts its busiest device):
--   compute_ns  the union of the rank's compute kernels (kernel_type = compute: not communication, not
--               memory) clipped to the step: what the rank itself had to do. NCCL time is not compute, so a
--               rank waiting in a collective for a slower peer is busy but not computing.
--   wait        max - mean of compute_ns over the ranks: the time the step lasts longer than a balanced
--               run in which every rank computes the mean (OSDI 2025 what-if, compute ops replaced by
--               their mean; S_whatif = span / (span - wait))
--   critical rank  the rank with the most compute (the one the others wait for); its idle time
--               (span - busy) is host/launch idle, its busy non-compute time exposed communication/memory
-- Pooled over the window's traced steps (Σ/Σ):
--   rank_balance_ratio  Σ (span - wait) / Σ span                                = 1 / S_whatif
--   gpu_busy_ratio      Σ (busy_crit - wait) / Σ (span - wait)
--   comm_overlap_ratio  Σ mean compute / Σ (busy_crit - wait)
-- The window's traced steps stand for all of its steps (traces are samples); the ratios scale its
-- t_typical in fct_job_window. A window without traced steps takes the ratios of the latest measured
-- window of the same attempt at most var ladder_carry_forward_hours (default 24) earlier
-- (ladder_source imputed_carry_forward), else none (untraced: its whole gap goes to effloss_unattributed).
-- One traced rank: wait = 0 (rank_balance 1; a straggler is then seen only as exposed communication).
with

windows as (
    select * from {{ ref('int_job_windows') }}
),

attempts as (
    select * from {{ ref('int_job_attempts') }}
),

steps as (
    select * from {{ ref('int_job_steps') }}
    where is_retained
),

step_busy as (
    select * from {{ ref('stg_traces__step_busy') }}
    where not last_step and job_id is not null and rank is not null and step_end_ns > step_start_ns
),

compute_kernels as (
    select capture_id, rank, device_index, start_ns, end_ns
    from {{ ref('stg_traces__kernels') }}
    where kernel_type = 'compute' and job_id is not null and rank is not null and end_ns > start_ns
),

step_kernels as (
    -- compute kernels clipped to each profiled step of the same capture, rank and device
    select
        step_busy.capture_id,
        step_busy.rank,
        step_busy.device_index,
        step_busy.step,
        greatest(compute_kernels.start_ns, step_busy.step_start_ns) as clip_start_ns,
        least(compute_kernels.end_ns, step_busy.step_end_ns) as clip_end_ns
    from step_busy
    inner join compute_kernels
        on step_busy.capture_id = compute_kernels.capture_id
        and step_busy.rank = compute_kernels.rank
        and coalesce(step_busy.device_index, -1) = coalesce(compute_kernels.device_index, -1)
        and compute_kernels.start_ns < step_busy.step_end_ns
        and compute_kernels.end_ns > step_busy.step_start_ns
),

covered as (
    -- the union of intervals: each kernel adds what lies beyond the furthest end before it
    select
        *,
        max(clip_end_ns) over (
            partition by capture_id, rank, device_index, step
            order by clip_start_ns, clip_end_ns
            rows between unbounded preceding and 1 preceding
        ) as covered_until_ns
    from step_kernels
),

step_compute as (
    select
        capture_id,
        rank,
        device_index,
        step,
        sum(greatest(0, clip_end_ns - greatest(clip_start_ns, coalesce(covered_until_ns, clip_start_ns)))) as compute_ns
    from covered
    group by capture_id, rank, device_index, step
),

rank_steps as (
    -- one figure per job, step and rank: its busiest device
    select
        step_busy.job_id,
        step_busy.step,
        step_busy.rank,
        max(step_busy.span_ns) as span_ns,
        max(step_busy.busy_ns) as busy_ns,
        max_by(coalesce(step_compute.compute_ns, 0), step_busy.busy_ns) as compute_ns,
        min(step_busy.step_started_at) as trace_started_at
    from step_busy
    left join step_compute
        on step_busy.capture_id = step_compute.capture_id
        and step_busy.rank = step_compute.rank
        and coalesce(step_busy.device_index, -1) = coalesce(step_compute.device_index, -1)
        and step_busy.step = step_compute.step
    group by step_busy.job_id, step_busy.step, step_busy.rank
),

traced_steps as (
    select
        job_id,
        step,
        count(*) as rank_count,
        max(span_ns) as span_ns,
        max(compute_ns) - avg(compute_ns) as wait_ns,
        avg(compute_ns) as mean_compute_ns,
        max_by(busy_ns, compute_ns) as critical_busy_ns,
        max_by(rank, compute_ns) as critical_rank,
        min(trace_started_at) as trace_started_at
    from rank_steps
    group by job_id, step
),

placed as (
    -- the retained training step each traced step is, and the window holding its start
    select
        windows.job_id,
        windows.attempt,
        windows.window_start_at,
        traced_steps.step,
        traced_steps.rank_count,
        traced_steps.span_ns,
        traced_steps.wait_ns,
        traced_steps.mean_compute_ns,
        traced_steps.critical_busy_ns,
        traced_steps.critical_rank
    from traced_steps
    inner join steps on traced_steps.job_id = steps.job_id and traced_steps.step = steps.step
    inner join attempts
        on steps.job_id = attempts.job_id
        and steps.step_start_at >= attempts.start_at
        and steps.step_start_at < attempts.end_at
    inner join windows
        on windows.job_id = steps.job_id
        and windows.attempt = attempts.attempt
        and windows.window_start_at = date_trunc('hour', steps.step_start_at)
    where (traced_steps.trace_started_at is null
           or (traced_steps.trace_started_at >= attempts.start_at and traced_steps.trace_started_at < attempts.end_at))
        and steps.productive_s <= windows.typical_max_s
        and traced_steps.span_ns > 0
),

measured as (
    select
        job_id,
        attempt,
        window_start_at,
        count(*) as traced_steps,
        min(rank_count) as traced_ranks,
        sum(span_ns) as span_ns,
        sum(wait_ns) as wait_ns,
        sum(span_ns - critical_busy_ns) as critical_idle_ns,
        sum(mean_compute_ns) as mean_compute_ns,
        {{ safe_divide('sum(span_ns - wait_ns)', 'sum(span_ns)') }} as rank_balance_ratio,
        {{ safe_divide('sum(critical_busy_ns - wait_ns)', 'sum(span_ns - wait_ns)') }} as gpu_busy_ratio,
        {{ safe_divide('sum(mean_compute_ns)', 'sum(critical_busy_ns - wait_ns)') }} as comm_overlap_ratio
    from placed
    group by job_id, attempt, window_start_at
),

carried as (
    -- the latest measured window of the same attempt, at most ladder_carry_forward_hours before
    select
        windows.job_id,
        windows.attempt,
        windows.window_start_at,
        measured.window_start_at as source_window_start_at,
        row_number() over (
            partition by windows.job_id, windows.attempt, windows.window_start_at
            order by measured.window_start_at desc
        ) as recency
    from windows
    inner join measured
        on windows.job_id = measured.job_id
        and windows.attempt = measured.attempt
        and measured.window_start_at <= windows.window_start_at
        and measured.window_start_at >= windows.window_start_at - interval {{ var('ladder_carry_forward_hours', 24) }} hour
),

final as (
    select
        ----------  ids
        windows.cluster,
        windows.job_id,
        windows.attempt,
        ----------  strings
        case
            when carried.source_window_start_at = windows.window_start_at then 'measured'
            when carried.source_window_start_at is not null then 'imputed_carry_forward'
            else 'untraced'
        end as ladder_source,
        ----------  numerics
        measured.traced_steps,
        measured.traced_ranks,
        case when carried.source_window_start_at = windows.window_start_at then
            {{ safe_divide('measured.traced_steps', 'windows.step_count') }} end as traced_step_share,
        measured.span_ns as traced_span_ns,
        measured.wait_ns as traced_wait_ns,
        measured.critical_idle_ns as traced_critical_idle_ns,
        measured.mean_compute_ns as traced_mean_compute_ns,
        measured.rank_balance_ratio,
        measured.gpu_busy_ratio,
        measured.comm_overlap_ratio,
        {{ interval_seconds('windows.window_start_at - carried.source_window_start_at') }} / 3600.0 as trace_age_h,
        ----------  dates
        windows.metric_date,
        ----------  timestamps
        windows.window_start_at,
        carried.source_window_start_at
    from windows
    left join carried
        on windows.job_id = carried.job_id
        and windows.attempt = carried.attempt
        and windows.window_start_at = carried.window_start_at
        and carried.recency = 1
    left join measured
        on carried.job_id = measured.job_id
        and carried.attempt = measured.attempt
        and carried.source_window_start_at = measured.window_start_at
)

select * from final
