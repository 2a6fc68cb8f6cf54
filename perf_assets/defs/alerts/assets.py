"""Alerts: every new regression is appended once to alerts/alerts.jsonl (deduplicated by id)."""

from datetime import datetime, timezone

import dagster as dg

from perf_assets.defs.resources import PerfwhHome
from perf_assets.lib.alerts import append_new_alerts, build_alerts
from perf_assets.lib.contracts import OWNER, REGRESSIONS_TABLE
from perf_assets.lib.warehouse import published_frame


@dg.asset(
    key="alert_outbox",
    group_name="alerts",
    owners=[OWNER],
    kinds={"python", "json"},
    deps=[REGRESSIONS_TABLE],
    description="Appends each new regression (grouped per entity and change day) once to alerts/alerts.jsonl.",
)
def alert_outbox(context: dg.AssetExecutionContext, perfwh: PerfwhHome) -> dg.MaterializeResult:
    home = perfwh.home()
    found = published_frame(home, f"select * from {REGRESSIONS_TABLE}")
    batch = append_new_alerts(home.alerts_dir, build_alerts(found), datetime.now(timezone.utc).isoformat())
    for alert in batch.appended:
        context.log.warning(f"ALERT {alert['alert_id']}: {alert['summary']}")
    return dg.MaterializeResult(
        metadata={
            "alerts_appended": dg.MetadataValue.int(len(batch.appended)),
            "alerts_already_sent": dg.MetadataValue.int(batch.already_sent),
            "store": dg.MetadataValue.path(str(home.alerts_dir / "alerts.jsonl")),
        }
    )
