-- The capacity ledger per node and day, in GPU-seconds (gs): every installed GPU-second is
-- down, idle, badput or productive (precedence down > allocated > idle), so
-- installed = down + idle + badput + productive exactly. Steps are attributed to the Slurm
-- allocation that contains their start, and split across days in proportion to time.
with

installed as (
    select * from {{ ref('int_node_days_installed') }}
),

days as (
    select * from {{ ref('int_calendar_days') }}
),

down_intervals as (
    select * from {{ ref('int_node_down_intervals') }}
),

allocation_nodes as (
    select * from {{ ref('int_allocation_nodes') }}
),

steps as (
    select * from {{ ref('int_job_steps') }}
),

down_days as (
    select
        down_intervals.node,
        days.day,
        sum({{ overlap_seconds('down_intervals.start_at', 'down_intervals.end_at', 'days.day_start_at', 'days.day_end_at') }}) as down_s
    from down_intervals
    inner join days
        on down_intervals.start_at < days.day_end_at and down_intervals.end_at > days.day_start_at
    group by all
),

allocation_days as (
    select
        allocation_nodes.node,
        days.day,
        sum(allocation_nodes.gpus_on_node
            * {{ overlap_seconds('allocation_nodes.start_at', 'allocation_nodes.end_at', 'days.day_start_at', 'days.day_end_at') }}
        ) as scheduled_gs
    from allocation_nodes
    inner join days
        on allocation_nodes.start_at < days.day_end_at and allocation_nodes.end_at > days.day_start_at
    group by all
),

allocations_while_down as (
    select
        allocation_nodes.node,
        allocation_nodes.gpus_on_node,
        greatest(allocation_nodes.start_at, down_intervals.start_at) as start_at,
        least(allocation_nodes.end_at, down_intervals.end_at) as end_at
    from allocation_nodes
    inner join down_intervals
        on allocation_nodes.node = down_intervals.node
        and allocation_nodes.start_at < down_intervals.end_at
        and allocation_nodes.end_at > down_intervals.start_at
),

allocation_down_days as (
    select
        allocations_while_down.node,
        days.day,
        sum(allocations_while_down.gpus_on_node
            * {{ overlap_seconds('allocations_while_down.start_at', 'allocations_while_down.end_at', 'days.day_start_at', 'days.day_end_at') }}
        ) as scheduled_while_down_gs
    from allocations_while_down
    inner join days
        on allocations_while_down.start_at < days.day_end_at and allocations_while_down.end_at > days.day_start_at
    group by all
),

step_nodes as (
    select
        allocation_nodes.node,
        allocation_nodes.gpus_on_node,
        allocation_nodes.gpus_on_node / nullif(allocation_nodes.alloc_gpus, 0) as flop_share,
        steps.*
    from steps
    inner join allocation_nodes
        on steps.job_id = allocation_nodes.job_id
        and steps.step_start_at >= allocation_nodes.start_at
        and steps.step_start_at < allocation_nodes.end_at
),

step_days as (
    select
        step_nodes.node,
        days.day,
        {{ overlap_seconds('step_nodes.step_start_at', 'step_nodes.step_end_at', 'days.day_start_at', 'days.day_end_at') }}
            / nullif(step_nodes.duration_s, 0) as time_share,
        step_nodes.*
    from step_nodes
    inner join days
        on step_nodes.step_start_at < days.day_end_at and step_nodes.step_end_at > days.day_start_at
),

work_days as (
    select
        node,
        day,
        sum(gpus_on_node * productive_s * time_share) as productive_gs,
        sum(case when has_flops_metadata then gpus_on_node * productive_s * time_share else 0 end)
            as productive_flops_known_gs,
        sum(gpus_on_node * wasted_progress_s * time_share) as wasted_progress_gs,
        sum(gpus_on_node * ckpt_save_s * time_share) as ckpt_save_gs,
        sum(gpus_on_node * custom_blocking_s * time_share) as custom_blocking_gs,
        sum(coalesce(useful_flop, 0) * flop_share * time_share) as useful_flop_known
    from step_days
    group by all
),

ledger as (
    select
        installed.cluster,
        installed.node,
        installed.sku,
        installed.day,
        installed.gpu_count,
        installed.installed_gs,
        coalesce(down_days.down_s, 0) * installed.installed_gs / 86400.0 as down_gs,
        coalesce(allocation_days.scheduled_gs, 0) - coalesce(allocation_down_days.scheduled_while_down_gs, 0)
            as allocated_gs,
        coalesce(work_days.productive_gs, 0) as productive_gs,
        coalesce(work_days.productive_flops_known_gs, 0) as productive_flops_known_gs,
        coalesce(work_days.wasted_progress_gs, 0) as wasted_progress_gs,
        coalesce(work_days.ckpt_save_gs, 0) as ckpt_save_gs,
        coalesce(work_days.custom_blocking_gs, 0) as custom_blocking_gs,
        coalesce(work_days.useful_flop_known, 0) as useful_flop_known
    from installed
    left join down_days on installed.node = down_days.node and installed.day = down_days.day
    left join allocation_days on installed.node = allocation_days.node and installed.day = allocation_days.day
    left join allocation_down_days
        on installed.node = allocation_down_days.node and installed.day = allocation_down_days.day
    left join work_days on installed.node = work_days.node and installed.day = work_days.day
),

final as (
    select
        ----------  ids
        cluster,
        node,
        sku,
        ----------  numerics (GPU-seconds and FLOPs; all additive)
        gpu_count,
        installed_gs,
        down_gs,
        installed_gs - down_gs as available_gs,
        allocated_gs,
        installed_gs - down_gs - allocated_gs as idle_gs,
        productive_gs,
        allocated_gs - productive_gs as badput_gs,
        wasted_progress_gs,
        ckpt_save_gs,
        custom_blocking_gs,
        allocated_gs - productive_gs - wasted_progress_gs - ckpt_save_gs - custom_blocking_gs as badput_other_gs,
        productive_flops_known_gs,
        useful_flop_known,
        ----------  dates
        day as metric_date
    from ledger
)

select * from final
