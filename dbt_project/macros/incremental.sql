{#- Incremental models by day (docs/incremental.md): dbt microbatch, one batch per UTC day of `event_time`. A build
    reprocesses the days it is given (perfwh passes --event-time-start/--event-time-end: the new days, the last
    `incremental_lookback_days` before them and every day a late file landed for); without them dbt takes the last
    `incremental_lookback_days` days before now. DuckDB deletes and inserts each batch's days; Spark overwrites the
    batch's partitions (partition_date, a DATE column of the batch's day: dbt-spark requires partition_by).
    A full refresh may take larger batches (var microbatch_batch_size, from PERFWH_BACKFILL_BATCH_SIZE: month or
    year): every model filters by the batch's bounds, never assumes one day, so any size gives the same rows.
    Batches run one after the other. Do not read earlier days from {{ this }} behind is_incremental(): under
    --full-refresh dbt compiles every batch with is_incremental() false; read them from an upstream table instead. -#}
{% macro daily_microbatch_config(event_time, partition_date) -%}
    {{ config(
        materialized='incremental',
        incremental_strategy='microbatch',
        event_time=event_time,
        batch_size=var('microbatch_batch_size', 'day'),
        lookback=incremental_lookback_days(),
        begin=var('incremental_begin', '2024-01-01'),
        partition_by=[partition_date],
        concurrent_batches=false,
    ) }}
{%- endmacro %}

{#- A predicate keeping the rows of `column` (a timestamp or date) inside the day batch being built; `true` outside a
    microbatch run. For inputs dbt does not filter by itself (no event_time, or read with .render()). -#}
{% macro in_batch(column) -%}
    {%- set batch = model.get('batch') if model is mapping else none -%}
    {%- if batch and batch.get('event_time_start') and batch.get('event_time_end') -%}
        {{ column }} >= '{{ batch.event_time_start }}' and {{ column }} < '{{ batch.event_time_end }}'
    {%- else -%}
        true
    {%- endif -%}
{%- endmacro %}

{#- Rows of `column` strictly before the batch being built (all rows outside a microbatch run: nothing is before). -#}
{% macro before_batch(column) -%}
    {%- set batch = model.get('batch') if model is mapping else none -%}
    {%- if batch and batch.get('event_time_start') -%}
        {{ column }} < '{{ batch.event_time_start }}'
    {%- else -%}
        false
    {%- endif -%}
{%- endmacro %}

{#- A series' samples inside the day batch (in_batch true) plus each series' last sample before it (in_batch false),
    so a lag() over the union reaches back across midnight and a day built alone equals a full build. `relation` (a
    CTE) must have exactly the columns series_columns, time_column, value_columns, in that order. The last sample
    before the batch is looked up in `before_relation` when given (a CTE with the same columns holding at least each
    series' last sample of every day, e.g. over int_dcgm_series_day_last), else in `relation` itself, which scans
    every earlier sample on each day batch. -#}
{% macro batch_with_last_before(relation, series_columns, time_column, value_columns, before_relation=none) -%}
    select *, true as in_batch from {{ relation }}
    where {{ in_batch(time_column) }}
    union all
    select
        {{ series_columns | join(', ') }},
        max({{ time_column }}) as {{ time_column }},
        {%- for column in value_columns %}
        max_by({{ column }}, {{ time_column }}) as {{ column }},
        {%- endfor %}
        false as in_batch
    from {{ before_relation or relation }}
    where {{ before_batch(time_column) }}
    group by {{ series_columns | join(', ') }}
{%- endmacro %}

{#- An interval [start_column, end_column) overlapping the day batch being built (end_column NULL: open-ended); `true`
    outside a microbatch run. For interval inputs a day-local model reads in full (state, allocation, requeue and
    inventory intervals), so that a batch reads only the intervals that can touch its day. -#}
{% macro overlaps_batch(start_column, end_column) -%}
    {%- set batch = model.get('batch') if model is mapping else none -%}
    {%- if batch and batch.get('event_time_start') and batch.get('event_time_end') -%}
        ({{ start_column }} < '{{ batch.event_time_end }}'
            and ({{ end_column }} is null or {{ end_column }} > '{{ batch.event_time_start }}'))
    {%- else -%}
        true
    {%- endif -%}
{%- endmacro %}

{#- The lookback of incremental builds in days: dbt var incremental_lookback_days, else the environment variable
    PERFWH_INCREMENTAL_LOOKBACK_DAYS that perfwh's build window uses (lib/incremental.py), else 2. -#}
{% macro incremental_lookback_days() -%}
    {{ return(var('incremental_lookback_days', env_var('PERFWH_INCREMENTAL_LOOKBACK_DAYS', '2')) | int) }}
{%- endmacro %}

{#- is_provisional (docs/incremental.md): true for a day the next incremental build will rebuild even without a late
    file, so its rows can still change (late restarts reclassify steps as wasted progress, late files add samples):
    the days after (latest data day − lookback), the latest data day being the calendar's last (int_calendar_days).
    With lookback 2 that is the latest day and the day before it (48 h); with lookback 0 no day. -#}
{% macro is_provisional(date_column) -%}
    ({{ date_column }} > (
        select max(day) - interval {{ incremental_lookback_days() }} day from {{ ref('int_calendar_days') }}
    ))
{%- endmacro %}
