-- Expected runtime goodput (metric_tree.md §2.6, Young 1974 / Daly 2006): what R would have been on a
-- cluster-day with the cluster's recent failure rate, each job's checkpoint cost and interval, and the
-- restart cost the cluster has shown. Per job-day j (with step events):
--   r_f      interruptions per allocated node-day on the cluster over the var expected_goodput_window_days
--            (default 14) days before the day (the day itself excluded: a baseline from history);
--            NULL when those days have no allocated node-time
--   C, τ     the job's blocking checkpoint save seconds per save and the mean spacing of consecutive
--            save starts within an attempt (rank 0 step events); a job that never saves twice has
--            C/τ = 0 and loses its whole attempt on a failure: τ = its mean attempt length
--   T_restart the job's first-attempt start-up (job_startup + device_init + training_prep +
--            data_loading_sync + program_startup) + the cluster's fault_detection + ckpt_restore
--            seconds per interruption over the whole window (the fleet's where the cluster has none)
--   loss     C/τ + (τ/2 + T_restart) × nodes × r_f / 86400 + the job-day's scheduled badput share
--            (custom_blocking, badput_other and the first attempt's start-up leaves: not failure-driven)
--   expected_R_j = max(0, 1 − loss); the residual per job-day is computed as expected checkpoint and failure
--            loss − the job-day's actual one (ckpt_save, wasted_progress, fault_detection, ckpt_restore and the
--            start-up of later attempts), which by the ledger equals productive − expected productive
-- Summed per cluster-day and fleet-day as expected_productive_pfs = Σ allocated_pfs × expected_R_j over
-- the job-days with an expected R (expected_allocated_pfs), and productive_vs_expected_pfs =
-- Σ (productive_pfs − expected productive) over the same job-days: runtime_goodput_vs_expected is then
-- R − expected R of those job-days (a companion outside the identity: negative = worse than normal).
-- Requeue waits are outside R (they sit in the job lens's S), so T_restart leaves them out.
{%- set startup = ['job_startup_s', 'device_init_s', 'training_prep_s', 'data_loading_sync_s', 'program_startup_s'] %}
{%- set leaves = startup + ['ckpt_restore_s', 'ckpt_save_s', 'custom_blocking_s', 'wasted_progress_s', 'fault_detection_s'] %}
with

attempt_days as (
    select * from {{ ref('int_job_attempt_days') }}
),

attempts as (
    select * from {{ ref('int_job_attempts') }}
),

interruptions as (
    select * from {{ ref('int_job_interruptions') }}
),

node_days as (
    select * from {{ ref('fct_node_day') }}
),

cluster_days as (
    select cluster, metric_date from {{ ref('fct_cluster_day') }}
),

saves as (
    select job_id, attempt, event_at
    from {{ ref('stg_step_events__events') }}
    where event = 'ckpt_save_start' and rank = 0
),

save_spacing as (
    select
        job_id,
        sum(saves_in_attempt) as saves,
        sum(span_s) as spacing_s,
        sum(saves_in_attempt - 1) as spacings
    from (
        select
            job_id,
            attempt,
            count(*) as saves_in_attempt,
            max({{ epoch_seconds('event_at') }}) - min({{ epoch_seconds('event_at') }}) as span_s
        from saves
        group by job_id, attempt
    ) as per_attempt
    group by job_id
),

job_params as (
    select
        job_id,
        sum(ckpt_save_s) as ckpt_save_s,
        sum(case when attempt = 1 then {{ startup | join(' + ') }} else 0 end) as first_startup_s,
        sum(allocated_s) / count(distinct attempt) as mean_attempt_s
    from attempt_days
    group by job_id
),

restart_costs as (
    -- fault_detection and ckpt_restore seconds per interruption, per cluster and for the fleet
    select
        coalesce(costs.cluster, 'fleet') as cluster,
        {{ safe_divide('sum(costs.restart_s)', 'sum(costs.interrupted)') }} as restart_s_per_interruption
    from (
        select
            attempts.cluster,
            sum(attempt_days.fault_detection_s + attempt_days.ckpt_restore_s) as restart_s,
            cast(0 as double) as interrupted
        from attempt_days
        inner join attempts on attempt_days.job_id = attempts.job_id and attempt_days.attempt = attempts.attempt
        group by attempts.cluster
        union all
        select cluster, cast(0 as double), sum(interruption_share)
        from interruptions
        group by cluster
    ) as costs
    group by rollup (costs.cluster)
),

failure_history as (
    -- interruptions per allocated node-day on the cluster over the window before each day
    select
        cluster_days.cluster,
        cluster_days.metric_date,
        {{ safe_divide('sum(history.interruptions)', 'sum(history.allocated_node_days)') }} as failures_per_node_day
    from cluster_days
    inner join (
        select
            node_days.cluster,
            node_days.metric_date,
            node_days.allocated_gs / (node_days.gpu_count * 86400.0) as allocated_node_days,
            coalesce(node_interruptions.interruptions, 0) as interruptions
        from node_days
        left join (
            select node, metric_date, sum(interruption_share) as interruptions from interruptions group by all
        ) as node_interruptions
            on node_days.node = node_interruptions.node and node_days.metric_date = node_interruptions.metric_date
    ) as history
        on history.cluster = cluster_days.cluster
        and history.metric_date < cluster_days.metric_date
        and history.metric_date >= cluster_days.metric_date - interval '{{ var("expected_goodput_window_days", 14) }} days'
    group by all
),

job_days as (
    select
        attempt_days.cluster,
        attempt_days.job_id,
        attempt_days.metric_date,
        max(attempts.n_nodes) as nodes,
        sum(attempt_days.allocated_s * attempt_days.gpus * attempt_days.peak_flops_dense) as allocated_pfs,
        sum(attempt_days.productive_s * attempt_days.gpus * attempt_days.peak_flops_dense) as productive_pfs,
        sum(
            (attempt_days.custom_blocking_s
                + (attempt_days.allocated_s - attempt_days.productive_s - {{ leaves | join(' - ') }})
                + case when attempt_days.attempt = 1 then {{ startup | join(' + ') }} else 0 end)
            * attempt_days.gpus * attempt_days.peak_flops_dense
        ) as scheduled_pfs,
        sum(
            (attempt_days.ckpt_save_s + attempt_days.wasted_progress_s + attempt_days.fault_detection_s
                + attempt_days.ckpt_restore_s
                + case when attempt_days.attempt > 1 then {{ startup | join(' + ') }} else 0 end)
            * attempt_days.gpus * attempt_days.peak_flops_dense
        ) as failure_loss_pfs
    from attempt_days
    inner join attempts on attempt_days.job_id = attempts.job_id and attempt_days.attempt = attempts.attempt
    where attempt_days.has_step_events and attempt_days.allocated_s > 0
    group by all
),

job_day_expectations as (
    select
        job_days.*,
        case when save_spacing.spacings > 0 then job_params.ckpt_save_s / save_spacing.saves end as ckpt_cost_s,
        case when save_spacing.spacings > 0 then save_spacing.spacing_s / save_spacing.spacings end as ckpt_interval_s,
        job_params.first_startup_s
            + coalesce(cluster_costs.restart_s_per_interruption, fleet_costs.restart_s_per_interruption, 0)
            as restart_s,
        job_params.mean_attempt_s,
        failure_history.failures_per_node_day
    from job_days
    inner join job_params on job_days.job_id = job_params.job_id
    left join save_spacing on job_days.job_id = save_spacing.job_id
    left join restart_costs as cluster_costs on job_days.cluster = cluster_costs.cluster
    left join restart_costs as fleet_costs on fleet_costs.cluster = 'fleet'
    left join failure_history
        on job_days.cluster = failure_history.cluster and job_days.metric_date = failure_history.metric_date
),

job_day_loss as (
    -- the expected checkpoint and failure loss as a share of allocated time, at most what scheduled badput leaves
    select
        *,
        least(
            coalesce(ckpt_cost_s / nullif(ckpt_interval_s, 0), 0)
            + (coalesce(ckpt_interval_s, mean_attempt_s) / 2 + restart_s) * nodes * failures_per_node_day / 86400.0,
            greatest(1 - scheduled_pfs / allocated_pfs, 0)
        ) as expected_loss_share
    from job_day_expectations
    where failures_per_node_day is not null
),

job_day_expected as (
    -- productive - expected productive = expected loss - actual checkpoint and failure loss (the ledger's
    -- allocated = productive + scheduled + failure loss): computed so, a day with neither is exactly 0
    select
        *,
        1 - scheduled_pfs / allocated_pfs - expected_loss_share as expected_runtime_goodput,
        allocated_pfs - scheduled_pfs - allocated_pfs * expected_loss_share as expected_productive_pfs,
        allocated_pfs * expected_loss_share - failure_loss_pfs as productive_vs_expected_pfs
    from job_day_loss
),

cluster_expected as (
    select
        cluster,
        metric_date,
        sum(expected_productive_pfs) as expected_productive_pfs,
        sum(productive_vs_expected_pfs) as productive_vs_expected_pfs,
        sum(allocated_pfs) as expected_allocated_pfs,
        sum(productive_pfs) as productive_pfs
    from job_day_expected
    group by all
),

allocated as (
    select 'cluster' as grain, cluster as entity_id, metric_date, allocated_pfs from {{ ref('fct_cluster_day') }}
    union all
    select 'fleet', fleet, metric_date, allocated_pfs from {{ ref('fct_fleet_day') }}
),

entity_expected as (
    select 'cluster' as grain, cluster as entity_id, metric_date,
        expected_productive_pfs, productive_vs_expected_pfs, expected_allocated_pfs, productive_pfs
    from cluster_expected
    union all
    select 'fleet', 'fleet', metric_date,
        sum(expected_productive_pfs), sum(productive_vs_expected_pfs), sum(expected_allocated_pfs), sum(productive_pfs)
    from cluster_expected
    group by metric_date
),

final as (
    select
        ----------  ids
        entity_expected.grain,
        entity_expected.entity_id,
        ----------  numerics
        cast(entity_expected.expected_productive_pfs as double) as expected_productive_pfs,
        cast(entity_expected.productive_vs_expected_pfs as double) as productive_vs_expected_pfs,
        cast(entity_expected.expected_allocated_pfs as double) as expected_allocated_pfs,
        cast(entity_expected.productive_pfs as double) as productive_pfs,
        cast({{ safe_divide('entity_expected.expected_productive_pfs', 'entity_expected.expected_allocated_pfs') }} as double)
            as expected_runtime_goodput,
        cast({{ safe_divide('entity_expected.productive_pfs', 'entity_expected.expected_allocated_pfs') }} as double)
            as runtime_goodput,
        cast(
            least({{ safe_divide('entity_expected.expected_allocated_pfs', 'allocated.allocated_pfs') }}, 1.0) as double
        ) as coverage_expected_runtime_goodput,
        ----------  dates
        entity_expected.metric_date
    from entity_expected
    left join allocated
        on entity_expected.grain = allocated.grain
        and entity_expected.entity_id = allocated.entity_id
        and entity_expected.metric_date = allocated.metric_date
)

select * from final
