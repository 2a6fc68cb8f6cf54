-- The program-goodput ladder per job attempt and UTC hour (metric_tree.md §2.2 "The P ladder", §2.5
-- identities 3 and 4, docs/program_ladder.md). Counterfactual step times, in seconds per step:
--   t_mean > t_typical                     step logs (int_job_windows)
--   t_attr      = t_typical where the window's ladder is attributed (measured or carried forward),
--                 else t_sol: an untraced window's whole remaining gap is effloss_unattributed
--   t_balanced  = t_attr x rank_balance_ratio          (1 / S_whatif)
--   t_busy      = t_balanced x gpu_busy_ratio           (the critical rank's idle removed)
--   t_compute   = t_busy x comm_overlap_ratio           (exposed non-compute removed: the mean compute)
--   t_sol       = model_flops_per_step / (gpus x peak)
-- (ratios from int_job_window_ladder; for an untraced window every level below t_attr is t_sol.)
-- Each level is stored additive, x n_steps x gpus (GPU-seconds) x dense peak (peak-FLOP-seconds), all by
-- the same product, so equal levels give gaps of exactly 0 on every engine: ladder_t_mean_pfs is the
-- window's productive_pfs and ladder_t_sol_pfs its useful FLOPs (up to rounding), so the factors (each
-- level over the one above) multiply to t_sol / t_mean = useful_flop / productive_pfs = P, and
-- P + Σ effloss_* = 1 (each leaf = the gap between two levels over t_mean).
-- Windows of jobs without FLOPs metadata have no ladder (NULL, unknown).
with

windows as (
    select * from {{ ref('int_job_windows') }}
),

ladder as (
    select * from {{ ref('int_job_window_ladder') }}
),

levels as (
    select
        windows.*,
        ladder.ladder_source,
        ladder.traced_steps,
        ladder.traced_ranks,
        ladder.trace_age_h,
        ladder.rank_balance_ratio,
        ladder.gpu_busy_ratio,
        ladder.comm_overlap_ratio,
        ladder.ladder_source in ('measured', 'imputed_carry_forward') as is_attributed
    from windows
    left join ladder
        on windows.job_id = ladder.job_id
        and windows.attempt = ladder.attempt
        and windows.window_start_at = ladder.window_start_at
),

seconds as (
    select
        *,
        case when is_attributed then t_typical_s else t_sol_s end as t_attr_s,
        case when is_attributed then t_typical_s * rank_balance_ratio else t_sol_s end as t_balanced_s,
        case when is_attributed then t_typical_s * rank_balance_ratio * gpu_busy_ratio else t_sol_s end as t_busy_s,
        case when is_attributed
            then t_typical_s * rank_balance_ratio * gpu_busy_ratio * comm_overlap_ratio else t_sol_s end as t_compute_s
    from levels
),

additive as (
    select
        *,
        {%- for level in program_ladder_levels() %}
        case when has_flops_metadata then {{ level }}_s * n_steps * gpus * peak_flops_dense end as ladder_{{ level }}_pfs,
        {%- endfor %}
        case when has_flops_metadata and is_attributed and ladder_source = 'measured'
            then t_typical_s * n_steps * gpus * peak_flops_dense else 0 end as ladder_measured_pfs,
        case when has_flops_metadata and is_attributed
            then t_typical_s * n_steps * gpus * peak_flops_dense else 0 end as ladder_attributed_pfs
    from seconds
),

with_gaps as (
    select
        *,
        {%- for level in program_ladder_levels() %}
        ladder_{{ level }}_pfs / peak_flops_dense as ladder_{{ level }}_gs,
        {%- endfor %}
        {%- for step in program_ladder_steps() %}
        ladder_{{ step[2] }}_pfs - ladder_{{ step[3] }}_pfs as {{ step[1] }}_pfs{{ ',' if not loop.last }}
        {%- endfor %}
    from additive
),

final as (
    select
        ----------  ids
        cluster,
        job_id,
        attempt,
        ----------  strings
        sku,
        coalesce(ladder_source, 'untraced') as ladder_source,
        ----------  numerics
        gpus,
        peak_flops_dense,
        step_count,
        n_steps,
        t_mean_s,
        t_typical_s,
        t_attr_s,
        t_balanced_s,
        t_busy_s,
        t_compute_s,
        t_sol_s,
        traced_steps,
        traced_ranks,
        trace_age_h,
        {%- for level in program_ladder_levels() %}
        ladder_{{ level }}_gs,
        ladder_{{ level }}_pfs,
        {%- endfor %}
        {%- for step in program_ladder_steps() %}
        {{ step[1] }}_pfs,
        {%- endfor %}
        ladder_measured_pfs,
        ladder_attributed_pfs,
        {{ program_ladder_factors(display=true) }},
        ----------  booleans
        has_flops_metadata,
        ----------  dates
        metric_date,
        ----------  timestamps
        window_start_at,
        window_end_at
    from with_gaps
)

select * from final
