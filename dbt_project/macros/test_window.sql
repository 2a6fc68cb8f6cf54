{#- Data tests over the built window only, on incremental builds (docs/incremental.md, "Data tests on an incremental
    build"). dbt wraps the model of every generic data test in get_where_subquery (the `where` config); this override
    adds, for a model, seed or source with an `event_time`, the days the build rebuilt: the window of
    --event-time-start/--event-time-end (which perfwh passes from lib.incremental.plan_window). Rows of other days
    did not change since the build that tested them. `dbt test` has no window flags: pass the vars test_window_start
    and test_window_end (dates) instead. A full refresh (--full-refresh), a run without a window, the var
    test_full_history = true and tables without event_time test every row. Singular tests are not filtered. -#}
{% macro get_where_subquery(relation) -%}
    {%- set where = config.get('where', '') -%}
    {%- set window = built_window_predicate() -%}
    {%- set conditions = [] -%}
    {%- if where %}{% do conditions.append('(' ~ where ~ ')') %}{% endif -%}
    {%- if window %}{% do conditions.append(window) %}{% endif -%}
    {%- if conditions -%}
        {%- set filtered -%}
            (select * from {{ relation }} where {{ conditions | join(' and ') }}) dbt_subquery
        {%- endset -%}
        {%- do return(filtered) -%}
    {%- else -%}
        {%- do return(relation) -%}
    {%- endif -%}
{%- endmacro %}

{#- `event_time >= start and event_time < end` for the resource the current test is attached to, when the invocation
    is an incremental build with a window; an empty string otherwise. -#}
{% macro built_window_predicate() -%}
    {%- set args = invocation_args_dict or {} -%}
    {%- set start = var('test_window_start', none) or args.get('event_time_start') -%}
    {%- set end = var('test_window_end', none) or args.get('event_time_end') -%}
    {%- if not execute or not start or not end or args.get('full_refresh') or var('test_full_history', false) -%}
        {{ return('') }}
    {%- endif -%}
    {%- set event_time = tested_event_time() -%}
    {%- if not event_time -%}
        {{ return('') }}
    {%- endif -%}
    {{ return(event_time ~ " >= " ~ window_bound(start) ~ " and " ~ event_time ~ " < " ~ window_bound(end)) }}
{%- endmacro %}

{#- The event_time of the model, seed or source the current generic test is attached to; none without one. -#}
{% macro tested_event_time() -%}
    {%- set attached = model.get('attached_node') if model is mapping else none -%}
    {%- set parents = model.get('depends_on', {}).get('nodes', []) if model is mapping else [] -%}
    {%- set candidates = [attached] if attached else (parents if parents | length == 1 else []) -%}
    {%- for unique_id in candidates -%}
        {%- set node = graph.nodes.get(unique_id) or graph.sources.get(unique_id) -%}
        {%- if node and node.config.get('event_time') -%}
            {{ return(node.config.get('event_time')) }}
        {%- endif -%}
    {%- endfor -%}
    {{ return(none) }}
{%- endmacro %}

{#- A window bound of the invocation (a datetime or its text) as the UTC literal dbt's own event_time filters use,
    '2026-11-09 00:00:00+00:00', which DuckDB and Spark compare with DATE and timestamp columns alike. -#}
{% macro window_bound(value) -%}
    {%- set text = (value | string | replace('T', ' ')) ~ ' 00:00:00' -%}
    {{ return("'" ~ text[:19] ~ "+00:00'") }}
{%- endmacro %}
