{#-
    True when `value` differs from `expected` by more than `rel_tol` of |expected| (or of `floor`, when |expected|
    is smaller): the tolerance of every identity and roll-up test. `floor` keeps a near-zero expected value from
    demanding an exact match; use a small floor for ratios (goodput) and 1 for sums of seconds or FLOPs.
-#}
{% macro differs_relatively(value, expected, floor=1, rel_tol=1e-9) -%}
    abs(({{ value }}) - ({{ expected }})) > {{ rel_tol }} * greatest(abs({{ expected }}), {{ floor }})
{%- endmacro %}
