-- The two periods an attribution compares: p1 = the last attribution_period_days days up to the
-- last day of the fleet facts (or the var attribution_end_date), p0 = the
-- attribution_baseline_days days just before them.
with

fleet_days as (
    select * from {{ ref('fct_fleet_day') }}
),

bounds as (
    select
        {% if var('attribution_end_date', none) %}
        cast('{{ var("attribution_end_date") }}' as date) as end_date
        {% else %}
        max(metric_date) as end_date
        {% endif %}
    from fleet_days
),

periods as (
    select
        'p0' as period,
        cast(end_date - {{ var('attribution_period_days', 7) }} - {{ var('attribution_baseline_days', 7) }} + 1 as date) as period_start,
        cast(end_date - {{ var('attribution_period_days', 7) }} as date) as period_end
    from bounds
    union all
    select
        'p1' as period,
        cast(end_date - {{ var('attribution_period_days', 7) }} + 1 as date) as period_start,
        cast(end_date as date) as period_end
    from bounds
),

final as (
    select * from periods
    where period_end is not null
)

select * from final
