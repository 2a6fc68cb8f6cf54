{#- Custom schemas verbatim (staging, intermediate); everything else in main, so that
    `select * from fct_fleet_day` works unqualified in the warehouse and the published snapshot. -#}
{% macro generate_schema_name(custom_schema_name, node) -%}
    {%- if custom_schema_name is none -%}{{ target.schema }}{%- else -%}{{ custom_schema_name | trim }}{%- endif -%}
{%- endmacro %}
