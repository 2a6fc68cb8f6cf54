{#- Makes the lake's Parquet visible as source tables where the engine needs a catalog entry (on-run-start).
    DuckDB reads the sources through each source's meta.external_location (read_parquet): nothing to do.
    Spark gets one table per source over its folder (meta.lake_path under PERFWH_LAKE_URI, e.g.
    s3a://bucket/lake on a cluster, default lake_dir(); `{name}` stands for the table name), dropped and created again on every run so that new files and event_date folders are
    seen. Its columns are those of the table's schema file (meta.lake_schema_file, written by ingestion
    beside the data): the full contract schema, which is what DuckDB's union_by_name over the same files
    yields, and a table with no data file yet still has its columns; without a schema file Spark merges
    the data files' schemas (mergeSchema). recursiveFileLookup reads every
    event_date folder without turning it into a partition column (DuckDB: hive_partitioning = false);
    Spark skips the `_schema` folder itself, as files whose names start with `_` are hidden to it. -#}
{% macro register_lake_sources() -%}
    {{ return(adapter.dispatch('register_lake_sources')()) }}
{%- endmacro %}

{% macro default__register_lake_sources() -%}
    {{ return('') }}
{%- endmacro %}

{% macro spark__register_lake_sources() -%}
    {%- if execute -%}
        {%- set lake = env_var('PERFWH_LAKE_URI', lake_dir() | trim) -%}
        {%- set schemas = [] -%}
        {%- for node in graph.sources.values() if node.meta.get('lake_path') -%}
            {%- if node.schema not in schemas -%}
                {%- do run_query('create database if not exists ' ~ node.schema) -%}
                {%- do schemas.append(node.schema) -%}
            {%- endif -%}
            {%- set relation = node.schema ~ '.' ~ node.identifier -%}
            {%- set location = lake ~ '/' ~ node.meta['lake_path'] | replace('{name}', node.identifier) -%}
            {%- set columns = [] -%}
            {%- if node.meta.get('lake_schema_file') -%}
                {%- set schema_file = lake ~ '/' ~ node.meta['lake_schema_file'] | replace('{name}', node.identifier) -%}
                {%- for row in run_query('describe select * from parquet.`' ~ schema_file ~ '`').rows -%}
                    {%- do columns.append('`' ~ row[0] ~ '` ' ~ row[1]) -%}
                {%- endfor -%}
            {%- endif -%}
            {%- do run_query('drop table if exists ' ~ relation) -%}
            {%- do run_query('create table ' ~ relation ~ (' (' ~ columns | join(', ') ~ ')' if columns else '')
                             ~ " using parquet options (path '" ~ location ~ "', recursiveFileLookup 'true',"
                             ~ " pathGlobFilter '*.parquet', mergeSchema 'true')") -%}
        {%- endfor -%}
    {%- endif -%}
    {{ return('') }}
{%- endmacro %}
