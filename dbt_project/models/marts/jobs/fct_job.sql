-- The job lens per job over its whole life in the window (all attempts and requeues, as
-- Meta's ETTR counts a job run): the sums of fct_job_day and the same factors, Σ/Σ.
with

job_days as (
    select * from {{ ref('fct_job_day') }}
),

attempts as (
    select
        job_id,
        count(*) as attempt_count,
        min(queue_start_at) as first_eligible_at,
        min(start_at) as first_start_at,
        max(end_at) as last_end_at,
        max_by(state, attempt) as final_state,
        bool_or(is_open) as is_running
    from {{ ref('int_job_attempts') }}
    group by job_id
),

job_meta as (
    select * from {{ ref('stg_job_meta__jobs') }}
),

summed as (
    select
        cluster,
        job_id,
        min(sku) as sku,
        max(gpus) as gpus,
        count(*) as job_days,
        sum(step_count) as step_count,
        {{ job_lens_sums() }}
        sum(allocated_with_events_pfs) as allocated_with_events_pfs,
        sum(productive_flops_known_pfs) as productive_flops_known_pfs,
        bool_and(has_flops_metadata) as has_flops_metadata,
        case when bool_and(has_flops_metadata) then sum(useful_flop) end as useful_flop,
        {{ program_ladder_sums() }}
    from job_days
    group by all
),

with_coverage as (
    select
        *,
        {{ safe_divide('allocated_with_events_pfs', 'allocated_pfs') }} as coverage_runtime_goodput,
        {{ safe_divide('productive_flops_known_pfs', 'productive_pfs') }} as coverage_program_goodput
    from summed
),

final as (
    select
        ----------  ids
        with_coverage.cluster,
        with_coverage.job_id,
        ----------  strings
        with_coverage.sku,
        job_meta.workload,
        job_meta.owner,
        job_meta.dtype,
        attempts.final_state,
        ----------  numerics
        with_coverage.gpus,
        attempts.attempt_count,
        attempts.attempt_count - 1 as restarts,
        {{ star_except('with_coverage.', ['cluster', 'job_id', 'sku', 'gpus']) }},
        {{ job_lens_factors() }},
        {{ program_ladder_factors() }},
        ----------  booleans
        attempts.is_running,
        ----------  timestamps
        attempts.first_eligible_at,
        attempts.first_start_at,
        attempts.last_end_at
    from with_coverage
    left join attempts on with_coverage.job_id = attempts.job_id
    left join job_meta on with_coverage.job_id = job_meta.job_id
)

select * from final
