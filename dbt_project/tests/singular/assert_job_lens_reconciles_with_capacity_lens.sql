{{ config(meta={'dagster': {'ref': {'name': 'fct_job_lens_cluster_day'}}}) }}
-- Lens reconciliation (metric_tree.md §2.1 rule 5, §2.5 identity 6), per cluster-day, between the
-- job lens (Σ of fct_job_day) and the capacity lens (fct_cluster_day, from the node-day ledger):
--  * productive: job productive_gs + program_startup_gs = capacity productive_gs. The job lens
--    also takes the first-step excess (Google PROGRAM_STARTUP) out of productive time; the
--    capacity ledger does not split it out, so that is the only, stated, gap. Steps spanning
--    midnight are split in proportion to time in both lenses, so day boundaries add no gap.
--  * wasted progress, blocking checkpoint saves and custom events: equal.
--  * allocated: capacity allocated_gs <= job allocated_gs <= capacity allocated_gs + down_gs:
--    the capacity ledger gives a node's down time precedence over an allocation that overlaps it
--    (§2.1 rule 2), the job lens counts all of the allocation.
-- Tolerance: 1e-9 relative (greatest(|capacity|, 1) GPU-seconds): float noise only.
with

capacity as (
    select * from {{ ref('fct_cluster_day') }}
),

jobs as (
    select * from {{ ref('fct_job_lens_cluster_day') }}
),

compared as (
    select
        capacity.cluster,
        capacity.metric_date,
        capacity.productive_gs as capacity_productive_gs,
        coalesce(jobs.productive_gs, 0) as job_productive_gs,
        coalesce(jobs.program_startup_gs, 0) as job_program_startup_gs,
        capacity.wasted_progress_gs as capacity_wasted_progress_gs,
        coalesce(jobs.wasted_progress_gs, 0) as job_wasted_progress_gs,
        capacity.ckpt_save_gs + capacity.custom_blocking_gs as capacity_blocking_gs,
        coalesce(jobs.ckpt_save_gs + jobs.custom_blocking_gs, 0) as job_blocking_gs,
        capacity.allocated_gs as capacity_allocated_gs,
        capacity.down_gs as capacity_down_gs,
        coalesce(jobs.allocated_gs, 0) as job_allocated_gs
    from capacity
    full outer join jobs on capacity.cluster = jobs.cluster and capacity.metric_date = jobs.metric_date
)

select *
from compared
where capacity_productive_gs is null
    or {{ differs_relatively('job_productive_gs + job_program_startup_gs', 'capacity_productive_gs') }}
    or {{ differs_relatively('job_wasted_progress_gs', 'capacity_wasted_progress_gs') }}
    or {{ differs_relatively('job_blocking_gs', 'capacity_blocking_gs') }}
    or job_allocated_gs < capacity_allocated_gs - 1e-9 * greatest(abs(capacity_allocated_gs), 1)
    or job_allocated_gs > capacity_allocated_gs + capacity_down_gs + 1e-9 * greatest(abs(capacity_allocated_gs), 1)
