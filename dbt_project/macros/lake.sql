{#- Where the Parquet lake is: PERFWH_HOME/lake (docs/contracts.md). -#}
{% macro lake_dir() -%}
    {{ env_var('PERFWH_HOME', '../data') }}/lake
{%- endmacro %}

{#- Keep one row per natural key: the same fact delivered twice (another file name, a replayed
    scrape) counts once. Deterministic: the row of the lowest landed_file_id wins. -#}
{% macro dedupe_on(columns) -%}
    qualify row_number() over (partition by {{ columns | join(', ') }} order by landed_file_id) = 1
{%- endmacro %}
