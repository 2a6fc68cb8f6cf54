-- Pooled numerator and denominator of a fleet-level rate per segment and period, the input of
-- the Kitagawa mix-vs-rate split. Segments: each cluster, and each SKU set (the cluster-day's
-- skus). Metrics: goodput = useful_flop / installed_pfs (mix_basis installed) and
-- running_goodput = useful_flop / allocated_pfs (mix_basis allocated).
{%- set metrics = [
    {'metric': 'goodput', 'mix_basis': 'installed', 'numerator': 'useful_flop', 'denominator': 'installed_pfs'},
    {'metric': 'running_goodput', 'mix_basis': 'allocated', 'numerator': 'useful_flop', 'denominator': 'allocated_pfs'},
] %}
{%- set segment_types = {'cluster': 'cluster', 'sku': 'skus'} %}
with

cluster_days as (
    select * from {{ ref('fct_cluster_day') }}
),

periods as (
    select * from {{ ref('int_attribution_periods') }}
),

final as (
    {% for segment_type, column in segment_types.items() %}
    {% set outer = loop %}
    {% for m in metrics %}
    select
        '{{ segment_type }}' as segment_type,
        cluster_days.{{ column }} as segment_id,
        '{{ m.metric }}' as metric,
        '{{ m.mix_basis }}' as mix_basis,
        periods.period,
        periods.period_start,
        periods.period_end,
        sum(cast(cluster_days.{{ m.numerator }} as double)) as numerator,
        sum(cast(cluster_days.{{ m.denominator }} as double)) as denominator
    from cluster_days
    inner join periods
        on cluster_days.metric_date between periods.period_start and periods.period_end
    group by all
    {% if not (loop.last and outer.last) %}union all{% endif %}
    {% endfor %}
    {% endfor %}
)

select * from final
