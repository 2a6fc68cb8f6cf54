{#- Seconds of the interval [start_at, end_at) that fall on each UTC day it touches: use as
    `cross join lateral ({{ day_overlaps('i.start_at', 'i.end_at') }}) as d` giving d.day, d.seconds. -#}
{% macro day_overlaps(start_at, end_at) -%}
    select
        cast(day_start as date) as day,
        {{ interval_seconds('least(' ~ end_at ~ ', day_start + interval 1 day) - greatest(' ~ start_at ~ ', day_start)') }} as seconds
    from (
        select {{ unnest_series(
            "date_trunc('day', " ~ start_at ~ ")",
            "date_trunc('day', " ~ end_at ~ " - interval 1 microsecond)",
            'interval 1 day'
        ) }} as day_start
    )
    where {{ end_at }} > {{ start_at }}
{%- endmacro %}

{#- Seconds two intervals share (0 when they do not meet). -#}
{% macro overlap_seconds(start_a, end_a, start_b, end_b) -%}
    greatest(0, {{ interval_seconds('least(' ~ end_a ~ ', ' ~ end_b ~ ') - greatest(' ~ start_a ~ ', ' ~ start_b ~ ')') }})
{%- endmacro %}

{#- a / b, NULL (unknown) when the denominator is 0 or NULL: never a fake zero. -#}
{% macro safe_divide(numerator, denominator) -%}
    ({{ numerator }}) / nullif({{ denominator }}, 0)
{%- endmacro %}

{#- The hour since the Unix epoch that contains a timestamp (an integer; int_calendar_hours.hour_index). -#}
{% macro hour_index(ts) -%}
    cast(floor({{ epoch_seconds(ts) }} / 3600) as bigint)
{%- endmacro %}

{#- One row per hour index a non-empty interval [start_at, end_at) touches (a select-list expression; filter out
    empty intervals first): join int_calendar_hours on hour_index by equality instead of a range join. -#}
{% macro hour_indexes(start_at, end_at) -%}
    {{ unnest_series(
        hour_index(start_at),
        'greatest(' ~ hour_index(start_at) ~ ', cast(floor((' ~ epoch_seconds(end_at) ~ ' - 1e-6) / 3600) as bigint))',
        'cast(1 as bigint)'
    ) }}
{%- endmacro %}
