-- Companion measures at the node, cluster and fleet grains that need the capacity facts or the
-- job history (metric_tree.md §2.2 companions, §2.4 goodput_ref, §2.6), one row per grain, entity
-- and day; metric_tree_daily joins them to its node, cluster and fleet rows. All additive (a
-- cluster's is the sum of its nodes', the fleet's the sum of the clusters') except useful_pflop
-- and installed_h100_pfs, which each grain takes from its own fact (useful FLOPs are extrapolated
-- per grain, as in fct_node_day / fct_cluster_day).
--   goodput_ref            useful_flop / installed_h100_pfs (H100-equivalent goodput)
--   energy_per_useful_pflop energy_j (int_companion_gpu_days) / useful_pflop; coverage = GPU-seconds
--                          with energy known / installed GPU-seconds
--   xid_node_faults        node `down` events whose reason names an XID ('xid N'), by start day,
--                          per installed node-day
--   interruptions          int_job_interruptions' shares per allocated node-day
--   mtti_h                 allocated node-hours / interruptions (NULL when none)
--   probe_nccl_busbw_ratio Σ busbw at the largest size / Σ the bounding link's limit (fct_nccl_test_runs,
--                          runs with status ok and a known limit) over the runs each node took part in,
--                          by run day; a multi-host run counts once on each of its nodes, so a cluster's
--                          ratio weighs runs by the nodes they cover; coverage = node-days with a run /
--                          installed node-days
--   expected_runtime_goodput, runtime_goodput_vs_expected: int_expected_runtime_goodput (cluster,
--                          fleet; NULL at the node grain)
with

node_days as (
    select * from {{ ref('fct_node_day') }}
),

gpu_days as (
    select
        node,
        metric_date,
        sum(energy_j) as energy_j,
        sum(energy_elapsed_s) as energy_elapsed_s
    from {{ ref('int_companion_gpu_days') }}
    group by all
),

interruptions as (
    select node, metric_date, sum(interruption_share) as interruptions
    from {{ ref('int_job_interruptions') }}
    group by all
),

xid_faults as (
    select node, cast(start_at as date) as metric_date, count(*) as xid_node_faults
    from {{ ref('stg_node_events__states') }}
    where state = 'down' and {{ regex_partial_match('lower(reason)', "'xid ?[0-9]+'") }}
    group by all
),

expected as (
    select * from {{ ref('int_expected_runtime_goodput') }}
),

nccl_run_nodes as (
    select
        {{ unnest_list('hosts') }} as node,
        run_date as metric_date,
        busbw_gbps,
        limit_busbw_gbps
    from {{ ref('fct_nccl_test_runs') }}
    where status = 'ok' and busbw_gbps is not null and limit_busbw_gbps is not null
),

nccl_runs as (
    select
        node,
        metric_date,
        sum(busbw_gbps) as probe_nccl_busbw_gbps,
        sum(limit_busbw_gbps) as probe_nccl_limit_gbps
    from nccl_run_nodes
    group by all
),

node_measures as (
    select
        node_days.cluster,
        node_days.node,
        node_days.metric_date,
        gpu_days.energy_j,
        coalesce(gpu_days.energy_elapsed_s, 0) as energy_known_gs,
        node_days.installed_gs,
        node_days.installed_gs / (node_days.gpu_count * 86400.0) as installed_node_days,
        cast(coalesce(xid_faults.xid_node_faults, 0) as double) as xid_node_faults,
        cast(coalesce(interruptions.interruptions, 0) as double) as interruptions,
        node_days.allocated_gs / (node_days.gpu_count * 86400.0) as allocated_node_days,
        node_days.allocated_gs / (node_days.gpu_count * 3600.0) as allocated_node_h,
        nccl_runs.probe_nccl_busbw_gbps,
        nccl_runs.probe_nccl_limit_gbps,
        case when nccl_runs.node is not null then node_days.installed_gs / (node_days.gpu_count * 86400.0) else 0 end
            as nccl_probed_node_days
    from node_days
    left join gpu_days on node_days.node = gpu_days.node and node_days.metric_date = gpu_days.metric_date
    left join interruptions
        on node_days.node = interruptions.node and node_days.metric_date = interruptions.metric_date
    left join xid_faults on node_days.node = xid_faults.node and node_days.metric_date = xid_faults.metric_date
    left join nccl_runs on node_days.node = nccl_runs.node and node_days.metric_date = nccl_runs.metric_date
),

{%- set summed = ['energy_j', 'energy_known_gs', 'installed_gs', 'installed_node_days', 'xid_node_faults',
                  'interruptions', 'allocated_node_days', 'allocated_node_h', 'probe_nccl_busbw_gbps',
                  'probe_nccl_limit_gbps', 'nccl_probed_node_days'] %}

entity_measures as (
    select 'node' as grain, node as entity_id, metric_date,
        {% for m in summed %}{{ m }}{{ ',' if not loop.last }} {% endfor %}
    from node_measures
    union all
    select 'cluster' as grain, cluster as entity_id, metric_date,
        {% for m in summed %}sum({{ m }}) as {{ m }}{{ ',' if not loop.last }} {% endfor %}
    from node_measures
    group by cluster, metric_date
    union all
    select 'fleet' as grain, 'fleet' as entity_id, metric_date,
        {% for m in summed %}sum({{ m }}) as {{ m }}{{ ',' if not loop.last }} {% endfor %}
    from node_measures
    group by metric_date
),

facts as (
    select 'node' as grain, node as entity_id, metric_date, useful_flop, installed_h100_pfs, coverage_goodput
    from node_days
    union all
    select 'cluster', cluster, metric_date, useful_flop, installed_h100_pfs, coverage_goodput
    from {{ ref('fct_cluster_day') }}
    union all
    select 'fleet', fleet, metric_date, useful_flop, installed_h100_pfs, coverage_goodput
    from {{ ref('fct_fleet_day') }}
),

final as (
    select
        ----------  ids
        entity_measures.grain,
        entity_measures.entity_id,
        ----------  numerics
        cast(facts.installed_h100_pfs as double) as installed_h100_pfs,
        cast(facts.coverage_goodput as double) as coverage_goodput_ref,
        cast(facts.useful_flop / 1e15 as double) as useful_pflop,
        cast(entity_measures.energy_j as double) as energy_j,
        cast({{ safe_divide('entity_measures.energy_known_gs', 'entity_measures.installed_gs') }} as double)
            as coverage_energy_per_useful_pflop,
        cast(entity_measures.installed_node_days as double) as installed_node_days,
        entity_measures.xid_node_faults,
        entity_measures.interruptions,
        cast(entity_measures.allocated_node_days as double) as allocated_node_days,
        cast(entity_measures.allocated_node_h as double) as allocated_node_h,
        cast(entity_measures.probe_nccl_busbw_gbps as double) as probe_nccl_busbw_gbps,
        cast(entity_measures.probe_nccl_limit_gbps as double) as probe_nccl_limit_gbps,
        cast({{ safe_divide('entity_measures.nccl_probed_node_days', 'entity_measures.installed_node_days') }} as double)
            as coverage_probe_nccl_busbw_ratio,
        expected.expected_productive_pfs,
        expected.productive_vs_expected_pfs,
        expected.expected_allocated_pfs,
        expected.coverage_expected_runtime_goodput,
        expected.coverage_expected_runtime_goodput as coverage_runtime_goodput_vs_expected,
        ----------  dates
        entity_measures.metric_date
    from entity_measures
    inner join facts
        on entity_measures.grain = facts.grain
        and entity_measures.entity_id = facts.entity_id
        and entity_measures.metric_date = facts.metric_date
    left join expected
        on entity_measures.grain = expected.grain
        and entity_measures.entity_id = expected.entity_id
        and entity_measures.metric_date = expected.metric_date
)

select * from final
