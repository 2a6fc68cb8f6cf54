{#- The program-goodput ladder (metric_tree.md §2.2 "The P ladder", docs/program_ladder.md): counterfactual
    step times from t_mean down to t_sol, each stored as an additive level in GPU-seconds and peak-FLOP-seconds
    (x n_steps x gpus [x peak]); a factor is the ratio of a level to the one above it, its additive leaf the gap
    between them over t_mean. -#}

{#- The levels, top to bottom. -#}
{% macro program_ladder_levels() -%}
    {{ return(['t_mean', 't_typical', 't_attr', 't_balanced', 't_busy', 't_compute', 't_sol']) }}
{%- endmacro %}

{#- (factor, its additive leaf, the level above, the level) in ladder order. -#}
{% macro program_ladder_steps() -%}
    {{ return([
        ('step_stability', 'effloss_transient', 't_mean', 't_typical'),
        ('ladder_coverage', 'effloss_unattributed', 't_typical', 't_attr'),
        ('rank_balance', 'effloss_straggler', 't_attr', 't_balanced'),
        ('gpu_busy', 'effloss_host_idle', 't_balanced', 't_busy'),
        ('comm_overlap', 'effloss_exposed_comm', 't_busy', 't_compute'),
        ('kernel_efficiency', 'effloss_kernel', 't_compute', 't_sol'),
    ]) }}
{%- endmacro %}

{#- Sums of a ladder mart's additive columns (fct_job_window -> fct_job_day -> fct_job). -#}
{% macro program_ladder_sums() -%}
    {%- for column in program_ladder_additive_columns() %}
        sum({{ column }}) as {{ column }}{{ ',' if not loop.last }}
    {%- endfor %}
{%- endmacro %}

{#- The factors and leaf shares from the summed levels, each Σ/Σ (so weighted by its own denominator, §2.4),
    and the ladder's coverages. display=true rounds them when var attribution_display_digits is set. -#}
{% macro program_ladder_factors(display=false) -%}
    {%- set columns = {} %}
    {%- for step in program_ladder_steps() %}
        {%- do columns.update({step[0]: safe_divide('ladder_' ~ step[3] ~ '_pfs', 'ladder_' ~ step[2] ~ '_pfs')}) %}
    {%- endfor %}
    {%- for step in program_ladder_steps() %}
        {%- do columns.update({step[1]: safe_divide(step[1] ~ '_pfs', 'ladder_t_mean_pfs')}) %}
    {%- endfor %}
    {%- do columns.update({
        'ladder_program_goodput': safe_divide('ladder_t_sol_pfs', 'ladder_t_mean_pfs'),
        'coverage_ladder': safe_divide('ladder_measured_pfs', 'ladder_t_typical_pfs'),
        'coverage_ladder_attributed': safe_divide('ladder_attributed_pfs', 'ladder_t_typical_pfs'),
    }) %}
    {%- for name, expression in columns.items() %}
        {{ attribution_display(expression) if display else expression }} as {{ name }}{{ ',' if not loop.last }}
    {%- endfor %}
{%- endmacro %}

{#- The ladder's measures in metric_tree_daily (lens job), prefixed job_ like the job lens's. -#}
{% macro program_ladder_tree_measures() -%}
    {% set measures = [] %}
    {% for level in program_ladder_levels() %}
        {% do measures.append('job_ladder_' ~ level ~ '_pfs') %}
    {% endfor %}
    {% for step in program_ladder_steps() %}
        {% do measures.append('job_' ~ step[1] ~ '_pfs') %}
    {% endfor %}
    {% for node_id in program_ladder_traced_nodes() %}
        {% do measures.append('coverage_' ~ node_id) %}
    {% endfor %}
    {{ return(measures) }}
{%- endmacro %}

{#- The job_ ladder measures selected from a mart carrying the ladder's sums. -#}
{% macro program_ladder_tree_columns(relation) -%}
    {%- for level in program_ladder_levels() %}
        cast({{ relation }}.ladder_{{ level }}_pfs as double) as job_ladder_{{ level }}_pfs,
    {%- endfor %}
    {%- for step in program_ladder_steps() %}
        cast({{ relation }}.{{ step[1] }}_pfs as double) as job_{{ step[1] }}_pfs,
    {%- endfor %}
    {%- for node_id in program_ladder_traced_nodes() %}
        {{ safe_divide(relation ~ '.ladder_measured_pfs', relation ~ '.ladder_t_typical_pfs') }} as coverage_{{ node_id }}{{ ',' if not loop.last }}
    {%- endfor %}
{%- endmacro %}

{#- The tree nodes measured from traces: their coverage in metric_tree_daily is the measured share of t_typical
    (carried-forward and untraced windows are not measured). -#}
{% macro program_ladder_traced_nodes() -%}
    {{ return(['rank_balance', 'gpu_busy', 'comm_overlap', 'kernel_efficiency',
               'effloss_straggler', 'effloss_host_idle', 'effloss_exposed_comm', 'effloss_kernel']) }}
{%- endmacro %}

{#- The additive columns a ladder mart carries (levels in gs and pfs, gaps, measured and attributed t_typical). -#}
{% macro program_ladder_additive_columns() -%}
    {% set columns = [] %}
    {% for level in program_ladder_levels() %}
        {% do columns.extend(['ladder_' ~ level ~ '_gs', 'ladder_' ~ level ~ '_pfs']) %}
    {% endfor %}
    {% for step in program_ladder_steps() %}
        {% do columns.append(step[1] ~ '_pfs') %}
    {% endfor %}
    {% do columns.extend(['ladder_measured_pfs', 'ladder_attributed_pfs']) %}
    {{ return(columns) }}
{%- endmacro %}
