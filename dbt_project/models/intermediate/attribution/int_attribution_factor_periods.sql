-- Pooled numerators and denominators per grain, entity, period and factor of the capacity spine:
-- the root goodput, its multiplicative factors and the additive badput leaves under
-- runtime_goodput (shares of allocated). A factor over a period is Σnumerator/Σdenominator of
-- the period's days, never a mean of daily ratios. fct_attribution_lmdi reads only this model.
-- Under program_goodput, the program-goodput ladder (docs/program_ladder.md) as multiplicative
-- sub-factors: each ladder factor is Σ lower level / Σ upper level (pfs) of the job-days of the
-- entity and period (fct_job_day, jobs with FLOPs metadata), so the six multiply to the ladder's
-- t_sol/t_mean; the named residual ladder_residual = P / (t_sol/t_mean) carries the part of the
-- capacity lens's P the ladder does not explain (first-step excess the capacity ledger counts as
-- productive, the FLOPs extrapolation to jobs without metadata). Ladder x residual = P exactly;
-- with no ladder in a period its factors and the residual are NULL (unknown, never 1).
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
{%- for step in program_ladder_steps() %}
    {%- do factors.append({'factor': step[0], 'parent': 'program_goodput', 'kind': 'mult',
                           'numerator': 'ladder_' ~ step[3] ~ '_pfs', 'denominator': 'ladder_' ~ step[2] ~ '_pfs'}) %}
{%- endfor %}
{%- do factors.append({'factor': 'ladder_residual', 'parent': 'program_goodput', 'kind': 'mult',
                       'numerator': safe_divide('useful_flop', 'productive_pfs'),
                       'denominator': safe_divide('ladder_t_sol_pfs', 'ladder_t_mean_pfs')}) %}
{%- set ladder_measures = [] %}
{%- for level in program_ladder_levels() %}
    {%- do ladder_measures.append('ladder_' ~ level ~ '_pfs') %}
{%- endfor %}
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

ladder_clusters as (
    -- the program-goodput ladder per cluster-day: Σ of the job-days' levels (NULL without FLOPs metadata)
    select
        cluster,
        metric_date,
        {% for measure in ladder_measures %}sum(cast({{ measure }} as double)) as {{ measure }}{{ "," if not loop.last }}
        {% endfor %}
    from {{ ref('fct_job_day') }}
    group by cluster, metric_date
),

ladder_fleet as (
    select
        metric_date,
        {% for measure in ladder_measures %}sum({{ measure }}) as {{ measure }}{{ "," if not loop.last }}
        {% endfor %}
    from ladder_clusters
    group by metric_date
),

entity_days as (
    select
        'cluster' as grain,
        cluster_days.cluster as entity_id,
        cluster_days.metric_date,
        {% for measure in measures %}cast(cluster_days.{{ measure }} as double) as {{ measure }},
        {% endfor %}
        {%- for measure in ladder_measures %}
        ladder_clusters.{{ measure }}{{ "," if not loop.last }}
        {%- endfor %}
    from cluster_days
    left join ladder_clusters
        on cluster_days.cluster = ladder_clusters.cluster and cluster_days.metric_date = ladder_clusters.metric_date
    union all
    select
        'fleet' as grain,
        fleet_days.fleet as entity_id,
        fleet_days.metric_date,
        {% for measure in measures %}cast(fleet_days.{{ measure }} as double) as {{ measure }},
        {% endfor %}
        {%- for measure in ladder_measures %}
        ladder_fleet.{{ measure }}{{ "," if not loop.last }}
        {%- endfor %}
    from fleet_days
    left join ladder_fleet on fleet_days.metric_date = ladder_fleet.metric_date
),

pooled as (
    select
        entity_days.grain,
        entity_days.entity_id,
        periods.period,
        periods.period_start,
        periods.period_end,
        count(*) as day_count,
        -- useful_flop is NULL on a day whose productive time had no FLOPs metadata (unknown, never 0): the
        -- period's useful FLOPs extrapolate the days where it is known to the period's productive time, so that
        -- an unknown day counts neither as zero FLOPs nor drops out of the denominators
        case
            when sum(entity_days.productive_pfs) = 0 then 0
            else sum(entity_days.useful_flop) * sum(entity_days.productive_pfs)
                / nullif(sum(case when entity_days.useful_flop is not null then entity_days.productive_pfs end), 0)
        end as useful_flop,
        {% for measure in measures + ladder_measures if measure != 'useful_flop' %}sum(entity_days.{{ measure }}) as {{ measure }}{{ "," if not loop.last }}
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
