"""Jobs and schedules: the daily build of everything, and the job the landing sensor starts."""

import dagster as dg

ingest_and_build = dg.define_asset_job(
    "ingest_and_build",
    selection=dg.AssetSelection.all() - dg.AssetSelection.groups("probes"),
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

probe_local_host = dg.define_asset_job(
    "probe_local_host",
    selection=dg.AssetSelection.assets("local_probe_suite"),
    description="Run the probe catalogue on the host that runs Dagster; results land for the next ingestion.",
)

probe_remote_hosts = dg.define_asset_job(
    "probe_remote_hosts",
    selection=dg.AssetSelection.assets("remote_probe_suite"),
    description="Run the probe catalogue on remote GPU hosts (partitions of probe_hosts) over ssh and Dagster Pipes.",
)

probe_schedule = dg.ScheduleDefinition(
    name="daily_probes",
    job=probe_local_host,
    cron_schedule="0 5 * * *",
    execution_timezone="UTC",
    default_status=dg.DefaultScheduleStatus.STOPPED,
    description="Daily probes at 05:00 UTC, before the build; off by default (turn on where Dagster runs on a GPU host).",
)
