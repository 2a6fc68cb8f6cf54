-- Pooled numerators and denominators per grain, entity, period and factor of the capacity spine:
-- the root goodput, its multiplicative factors and the additive badput leaves under
-- runtime_goodput (shares of allocated). A factor over a period is Σnumerator/Σdenominator of
-- the period's days, never a mean of daily ratios. fct_attribution_lmdi reads only this model.
{%- set factors = [
    {'factor': 'goodput', 'parent': none, 'kind': 'root', 'numerator': 'useful_flop', 'denominator': 'installed_pfs'},
    {'factor': 'availability', 'parent': 'goodput', 'kind': 'mult', 'numerator': 'available_pfs', 'denominator': 'installed_pfs'},
    {'factor': 'allocation', 'parent': 'goodput', 'kind': 'mult', 'numerator': 'allocated_pfs', 'denominator': 'available_pfs'},
    {'factor': 'runtime_goodput', 'parent': 'goodput', 'kind': 'mult', 'numerator': 'productive_pfs', 'denominator': 'allocated_pfs'},
    {'factor': 'program_goodput', 'parent': 'goodput', 'kind': 'mult', 'numerator': 'useful_flop', 'denominator': 'productive_pfs'},
    {'factor': 'wasted_progress', 'parent': 'runtime_goodput', 'kind': 'add_leaf', 'numerator': 'wasted_progress_pfs', 'denominator': 'allocated_pfs'},
    {'factor': 'ckpt_save', 'parent': 'runtime_goodput', 'kind': 'add_leaf', 'numerator': 'ckpt_save_pfs', 'denominator': 'allocated_pfs'},
    {'factor': 'custom_blocking', 'parent': 'runtime_goodput', 'kind': 'add_leaf', 'numerator': 'custom_blocking_pfs', 'denominator': 'allocated_pfs'},
    {'factor': 'badput_other', 'parent': 'runtime_goodput', 'kind': 'add_leaf', 'numerator': 'badput_other_pfs', 'denominator': 'allocated_pfs'},
] %}
{%- set measures = ['installed_pfs', 'available_pfs', 'allocated_pfs', 'productive_pfs', 'useful_flop',
                    'wasted_progress_pfs', 'ckpt_save_pfs', 'custom_blocking_pfs', 'badput_other_pfs'] %}
with

cluster_days as (
    select * from {{ ref('fct_cluster_day') }}
),

fleet_days as (
    select * from {{ ref('fct_fleet_day') }}
),

periods as (
    select * from {{ ref('int_attribution_periods') }}
),

entity_days as (
    select
        'cluster' as grain,
        cluster as entity_id,
        metric_date,
        {% for measure in measures %}cast({{ measure }} as double) as {{ measure }}{{ "," if not loop.last }}
        {% endfor %}
    from cluster_days
    union all
    select
        'fleet' as grain,
        fleet as entity_id,
        metric_date,
        {% for measure in measures %}cast({{ measure }} as double) as {{ measure }}{{ "," if not loop.last }}
        {% endfor %}
    from fleet_days
),

pooled as (
    select
        entity_days.grain,
        entity_days.entity_id,
        periods.period,
        periods.period_start,
        periods.period_end,
        count(*) as day_count,
        {% for measure in measures %}sum(entity_days.{{ measure }}) as {{ measure }}{{ "," if not loop.last }}
        {% endfor %}
    from entity_days
    inner join periods
        on entity_days.metric_date between periods.period_start and periods.period_end
    group by all
),

final as (
    {% for f in factors %}
    select
        grain,
        entity_id,
        period,
        period_start,
        period_end,
        '{{ f.factor }}' as factor,
        {% if f.parent %}'{{ f.parent }}'{% else %}cast(null as string){% endif %} as parent_factor,
        '{{ f.kind }}' as factor_kind,
        {{ f.numerator }} as numerator,
        {{ f.denominator }} as denominator,
        day_count
    from pooled
    {% if not loop.last %}union all{% endif %}
    {% endfor %}
)

select * from final
