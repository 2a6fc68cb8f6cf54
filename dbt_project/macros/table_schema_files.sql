{#- A schema file beside each partitioned table's data (on-run-end): `<table location>/_schema/`, one Parquet file with
    the table's columns and no rows. Spark writes no file for a partitioned table without rows, so without it an empty
    table (no DCGM counters on a fleet, say) has no columns for the DuckDB serving warehouse to read
    (perf_assets/lib/spark_marts.py). Spark hides paths that start with `_`, so the table never reads it as data.
    Written for the partitioned models this run built (`results`), or for every one of them that exists (no results:
    `dbt run-operation write_table_schema_files`). Nothing on DuckDB. -#}
{% macro write_table_schema_files(results=none) -%}
    {{ return(adapter.dispatch('write_table_schema_files')(results)) }}
{%- endmacro %}

{% macro default__write_table_schema_files(results) -%}
    {{ return('') }}
{%- endmacro %}

{% macro spark__write_table_schema_files(results) -%}
    {%- if execute -%}
        {%- set nodes = [] -%}
        {%- if results is none -%}
            {%- for node in graph.nodes.values() if node.resource_type == 'model' -%}{%- do nodes.append(node) -%}{%- endfor -%}
        {%- else -%}
            {%- for result in results if result.status == 'success' and result.node.resource_type == 'model' -%}
                {%- do nodes.append(result.node) -%}
            {%- endfor -%}
        {%- endif -%}
        {%- for node in nodes if node.config.get('partition_by') -%}
            {%- set relation = adapter.get_relation(database=node.database, schema=node.schema, identifier=node.alias) -%}
            {%- if relation is not none -%}
                {%- set location = [] -%}
                {%- for row in run_query('describe table extended ' ~ relation).rows if row[0] == 'Location' -%}
                    {%- do location.append(row[1]) -%}
                {%- endfor -%}
                {%- if location -%}
                    {%- do run_query("insert overwrite directory '" ~ location[0] ~ "/_schema' using parquet select * from "
                                     ~ relation ~ " limit 0") -%}
                {%- endif -%}
            {%- endif -%}
        {%- endfor -%}
    {%- endif -%}
    {{ return('') }}
{%- endmacro %}
