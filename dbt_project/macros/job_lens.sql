{#- The job lens (metric_tree.md §2.2, job lens; §1.1 Google's badput categories). The ledger of a
    job in GPU-seconds: eligible = queue_initial + queue_requeue + allocated, and
    allocated = productive + Σ badput leaves + badput_other (the named residual). -#}

{#- The measured badput leaves, in the order of a job's life (badput_other is the residual). -#}
{% macro job_lens_badput_leaves() -%}
    {{ return(['job_startup', 'device_init', 'training_prep', 'ckpt_restore', 'data_loading_sync',
               'program_startup', 'ckpt_save', 'custom_blocking', 'wasted_progress', 'fault_detection']) }}
{%- endmacro %}

{#- The measured (stored) states of int_job_attempt_days, in seconds of the job's wall clock. -#}
{% macro job_lens_measured_states() -%}
    {{ return(['queue_initial', 'queue_requeue', 'allocated', 'productive'] + job_lens_badput_leaves()) }}
{%- endmacro %}

{#- Every additive state of the job-lens marts; each exists as <state>_gs and <state>_pfs. -#}
{% macro job_lens_states() -%}
    {{ return(['eligible', 'queue_initial', 'queue_requeue', 'allocated', 'productive', 'badput']
              + job_lens_badput_leaves() + ['badput_other']) }}
{%- endmacro %}

{#- Sums the additive columns of a job-lens mart (or int_job_attempt_days when from_seconds). -#}
{% macro job_lens_sums(from_seconds=false) -%}
    {%- for state in job_lens_states() %}
        {%- if from_seconds %}
            {%- if state == 'eligible' %}
        sum((queue_initial_s + queue_requeue_s + allocated_s) * gpus) as eligible_gs,
        sum((queue_initial_s + queue_requeue_s + allocated_s) * gpus * peak_flops_dense) as eligible_pfs,
            {%- elif state == 'badput' %}
        sum((allocated_s - productive_s) * gpus) as badput_gs,
        sum((allocated_s - productive_s) * gpus * peak_flops_dense) as badput_pfs,
            {%- elif state == 'badput_other' %}
        sum((allocated_s - productive_s - {{ job_lens_badput_leaves() | join('_s - ') }}_s) * gpus) as badput_other_gs,
        sum((allocated_s - productive_s - {{ job_lens_badput_leaves() | join('_s - ') }}_s) * gpus * peak_flops_dense) as badput_other_pfs,
            {%- else %}
        sum({{ state }}_s * gpus) as {{ state }}_gs,
        sum({{ state }}_s * gpus * peak_flops_dense) as {{ state }}_pfs,
            {%- endif %}
        {%- else %}
        sum({{ state }}_gs) as {{ state }}_gs,
        sum({{ state }}_pfs) as {{ state }}_pfs,
        {%- endif %}
    {%- endfor %}
{%- endmacro %}

{#- The job lens's factors, each Σnumerator/Σdenominator: G = S × R × P, time goodput = S × R.
    R (and G, time goodput) is NULL where allocated time exists but none of it has step events:
    unknown, not 0. A day with queue time only has S = 0 and G = 0 (known: no work while
    eligible) but R and P NULL (no allocated or productive time).
    display=true rounds them when the var attribution_display_digits is set (unit tests only). -#}
{% macro job_lens_factors(display=false) -%}
    {%- set factors = {
        'scheduling_goodput': safe_divide('allocated_pfs', 'eligible_pfs'),
        'runtime_goodput': 'case when coalesce(coverage_runtime_goodput, 1) > 0 then ' ~ safe_divide('productive_pfs', 'allocated_pfs') ~ ' end',
        'program_goodput': safe_divide('useful_flop', 'productive_pfs'),
        'job_goodput': 'case when coalesce(coverage_runtime_goodput, 1) > 0 then ' ~ safe_divide('useful_flop', 'eligible_pfs') ~ ' end',
        'time_goodput': 'case when coalesce(coverage_runtime_goodput, 1) > 0 then ' ~ safe_divide('productive_pfs', 'eligible_pfs') ~ ' end',
    } -%}
    {%- for name, expression in factors.items() %}
        {{ attribution_display(expression) if display else expression }} as {{ name }}{{ ',' if not loop.last }}
    {%- endfor %}
{%- endmacro %}

{#- The job lens's measures in metric_tree_daily, prefixed job_ so that they never collide with
    the capacity lens's (a metric_tree_nodes row of lens 'job' names these). -#}
{% macro job_lens_tree_measures() -%}
    {% set measures = [] %}
    {% for state in job_lens_states() %}
        {% do measures.append('job_' ~ state ~ '_pfs') %}
    {% endfor %}
    {% do measures.extend(['job_useful_flop', 'coverage_job_goodput', 'coverage_job_runtime_goodput',
                           'coverage_job_program_goodput', 'coverage_time_goodput']) %}
    {{ return(measures) }}
{%- endmacro %}

{#- The job_ measures selected from a job-lens mart (fct_job_day or fct_job_lens_cluster_day). -#}
{% macro job_lens_tree_columns(relation) -%}
    {%- for state in job_lens_states() %}
        cast({{ relation }}.{{ state }}_pfs as double) as job_{{ state }}_pfs,
    {%- endfor %}
        cast({{ relation }}.useful_flop as double) as job_useful_flop,
        least({{ relation }}.coverage_runtime_goodput, {{ relation }}.coverage_program_goodput) as coverage_job_goodput,
        {{ relation }}.coverage_runtime_goodput as coverage_job_runtime_goodput,
        {{ relation }}.coverage_program_goodput as coverage_job_program_goodput,
        {{ relation }}.coverage_runtime_goodput as coverage_time_goodput
{%- endmacro %}
