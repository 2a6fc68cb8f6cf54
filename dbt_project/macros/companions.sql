{#- Companion nodes whose node, cluster and fleet measures come from int_companion_entity_days (they need the
    capacity facts or the job history, not only GPU-days): no gpu grain. -#}
{% macro entity_companion_nodes() -%}
    {{ return(['goodput_ref', 'energy_per_useful_pflop', 'xid_node_faults', 'interruptions', 'mtti_h',
               'expected_runtime_goodput', 'runtime_goodput_vs_expected', 'probe_nccl_busbw_ratio']) }}
{%- endmacro %}

{#- Of those, the ones with no node grain either (cluster and fleet only). -#}
{% macro cluster_companion_nodes() -%}
    {{ return(['expected_runtime_goodput', 'runtime_goodput_vs_expected']) }}
{%- endmacro %}

{#- The measures of int_companion_entity_days that metric_tree_daily carries at the node, cluster and fleet grains. -#}
{% macro entity_companion_measures() -%}
    {{ return(['installed_h100_pfs', 'coverage_goodput_ref', 'useful_pflop', 'energy_j',
               'coverage_energy_per_useful_pflop', 'installed_node_days', 'xid_node_faults', 'interruptions',
               'allocated_node_days', 'allocated_node_h', 'expected_productive_pfs', 'productive_vs_expected_pfs',
               'expected_allocated_pfs', 'coverage_expected_runtime_goodput',
               'coverage_runtime_goodput_vs_expected', 'probe_nccl_busbw_gbps', 'probe_nccl_limit_gbps',
               'coverage_probe_nccl_busbw_ratio']) }}
{%- endmacro %}
