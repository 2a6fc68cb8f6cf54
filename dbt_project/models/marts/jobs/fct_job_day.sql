-- The job lens per job and UTC day (metric_tree.md §2.2, job lens): additive GPU-seconds (_gs)
-- and peak-FLOP-seconds (_pfs) of the job's ledger, useful FLOPs, and
--   job_goodput G = scheduling_goodput S x runtime_goodput R x program_goodput P
--     S = allocated / eligible (eligible = queue_initial + queue_requeue + allocated)
--     R = productive / allocated (1 - R = Σ badput leaves + badput_other)
--     P = useful_flop / productive_pfs (MFU over productive time, dense peak)
--   time_goodput = S x R (≈ Meta's ETTR, §1.2), each Σ/Σ over the job's attempts that day.
-- badput_other is the named residual: allocated - productive - Σ measured leaves.
with

attempt_days as (
    select * from {{ ref('int_job_attempt_days') }}
),

summed as (
    select
        cluster,
        job_id,
        metric_date,
        min(sku) as sku,
        max(gpus) as gpus,
        count(distinct attempt) filter (where allocated_s > 0) as attempts,
        sum(step_count) as step_count,
        {{ job_lens_sums(from_seconds=true) }}
        sum(case when has_step_events then allocated_s * gpus * peak_flops_dense else 0 end) as allocated_with_events_pfs,
        sum(case when has_flops_metadata then productive_s * gpus * peak_flops_dense else 0 end) as productive_flops_known_pfs,
        sum(case when has_flops_metadata then useful_flop end) as useful_flop_known,
        bool_and(has_flops_metadata) as has_flops_metadata
    from attempt_days
    group by all
),

with_useful as (
    select
        *,
        case when has_flops_metadata then useful_flop_known end as useful_flop,
        {{ safe_divide('allocated_with_events_pfs', 'allocated_pfs') }} as coverage_runtime_goodput,
        {{ safe_divide('productive_flops_known_pfs', 'productive_pfs') }} as coverage_program_goodput
    from summed
),

ladder_days as (
    -- the program-goodput ladder: Σ of the day's hourly windows (fct_job_window, docs/program_ladder.md)
    select
        job_id,
        metric_date,
        {{ program_ladder_sums() }}
    from {{ ref('fct_job_window') }}
    group by job_id, metric_date
),

with_ladder as (
    select
        with_useful.*,
        {%- for column in program_ladder_additive_columns() %}
        ladder_days.{{ column }}{{ ',' if not loop.last }}
        {%- endfor %}
    from with_useful
    left join ladder_days on with_useful.job_id = ladder_days.job_id and with_useful.metric_date = ladder_days.metric_date
),

final as (
    select
        *,
        {{ job_lens_factors(display=true) }},
        {{ program_ladder_factors(display=true) }}
    from with_ladder
)

select * from final
