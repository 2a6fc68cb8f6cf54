{#- The additive columns of the capacity lens, in GPU-seconds; each also exists as peak-FLOP-
    seconds (<name>_pfs). Shared by fct_cluster_day, fct_fleet_day and metric_tree_daily. -#}
{% macro capacity_ledger_states() -%}
    {{ return(['installed', 'down', 'available', 'allocated', 'idle', 'productive', 'badput',
               'wasted_progress', 'ckpt_save', 'custom_blocking', 'badput_other']
              + capacity_down_leaves() + capacity_idle_leaves()) }}
{%- endmacro %}

{#- The leaves of down and idle time in the hour ledger (docs/ledger.md): down_* from the seed state_taxonomy,
    idle_* by the rules of int_node_hour_ledger. idle_reserved_unused is left out: no input carries reservations. -#}
{% macro capacity_down_leaves() -%}
    {{ return(['down_hw_fault', 'down_repair', 'down_probe_quarantine', 'down_maintenance', 'down_drain',
               'down_unknown']) }}
{%- endmacro %}
{% macro capacity_idle_leaves() -%}
    {{ return(['idle_requeue_gap', 'idle_fragmented', 'idle_no_demand']) }}
{%- endmacro %}

{#- Every measure a metric_tree_nodes row may name as numerator, denominator or coverage. -#}
{% macro capacity_measures() -%}
    {% set measures = [] %}
    {% for state in capacity_ledger_states() %}
        {% do measures.append(state ~ '_gs') %}
        {% do measures.append(state ~ '_pfs') %}
    {% endfor %}
    {% do measures.extend(['productive_flops_known_pfs', 'useful_flop_known', 'useful_flop',
                           'coverage_program_goodput', 'coverage_goodput',
                           'dcgm_gpu_util_sum', 'dcgm_gpu_util_samples',
                           'dcgm_tensor_active_sum', 'dcgm_tensor_active_samples']) %}
    {{ return(measures) }}
{%- endmacro %}

{#- Useful FLOPs of all productive time, extrapolated from the productive time whose jobs have FLOPs
    metadata (useful_flop_known over productive_flops_known_pfs, scaled to productive_pfs; 0 when nothing was
    productive, NULL when productive time had no FLOPs at all), and the coverage that says how much was
    measured. Needs productive_pfs, productive_flops_known_pfs and useful_flop_known. -#}
{% macro useful_flop_extrapolated() -%}
        case
            when productive_pfs = 0 then 0
            else useful_flop_known * productive_pfs / nullif(productive_flops_known_pfs, 0)
        end as useful_flop,
        {{ safe_divide('productive_flops_known_pfs', 'productive_pfs') }} as coverage_program_goodput
{%- endmacro %}

{#- H100-equivalent goodput (metric_tree.md §2.2 `goodput_ref`, §2.4, §6): useful FLOPs over the installed
    GPU-seconds valued at the H100 dense BF16 peak of the seed, = capability_ratio × goodput with
    capability_ratio = installed_pfs / (installed_gs × peak_ref). Unlike goodput, it penalises moving work to
    older SKUs. Not bounded by 1 on SKUs faster than the reference. Needs installed_gs and useful_flop. -#}
{% macro goodput_h100_equivalent() -%}
        installed_gs * (
            select peak_flops_dense from {{ ref('gpu_sku_specs') }} where sku = 'H100-SXM' and dtype = 'bf16'
        ) as installed_h100_pfs,
        {{ safe_divide('useful_flop', "installed_gs * (select peak_flops_dense from " ~ ref('gpu_sku_specs') ~ " where sku = 'H100-SXM' and dtype = 'bf16')") }} as goodput_h100_equivalent
{%- endmacro %}

{#- The spine's factors as Σnumerator/Σdenominator of the columns above (never a mean of ratios). -#}
{#- display=true rounds them when the var attribution_display_digits is set (unit tests only). -#}
{% macro capacity_factors(display=false) -%}
    {%- set factors = {
        'availability': safe_divide('available_pfs', 'installed_pfs'),
        'allocation': safe_divide('allocated_pfs', 'available_pfs'),
        'runtime_goodput': safe_divide('productive_pfs', 'allocated_pfs'),
        'program_goodput': safe_divide('useful_flop', 'productive_pfs'),
        'goodput': safe_divide('useful_flop', 'installed_pfs'),
    } -%}
    {%- for name, expression in factors.items() %}
        {{ attribution_display(expression) if display else expression }} as {{ name }}{{ ',' if not loop.last }}
    {%- endfor %}
{%- endmacro %}

{#- Companion nodes outside the identity (metric_tree.md §2.2), rolled up from int_companion_gpu_days:
    node_id -> (numerator, denominator). dcgm_gpu_util and dcgm_tensor_active keep the capacity
    marts' measures at the node, cluster and fleet grains and take int_companion_gpu_days' at the
    gpu grain. -#}
{% macro companion_nodes() -%}
    {{ return({
        'dcgm_gpu_util': ('dcgm_gpu_util_sum', 'dcgm_gpu_util_samples'),
        'dcgm_tensor_active': ('dcgm_tensor_active_sum', 'dcgm_tensor_active_samples'),
        'clock_ratio': ('clock_ratio_sum', 'clock_ratio_samples'),
        'power_ratio': ('power_ratio_sum', 'power_ratio_samples'),
        'thermal_ok': ('thermal_ok_s', 'thermal_elapsed_s'),
        'probe_gemm_ratio': ('probe_gemm_value', 'probe_gemm_peak'),
        'probe_hbm_bw_ratio': ('probe_hbm_value', 'probe_hbm_peak'),
        'dcgm_sm_active': ('dcgm_sm_active_sum', 'dcgm_sm_active_samples'),
        'dcgm_dram_active': ('dcgm_dram_active_sum', 'dcgm_dram_active_samples'),
        'throttle_share': ('throttle_s', 'throttle_elapsed_s'),
        'xid_count': ('xid_events', 'xid_gpu_days'),
    }) }}
{%- endmacro %}

{#- The companions' measures in metric_tree_daily besides the capacity marts' dcgm_* ones. -#}
{% macro companion_measures() -%}
    {% set measures = [] %}
    {% for node_id, pair in companion_nodes().items() %}
        {% if node_id not in ('dcgm_gpu_util', 'dcgm_tensor_active') %}
            {% do measures.extend(pair) %}
        {% endif %}
        {% do measures.append('coverage_' ~ node_id) %}
    {% endfor %}
    {{ return(measures) }}
{%- endmacro %}
