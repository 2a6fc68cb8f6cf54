"""The alert store: each regression becomes one alert, appended once to alerts/alerts.jsonl.

An alert groups the regressions of one entity that start on the same day (goodput and the factor
that moved it are one incident, not two pages). Its id is stable, so re-runs, retries and a
sensor firing twice append nothing new.
"""

from __future__ import annotations

import hashlib
import json
import os
from dataclasses import dataclass
from pathlib import Path

import pandas as pd
from filelock import FileLock

from perf_assets.lib.detection import describe_regression

ALERTS_FILE = "alerts.jsonl"


@dataclass(frozen=True)
class AlertBatch:
    appended: list[dict]
    already_sent: int


def _alert_id(grain: str, entity: str, change_date: str) -> str:
    return hashlib.sha256(f"alert|{grain}|{entity}|{change_date}".encode()).hexdigest()[:16]


def build_alerts(regressions: pd.DataFrame) -> list[dict]:
    """One alert per (grain, entity, change day) of the regressions (improvements do not page)."""
    alerts = []
    found = regressions[regressions["change_kind"] == "regression"]
    for (grain, entity, change_date), group in found.groupby(["grain", "entity_id", "change_date"], sort=True):
        rows = group.sort_values("p_value").to_dict("records")
        headline = next((row for row in rows if row["metric"] == "goodput"), rows[0])
        alerts.append(
            {
                "alert_id": _alert_id(grain, entity, str(change_date)),
                "status": "open",
                "grain": grain,
                "entity_id": entity,
                "change_date": str(change_date),
                "summary": describe_regression(headline),
                "regression_ids": [row["regression_id"] for row in rows],
                "metrics": {
                    row["metric"]: {
                        "before_level": row["before_level"],
                        "after_level": row["after_level"],
                        "relative_effect": row["relative_effect"],
                        "ci_low": row["ci_low"],
                        "ci_high": row["ci_high"],
                        "p_value": row["p_value"],
                    }
                    for row in rows
                },
                "top_factor": headline["top_factor"],
                "coinciding_changes": json.loads(headline["coinciding_changes"] or "[]"),
            }
        )
    return alerts


def read_alerts(alerts_dir: Path) -> list[dict]:
    path = alerts_dir / ALERTS_FILE
    if not path.exists():
        return []
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]


def append_new_alerts(alerts_dir: Path, alerts: list[dict], sent_at: str) -> AlertBatch:
    """Append the alerts whose id the store has not seen; fsync so a crash cannot lose a sent one."""
    alerts_dir.mkdir(parents=True, exist_ok=True)
    with FileLock(str(alerts_dir / ".alerts.lock")):
        known = {alert["alert_id"] for alert in read_alerts(alerts_dir)}
        new = [dict(alert, sent_at=sent_at) for alert in alerts if alert["alert_id"] not in known]
        if new:
            with open(alerts_dir / ALERTS_FILE, "a", encoding="utf-8") as handle:
                for alert in new:
                    handle.write(json.dumps(alert, sort_keys=True, default=str) + "\n")
                handle.flush()
                os.fsync(handle.fileno())
        return AlertBatch(appended=new, already_sent=len(alerts) - len(new))
