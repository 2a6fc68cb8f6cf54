"""Alerts: `alert_outbox` upserts each regression incident into the alert store (alerts/events.jsonl)."""

from datetime import datetime, timezone

import dagster as dg

from perf_assets.defs.resources import PerfwhHome
from perf_assets.lib.alert_text import escalation_text
from perf_assets.lib.alerts import (
    ACTIVE_STATUSES,
    apply_annotations,
    auto_resolve,
    build_incidents,
    load_annotations,
    load_config,
    read_alerts,
    reopen_unannotated,
    upsert_incidents,
)
from perf_assets.lib.contracts import OWNER, REGRESSIONS_TABLE
from perf_assets.lib.paths import DataHome
from perf_assets.lib.topology import read_topology
from perf_assets.lib.warehouse import published_frame

INSTALLED_SQL = """
select 'cluster' as grain, cluster as entity_id, metric_date, installed_gs from fct_cluster_day
union all
select 'fleet' as grain, fleet as entity_id, metric_date, installed_gs from fct_fleet_day
"""


def read_inputs(home: DataHome):
    """Regressions, the metric tree and installed GPU-seconds from the published snapshot."""
    found = published_frame(home, f"select * from {REGRESSIONS_TABLE}")
    tree = published_frame(
        home,
        "select grain, entity_id, node_id, metric_date, numerator, denominator, direction from metric_tree_daily",
    )
    try:
        installed = published_frame(home, INSTALLED_SQL)
    except Exception:  # an older snapshot without installed_gs: impact in H100-equivalent hours only
        installed = None
    return found, tree, installed


@dg.asset(
    key="alert_outbox",
    group_name="alerts",
    owners=[OWNER],
    kinds={"python", "json"},
    deps=[REGRESSIONS_TABLE, "dim_gpus"],  # dim_gpus: the topology that groups an incident
    description=(
        "Upserts each regression incident (root entity + direction + spine factor, change day ± 2 days) into the "
        "alert store alerts/events.jsonl as open, or expected when annotations.yaml covers it; escalates an alert "
        "whose severity rises to a level it never had; resolves alerts whose metric is back at its old level. "
        "The alert_delivery sensor sends them (docs/alerts.md)."
    ),
)
def alert_outbox(context: dg.AssetExecutionContext, perfwh: PerfwhHome) -> dg.MaterializeResult:
    home = perfwh.home()
    config = load_config(home.root)
    found, tree, installed = read_inputs(home)
    now = datetime.now(timezone.utc)
    annotations = load_annotations(home.root)
    topology = read_topology(lambda sql: published_frame(home, sql))
    result = upsert_incidents(
        home.alerts_dir,
        build_incidents(found, topology) + build_incidents(found, topology, change_kind="improvement"),
        config=config,
        annotations=annotations,
        tree=tree,
        installed_gs=installed,
        now=now,
        topology=topology,
    )
    reopened = reopen_unannotated(home.alerts_dir, annotations, now=now)  # annotations withdrawn since
    late = apply_annotations(home.alerts_dir, annotations, now=now)  # annotations written after the page
    resolved = auto_resolve(home.alerts_dir, tree, config, now=now)
    for alert in result.opened:
        context.log.warning(f"ALERT {alert['alert_id']} [{alert['severity']}] {alert['summary']}")
    for alert in result.escalated:
        context.log.warning(f"ESCALATED {alert['alert_id']} {escalation_text(alert['escalation'])}: {alert['summary']}")
    for alert in result.expected:
        context.log.info(f"expected ({alert['expected_by']['id']}): {alert['summary']}")
    for incident in result.not_established:
        context.log.info(f"not established, no alert yet: {incident['summary']} ({incident['not_established']})")
    for alert in reopened:
        annotation = (alert.get("withdrawn_annotation") or {}).get("id")
        context.log.warning(f"REOPENED (annotation {annotation} withdrawn) {alert['alert_id']}: {alert['summary']}")
    for alert in late:
        context.log.info(f"now expected (annotation {alert['expected_by']['id']}): {alert['summary']}")
    for alert in resolved:
        context.log.info(f"auto-resolved {alert['alert_id']}: {alert['summary']}")
    statuses: dict[str, int] = {}
    for alert in read_alerts(home.alerts_dir):
        statuses[alert["status"]] = statuses.get(alert["status"], 0) + 1
    return dg.MaterializeResult(
        metadata={
            "alerts_opened": dg.MetadataValue.int(len(result.opened)),
            "alerts_expected": dg.MetadataValue.int(len(result.expected) + len(late)),
            "alerts_reopened": dg.MetadataValue.int(len(reopened)),
            "alerts_updated": dg.MetadataValue.int(len(result.updated)),
            "alerts_escalated": dg.MetadataValue.int(len(result.escalated)),
            "alerts_unchanged": dg.MetadataValue.int(result.unchanged),
            "incidents_not_established": dg.MetadataValue.int(len(result.not_established)),
            "alerts_auto_resolved": dg.MetadataValue.int(len(resolved)),
            "unresolved_alerts": dg.MetadataValue.int(sum(statuses.get(status, 0) for status in ACTIVE_STATUSES)),
            "alerts_by_status": dg.MetadataValue.json(statuses),
            "store": dg.MetadataValue.path(str(home.alerts_dir / "events.jsonl")),
        }
    )
