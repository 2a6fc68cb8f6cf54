-- Kitagawa's symmetric split of the change in a fleet-level rate G = Σ_s w_s g_s between two
-- periods into mix (composition) and rate (metric_tree.md §1.5, §6): w_s = the segment's share
-- of the denominator (mix_basis), g_s = Σnumerator/Σdenominator of the segment.
-- mix_s = ḡ_s Δw_s, rate_s = w̄_s Δg_s, Σ_s (mix_s + rate_s) = G1 - G0 with no interaction term.
-- A segment present in one period only has w = 0 in the other; its g is taken from the period
-- it has, so it contributes w·g wholly to mix.
with

segment_periods as (
    select * from {{ ref('int_attribution_segment_periods') }}
),

weighted as (
    select
        segment_type,
        segment_id,
        metric,
        mix_basis,
        period,
        period_start,
        period_end,
        {{ safe_divide('denominator', 'sum(denominator) over (partition by segment_type, metric, period)') }} as w,
        {{ safe_divide('numerator', 'denominator') }} as g
    from segment_periods
),

fleet as (
    select
        segment_type,
        metric,
        max(case when period = 'p0' then period_start end) as period0_start,
        max(case when period = 'p0' then period_end end) as period0_end,
        max(case when period = 'p1' then period_start end) as period1_start,
        max(case when period = 'p1' then period_end end) as period1_end,
        {{ safe_divide("sum(case when period = 'p0' then numerator end)", "sum(case when period = 'p0' then denominator end)") }} as fleet_g0,
        {{ safe_divide("sum(case when period = 'p1' then numerator end)", "sum(case when period = 'p1' then denominator end)") }} as fleet_g1
    from segment_periods
    group by all
),

paired as (
    select
        coalesce(period0.segment_type, period1.segment_type) as segment_type,
        coalesce(period0.metric, period1.metric) as metric,
        coalesce(period0.segment_id, period1.segment_id) as segment_id,
        coalesce(period0.mix_basis, period1.mix_basis) as mix_basis,
        coalesce(period0.w, 0) as w0,
        coalesce(period1.w, 0) as w1,
        coalesce(period0.g, period1.g) as g0,
        coalesce(period1.g, period0.g) as g1
    from (select * from weighted where period = 'p0') as period0
    full outer join (select * from weighted where period = 'p1') as period1
        on period0.segment_type = period1.segment_type
        and period0.metric = period1.metric
        and period0.segment_id = period1.segment_id
),

split as (
    select
        paired.*,
        case when w0 = 0 and w1 = 0 then 0 else (g0 + g1) / 2 * (w1 - w0) end as mix_contribution,
        case when w0 = 0 and w1 = 0 then 0 else (w0 + w1) / 2 * (g1 - g0) end as rate_contribution
    from paired
),

totals as (
    select
        split.*,
        mix_contribution + rate_contribution as total_contribution,
        sum(mix_contribution) over (partition by split.segment_type, split.metric) as fleet_mix,
        sum(rate_contribution) over (partition by split.segment_type, split.metric) as fleet_rate,
        fleet.fleet_g0,
        fleet.fleet_g1,
        fleet.fleet_g1 - fleet.fleet_g0 as fleet_dg,
        fleet.period0_start,
        fleet.period0_end,
        fleet.period1_start,
        fleet.period1_end
    from split
    inner join fleet
        on split.segment_type = fleet.segment_type
        and split.metric = fleet.metric
),

final as (
    select
        ----------  ids
        'fleet' as grain,
        segment_type,
        segment_id,
        metric,
        mix_basis,
        ----------  numerics
        {{ attribution_display('w0') }} as w0,
        {{ attribution_display('w1') }} as w1,
        {{ attribution_display('g0') }} as g0,
        {{ attribution_display('g1') }} as g1,
        {{ attribution_display('mix_contribution') }} as mix_contribution,
        {{ attribution_display('rate_contribution') }} as rate_contribution,
        {{ attribution_display('total_contribution') }} as total_contribution,
        {{ attribution_display('fleet_g0') }} as fleet_g0,
        {{ attribution_display('fleet_g1') }} as fleet_g1,
        {{ attribution_display('fleet_dg') }} as fleet_dg,
        {{ attribution_display('fleet_mix') }} as fleet_mix,
        {{ attribution_display('fleet_rate') }} as fleet_rate,
        ----------  dates
        period0_start,
        period0_end,
        period1_start,
        period1_end
    from totals
)

select * from final
