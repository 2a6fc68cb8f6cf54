{#- Seeds on Spark: dbt-spark 1.11's session cursor pastes bindings into the SQL unescaped (a quote in a
    description breaks the statement) and loads a missing value as the text 'None'. Literal values instead:
    NULL for an empty cell, else the cell as an escaped string literal cast to the column's type. -#}
{% macro spark__load_csv_rows(model, agate_table) %}
    {%- set batch_size = get_batch_size() -%}
    {%- set column_override = model['config'].get('column_types', {}) -%}
    {%- set types = [] -%}
    {%- for col_name in agate_table.column_names -%}
        {%- do types.append(column_override.get(col_name, adapter.convert_type(agate_table, loop.index0))) -%}
    {%- endfor -%}
    {%- set statements = [] -%}
    {%- for chunk in agate_table.rows | batch(batch_size) -%}
        {%- set sql -%}
            insert into {{ this.render() }} values
            {% for row in chunk -%}
                ({%- for value in row -%}
                    {%- if value is none -%}cast(null as {{ types[loop.index0] }})
                    {%- else -%}cast('{{ value | string | replace('\\', '\\\\') | replace("'", "\\'") }}' as {{ types[loop.index0] }})
                    {%- endif -%}{{ ', ' if not loop.last }}
                {%- endfor -%}){{ ',' if not loop.last }}
            {% endfor %}
        {%- endset -%}
        {%- do adapter.add_query(sql, abridge_sql_log=True) -%}
        {%- do statements.append(sql) -%}
    {%- endfor -%}
    {{ return(statements[0] if statements else '') }}
{% endmacro %}
