"""Start ingestion when new files land: one run per tick for everything new (batched)."""

import dagster as dg

from perf_assets.lib.ingest import landed_files
from perf_assets.lib.paths import data_home


@dg.sensor(
    name="landing_sensor",
    job_name="ingest_and_build",
    minimum_interval_seconds=30,
    default_status=dg.DefaultSensorStatus.RUNNING,
    description="Requests one ingest-and-build run when files newer than the last seen land under landing/.",
)
def landing_sensor(context: dg.SensorEvaluationContext):
    home = data_home()
    cursor = int(context.cursor or 0)  # newest modification time seen, in integer nanoseconds
    newest = cursor
    fresh = 0
    for path in landed_files(home.landing):
        modified = path.lstat().st_mtime_ns  # lstat: a dangling link (quarantined by ingest) has no target
        if modified > cursor:
            fresh += 1
            newest = max(newest, modified)
    if not fresh:
        return dg.SkipReason(f"no new files under {home.landing}")
    return dg.SensorResult(
        run_requests=[dg.RunRequest(run_key=f"landing-{newest}", tags={"perfwh/new_files": str(fresh)})],
        cursor=str(newest),
    )
