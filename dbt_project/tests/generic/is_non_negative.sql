{% test is_non_negative(model, column_name, tolerance=1e-6) %}
select *
from {{ model }}
where {{ column_name }} < -{{ tolerance }}
{% endtest %}
