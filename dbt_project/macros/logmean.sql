{#- The logarithmic mean L(a, b) = (a - b) / (ln a - ln b), with L(a, a) = a (metric_tree.md §1.5,
    §2.9). NULL when either argument is NULL or not positive: ln is undefined there, and the
    zero-value limits (Wood & Lenzen 2006) are the caller's business. -#}
{% macro logmean(a, b) -%}
    (case
        when ({{ a }}) is null or ({{ b }}) is null or ({{ a }}) <= 0 or ({{ b }}) <= 0 then null
        when abs(({{ a }}) - ({{ b }})) <= 1e-15 * greatest(abs({{ a }}), abs({{ b }})) then cast({{ a }} as double)
        else (({{ a }}) - ({{ b }})) / (ln({{ a }}) - ln({{ b }}))
    end)
{%- endmacro %}

{#- Rounds a figure only when the var attribution_display_digits is set (unit tests set it to
    compare with the rounded worked examples of metric_tree.md §5 and §6); full precision otherwise.
    Adding 0.0 turns -0.0 into 0.0, which set comparisons tell apart. -#}
{% macro attribution_display(expression) -%}
    {%- set digits = var('attribution_display_digits', none) -%}
    {%- if digits is none -%}{{ expression }}{%- else -%}(round({{ expression }}, {{ digits }}) + 0.0){%- endif -%}
{%- endmacro %}
