{#- A factor lies in [0, 1] (a tolerance absorbs float noise); NULL (unknown) passes. -#}
{% test is_ratio(model, column_name, tolerance=1e-9) %}
select *
from {{ model }}
where {{ column_name }} < -{{ tolerance }} or {{ column_name }} > 1 + {{ tolerance }}
{% endtest %}
