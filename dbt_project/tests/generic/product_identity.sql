{#- The factors multiply to the target within a relative tolerance (metric_tree.md §2.5). -#}
{% test product_identity(model, factors, target, rel_tol=1e-9) %}
select *
from {{ model }}
where {{ target }} is not null
  and {% for factor in factors %}{{ factor }} is not null and {% endfor %} true
  and {{ differs_relatively(factors | join(' * '), target, floor=1e-12, rel_tol=rel_tol) }}
{% endtest %}
