-- LMDI attribution of the change in goodput between two periods (metric_tree.md §1.5, §2.9), per
-- grain and entity. Each multiplicative factor k: dln = ln(f1/f0), additive dG = L(G1,G0)·dln,
-- multiplicative D = exp(dln), share of Δln G = dln / ln(G1/G0). Each additive leaf under a
-- factor F (a share with F + Σ leaves = 1): dln = -Δshare / L(F1,F0), its part of Δln F. The
-- root row carries G itself: dln = ln(G1/G0), dG = G1 - G0, D = G1/G0.
with

factor_periods as (
    select * from {{ ref('int_attribution_factor_periods') }}
),

pooled as (
    select
        grain,
        entity_id,
        period,
        period_start,
        period_end,
        factor,
        parent_factor,
        factor_kind,
        {{ safe_divide('numerator', 'denominator') }} as factor_value
    from factor_periods
),

paired as (
    select
        period0.grain,
        period0.entity_id,
        period0.factor,
        period0.parent_factor,
        period0.factor_kind,
        period0.period_start as period0_start,
        period0.period_end as period0_end,
        period1.period_start as period1_start,
        period1.period_end as period1_end,
        period0.factor_value as f0,
        period1.factor_value as f1
    from pooled as period0
    inner join pooled as period1
        on period0.grain = period1.grain
        and period0.entity_id = period1.entity_id
        and period0.factor = period1.factor
        and period0.period = 'p0'
        and period1.period = 'p1'
),

roots as (
    select
        grain,
        entity_id,
        period0_start,
        period1_start,
        f0 as g0,
        f1 as g1
    from paired
    where factor_kind = 'root'
),

parents as (
    select
        grain,
        entity_id,
        period0_start,
        period1_start,
        factor as parent_factor,
        f0 as parent_f0,
        f1 as parent_f1
    from paired
),

log_changes as (
    select
        paired.*,
        roots.g0,
        roots.g1,
        case
            when paired.factor_kind = 'add_leaf'
                then -(paired.f1 - paired.f0) / {{ logmean('parents.parent_f1', 'parents.parent_f0') }}
            when paired.f0 > 0 and paired.f1 > 0
                then ln(paired.f1 / paired.f0)
        end as dln,
        case
            when roots.g0 > 0 and roots.g1 > 0 then ln(roots.g1 / roots.g0)
        end as dln_g
    from paired
    inner join roots
        on paired.grain = roots.grain
        and paired.entity_id = roots.entity_id
        and paired.period0_start = roots.period0_start
        and paired.period1_start = roots.period1_start
    left join parents
        on paired.grain = parents.grain
        and paired.entity_id = parents.entity_id
        and paired.period0_start = parents.period0_start
        and paired.period1_start = parents.period1_start
        and paired.parent_factor = parents.parent_factor
),

contributions as (
    select
        *,
        case
            when factor_kind = 'root' then g1 - g0
            else {{ logmean('g1', 'g0') }} * dln
        end as dg_additive,
        exp(dln) as d_multiplicative,
        case
            when factor_kind = 'root' and dln is not null then 1.0
            else {{ safe_divide('dln', 'dln_g') }}
        end as share_of_dln_g
    from log_changes
),

final as (
    select
        ----------  ids
        grain,
        entity_id,
        factor,
        parent_factor,
        factor_kind,
        ----------  numerics
        {{ attribution_display('f0') }} as f0,
        {{ attribution_display('f1') }} as f1,
        {{ attribution_display('dln') }} as dln,
        {{ attribution_display('dg_additive') }} as dg_additive,
        {{ attribution_display('d_multiplicative') }} as d_multiplicative,
        {{ attribution_display('share_of_dln_g') }} as share_of_dln_g,
        ----------  dates
        period0_start,
        period0_end,
        period1_start,
        period1_end
    from contributions
)

select * from final
