-- The capacity ledger per node and UTC hour, in GPU-seconds (gs): the atomic grain of the capacity lens
-- (docs/ledger.md). Every installed GPU-second is in exactly one leaf:
--   down_<cause>   (int_node_state_intervals: node state history through the seed state_taxonomy)
--   > allocated    (Slurm allocations; productive and badput from the steps, as the node-day ledger did)
--   > idle_requeue_gap   (idle GPUs a job held before a requeue, until its next attempt starts)
--   > idle_fragmented    (other idle GPUs while eligible demand was pending in the cluster, up to that demand)
--   > idle_no_demand     (the residual).
-- sacct gives a GPU count per node, not GPU indices, so node x hour is the finest honest grain. Each node's
-- time is cut into pieces at hour starts and at every boundary of an inventory, state, allocation or requeue
-- interval, so within a piece the installed GPUs, the down leaf, the allocated and the requeue-gap GPUs are
-- constant and the hour sums are exact.
-- Built by day (docs/incremental.md): a day's rows read that day's calendar hours, the intervals and steps that
-- overlap the day and the day's pending demand; the pieces of a day never cross its ends (hour starts are
-- boundaries), so a day built alone equals a full build.
{{ daily_microbatch_config('metric_date', 'metric_date') }}
with

hours as (
    select * from {{ ref('int_calendar_hours') }}
    where {{ in_batch('day') }}
),

bounds as (
    select min(hour_start_at) as window_start_at, max(hour_end_at) as window_end_at from hours
),

inventory as (
    select * from {{ ref('stg_inventory__gpus') }}
),

nodes as (
    -- every node of the inventory, whichever day its GPUs are installed on (as in a full build)
    select node, min(cluster) as cluster, min(sku) as sku from inventory group by node
),

gpus as (
    select * from inventory
    where {{ overlaps_batch('valid_from_at', 'valid_to_at') }}
),

state_intervals as (
    select * from {{ ref('int_node_state_intervals') }}
    where {{ overlaps_batch('start_at', 'end_at') }}
),

all_allocation_nodes as (
    select * from {{ ref('int_allocation_nodes') }}
),

allocation_nodes as (
    select * from all_allocation_nodes
    where {{ overlaps_batch('start_at', 'end_at') }}
),

requeue_gaps as (
    select * from {{ ref('int_requeue_gap_nodes') }}
    where {{ overlaps_batch('start_at', 'end_at') }}
),

pending as (
    select * from {{ ref('int_pending_demand_hours') }}
    where {{ in_batch('hour_start_at') }}
),

steps as (
    -- the steps that overlap the day (a step is split across the hours it touches)
    select * from {{ ref('int_job_steps') }}
    where {{ overlaps_batch('step_start_at', 'step_end_at') }}
),

boundaries as (
    select nodes.node, hours.hour_start_at as boundary_at from nodes cross join hours
    union
    select nodes.node, bounds.window_end_at as boundary_at from nodes cross join bounds
    union
    select node, valid_from_at as boundary_at from gpus
    union
    select node, valid_to_at as boundary_at from gpus where valid_to_at is not null
    union
    select node, start_at as boundary_at from state_intervals
    union
    select node, end_at as boundary_at from state_intervals
    union
    select node, start_at as boundary_at from allocation_nodes
    union
    select node, end_at as boundary_at from allocation_nodes
    union
    select node, start_at as boundary_at from requeue_gaps
    union
    select node, end_at as boundary_at from requeue_gaps
),

pieces as (
    select
        node,
        boundary_at as start_at,
        lead(boundary_at) over (partition by node order by boundary_at) as end_at
    from boundaries
    cross join bounds
    where boundary_at >= bounds.window_start_at and boundary_at <= bounds.window_end_at
),

piece_gpus as (
    select
        pieces.node,
        pieces.start_at,
        count(distinct gpus.gpu_uuid) as installed_gpus
    from pieces
    inner join gpus
        on pieces.node = gpus.node
        and gpus.valid_from_at <= pieces.start_at
        and (gpus.valid_to_at is null or gpus.valid_to_at >= pieces.end_at)
    where pieces.end_at is not null
    group by pieces.node, pieces.start_at
),

piece_states as (
    select pieces.node, pieces.start_at, min(state_intervals.ledger_leaf) as down_leaf
    from pieces
    inner join state_intervals
        on pieces.node = state_intervals.node
        and state_intervals.start_at <= pieces.start_at
        and state_intervals.end_at >= pieces.end_at
    group by pieces.node, pieces.start_at
),

piece_allocations as (
    select pieces.node, pieces.start_at, sum(allocation_nodes.gpus_on_node) as allocated_gpus
    from pieces
    inner join allocation_nodes
        on pieces.node = allocation_nodes.node
        and allocation_nodes.start_at <= pieces.start_at
        and allocation_nodes.end_at >= pieces.end_at
    group by pieces.node, pieces.start_at
),

piece_gaps as (
    select pieces.node, pieces.start_at, sum(requeue_gaps.gpus_on_node) as gap_gpus
    from pieces
    inner join requeue_gaps
        on pieces.node = requeue_gaps.node
        and requeue_gaps.start_at <= pieces.start_at
        and requeue_gaps.end_at >= pieces.end_at
    group by pieces.node, pieces.start_at
),

piece_seconds as (
    select
        pieces.node,
        pieces.start_at,
        {{ interval_seconds('pieces.end_at - pieces.start_at') }} as seconds,
        piece_gpus.installed_gpus,
        piece_states.down_leaf,
        case when piece_states.down_leaf is null then coalesce(piece_allocations.allocated_gpus, 0) else 0 end
            as allocated_gpus,
        case when piece_states.down_leaf is null then coalesce(piece_gaps.gap_gpus, 0) else 0 end as gap_gpus
    from pieces
    inner join piece_gpus on pieces.node = piece_gpus.node and pieces.start_at = piece_gpus.start_at
    left join piece_states on pieces.node = piece_states.node and pieces.start_at = piece_states.start_at
    left join piece_allocations
        on pieces.node = piece_allocations.node and pieces.start_at = piece_allocations.start_at
    left join piece_gaps on pieces.node = piece_gaps.node and pieces.start_at = piece_gaps.start_at
    where pieces.end_at > pieces.start_at
),

state_hours as (
    -- the pieces summed per node-hour (a piece never crosses an hour start)
    select
        piece_seconds.node,
        hours.hour_start_at,
        max(piece_seconds.installed_gpus) as gpu_count,
        sum(piece_seconds.installed_gpus * piece_seconds.seconds) as installed_gs,
        {%- for leaf in capacity_down_leaves() %}
        sum(case when piece_seconds.down_leaf = '{{ leaf }}' then piece_seconds.installed_gpus * piece_seconds.seconds
            else 0 end) as {{ leaf }}_gs,
        {%- endfor %}
        sum(piece_seconds.allocated_gpus * piece_seconds.seconds) as allocated_gs,
        sum(case when piece_seconds.down_leaf is null
            then least(greatest(piece_seconds.installed_gpus - piece_seconds.allocated_gpus, 0), piece_seconds.gap_gpus)
                * piece_seconds.seconds
            else 0 end) as idle_requeue_gap_gs
    from piece_seconds
    inner join hours on hours.hour_index = {{ hour_index('piece_seconds.start_at') }}
    group by piece_seconds.node, hours.hour_start_at
),

step_nodes as (
    select
        allocation_nodes.node,
        allocation_nodes.gpus_on_node,
        allocation_nodes.gpus_on_node / nullif(allocation_nodes.alloc_gpus, 0) as flop_share,
        steps.*
    from steps
    inner join all_allocation_nodes as allocation_nodes  -- the allocation that holds the step's start, any day
        on steps.job_id = allocation_nodes.job_id
        and steps.step_start_at >= allocation_nodes.start_at
        and steps.step_start_at < allocation_nodes.end_at
),

step_hour_indexes as (
    -- each step once per hour it touches (steps last seconds: mostly one hour, never a range join)
    select
        step_nodes.*,
        {{ hour_indexes('step_nodes.step_start_at', 'step_nodes.step_end_at') }} as hour_index
    from step_nodes
    where step_nodes.step_end_at > step_nodes.step_start_at
),

step_hours as (
    select
        hours.hour_start_at,
        {{ overlap_seconds('step_hour_indexes.step_start_at', 'step_hour_indexes.step_end_at', 'hours.hour_start_at', 'hours.hour_end_at') }}
            / nullif(step_hour_indexes.duration_s, 0) as time_share,
        step_hour_indexes.*
    from step_hour_indexes
    inner join hours
        on step_hour_indexes.hour_index = hours.hour_index
        and step_hour_indexes.step_start_at < hours.hour_end_at
        and step_hour_indexes.step_end_at > hours.hour_start_at
),

work_hours as (
    select
        node,
        hour_start_at,
        sum(gpus_on_node * productive_s * time_share) as productive_gs,
        sum(case when has_flops_metadata then gpus_on_node * productive_s * time_share else 0 end)
            as productive_flops_known_gs,
        sum(gpus_on_node * wasted_progress_s * time_share) as wasted_progress_gs,
        sum(gpus_on_node * ckpt_save_s * time_share) as ckpt_save_gs,
        sum(gpus_on_node * custom_blocking_s * time_share) as custom_blocking_gs,
        sum(coalesce(useful_flop, 0) * flop_share * time_share) as useful_flop_known
    from step_hours
    group by node, hour_start_at
),

with_idle as (
    select
        nodes.cluster,
        state_hours.*,
        state_hours.installed_gs
        {%- for leaf in capacity_down_leaves() %} - state_hours.{{ leaf }}_gs{% endfor %}
        - state_hours.allocated_gs - state_hours.idle_requeue_gap_gs as idle_open_gs
    from state_hours
    inner join nodes on state_hours.node = nodes.node
    where state_hours.installed_gs > 0
),

cluster_idle as (
    -- idle capacity the pending demand may be matched against, per cluster-hour
    select
        cluster,
        hour_start_at,
        sum(greatest(idle_open_gs, 0)) as idle_open_gs,
        sum(idle_requeue_gap_gs) as idle_requeue_gap_gs
    from with_idle
    group by cluster, hour_start_at
),

fragmented as (
    -- idle GPU-seconds up to the pending demand not already named by the requeue gaps (the waiting jobs'
    -- own GPUs), spread over the cluster's nodes in proportion to their open idle time
    select
        cluster_idle.cluster,
        cluster_idle.hour_start_at,
        cluster_idle.idle_open_gs,
        least(cluster_idle.idle_open_gs, greatest(pending.pending_gs - cluster_idle.idle_requeue_gap_gs, 0))
            as fragmented_gs,
        pending.pending_gs,
        pending.pending_jobs
    from cluster_idle
    inner join pending
        on cluster_idle.cluster = pending.cluster and cluster_idle.hour_start_at = pending.hour_start_at
),

ledger as (
    select
        with_idle.*,
        nodes.sku,
        coalesce(
            greatest(with_idle.idle_open_gs, 0) * fragmented.fragmented_gs / nullif(fragmented.idle_open_gs, 0), 0
        ) as idle_fragmented_gs,
        coalesce(fragmented.pending_gs, 0) as cluster_pending_gs,
        coalesce(work_hours.productive_gs, 0) as productive_gs,
        coalesce(work_hours.productive_flops_known_gs, 0) as productive_flops_known_gs,
        coalesce(work_hours.wasted_progress_gs, 0) as wasted_progress_gs,
        coalesce(work_hours.ckpt_save_gs, 0) as ckpt_save_gs,
        coalesce(work_hours.custom_blocking_gs, 0) as custom_blocking_gs,
        coalesce(work_hours.useful_flop_known, 0) as useful_flop_known
    from with_idle
    inner join nodes on with_idle.node = nodes.node
    left join fragmented
        on with_idle.cluster = fragmented.cluster and with_idle.hour_start_at = fragmented.hour_start_at
    left join work_hours on with_idle.node = work_hours.node and with_idle.hour_start_at = work_hours.hour_start_at
),

final as (
    select
        ----------  ids
        ledger.cluster,
        ledger.node,
        ledger.sku,
        ----------  numerics (GPU-seconds and FLOPs; all additive)
        ledger.gpu_count,
        ledger.installed_gs,
        {% for leaf in capacity_down_leaves() %}ledger.{{ leaf }}_gs{{ ' + ' if not loop.last }}{% endfor %} as down_gs,
        {%- for leaf in capacity_down_leaves() %}
        ledger.{{ leaf }}_gs,
        {%- endfor %}
        ledger.installed_gs
        {%- for leaf in capacity_down_leaves() %} - ledger.{{ leaf }}_gs{% endfor %} as available_gs,
        ledger.allocated_gs,
        ledger.idle_open_gs + ledger.idle_requeue_gap_gs as idle_gs,
        ledger.idle_requeue_gap_gs,
        ledger.idle_fragmented_gs,
        ledger.idle_open_gs - ledger.idle_fragmented_gs as idle_no_demand_gs,
        ledger.productive_gs,
        ledger.allocated_gs - ledger.productive_gs as badput_gs,
        ledger.wasted_progress_gs,
        ledger.ckpt_save_gs,
        ledger.custom_blocking_gs,
        ledger.allocated_gs - ledger.productive_gs - ledger.wasted_progress_gs - ledger.ckpt_save_gs
            - ledger.custom_blocking_gs as badput_other_gs,
        ledger.productive_flops_known_gs,
        ledger.useful_flop_known,
        ledger.cluster_pending_gs,
        ----------  dates and timestamps
        hours.day as metric_date,
        ledger.hour_start_at
    from ledger
    inner join hours on ledger.hour_start_at = hours.hour_start_at
)

select * from final
