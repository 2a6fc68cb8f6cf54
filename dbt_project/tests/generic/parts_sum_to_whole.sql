{#- Additive parts add up to the whole within a relative tolerance (ledger and leaf closure). -#}
{% test parts_sum_to_whole(model, parts, whole, rel_tol=1e-9) %}
select *
from {{ model }}
where {{ differs_relatively(parts | join(' + '), whole, rel_tol=rel_tol) }}
{% endtest %}
