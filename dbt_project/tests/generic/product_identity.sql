{#- The factors multiply to the target within a relative tolerance (metric_tree.md §2.5). -#}
{% test product_identity(model, factors, target, rel_tol=1e-9) %}
select *
from {{ model }}
where {{ target }} is not null
  and {% for factor in factors %}{{ factor }} is not null and {% endfor %} true
  and abs(({{ factors | join(' * ') }}) - {{ target }}) > {{ rel_tol }} * greatest(abs({{ target }}), 1e-12)
{% endtest %}
