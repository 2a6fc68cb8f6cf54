"""A sensor that frees the warehouse writer pool slot of runs whose worker process died (lib/run_watchdog.py)."""

import dagster as dg

from perf_assets.lib.run_watchdog import release_dead_runs


@dg.sensor(
    name="dead_run_watchdog",
    minimum_interval_seconds=120,
    default_status=dg.DefaultSensorStatus.RUNNING,
    description=(
        "Every 2 minutes: a STARTED run whose worker process on this host is gone (killed, OOM, reboot) is "
        "marked failed with the reason and its warehouse_writer pool slot freed, so queued runs go on "
        "(the DefaultRunLauncher has no worker health checks for Dagster's run monitoring to use)."
    ),
)
def dead_run_watchdog(context: dg.SensorEvaluationContext):
    released = release_dead_runs(context.instance)
    for dead in released:
        context.log.warning(f"run {dead.run_id} ({dead.job_name}) marked failed: worker {dead.why}")
    if not released:
        return dg.SkipReason("no run with a dead worker")
    return dg.SkipReason(f"marked failed and freed the pool slots of {len(released)} run(s) with a dead worker")
