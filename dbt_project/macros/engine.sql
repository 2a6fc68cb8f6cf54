{#- Engine differences (docs/spark.md): every model is written once, and what DuckDB and Spark SQL spell
    differently goes through one of these dispatched macros (default__ = DuckDB, spark__ = Spark 4). -#}

{#- An instant in UTC: DuckDB TIMESTAMPTZ; Spark's TIMESTAMP is already instant-based (session zone UTC). -#}
{% macro type_timestamptz() -%}{{ return(adapter.dispatch('type_timestamptz')()) }}{%- endmacro %}
{% macro default__type_timestamptz() -%}timestamptz{%- endmacro %}
{% macro spark__type_timestamptz() -%}timestamp{%- endmacro %}

{#- Seconds since the Unix epoch of a timestamp, as a double with the microseconds. -#}
{% macro epoch_seconds(ts) -%}{{ return(adapter.dispatch('epoch_seconds')(ts)) }}{%- endmacro %}
{% macro default__epoch_seconds(ts) -%}epoch({{ ts }}){%- endmacro %}
{% macro spark__epoch_seconds(ts) -%}(unix_micros({{ ts }}) / 1e6){%- endmacro %}

{#- The length of an interval (a difference of timestamps) in seconds, as a double. -#}
{% macro interval_seconds(interval) -%}{{ return(adapter.dispatch('interval_seconds')(interval)) }}{%- endmacro %}
{% macro default__interval_seconds(interval) -%}epoch({{ interval }}){%- endmacro %}
{% macro spark__interval_seconds(interval) -%}(unix_micros(timestamp_micros(0) + ({{ interval }})) / 1e6){%- endmacro %}

{#- The timestamp of a count of microseconds since the Unix epoch. -#}
{% macro timestamp_from_micros(micros) -%}{{ return(adapter.dispatch('timestamp_from_micros')(micros)) }}{%- endmacro %}
{% macro default__timestamp_from_micros(micros) -%}make_timestamp({{ micros }}){%- endmacro %}
{% macro spark__timestamp_from_micros(micros) -%}timestamp_micros({{ micros }}){%- endmacro %}

{#- Integer division (truncating) of two integers. -#}
{% macro int_div(numerator, denominator) -%}{{ return(adapter.dispatch('int_div')(numerator, denominator)) }}{%- endmacro %}
{% macro default__int_div(numerator, denominator) -%}(({{ numerator }}) // ({{ denominator }})){%- endmacro %}
{% macro spark__int_div(numerator, denominator) -%}(({{ numerator }}) div ({{ denominator }})){%- endmacro %}

{#- One row per element of a list (a select-list expression). -#}
{% macro unnest_list(list) -%}{{ return(adapter.dispatch('unnest_list')(list)) }}{%- endmacro %}
{% macro default__unnest_list(list) -%}unnest({{ list }}){%- endmacro %}
{% macro spark__unnest_list(list) -%}explode({{ list }}){%- endmacro %}

{#- One row per value start, start + step, ... up to stop inclusive (a select-list expression). -#}
{% macro unnest_series(start, stop, step) -%}{{ return(adapter.dispatch('unnest_series')(start, stop, step)) }}{%- endmacro %}
{% macro default__unnest_series(start, stop, step) -%}unnest(generate_series({{ start }}, {{ stop }}, {{ step }})){%- endmacro %}
{% macro spark__unnest_series(start, stop, step) -%}explode(sequence({{ start }}, {{ stop }}, {{ step }})){%- endmacro %}

{#- The n-th element (1-based) of a list; NULL past its end. -#}
{% macro list_element(list, n) -%}{{ return(adapter.dispatch('list_element')(list, n)) }}{%- endmacro %}
{% macro default__list_element(list, n) -%}{{ list }}[{{ n }}]{%- endmacro %}
{% macro spark__list_element(list, n) -%}try_element_at({{ list }}, {{ n }}){%- endmacro %}

{#- Whether a list holds a value (NULL for a NULL list). -#}
{% macro list_has(list, value) -%}{{ return(adapter.dispatch('list_has')(list, value)) }}{%- endmacro %}
{% macro default__list_has(list, value) -%}list_contains({{ list }}, {{ value }}){%- endmacro %}
{% macro spark__list_has(list, value) -%}array_contains({{ list }}, {{ value }}){%- endmacro %}

{#- A string split on a literal separator into a list. -#}
{% macro split_to_list(text, separator) -%}{{ return(adapter.dispatch('split_to_list')(text, separator)) }}{%- endmacro %}
{% macro default__split_to_list(text, separator) -%}string_split({{ text }}, {{ separator }}){%- endmacro %}
{% macro spark__split_to_list(text, separator) -%}split({{ text }}, concat('\\Q', {{ separator }}, '\\E')){%- endmacro %}

{#- Aggregate: the sorted distinct non-NULL values of expr over the rows that pass the filter, NULL when none. -#}
{% macro sorted_distinct_list(expr, where='true') -%}{{ return(adapter.dispatch('sorted_distinct_list')(expr, where)) }}{%- endmacro %}
{% macro default__sorted_distinct_list(expr, where) -%}
    list_sort(list_distinct(list({{ expr }}) filter (where {{ where }})))
{%- endmacro %}
{% macro spark__sorted_distinct_list(expr, where) -%}
    case when count({{ expr }}) filter (where {{ where }}) > 0
        then array_sort(collect_set({{ expr }}) filter (where {{ where }})) end
{%- endmacro %}

{#- Aggregate: the distinct non-NULL values of expr that pass the filter, sorted and joined by separator. -#}
{% macro sorted_distinct_string_agg(expr, separator, where='true') -%}
    {{ return(adapter.dispatch('sorted_distinct_string_agg')(expr, separator, where)) }}
{%- endmacro %}
{% macro default__sorted_distinct_string_agg(expr, separator, where) -%}
    string_agg(distinct {{ expr }}, {{ separator }} order by {{ expr }}) filter (where {{ where }})
{%- endmacro %}
{% macro spark__sorted_distinct_string_agg(expr, separator, where) -%}
    case when count({{ expr }}) filter (where {{ where }}) > 0
        then array_join(array_sort(collect_set({{ expr }}) filter (where {{ where }})), {{ separator }}) end
{%- endmacro %}

{#- Whether the whole string matches a regular expression / whether a part of it does. -#}
{% macro regex_full_match(text, pattern) -%}{{ return(adapter.dispatch('regex_full_match')(text, pattern)) }}{%- endmacro %}
{% macro default__regex_full_match(text, pattern) -%}regexp_full_match({{ text }}, {{ pattern }}){%- endmacro %}
{% macro spark__regex_full_match(text, pattern) -%}({{ text }} rlike concat('^(?:', {{ pattern }}, ')$')){%- endmacro %}
{% macro regex_partial_match(text, pattern) -%}{{ return(adapter.dispatch('regex_partial_match')(text, pattern)) }}{%- endmacro %}
{% macro default__regex_partial_match(text, pattern) -%}regexp_matches({{ text }}, {{ pattern }}){%- endmacro %}
{% macro spark__regex_partial_match(text, pattern) -%}({{ text }} rlike {{ pattern }}){%- endmacro %}

{#- The string value at a JSON path ('$' or '$.key'): strings unquoted, other values as JSON text. -#}
{% macro json_text(json, path) -%}{{ return(adapter.dispatch('json_text')(json, path)) }}{%- endmacro %}
{% macro default__json_text(json, path) -%}json_extract_string({{ json }}, {{ path }}){%- endmacro %}
{% macro spark__json_text(json, path) -%}get_json_object({{ json }}, {{ path }}){%- endmacro %}

{#- A timestamp as text; fmt is strftime's (%Y %m %d %H %M %S, other characters literal). -#}
{% macro format_timestamp(ts, fmt) -%}{{ return(adapter.dispatch('format_timestamp')(ts, fmt)) }}{%- endmacro %}
{% macro default__format_timestamp(ts, fmt) -%}strftime({{ ts }}, '{{ fmt }}'){%- endmacro %}
{% macro spark__format_timestamp(ts, fmt) -%}
    {%- set codes = {'Y': 'yyyy', 'm': 'MM', 'd': 'dd', 'H': 'HH', 'M': 'mm', 'S': 'ss'} -%}
    {%- set parts = [] -%}
    {%- for piece in modules.re.split('(%[A-Za-z])', fmt) if piece -%}
        {%- if piece[0] == '%' -%}{%- do parts.append(codes[piece[1]]) -%}
        {%- else -%}{%- do parts.append("''" ~ piece ~ "''") -%}{%- endif -%}
    {%- endfor -%}
    date_format({{ ts }}, '{{ parts | join('') }}')
{%- endmacro %}

{#- Text from a template with `{}` (any value) and `{:.Nf}` (a number with N decimals) placeholders, one
    argument each (fmt syntax, as DuckDB's format()). -#}
{% macro format_text(template, args) -%}{{ return(adapter.dispatch('format_text')(template, args)) }}{%- endmacro %}
{% macro default__format_text(template, args) -%}format('{{ template }}', {{ args | join(', ') }}){%- endmacro %}
{% macro spark__format_text(template, args) -%}
    {%- set pieces = modules.re.split('([{][^}]*[}])', template) -%}
    {%- set parts = [] -%}
    {%- set ns = namespace(i=0) -%}
    {%- for piece in pieces if piece -%}
        {%- if piece[0] == '{' -%}
            {%- set arg = args[ns.i] -%}{%- set ns.i = ns.i + 1 -%}
            {%- if piece == '{}' -%}{%- do parts.append('coalesce(cast(' ~ arg ~ " as string), 'NULL')") -%}
            {%- else -%}{%- do parts.append("coalesce(format_string('%" ~ piece[2:-1] ~ "', " ~ arg ~ "), 'NULL')") -%}{%- endif -%}
        {%- else -%}{%- do parts.append("'" ~ piece ~ "'") -%}{%- endif -%}
    {%- endfor -%}
    concat({{ parts | join(', ') }})
{%- endmacro %}

{#- The number of elements of a list (NULL for a NULL list). -#}
{% macro list_length(list) -%}{{ return(adapter.dispatch('list_length')(list)) }}{%- endmacro %}
{% macro default__list_length(list) -%}len({{ list }}){%- endmacro %}
{% macro spark__list_length(list) -%}(case when {{ list }} is not null then size({{ list }}) end){%- endmacro %}

{#- Every column of a relation but some: `prefix` is the relation's alias with its dot, or ''. -#}
{% macro star_except(prefix, columns) -%}{{ return(adapter.dispatch('star_except')(prefix, columns)) }}{%- endmacro %}
{% macro default__star_except(prefix, columns) -%}{{ prefix }}* exclude ({{ columns | join(', ') }}){%- endmacro %}
{% macro spark__star_except(prefix, columns) -%}{{ prefix }}* except ({{ columns | join(', ') }}){%- endmacro %}

{#- The elements of a list as text joined by a separator (NULL for a NULL list). -#}
{% macro join_list(list, separator) -%}{{ return(adapter.dispatch('join_list')(list, separator)) }}{%- endmacro %}
{% macro default__join_list(list, separator) -%}array_to_string({{ list }}, {{ separator }}){%- endmacro %}
{% macro spark__join_list(list, separator) -%}array_join({{ list }}, {{ separator }}){%- endmacro %}

{#- A number as C's printf('%.<digits>g') writes it: `digits` significant digits, trailing zeros dropped, scientific
    notation below 1e-4 and from 10^digits on. Spark's printf is Java's, whose %g keeps trailing zeros. -#}
{% macro format_general(number, digits) -%}{{ return(adapter.dispatch('format_general')(number, digits)) }}{%- endmacro %}
{% macro default__format_general(number, digits) -%}printf('%.{{ digits }}g', {{ number }}){%- endmacro %}
{% macro spark__format_general(number, digits) -%}
    {%- set scientific = "format_string('%." ~ (digits - 1) ~ "e', " ~ number ~ ")" -%}
    {%- set exponent = "cast(substring_index(" ~ scientific ~ ", 'e', -1) as int)" -%}
    {%- set strip = "regexp_replace(regexp_replace({}, '(\\\\.[0-9]*?)0+$', '$1'), '\\\\.$', '')" -%}
    (case
        when {{ number }} is null then null
        when {{ number }} = 0 then '0'
        when {{ exponent }} < -4 or {{ exponent }} >= {{ digits }} then
            concat({{ strip.replace('{}', "substring_index(" ~ scientific ~ ", 'e', 1)") }}, 'e', substring_index({{ scientific }}, 'e', -1))
        else {{ strip.replace('{}', "format_string(concat('%.', cast(" ~ (digits - 1) ~ " - " ~ exponent ~ " as string), 'f'), " ~ number ~ ")") }}
    end)
{%- endmacro %}

{#- How a staging model that perf_assets' Python reads (detection: node software, inventory) is materialized: a view
    on DuckDB (it reads the lake), a table on Spark, where a view has no files for the DuckDB serving warehouse to
    read (perf_assets/lib/spark_marts.py, docs/spark.md). -#}
{% macro read_by_python_materialization() -%}{{ return(adapter.dispatch('read_by_python_materialization')()) }}{%- endmacro %}
{% macro default__read_by_python_materialization() -%}{{ return('view') }}{%- endmacro %}
{% macro spark__read_by_python_materialization() -%}{{ return('table') }}{%- endmacro %}

{#- A 64-bit hash of the columns (NULL hashes like a value), to find rows that may share a key cheaply; equal keys
    always hash equal, different keys may collide, so a caller compares the columns themselves after it. -#}
{% macro row_hash(columns) -%}{{ return(adapter.dispatch('row_hash')(columns)) }}{%- endmacro %}
{% macro default__row_hash(columns) -%}hash({{ columns | join(', ') }}){%- endmacro %}
{% macro spark__row_hash(columns) -%}xxhash64({{ columns | join(', ') }}){%- endmacro %}
