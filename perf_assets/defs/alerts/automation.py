"""Alert automation: a daily detection run after the daily build, and a sensor that delivers pending alerts.

Both are on by default. Environment variables (read when the code location loads):
  PERFWH_DETECT_CRON                 cron of `daily_detection` (default "0 7 * * *", UTC; daily_build is 06:00)
  PERFWH_ALERTS_DELIVERY_INTERVAL_S  minimum seconds between delivery ticks (default 60)
"""

import os

import dagster as dg

from perf_assets.lib.alert_delivery import deliver
from perf_assets.lib.alerts import AlertError, load_annotations, load_config
from perf_assets.lib.contracts import REGRESSIONS_TABLE
from perf_assets.lib.paths import data_home

DETECT_CRON_ENV = "PERFWH_DETECT_CRON"
DELIVERY_INTERVAL_ENV = "PERFWH_ALERTS_DELIVERY_INTERVAL_S"

detect_and_alert = dg.define_asset_job(
    "detect_and_alert",
    selection=dg.AssetSelection.assets(REGRESSIONS_TABLE).downstream(),
    description="Change-point detection on the current warehouse, then the alert store and the evaluation.",
)

daily_detection_schedule = dg.ScheduleDefinition(
    name="daily_detection",
    job=detect_and_alert,
    cron_schedule=os.environ.get(DETECT_CRON_ENV) or "0 7 * * *",
    execution_timezone="UTC",
    default_status=dg.DefaultScheduleStatus.RUNNING,
    description=f"Detect and upsert alerts daily at 07:00 UTC, after daily_build (06:00); cron from ${DETECT_CRON_ENV}.",
)


@dg.sensor(
    name="alert_delivery",
    minimum_interval_seconds=int(os.environ.get(DELIVERY_INTERVAL_ENV) or 60),
    default_status=dg.DefaultSensorStatus.RUNNING,
    description=(
        "Applies annotations.yaml (an expected alert whose annotation was withdrawn is reopened), sends every pending alert to the sinks of its route (alerts.yaml) and a "
        "closing notice for each paged alert since resolved or expected; records each delivery; what failed "
        "stays pending and is retried on the next tick."
    ),
)
def alert_delivery(context: dg.SensorEvaluationContext):
    home = data_home()
    try:
        annotations = load_annotations(home.root)
    except AlertError as why:  # a typo in annotations.yaml must not stop delivery, nor reopen what it covers
        context.log.warning(f"annotations not applied: {why}")
        annotations = None
    report = deliver(
        home.alerts_dir,
        load_config(home.root),
        actor="sensor:alert_delivery",
        budget_s=40.0,
        lock_timeout_s=5.0,
        annotations=annotations,
    )
    for alert_id, sink, detail in report.failed:
        context.log.warning(f"alert {alert_id} not delivered to {sink}: {detail} (retried next tick)")
    return dg.SkipReason(report.line())
