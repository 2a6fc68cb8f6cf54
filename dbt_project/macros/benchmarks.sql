{#- The gpu_sku_specs SKU a GPU name stands for (nccl-tests rank lines, MLPerf SYSJSON); NULL when unknown.
    "NVIDIA H100 80GB HBM3" is the SXM5 board (PCIe and NVL boards name themselves). -#}
{% macro sku_from_gpu_name(column) -%}
    case
        when {{ column }} ilike '%H100%' and {{ column }} not ilike '%PCIe%' and {{ column }} not ilike '%NVL%'
            and ({{ column }} ilike '%HBM3%' or {{ column }} ilike '%SXM%') then 'H100-SXM'
        when {{ column }} ilike '%H200%' and {{ column }} not ilike '%NVL%' then 'H200-SXM'
        when {{ column }} ilike '%A100%SXM4%80GB%' then 'A100-SXM4-80GB'
        when {{ column }} ilike '%A100%SXM4%40GB%' then 'A100-SXM4-40GB'
    end
{%- endmacro %}
