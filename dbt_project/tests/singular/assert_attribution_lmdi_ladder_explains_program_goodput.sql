{{ config(meta={'dagster': {'ref': {'name': 'fct_attribution_lmdi'}}}) }}
-- The LMDI split of a change in program goodput P into the program-goodput ladder (docs/metric_tree.md
-- "Ladder attribution"; metric_tree.md §2.5 identities 4 and 7). Per grain, entity and period pair where P is
-- known in both periods:
--   * P has exactly seven multiplicative children (the six ladder factors and ladder_residual), each with a
--     log change (a missing ladder fails: unknown is never counted as "no change");
--   * in each period the six ladder factors multiply to t_sol / t_mean recomputed here from fct_job_day
--     (Σ over the entity's job-days in the period, independently of int_attribution_factor_periods);
--   * ladder_residual x that product = P, and Σ of the seven dln = dln P (the generic closure test checks
--     dln and dg_additive for every parent; this one also fails when the children are absent).
-- Tolerance 1e-9 relative.
with

lmdi as (
    select * from {{ ref('fct_attribution_lmdi') }}
),

periods as (
    select * from {{ ref('int_attribution_periods') }}
),

job_days as (
    select
        job_days.cluster,
        periods.period,
        sum(job_days.ladder_t_sol_pfs) as t_sol_pfs,
        sum(job_days.ladder_t_mean_pfs) as t_mean_pfs
    from {{ ref('fct_job_day') }} as job_days
    inner join periods
        on job_days.metric_date between periods.period_start and periods.period_end
    group by job_days.cluster, periods.period
),

ladder_periods as (
    select 'cluster' as grain, cluster as entity_id, period, t_sol_pfs / t_mean_pfs as ladder_p
    from job_days
    union all
    select 'fleet', 'fleet', period, sum(t_sol_pfs) / sum(t_mean_pfs)
    from job_days
    group by period
),

recomputed as (
    select
        grain,
        entity_id,
        max(case when period = 'p0' then ladder_p end) as ladder_p0,
        max(case when period = 'p1' then ladder_p end) as ladder_p1
    from ladder_periods
    group by grain, entity_id
),

program as (
    select grain, entity_id, period0_start, period1_start, f0 as p0, f1 as p1, dln as dln_p
    from lmdi
    where factor = 'program_goodput' and f0 > 0 and f1 > 0
),

children as (
    select
        grain,
        entity_id,
        period0_start,
        period1_start,
        count(case when factor_kind = 'mult' and dln is not null then 1 end) as children_known,
        count(case when factor = 'ladder_residual' and dln is not null then 1 end) as residual_known,
        exp(sum(case when factor <> 'ladder_residual' then ln(f0) end)) as ladder_product0,
        exp(sum(case when factor <> 'ladder_residual' then ln(f1) end)) as ladder_product1,
        max(case when factor = 'ladder_residual' then f0 end) as residual0,
        max(case when factor = 'ladder_residual' then f1 end) as residual1,
        sum(dln) as children_dln
    from lmdi
    where parent_factor = 'program_goodput'
    group by grain, entity_id, period0_start, period1_start
),

final as (
    select
        program.*,
        children.children_known,
        children.residual_known,
        children.ladder_product0,
        children.ladder_product1,
        recomputed.ladder_p0,
        recomputed.ladder_p1,
        children.residual0,
        children.residual1,
        children.children_dln
    from program
    left join children
        on program.grain = children.grain
        and program.entity_id = children.entity_id
        and program.period0_start = children.period0_start
        and program.period1_start = children.period1_start
    left join recomputed
        on program.grain = recomputed.grain and program.entity_id = recomputed.entity_id
)

select *
from final
where coalesce(children_known, 0) <> 7
    or residual_known <> 1
    or ladder_p0 is null
    or ladder_p1 is null
    or abs(ladder_product0 - ladder_p0) > 1e-9 * ladder_p0
    or abs(ladder_product1 - ladder_p1) > 1e-9 * ladder_p1
    or abs(residual0 * ladder_product0 - p0) > 1e-9 * p0
    or abs(residual1 * ladder_product1 - p1) > 1e-9 * p1
    or abs(children_dln - dln_p) > greatest(1e-9 * abs(dln_p), 1e-12)
