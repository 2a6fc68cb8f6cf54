-- The job lens rolled up per cluster and day: Σ of the job-days' numerators and denominators
-- (never a mean of job ratios, metric_tree.md §2.4), so S, R and P here are weighted by each
-- factor's own denominator. useful_flop extrapolates the FLOPs of jobs with metadata to the
-- productive time of jobs without it (as fct_cluster_day does); coverage_program_goodput says
-- how much was measured. This is the side of the lens reconciliation with fct_cluster_day.
with

job_days as (
    select * from {{ ref('fct_job_day') }}
),

summed as (
    select
        cluster,
        metric_date,
        count(distinct job_id) as job_count,
        {{ sorted_distinct_string_agg('sku', "','") }} as skus,
        {{ job_lens_sums() }}
        sum(allocated_with_events_pfs) as allocated_with_events_pfs,
        sum(productive_flops_known_pfs) as productive_flops_known_pfs,
        sum(useful_flop) as useful_flop_known
    from job_days
    group by all
),

with_useful as (
    select
        *,
        {{ safe_divide('allocated_with_events_pfs', 'allocated_pfs') }} as coverage_runtime_goodput,
        {{ useful_flop_extrapolated() }}
    from summed
),

final as (
    select
        *,
        {{ job_lens_factors() }}
    from with_useful
)

select * from final
