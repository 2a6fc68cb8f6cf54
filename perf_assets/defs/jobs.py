"""Jobs and schedules: the daily build of everything, and the job the landing sensor starts."""

import dagster as dg

ingest_and_build = dg.define_asset_job(
    "ingest_and_build",
    selection=dg.AssetSelection.all(),
    description="Ingest new landed files, build the warehouse, detect, alert and evaluate.",
)

daily_build_schedule = dg.ScheduleDefinition(
    name="daily_build",
    job=ingest_and_build,
    cron_schedule="0 6 * * *",
    execution_timezone="UTC",
    default_status=dg.DefaultScheduleStatus.RUNNING,
    description="Rebuild everything daily at 06:00 UTC, after the nightly exports have landed.",
)
