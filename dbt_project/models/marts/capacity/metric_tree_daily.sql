-- The long interface of the metric tree: one row per grain, entity, day and tree node, built
-- from the seed metric_tree_nodes (the tree's shape as data), the capacity facts and the job
-- lens (lens 'job' nodes: at the cluster and fleet grains from fct_job_lens_cluster_day, and at
-- the 'job' grain, entity_id = job_id, from fct_job_day; the job grain has no capacity nodes).
-- Capacity-lens nodes also at the 'node' grain (entity_id = node, from fct_node_day). Companion
-- nodes (kind 'companion', outside the identity) at every capacity grain and at the 'gpu' grain
-- (entity_id = gpu_uuid, companions only), rolled up Σ/Σ from int_companion_gpu_days.
-- Companions that need the facts or the job history (goodput_ref, energy, XID node faults, interruptions,
-- MTTI, expected runtime goodput) at the node, cluster and fleet grains from int_companion_entity_days
-- (docs/companions.md; the expected-R pair at the cluster and fleet grains only).
-- The program-goodput ladder (lens 'job' nodes under job_program_goodput, docs/program_ladder.md) at the
-- job grain from fct_job_day and at the cluster and fleet grains as Σ of the job-days' ladder levels.
-- A node's coverage is the measure coverage_<node_id> where one exists, else 1.
-- A full table (docs/incremental.md): its companions and job lens change on past days as days arrive.
with

companion_gpu_days as (
    select * from {{ ref('int_companion_gpu_days') }}
),

companions as (
    -- the companions' numerators, denominators and coverages per grain (sums of the GPU-days); the node,
    -- cluster and fleet grains take dcgm_gpu_util and dcgm_tensor_active from the capacity marts (NULL here)
    select
        'gpu' as grain,
        gpu_uuid as entity_id,
        metric_date,
        {%- for node_id, pair in companion_nodes().items() %}
        cast({{ pair[0] }} as double) as {{ pair[0] }},
        cast({{ pair[1] }} as double) as {{ pair[1] }},
        cast(covered_{{ node_id }} as double) as coverage_{{ node_id }}{{ ',' if not loop.last }}
        {%- endfor %}
    from companion_gpu_days
    {%- for grain, entity in [('node', 'node'), ('cluster', 'cluster'), ('fleet', "'fleet'")] %}
    union all
    select
        '{{ grain }}' as grain,
        {{ entity }} as entity_id,
        metric_date,
        {%- for node_id, pair in companion_nodes().items() %}
        {%- if node_id not in ('dcgm_gpu_util', 'dcgm_tensor_active') %}
        sum({{ pair[0] }}) as {{ pair[0] }},
        sum({{ pair[1] }}) as {{ pair[1] }},
        {%- else %}
        cast(null as double) as {{ pair[0] }},
        cast(null as double) as {{ pair[1] }},
        {%- endif %}
        sum(covered_{{ node_id }}) / sum(gpu_count) as coverage_{{ node_id }}{{ ',' if not loop.last }}
        {%- endfor %}
    from companion_gpu_days
    group by all
    {%- endfor %}
),

nodes as (
    select * from {{ ref('metric_tree_nodes') }}
),

entity_companions as (
    -- companions that need the facts or the job history, at the node, cluster and fleet grains (docs/companions.md)
    select * from {{ ref('int_companion_entity_days') }}
),

job_lens_clusters as (
    select * from {{ ref('fct_job_lens_cluster_day') }}
),

job_lens_fleet as (
    -- the job lens for the fleet: sums of the cluster-days' numerators and denominators
    select
        metric_date,
        {%- for state in job_lens_states() %}
        sum({{ state }}_pfs) as {{ state }}_pfs,
        {%- endfor %}
        sum(useful_flop) as useful_flop,
        {{ safe_divide('sum(allocated_with_events_pfs)', 'sum(allocated_pfs)') }} as coverage_runtime_goodput,
        {{ safe_divide('sum(productive_flops_known_pfs)', 'sum(productive_pfs)') }} as coverage_program_goodput
    from job_lens_clusters
    group by metric_date
),

program_ladder_clusters as (
    -- the program-goodput ladder per cluster-day: Σ of the job-days' additive ladder columns
    select cluster, metric_date, {{ program_ladder_sums() }}
    from {{ ref('fct_job_day') }}
    group by cluster, metric_date
),

program_ladder_fleet as (
    select metric_date, {{ program_ladder_sums() }}
    from program_ladder_clusters
    group by metric_date
),

-- The grains' measures side by side: each grain carries some of them (the rest NULL).
{%- set capacity_columns = capacity_measures() + companion_measures() + entity_companion_measures() %}
{%- set wide_columns = capacity_columns + job_lens_tree_measures() + program_ladder_tree_measures() %}

cluster_rows as (
    select
        'cluster' as grain,
        facts.cluster as entity_id,
        facts.metric_date,
        {% for measure in capacity_measures() %}cast(facts.{{ measure }} as double) as {{ measure }},
        {% endfor %}
        {%- for measure in companion_measures() %}
        companions.{{ measure }},
        {%- endfor %}
        {%- for measure in entity_companion_measures() %}
        entity_companions.{{ measure }},
        {%- endfor %}
        {{ job_lens_tree_columns('job_lens_clusters') }},
        {{ program_ladder_tree_columns('program_ladder_clusters') }}
    from {{ ref('fct_cluster_day') }} as facts
    left join job_lens_clusters
        on facts.cluster = job_lens_clusters.cluster and facts.metric_date = job_lens_clusters.metric_date
    left join program_ladder_clusters
        on facts.cluster = program_ladder_clusters.cluster and facts.metric_date = program_ladder_clusters.metric_date
    left join companions
        on companions.grain = 'cluster'
        and companions.entity_id = facts.cluster
        and companions.metric_date = facts.metric_date
    left join entity_companions
        on entity_companions.grain = 'cluster'
        and entity_companions.entity_id = facts.cluster
        and entity_companions.metric_date = facts.metric_date
),

fleet_rows as (
    select
        'fleet' as grain,
        facts.fleet as entity_id,
        facts.metric_date,
        {% for measure in capacity_measures() %}cast(facts.{{ measure }} as double) as {{ measure }},
        {% endfor %}
        {%- for measure in companion_measures() %}
        companions.{{ measure }},
        {%- endfor %}
        {%- for measure in entity_companion_measures() %}
        entity_companions.{{ measure }},
        {%- endfor %}
        {{ job_lens_tree_columns('job_lens_fleet') }},
        {{ program_ladder_tree_columns('program_ladder_fleet') }}
    from {{ ref('fct_fleet_day') }} as facts
    left join job_lens_fleet on facts.metric_date = job_lens_fleet.metric_date
    left join program_ladder_fleet on facts.metric_date = program_ladder_fleet.metric_date
    left join companions
        on companions.grain = 'fleet'
        and companions.entity_id = facts.fleet
        and companions.metric_date = facts.metric_date
    left join entity_companions
        on entity_companions.grain = 'fleet'
        and entity_companions.entity_id = facts.fleet
        and entity_companions.metric_date = facts.metric_date
),

node_rows as (
    -- the node grain: the capacity lens from the node-day ledger, and the companions
    select
        'node' as grain,
        facts.node as entity_id,
        facts.metric_date,
        {% for measure in capacity_measures() %}cast(facts.{{ measure }} as double) as {{ measure }},
        {% endfor %}
        {%- for measure in companion_measures() %}
        companions.{{ measure }},
        {%- endfor %}
        {%- for measure in entity_companion_measures() %}
        entity_companions.{{ measure }}{{ ',' if not loop.last }}
        {%- endfor %}
    from {{ ref('fct_node_day') }} as facts
    left join companions
        on companions.grain = 'node'
        and companions.entity_id = facts.node
        and companions.metric_date = facts.metric_date
    left join entity_companions
        on entity_companions.grain = 'node'
        and entity_companions.entity_id = facts.node
        and entity_companions.metric_date = facts.metric_date
),

gpu_rows as (
    -- the gpu grain carries the companions only
    select *
    from companions
    where grain = 'gpu'
),

job_rows as (
    -- the job grain carries the job lens only
    select
        'job' as grain,
        job_days.job_id as entity_id,
        job_days.metric_date,
        {{ job_lens_tree_columns('job_days') }},
        {{ program_ladder_tree_columns('job_days') }}
    from {{ ref('fct_job_day') }} as job_days
),

{%- set gpu_columns = [] %}
{%- for node_id, pair in companion_nodes().items() %}
    {%- do gpu_columns.extend([pair[0], pair[1], 'coverage_' ~ node_id]) %}
{%- endfor %}
{%- set grain_columns = {
    'cluster_rows': wide_columns, 'fleet_rows': wide_columns, 'node_rows': capacity_columns,
    'gpu_rows': gpu_columns, 'job_rows': job_lens_tree_measures() + program_ladder_tree_measures(),
} %}

wide as (
    {%- for relation, columns in grain_columns.items() %}
    select
        grain,
        entity_id,
        metric_date,
        {%- for measure in wide_columns %}
        {{ measure if measure in columns else 'cast(null as double)' }} as {{ measure }}{{ ',' if not loop.last }}
        {%- endfor %}
    from {{ relation }}
    {% if not loop.last %}union all{% endif %}
    {%- endfor %}
),

measures as (
    select grain, entity_id, metric_date, measure, amount
    from wide
    unpivot include nulls (
        amount for measure in ({{ (capacity_measures() + job_lens_tree_measures() + companion_measures()
                                   + entity_companion_measures() + program_ladder_tree_measures()) | join(', ') }})
    )
),

{#- which nodes each grain carries -#}
{%- set grain_rules -%}
(numerators.grain <> 'job' or nodes.lens = 'job')
        and (numerators.grain <> 'node' or nodes.lens = 'capacity')
        and (numerators.grain <> 'gpu' or nodes.kind = 'companion')
        and (numerators.grain <> 'gpu' or nodes.node_id not in ('{{ entity_companion_nodes() | join("', '") }}'))
        and (numerators.grain <> 'node' or nodes.node_id not in ('{{ cluster_companion_nodes() | join("', '") }}'))
{%- endset %}

final as (
    {{ metric_tree_rows(['metric_date'], ['metric_date'], where=grain_rules) }}
)

select
    *,
    {{ is_provisional('metric_date') }} as is_provisional  -- docs/incremental.md
from final
