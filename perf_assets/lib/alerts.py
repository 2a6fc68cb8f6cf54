"""The alert store: regressions become alerts with a lifecycle, kept in an append-only event log.

    open ──deliver──▶ notified ──ack──▶ acknowledged ──resolve──▶ resolved
      │  ╲──────────────ack──────────────▲                           ▲
      ╰──────────────────────resolve (by hand or automatically)──────╯
    expected (an annotation covers the change, or detection explained it as a knock-on: regressions
      .expected_because): stored and listed with --all, never sent; resolvable.
      An annotation added after an alert opened turns it expected too (apply_annotations).
    silenced until a date: an overlay on any unresolved status; nothing is sent while it lasts.

Every sink that was sent an alert's opening notice is later sent one closing notice when the alert
is resolved or turns expected (alert_delivery.py), so no receiver is left with a stale page. An open,
notified or acknowledged alert whose severity a later run raises to a level it never had gets an
`escalated` event, sent once to each routed sink that never had that level.

Storage: ``alerts/events.jsonl``, one JSON event per line (time, actor, event, alert id, fields),
appended under a file lock with fsync; the current state of every alert is the fold of the log.
A torn last line (crash mid-write) is ignored on read and fenced off by the next append. The
store never touches the warehouse DuckDB. docs/alerts.md describes the formats and the rules.
"""

from __future__ import annotations

import getpass
import hashlib
import json
import math
import os
from collections.abc import Iterable
from dataclasses import dataclass, field
from datetime import date, datetime, timedelta, timezone
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import pandas as pd
import yaml
from filelock import FileLock

from perf_assets.lib.alert_text import finite_number, lost_per_day
from perf_assets.lib.causes import SOFTWARE_DIMENSIONS
from perf_assets.lib.detection import DETECTED_NODES, describe_regression
from perf_assets.lib.established import all_expected, not_established
from perf_assets.lib.grouping import FACTOR_OF_METRIC, factor_of, group_regressions
from perf_assets.lib.incident_joins import hardware_evidence, rollout_events
from perf_assets.lib.topology import Topology, cohort_nodes

EVENTS_FILE = "events.jsonl"
LOCK_FILE = ".store.lock"
CONFIG_FILE = "alerts.yaml"  # under PERFWH_HOME; PERFWH_ALERTS_CONFIG overrides the path
ANNOTATIONS_FILE = "annotations.yaml"  # under PERFWH_HOME; PERFWH_ANNOTATIONS overrides the path

STATUSES = ("open", "notified", "acknowledged", "resolved", "expected")
ACTIVE_STATUSES = ("open", "notified", "acknowledged")
SEVERITIES = ("minor", "major", "critical")  # lowest first
DEDUP_WINDOW_DAYS = 2
# What an improvement incident is stored as: `expected` (listed with --all, never sent, never auto-resolved).
IMPROVEMENT_NOTICE = {"id": "improvement", "note": "an improvement: a notice, never paged", "source": "detection"}
H100_PEAK_FLOPS = 989.4e12  # dense BF16 peak of an H100-SXM (dbt seed gpu_sku_specs): 1 H100-equivalent GPU
# A goodput row's top factor names the incident's factor only when it carries at least this share of goodput's Δln:
# two factors that share a change about equally swap places with noise from one run to the next.
DOMINANT_FACTOR_SHARE = 2 / 3

# Which transitions a person (or the delivery) may make; anything else is rejected with a reason.
TRANSITIONS = {
    "notify": {"open"},
    "acknowledge": {"open", "notified"},
    "resolve": {"open", "notified", "acknowledged", "expected"},
    "silence": {"open", "notified", "acknowledged", "expected"},
}
TARGET = {"notify": "notified", "acknowledge": "acknowledged", "resolve": "resolved"}


class AlertError(ValueError):
    """A request the store refuses: unknown id, ambiguous prefix, or a transition the lifecycle forbids."""


def utcnow() -> datetime:
    return datetime.now(timezone.utc)


def default_actor() -> str:
    try:
        return getpass.getuser()
    except Exception:  # no login name in some containers
        return "unknown"


# --------------------------------------------------------------------------- config


# Keys that would put a secret into alerts.yaml (and from there into logs and reports): refused.
INLINE_SECRET_KEYS = ("secret", "token", "password", "api_key", "signing_key")


@dataclass(frozen=True)
class AlertConfig:
    """alerts.yaml: sinks, routes, owners, severity thresholds and auto-resolve (docs/alerts.md)."""

    sinks: dict[str, dict] = field(default_factory=lambda: {"file": {"type": "jsonl"}})
    routes: list[dict] = field(default_factory=list)
    default_route: list[str] = field(default_factory=lambda: ["file"])
    owners: dict[str, str] = field(default_factory=dict)  # cluster or job id -> owner
    critical_gpu_hours_per_day: float = 100.0
    major_gpu_hours_per_day: float = 10.0
    auto_resolve_days: int = 3

    @classmethod
    def from_dict(cls, raw: dict | None) -> "AlertConfig":
        raw = raw or {}
        known = {"sinks", "routes", "default_route", "owners", "severity", "auto_resolve"}
        unknown = set(raw) - known
        if unknown:
            raise AlertError(f"alerts config: unknown key(s) {sorted(unknown)}; known: {sorted(known)}")
        sinks = raw.get("sinks") or {"file": {"type": "jsonl"}}
        for name, sink in sinks.items():
            if not isinstance(sink, dict) or sink.get("type") not in ("jsonl", "webhook", "slack"):
                raise AlertError(f"alerts config: sink {name!r} needs type jsonl, webhook or slack")
            if sink["type"] == "webhook" and not sink.get("url"):
                raise AlertError(f"alerts config: webhook sink {name!r} needs a url")
            inline = sorted(key for key in sink if key in INLINE_SECRET_KEYS)
            if inline or (sink["type"] == "webhook" and urlsplit(str(sink["url"])).password):
                raise AlertError(
                    f"alerts config: sink {name!r} holds a secret ({', '.join(inline) or 'a password in the url'}); "
                    "secrets come only from the environment: name the variable with secret_env (webhook) or "
                    "token_env (slack)"
                )
        routes = raw.get("routes") or []
        default_route = list(raw.get("default_route") or ["file"])
        for route in [*routes, {"sinks": default_route}]:
            for name in route.get("sinks", []):
                if name not in sinks:
                    raise AlertError(f"alerts config: route names sink {name!r}, not among {sorted(sinks)}")
        severity = raw.get("severity") or {}
        return cls(
            sinks=sinks,
            routes=routes,
            default_route=default_route,
            owners={str(k): str(v) for k, v in (raw.get("owners") or {}).items()},
            critical_gpu_hours_per_day=float(severity.get("critical_gpu_hours_per_day", 100.0)),
            major_gpu_hours_per_day=float(severity.get("major_gpu_hours_per_day", 10.0)),
            auto_resolve_days=int((raw.get("auto_resolve") or {}).get("days", 3)),
        )


def config_path(home_root: Path) -> Path:
    return Path(os.environ.get("PERFWH_ALERTS_CONFIG") or home_root / CONFIG_FILE)


def load_config(home_root: Path) -> AlertConfig:
    path = config_path(home_root)
    if not path.exists():
        return AlertConfig()
    return AlertConfig.from_dict(yaml.safe_load(path.read_text(encoding="utf-8")))


# --------------------------------------------------------------------------- annotations


def _as_utc(value: Any) -> datetime:
    if isinstance(value, datetime):
        return value if value.tzinfo else value.replace(tzinfo=timezone.utc)
    if isinstance(value, date):
        return datetime.combine(value, datetime.min.time(), tzinfo=timezone.utc)
    parsed = datetime.fromisoformat(str(value).replace("Z", "+00:00"))
    return parsed if parsed.tzinfo else parsed.replace(tzinfo=timezone.utc)


def load_annotations(home_root: Path) -> list[dict]:
    """annotations.yaml: a list under `annotations:` of {kind, scope, start, end, note, metrics?}."""
    path = Path(os.environ.get("PERFWH_ANNOTATIONS") or home_root / ANNOTATIONS_FILE)
    if not path.exists():
        return []
    raw = yaml.safe_load(path.read_text(encoding="utf-8")) or {}
    items = raw.get("annotations", []) if isinstance(raw, dict) else raw
    annotations = []
    for number, item in enumerate(items or [], start=1):
        if "start" not in item:
            raise AlertError(f"{path}: annotation {number} has no start")
        start = _as_utc(item["start"])
        end = _as_utc(item.get("end") or item["start"])
        if isinstance(item.get("end"), date) and not isinstance(item.get("end"), datetime):
            end += timedelta(days=1)  # a date as end means the whole day
        annotations.append(
            {
                "id": str(item.get("id") or f"annotation-{number}"),
                "kind": str(item.get("kind", "maintenance")),
                "scope": dict(item.get("scope") or {}),
                "start": start,
                "end": end,
                "note": str(item.get("note", "")),
                "metrics": list(item.get("metrics") or []),
            }
        )
    return annotations


def matching_annotation(incident: dict, annotations: list[dict]) -> dict | None:
    """The first annotation whose scope covers the incident's entity and whose window covers its change day.

    Scope keys: `cluster` (one or a list), `fleet: true`, `entity` (any grain); an empty scope is
    everything. The window is widened by the dedup tolerance (± 2 days), as a change point moves.
    """
    change = _as_utc(incident["change_date"])
    for annotation in annotations:
        scope = annotation["scope"]
        if scope:
            covered = False
            for key, grain in (("cluster", "cluster"), ("job", "job"), ("entity", None)):
                if key in scope:
                    values = scope[key] if isinstance(scope[key], list) else [scope[key]]
                    if (grain is None or incident["grain"] == grain) and incident["entity_id"] in map(str, values):
                        covered = True
            if scope.get("fleet") and incident["grain"] == "fleet":
                covered = True
            if not covered:
                continue
        if annotation["metrics"] and not set(annotation["metrics"]) & set(incident["metrics"]):
            continue
        slack = timedelta(days=DEDUP_WINDOW_DAYS)
        if annotation["start"] - slack <= change < annotation["end"] + slack:
            return annotation
    return None


# --------------------------------------------------------------------------- incidents from regressions


def metric_group(metric: str) -> str:
    """Goodput and its spine factors are one incident group; any other metric is its own group."""
    return "goodput" if metric in DETECTED_NODES else metric


def _day(value: Any) -> date:
    if isinstance(value, datetime):
        return value.date()
    if isinstance(value, date):
        return value
    return date.fromisoformat(str(value)[:10])


def _metric_evidence(row: dict) -> dict:
    return {
        name: finite_number(row.get(name))
        for name in ("before_level", "after_level", "relative_effect", "ci_low", "ci_high", "p_value", "q_value")
        if name in row
    } | {
        "change_date": row["_day"].isoformat(),
        "before_start_date": _day(row["before_start_date"]).isoformat(),
        "after_end_date": _day(row["after_end_date"]).isoformat(),
    }


def build_incidents(
    regressions: pd.DataFrame, topology: Topology | None = None, change_kind: str = "regression"
) -> list[dict]:
    """Regressions grouped into incidents, one per incident group (perf_assets/lib/grouping.py): same
    direction, change days chained ± 2 days, nested scopes across grains and metrics. The group's root
    row gives the incident its grain, entity, metric group and change day (the dedup key); the root
    entity's rows are its `metrics`, every other row of the group is one of its `children`.

    Without a topology (or with cluster and fleet rows only) this is the former grouping per entity and
    metric group, except that a fleet change within ± 2 days of a cluster change of the same direction
    is a child of that cluster's incident instead of an alert of its own.

    Improvements do not page: with ``change_kind="improvement"`` the same grouping gives the improvement
    incidents, which the store keeps as notices (`expected`, never sent; ``upsert_incidents``). A
    provisional change (too few days after it to be confirmed) does page, marked `provisional`, because
    waiting for confirmation would delay every alert by the confirmation window; it becomes `confirmed`
    when a later detection run confirms it.
    """
    if regressions.empty:
        return []
    found = regressions[regressions["change_kind"] == change_kind].copy()
    if found.empty:
        return []
    found = found.reset_index(drop=True)
    found["_day"] = found["change_date"].map(_day)
    found = found.join(group_regressions(found, topology))
    incidents = []
    for group_id, rows in found.groupby("group_id", sort=False):
        records = rows.sort_values(["_day", "regression_id"]).to_dict("records")
        headline = next(row for row in records if row["is_root"])
        root_rows = [
            row for row in records if (row["grain"], row["entity_id"]) == (headline["grain"], headline["entity_id"])
        ]
        children = [row for row in records if row not in root_rows]
        cause = json.loads(headline.get("cause_candidates") or "[]") if "cause_candidates" in headline else []
        incidents.append(
            {
                "grain": str(headline["grain"]),
                "entity_id": str(headline["entity_id"]),
                "metric_group": metric_group(headline["metric"]),
                "direction": str(headline["change_kind"]),
                "change_date": headline["_day"].isoformat(),
                "headline_metric": headline["metric"],
                "summary": describe_regression(headline),
                "group_id": str(group_id),
                "regression_ids": sorted(str(row["regression_id"]) for row in records),
                "metrics": {row["metric"]: _metric_evidence(row) for row in root_rows},
                "children": [
                    {
                        "regression_id": str(row["regression_id"]),
                        "grain": str(row["grain"]),
                        "entity_id": str(row["entity_id"]),
                        "metric": row["metric"],
                    }
                    | _metric_evidence(row)
                    | _joined_because(row)
                    for row in children
                ],
                "verdict": str(headline.get("verdict") or "confirmed"),
                "top_factor": headline.get("top_factor"),
                "factors": incident_factors(records),
                "coinciding_changes": json.loads(headline.get("coinciding_changes") or "[]"),
                "top_cause": cause[0] if cause else None,
            }
            | _expected_because(headline, records)
            | _not_established(records)
        )
    return sorted(incidents, key=lambda item: (item["grain"], item["entity_id"], item["change_date"]))


def incident_factors(records: list[dict]) -> list[str]:
    """The spine factors (availability, allocation, runtime goodput, program goodput) the group's rows are changes
    of (grouping.factor_of: a factor row its own, a companion or leaf share the factor it describes, a goodput row
    its top factor when that carries at least ``DOMINANT_FACTOR_SHARE`` of goodput's change); empty: unknown."""
    factors = set()
    for row in records:
        if row["metric"] == "goodput":
            share = finite_number(row.get("top_factor_share"))
            if share is not None and share < DOMINANT_FACTOR_SHARE:
                continue  # no factor dominates: its top may be another factor on the next run
        factor = factor_of(row)
        if factor is not None:
            factors.add(factor)
    return sorted(factors)


def _joined_because(row: dict) -> dict:
    """``{"joined_because": why}`` for a child that a join rule of perf_assets/lib/incident_joins.py put in its
    incident (a rollout's step seen late, a fleet change that came with the incident's rollout); else nothing."""
    reason = row.get("joined_because")
    return {"joined_because": reason} if isinstance(reason, str) and reason else {}


def _not_established(records: list[dict]) -> dict:
    """``{"not_established": why}`` when the 95 % interval of every change of the group that nothing explains
    includes zero (perf_assets/lib/established.py): such an incident opens no alert yet."""
    reason = not_established(records)
    return {"not_established": reason} if reason else {}


def _expected_because(headline: dict, records: list[dict]) -> dict:
    """``{"expected_because": the headline's reason}`` when a known cause explains every row of the group
    (regressions column `expected_because`, perf_assets/lib/knock_on.py: a job-peer or down-time knock-on)."""
    if all_expected(records):
        return {"expected_because": headline["expected_because"]}
    return {}


# --------------------------------------------------------------------------- severity


def _pooled(series: pd.DataFrame, start: date, stop: date) -> float | None:
    """Σnumerator/Σdenominator of a (metric_date, numerator, denominator) frame over [start, stop)."""
    window = series[(series["metric_date"] >= start) & (series["metric_date"] < stop)]
    denominator = window["denominator"].sum()
    return float(window["numerator"].sum() / denominator) if denominator > 0 else None


def _series(tree: pd.DataFrame | None, grain: str, entity: str, node: str) -> pd.DataFrame:
    """A (metric_date, numerator, denominator) series of one tree node; a cohort's (the nodes that took one rollout,
    rollout_canary.py) sums its nodes' rows per day, as a cluster's sums its nodes'."""
    if tree is None or tree.empty:
        return pd.DataFrame(columns=["metric_date", "numerator", "denominator"])
    if grain == "cohort":
        rows = tree[
            (tree["grain"] == "node") & tree["entity_id"].isin(cohort_nodes(entity)) & (tree["node_id"] == node)
        ]
        rows = rows.groupby("metric_date", as_index=False)[["numerator", "denominator"]].sum(min_count=1)
    else:
        rows = tree[(tree["grain"] == grain) & (tree["entity_id"] == entity) & (tree["node_id"] == node)]
    rows = rows[["metric_date", "numerator", "denominator"]].copy()
    rows["metric_date"] = rows["metric_date"].map(_day)
    return rows.sort_values("metric_date")


def impact(incident: dict, tree: pd.DataFrame | None, installed_gs: pd.DataFrame | None = None) -> dict:
    """Lost useful GPU-hours per day (docs/alerts.md, "Severity").

    ΔG = after − before of goodput when goodput itself moved, else G_before × relative effect of the
    factor (goodput is the product of the factors), for a share that is bad when it rises scaled to its
    factor's relative change (``_factor_scale``; unknown for a fault count). lost = −ΔG × installed GPU-hours per day over the
    after window (installed_gs / 3600 from fct_cluster_day / fct_fleet_day), and in H100-equivalent
    hours = −ΔG × installed peak-FLOP-seconds per day / (989.4e12 × 3600) from metric_tree_daily.
    The interval uses the effect's 95% CI the same way.
    """
    grain, entity = incident["grain"], incident["entity_id"]
    headline = incident["metrics"][incident["headline_metric"]]
    change = date.fromisoformat(headline["change_date"])
    start = date.fromisoformat(headline["before_start_date"])
    end = date.fromisoformat(headline["after_end_date"]) + timedelta(days=1)
    goodput = _series(tree, grain, entity, "goodput")
    g_before = _pooled(goodput, start, change)
    if g_before is None and incident["headline_metric"] == "goodput":
        g_before = headline.get("before_level")
    out: dict[str, Any] = {"goodput_before": g_before}
    effect = headline.get("relative_effect")
    per_effect = _factor_scale(incident, tree, start, change)
    if g_before is None or effect is None or per_effect is None:
        return out | {"lost_gpu_hours_per_day": None, "lost_h100_equivalent_hours_per_day": None}
    loss = [
        -g_before * per_effect * value if value is not None else None
        for value in (effect, headline.get("ci_high"), headline.get("ci_low"))
    ]
    out["delta_goodput"] = -loss[0]
    after = goodput[(goodput["metric_date"] >= change) & (goodput["metric_date"] < end)]
    h100 = float(after["denominator"].mean()) / (H100_PEAK_FLOPS * 3600) if len(after) else None
    gpu_hours = None
    if installed_gs is not None and not installed_gs.empty:
        rows = installed_gs[(installed_gs["grain"] == grain) & (installed_gs["entity_id"] == entity)].copy()
        rows["metric_date"] = rows["metric_date"].map(_day)
        rows = rows[(rows["metric_date"] >= change) & (rows["metric_date"] < end)]
        gpu_hours = float(rows["installed_gs"].mean()) / 3600 if len(rows) else None
    out["installed_gpu_hours_per_day"] = gpu_hours
    out["installed_h100_equivalent_hours_per_day"] = h100
    out["lost_gpu_hours_per_day"] = loss[0] * gpu_hours if gpu_hours is not None else None
    out["lost_h100_equivalent_hours_per_day"] = loss[0] * h100 if h100 is not None else None
    scale = gpu_hours if gpu_hours is not None else h100
    if scale is not None and None not in loss[1:]:
        out["lost_gpu_hours_per_day_ci"] = sorted([loss[1] * scale, loss[2] * scale])
    return out


def _direction(tree: pd.DataFrame | None, node: str) -> int:
    """The metric's direction in metric_tree_daily (1: up is good, -1: up is bad); 1 when unknown."""
    if tree is None or tree.empty or "direction" not in tree.columns:
        return 1
    rows = tree.loc[tree["node_id"] == node, "direction"]
    return int(rows.iloc[0]) if len(rows) else 1


def _factor_scale(incident: dict, tree: pd.DataFrame | None, start: date, change: date) -> float | None:
    """The relative change of goodput per relative change of the headline metric: 1 for goodput, a factor or a
    companion (goodput = A × U × R × P); for a share that is bad when it rises (idle, down, badput, idle
    fragmented: direction -1) its factor loses what the share gains, so −before_level / factor_before (a burst of
    idle-fragmented capacity from 0.6 % to 43 % is allocation −0.42 of ~0.9, not goodput × 69); None (unknown)
    for another metric that is bad when it rises (a fault count) or without the factor's level."""
    metric = incident["headline_metric"]
    if metric == "goodput" or _direction(tree, metric) > 0:
        return 1.0
    factor = FACTOR_OF_METRIC.get(metric) if metric.endswith("_share") else None
    before_level = finite_number(incident["metrics"][metric].get("before_level"))
    if factor is None or before_level is None:
        return None
    factor_before = _pooled(_series(tree, incident["grain"], incident["entity_id"], factor), start, change)
    return -before_level / factor_before if factor_before else None


def confidence(metrics: dict) -> str:
    """high: the 95% CI excludes zero, p ≤ 0.01 and the CI's half-width ≤ half the effect; medium: the CI
    excludes zero; low: otherwise (the effect may be zero)."""
    p, low, high = metrics.get("p_value"), metrics.get("ci_low"), metrics.get("ci_high")
    effect = metrics.get("relative_effect")
    if low is None or high is None or not (high < 0 or low > 0):
        return "low"
    tight = effect is not None and (high - low) / 2 <= abs(effect) / 2
    return "high" if p is not None and p <= 0.01 and tight else "medium"


def severity(lost_per_day: float | None, conf: str, config: AlertConfig) -> str:
    """critical / major / minor from lost GPU-hours per day, one step down when the confidence is low."""
    levels = SEVERITIES
    if lost_per_day is None:
        level = 1  # unknown size: major, so that a person looks
    elif lost_per_day >= config.critical_gpu_hours_per_day:
        level = 2
    elif lost_per_day >= config.major_gpu_hours_per_day:
        level = 1
    else:
        level = 0
    if conf == "low":
        level = max(0, level - 1)
    return levels[level]


def assess(incident: dict, tree: pd.DataFrame | None, installed_gs: pd.DataFrame | None, config: AlertConfig) -> dict:
    size = impact(incident, tree, installed_gs)
    conf = confidence(incident["metrics"][incident["headline_metric"]])
    lost, _ = lost_per_day(size)  # GPU-hours, else H100-equivalent hours
    return {"impact": size, "confidence": conf, "severity": severity(lost, conf, config)}


def severity_rank(level: str | None) -> int:
    """0 minor, 1 major, 2 critical; -1 unknown."""
    return SEVERITIES.index(level) if level in SEVERITIES else -1


def escalation(alert: dict, changes: dict) -> dict | None:
    """The `escalated` event's fields when an update raises an active alert's severity above the highest it has
    had (`peak_severity`): a rise to a level it never had re-notifies once; the same level again, or a fall, never.
    None otherwise (an expected or resolved alert, or an unknown earlier level)."""
    peak = alert.get("peak_severity") or alert.get("severity")
    new = changes.get("severity")
    if alert["status"] not in ACTIVE_STATUSES or severity_rank(peak) < 0 or severity_rank(new) <= severity_rank(peak):
        return None
    before, unit = lost_per_day(alert.get("impact"))
    after, after_unit = lost_per_day(changes.get("impact", alert.get("impact")))
    return {
        "escalation": int(alert.get("escalations") or 0) + 1,
        "from_severity": peak,
        "to_severity": new,
        "lost_per_day_before": before,
        "lost_per_day_after": after,
        "unit": after_unit if after is not None else unit,
    }


# --------------------------------------------------------------------------- the event log


def _events_path(alerts_dir: Path) -> Path:
    return alerts_dir / EVENTS_FILE


def _lock(alerts_dir: Path) -> FileLock:
    alerts_dir.mkdir(parents=True, exist_ok=True)
    return FileLock(str(alerts_dir / LOCK_FILE), timeout=60)


def read_events(alerts_dir: Path) -> list[dict]:
    path = _events_path(alerts_dir)
    if not path.exists():
        return []
    events = []
    for line in path.read_text(encoding="utf-8").splitlines():
        if not line.strip():
            continue
        try:
            events.append(json.loads(line))
        except json.JSONDecodeError:
            continue  # a line torn by a crash mid-append: never acknowledged to anyone, so dropped
    return events


def append_events(alerts_dir: Path, events: Iterable[dict]) -> None:
    """Append events durably (flush + fsync); call while holding the store lock."""
    events = list(events)
    if not events:
        return
    path = _events_path(alerts_dir)
    with open(path, "ab") as handle:
        if handle.tell() > 0:
            with open(path, "rb") as reader:
                reader.seek(-1, os.SEEK_END)
                if reader.read(1) != b"\n":
                    handle.write(b"\n")  # fence off a torn line
        for event in events:
            handle.write((json.dumps(event, sort_keys=True, default=str) + "\n").encode("utf-8"))
        handle.flush()
        os.fsync(handle.fileno())


def _event(kind: str, alert_id: str, at: datetime, actor: str, **fields: Any) -> dict:
    return {"event": kind, "alert_id": alert_id, "at": at.isoformat(), "actor": actor, **fields}


def fold(events: Iterable[dict]) -> dict[str, dict]:
    """The current state of every alert from its events, in log order."""
    alerts: dict[str, dict] = {}
    for event in events:
        kind, alert_id = event["event"], event["alert_id"]
        if kind == "created":
            alerts[alert_id] = dict(event["alert"]) | {
                "alert_id": alert_id,
                "status": event["status"],
                "created_at": event["at"],
                "updated_at": event["at"],
                "silenced_until": None,
                "deliveries": {},
                "closing_deliveries": {},
                "escalation_deliveries": {},
                "sent_severity": {},  # per sink: the highest severity it was paged or escalated with
                "history": [],
            }
            alerts[alert_id].setdefault("peak_severity", alerts[alert_id].get("severity"))
        alert = alerts.get(alert_id)
        if alert is None:
            continue
        alert["history"].append({k: v for k, v in event.items() if k not in ("alert", "alert_id")})
        alert["updated_at"] = event["at"]
        if kind == "updated":
            alert.update(event["changes"])
            if severity_rank(alert.get("severity")) > severity_rank(alert.get("peak_severity")):
                alert["peak_severity"] = alert["severity"]
        elif kind == "escalated":  # its severity rose to a level it never had: every routed sink is told once
            alert["escalation"] = {k: v for k, v in event.items() if k not in ("event", "alert_id", "actor")}
            alert["escalations"] = event["escalation"]
            alert["escalated_at"] = event["at"]
            alert["escalation_deliveries"] = {}
        elif kind == "expected":  # an annotation added after the alert opened
            alert["status"] = "expected"
            alert["expected_by"] = event["annotation"]
            alert["expected_at"] = event["at"]
        elif kind == "reopened":  # the annotation that made it expected was withdrawn or narrowed
            alert["status"] = "open"
            alert["generation"] = alert.get("generation", 0) + 1
            alert["withdrawn_annotation"] = alert.get("expected_by")
            alert["expected_by"] = None
            alert["reopened_at"] = event["at"]
            alert["deliveries"] = {}  # a new page to every routed sink, under new idempotency keys
            alert["closing_deliveries"] = {}  # (the earlier records stay in the history)
            alert["escalation"] = None  # the new page carries the current severity
            alert["escalation_deliveries"] = {}
            alert["sent_severity"] = {}
        elif kind in ("notified", "acknowledged", "resolved"):
            alert["status"] = kind
            alert[f"{kind}_at"] = event["at"]
            alert[f"{kind}_by"] = event["actor"]
            if kind == "resolved":
                alert["resolved_on"] = event.get("resolved_on") or event["at"][:10]
                alert["resolution"] = event.get("how", "manual")
        elif kind == "silenced":
            alert["silenced_until"] = event["until"]
        elif kind in ("delivery_started", "delivered", "delivery_failed"):
            _fold_delivery(alert, event)
    return alerts


def _fold_delivery(alert: dict, event: dict) -> None:
    """Delivery records per sink: `deliveries` for the page (opening or reopened), `escalation_deliveries` for
    the notice of the latest escalation, `closing_deliveries` for the close. A delivered page or escalation
    raises the sink's `sent_severity` (the severity it carried; an older record without one: the alert's)."""
    notice = event.get("notice", "opening")
    paging = notice in ("opening", "reopened")
    if notice == "escalated":
        current = (alert.get("escalation") or {}).get("escalation")
        records = alert.setdefault("escalation_deliveries", {}) if event.get("escalation") == current else {}
    else:
        records = alert["deliveries"] if paging else alert["closing_deliveries"]
    if event["event"] == "delivered" and (paging or notice == "escalated"):
        sent = alert.setdefault("sent_severity", {})
        level = event.get("severity") or alert.get("severity")
        if severity_rank(level) > severity_rank(sent.get(event["sink"])):
            sent[event["sink"]] = level
    delivery = records.setdefault(event["sink"], {"attempts": 0})
    if event["event"] == "delivery_started":
        delivery.update(status="sending", idempotency_key=event["idempotency_key"])
    elif event["event"] == "delivered":
        delivery.update(status="delivered", delivered_at=event["at"], idempotency_key=event["idempotency_key"])
        delivery["attempts"] += int(event.get("attempts", 1))
    else:
        delivery.update(status="failed", error=event.get("error"))
        delivery["attempts"] += int(event.get("attempts", 1))


def read_alerts(alerts_dir: Path) -> list[dict]:
    """Every alert's current state, oldest first."""
    return list(fold(read_events(alerts_dir)).values())  # in the order they were created


def is_silenced(alert: dict, now: datetime) -> bool:
    """Silenced through the end of `silenced_until` (a UTC date); expires by itself."""
    until = alert.get("silenced_until")
    return bool(until) and now.date() <= date.fromisoformat(until)


# --------------------------------------------------------------------------- upsert (dedup)


@dataclass
class UpsertResult:
    opened: list[dict] = field(default_factory=list)
    expected: list[dict] = field(default_factory=list)
    updated: list[dict] = field(default_factory=list)
    escalated: list[dict] = field(default_factory=list)  # updated alerts whose severity rose to a new level
    unchanged: int = 0
    not_established: list[dict] = field(default_factory=list)  # new incidents whose evidence opens no alert yet
    auto_resolved: list[dict] = field(default_factory=list)


def _alert_id(incident: dict) -> str:
    key = "|".join(
        [
            incident["grain"],
            incident["entity_id"],
            incident["metric_group"],
            incident["direction"],
            incident["change_date"],
        ]
    )
    return hashlib.sha256(f"alert|{key}".encode()).hexdigest()[:12]


def find_match(alerts: Iterable[dict], incident: dict, topology: Topology | None = None) -> dict | None:
    """The stored alert this incident is (the first of ``match_candidates``), or None."""
    candidates = match_candidates(alerts, incident, topology)
    return candidates[0][1] if candidates else None


def match_candidates(
    alerts: Iterable[dict], incident: dict, topology: Topology | None = None
) -> list[tuple[tuple[int, int, int], dict]]:
    """The stored alerts this incident may be, best first, each with its rank (0 for the same root entity, else 1;
    the days between their headlines, or the alert's children on the incident's root; the fewest days between any of
    these or a shared child series): same root entity and direction, change day ± 2 days.

    The metric group is not part of the key: an incident group already holds every metric of its
    root entity within ± 2 days (perf_assets/lib/grouping.py), and the headline metric of a group can
    change between runs as evidence accumulates (a companion first, goodput once it moves).

    The days compared are the one the alert was opened with (`dedup_change_date`) and the one it holds
    now (`change_date`, moved by `updated` events): a change point that moves a day per run as days
    arrive (6 → 5 → 4 → 3 October) keeps updating its alert instead of opening a second one once it is
    more than 2 days from the opening day (bench/soak.py, inc-bad-batch-a100). Days it held in between
    are not compared, so an alert is never stretched over every day it ever touched.

    With the inventory topology, an alert whose entity contains or is contained in the incident's root
    (a cluster and one of its nodes) matches too, the same entity preferred: a day-by-day run roots one
    incident at the cluster on one day and at its nodes on another (bench/soak.py on `incidents`).

    The change days of the alert's children on the incident's root entity count as well (``child_days``): an alert
    headed by a throttled node holds its cluster's change as a child, and the cluster's change seen alone on a
    later run (a day further off than the node's) is that alert's, not a page of its own (bench/replay_alerts.py on
    `incidents` seed 1: inc-hbm-decay-h200-n04 headed by h200-n04 from 10-17, cluster h200 of 10-14 on 10-27).

    Beyond nested scopes, an incident matches an alert that held its root entity as a child (``child_days`` not
    empty), or that it holds as a child itself (the alert's root among the incident's children, compared at that
    child's change day): one incident whose headline moved to another of its entities between runs, which grouping
    had put in one group on both runs. fleet-1k seed 113 (bench/replay_alerts.py): the bad hardware batch of
    h100-east opened on rack r9's fault rate of 10-01 with rack r10's of 10-02 as a child; the 10-09 run rooted
    the same group at r10, with r9 as its child, and paged it again.

    An incident that shares a child series with the alert (``shared_child_distance``: the same entity and metric among
    both's children, compared at those children's change days) matches too: the same row seen under two headlines,
    neither of which holds the other. fleet-1k seed 126 (bench/replay_alerts.py): the h100-east bad batch opened on
    10-04 as rack r10's fault rate of 10-02 with node n37's as a child; the 10-05 run, without the rack's row, rooted
    it at n35 (rack r9) with n37's row of 10-02 as its child, and paged it again.

    An incident that came with the same rollout as the alert (``incident_joins.rollout_events``: a component, both versions and the
    day of its first node, in both `coinciding_changes`) matches too: a rollout moves its nodes a day or two before
    the cluster's change is found, and each node's change is then a group of its own (fleet-1k seed 118,
    bench/replay_alerts.py: the a100-west driver rollout of 10-21 paged as three node alerts on the 10-22 run, n01,
    n29 and n30, each of whose program goodput split on 10-20). Matching an alert, not linking rows in grouping,
    keeps this from chaining: each incident is compared with the alerts' own days.

    A resolved alert matches only a change day on or before the day it was resolved: the same old
    change point seen again stays resolved, while a regression that returns after the resolution
    is a new change point and opens a new alert.

    An alert stored `expected` as a knock-on that detection explained matches only an incident that is
    explained too: when a group grows by rows nothing explains (a GPU's thermal throttling joining a
    job-peer knock-on on its node two days earlier, rooted at their cluster), the incident pages as a
    new alert instead of updating the silent one (bench/soak.py, inc-thermal-h100-n04-gpu3).

    Known spine factors must overlap (``factors_compatible``): two incidents of one cluster within two days
    that grouping keeps apart by factor (a checkpoint slowdown, runtime goodput; a mix shift's idle GPUs,
    allocation) are two alerts, not the first one's alert updated by the second; a side whose factor is
    unknown matches as before.

    A hardware incident inside a rollout's alert (``hardware_apart``: thermal, HBM or fault rows, which the alert
    lacks) is its own unless it has the alert's root or shares a child series with it, even when its node took the
    rollout. fleet-1k seeds 126-128 (bench/replay_alerts.py): h200-east-n10's HBM decay (its probes from 10-16, its
    own node the cause) was taken in by the cohort alert of the half-cluster driver rollout of 10-16, which the node
    took too, and never paged.
    """
    change = date.fromisoformat(incident["change_date"])
    scope = (incident["grain"], incident["entity_id"])
    rollouts = rollout_events(incident)
    ranked = []
    for alert in alerts:
        if alert["direction"] != incident["direction"]:
            continue
        if _explained_by_detection(alert) and not incident.get("expected_because"):
            continue  # a knock-on alert never takes in a change that nothing explains: that one pages
        if not factors_compatible(alert, incident):
            continue  # another incident of the same scope: a checkpoint slowdown is not a mix shift's idle GPUs
        root = (alert["grain"], alert["entity_id"])
        same = root == scope
        held, holds = child_days(alert, scope), child_days(incident, root)
        rollout = bool(rollouts and rollouts & rollout_events(alert))
        shared = shared_child_distance(alert, incident)
        if not (same or held or holds or rollout or shared is not None or _nested(root, scope, topology)):
            continue
        if not same and shared is None and hardware_apart(alert, incident):
            continue  # a node's own hardware fault, not the rollout it took
        anchors = {alert.get("dedup_change_date") or alert["change_date"], alert["change_date"]} | held
        days = {change} | {date.fromisoformat(day) for day in holds}
        direct = min(abs((date.fromisoformat(anchor) - day).days) for anchor in anchors for day in days)
        distance = direct if shared is None else min(direct, shared)
        if distance > DEDUP_WINDOW_DAYS:
            continue
        if alert["status"] == "resolved" and change > date.fromisoformat(alert["resolved_on"]):
            continue
        # the same entity first, then the nearest day of the headlines (and children on the root), then of any child
        ranked.append(((0 if same else 1, direct, distance), alert))
    return sorted(ranked, key=lambda item: item[0])


def shared_child_distance(alert: dict, incident: dict) -> int | None:
    """The fewest days between a child of the alert and a child of the incident that are one series (the same grain,
    entity and metric), or None when they share none: the same row seen under two headlines."""

    def series_days(record: dict) -> list[tuple[tuple, date]]:
        return [
            ((child.get("grain"), child.get("entity_id"), child.get("metric")), _day(child["change_date"]))
            for child in record.get("children") or []
            if child.get("change_date")
        ]

    theirs: dict[tuple, list[date]] = {}
    for key, day in series_days(alert):
        theirs.setdefault(key, []).append(day)
    distances = [abs((day - other).days) for key, day in series_days(incident) for other in theirs.get(key, ())]
    return min(distances, default=None)


def child_days(alert: dict, scope: tuple[str, str]) -> set[str]:
    """The change days of the alert's (or an incident's) children (``build_incidents``) on the entity ``scope``
    (grain, entity)."""
    return {
        str(child["change_date"])
        for child in alert.get("children") or []
        if (child.get("grain"), child.get("entity_id")) == scope and child.get("change_date")
    }


def factors_compatible(alert: dict, incident: dict) -> bool:
    """False only when both carry known spine factors and share none: the factors the alert opened with
    (`dedup_factors`) or holds now (`factors`) against the incident's. Unknown on either side (a companion-only
    group, no dominant factor, an alert stored before factors were kept) matches any."""
    ours = set(incident.get("factors") or [])
    theirs = set(alert.get("dedup_factors") or []) | set(alert.get("factors") or [])
    return not ours or not theirs or bool(ours & theirs)


def hardware_apart(alert: dict, incident: dict) -> bool:
    """The alert is a rollout's (its top cause, when it opened or now, a node_software or config dimension:
    causes.SOFTWARE_DIMENSIONS) without hardware evidence, and the incident holds some (a row of a metric no rollout
    moves: incident_joins.hardware_evidence, a thermal throttle, HBM bandwidth, faults): a hardware incident on a node
    that took the rollout is its own, as grouping keeps it (incident_joins.explained_apart)."""

    def rows(record: dict) -> list[dict]:  # the root's metrics and the children, as rows with a `metric`
        return [{"metric": metric} for metric in record.get("metrics") or {}] + list(record.get("children") or [])

    causes = [alert.get("dedup_top_cause"), alert.get("top_cause")]
    rollout = any(cause and cause.get("dimension") in SOFTWARE_DIMENSIONS for cause in causes)
    return rollout and hardware_evidence(rows(incident)) and not hardware_evidence(rows(alert))


def _explained_by_detection(alert: dict) -> bool:
    """Stored `expected` because detection explained it as a knock-on (not an annotation, not an improvement)."""
    return alert["status"] == "expected" and (alert.get("expected_by") or {}).get("id") == "knock-on"


def _nested(a: tuple[str, str], b: tuple[str, str], topology: Topology | None) -> bool:
    """One scope inside the other (a node in its cluster, a GPU in its node); never through the fleet,
    which contains everything and would fold independent incidents (as in grouping)."""
    if topology is None or "fleet" in (a[0], b[0]):
        return False
    return topology.contains(a, b) or topology.contains(b, a)


def same_evidence(a: Any, b: Any) -> bool:
    """Equal, with floats equal to 1e-9 relative (a rebuild re-sums floats: the last bits move)."""
    if isinstance(a, float) and isinstance(b, float):
        return math.isclose(a, b, rel_tol=1e-9, abs_tol=1e-12)
    if isinstance(a, dict) and isinstance(b, dict):
        return a.keys() == b.keys() and all(same_evidence(a[k], b[k]) for k in a)
    if isinstance(a, list) and isinstance(b, list):
        return len(a) == len(b) and all(same_evidence(x, y) for x, y in zip(a, b))
    return a == b


EVIDENCE_FIELDS = (
    "change_date",
    "summary",
    "regression_ids",
    "metrics",
    "verdict",
    "top_factor",
    "factors",
    "coinciding_changes",
    "children",
    "top_cause",
)


def assign_stored_alerts(
    alerts: list[dict], incidents: list[dict], topology: Topology | None = None
) -> dict[int, dict | None]:
    """Each incident of one run (by index) that may be a stored alert (``match_candidates``), with the alert it takes:
    one alert per incident and one incident per alert, the (incident, alert) pairs taken in rank order over the run
    (the same root entity first, then the nearest day), so an alert goes to the incident nearest it, not to the first
    one sorted. None: each alert it may be went to an incident of the run nearer that alert. fleet-1k seed 128
    (bench/replay_alerts.py): on 10-29 cluster h100-west held the image stall of 10-18 and the rack power cap of 10-22
    as two incidents; the power cap's alert, moved to 10-20 by the run before, went to the image stall, sorted first,
    and the power cap's own incident was left without an alert."""
    pairs = sorted(
        ((rank, index, alert["alert_id"]), alert)
        for index, incident in enumerate(incidents)
        for rank, alert in match_candidates(alerts, incident, topology)
    )
    taken: dict[int, dict | None] = {key[1]: None for key, _ in pairs}
    claimed: set[str] = set()
    for (_, index, alert_id), alert in pairs:
        if taken[index] is None and alert_id not in claimed:
            taken[index] = alert
            claimed.add(alert_id)
    return taken


def upsert_incidents(
    alerts_dir: Path,
    incidents: list[dict],
    *,
    config: AlertConfig | None = None,
    annotations: list[dict] | None = None,
    tree: pd.DataFrame | None = None,
    installed_gs: pd.DataFrame | None = None,
    now: datetime | None = None,
    actor: str = "detection",
    topology: Topology | None = None,
) -> UpsertResult:
    """Open an alert per new incident (or store it as `expected` when an annotation covers it).

    A new incident that is not established (its `not_established`: the 95 % interval of every change nothing
    explains includes zero, perf_assets/lib/established.py) opens nothing yet (``result.not_established``); a stored
    alert that it matches is updated as usual.

    An incident that matches a stored alert (``find_match``) opens nothing; when its evidence
    changed (the change point moved a day, a factor joined) the alert gets an `updated` event.
    One alert takes the evidence of one incident per run, the one nearest it (``assign_stored_alerts``: the
    same root entity first, then the nearest day): two incidents of a run on one alert no longer toggle its
    change day back and forth within the run (the s18 soak's cluster h100 alert went 21 → 19 → 21 October),
    and an incident whose alerts all went to nearer incidents of the run opens nothing.
    An update that raises an active alert's severity above every level it had also gets an `escalated`
    event (``escalation``), which the delivery sends once per routed sink (alert_delivery.py).
    """
    config = config or AlertConfig()
    annotations = annotations or []
    now = now or utcnow()
    result = UpsertResult()
    with _lock(alerts_dir):
        alerts = fold(read_events(alerts_dir))
        events = []
        taken = assign_stored_alerts(list(alerts.values()), incidents, topology)
        opened_now: list[dict] = []  # alerts this run opened
        for index, incident in enumerate(incidents):
            match = taken.get(index)
            if index in taken and match is None:
                result.unchanged += 1  # each alert it may be went to an incident of this run nearer that alert
                continue
            if index not in taken and find_match(opened_now, incident, topology) is not None:
                result.unchanged += 1  # an alert an earlier incident of this run opened stands for it
                continue
            if match is not None and (match["grain"], match["entity_id"]) != (incident["grain"], incident["entity_id"]):
                result.unchanged += 1  # the same incident rooted at a nested entity: the alert stands as it is
                continue
            if match is not None:
                changes = {
                    name: incident[name]
                    for name in EVIDENCE_FIELDS
                    if name in incident and not same_evidence(match.get(name), incident[name])
                }
                if changes and match["status"] != "resolved":
                    changes |= assess(incident, tree, installed_gs, config)
                    events.append(_event("updated", match["alert_id"], now, actor, changes=changes))
                    raised = escalation(match, changes)
                    match.update(changes)
                    if severity_rank(match.get("severity")) > severity_rank(match.get("peak_severity")):
                        match["peak_severity"] = match["severity"]
                    if raised is not None:
                        events.append(_event("escalated", match["alert_id"], now, actor, **raised))
                        match |= {"escalation": raised, "escalations": raised["escalation"]}
                        result.escalated.append(match)
                    result.updated.append(match)
                else:
                    result.unchanged += 1
                continue
            if incident.get("not_established"):
                result.not_established.append(incident)  # no alert until a later run's interval excludes zero
                continue
            alert = dict(incident) | assess(incident, tree, installed_gs, config)
            cluster = (
                topology.cluster_of(str(incident["grain"]), str(incident["entity_id"]))
                if topology is not None and incident["grain"] not in ("fleet", "job")
                else None
            )
            if cluster is not None and incident["grain"] != "cluster":
                alert["cluster"] = cluster  # routing and ownership of a node, rack, cohort or GPU alert
            alert["owner"] = config.owners.get(incident["entity_id"]) or config.owners.get(cluster or "")
            alert["dedup_change_date"] = incident["change_date"]
            alert["dedup_factors"] = list(incident.get("factors") or [])
            alert["dedup_top_cause"] = incident.get("top_cause")
            annotation = matching_annotation(incident, annotations)
            status = "open"
            if incident["direction"] != "regression":  # an improvement: a notice in the store, never paged
                status = "expected"
                alert["expected_by"] = dict(IMPROVEMENT_NOTICE)
            elif annotation is not None:
                status = "expected"
                alert["expected_by"] = _annotation_fields(annotation)
            elif incident.get("expected_because"):  # a knock-on that detection explained: stored, never sent
                status = "expected"
                alert["expected_by"] = {"id": "knock-on", "note": incident["expected_because"], "source": "detection"}
            alert_id = _alert_id(incident)
            while alert_id in alerts:  # a returning regression on the very same day as an old one
                alert_id = hashlib.sha256(alert_id.encode()).hexdigest()[:12]
            event = _event("created", alert_id, now, actor, status=status, alert=alert)
            events.append(event)
            alerts[alert_id] = fold([event])[alert_id]
            opened_now.append(alerts[alert_id])
            (result.expected if status == "expected" else result.opened).append(alerts[alert_id])
        append_events(alerts_dir, events)
    return result


def _annotation_fields(annotation: dict) -> dict:
    return {k: (v.isoformat() if isinstance(v, datetime) else v) for k, v in annotation.items()}


def apply_annotations(
    alerts_dir: Path, annotations: list[dict], *, now: datetime | None = None, actor: str = "annotations"
) -> list[dict]:
    """Turn every active alert (open, notified, acknowledged) that an annotation now covers into `expected`.

    Annotations are often written after the page: a maintenance window announced late, a rollout
    recorded once someone recognised it. The alert keeps its history; a sink that was sent it gets
    a closing notice saying which annotation covers it. Returns the alerts changed.
    """
    if not annotations:
        return []
    now = now or utcnow()
    changed = []
    with _lock(alerts_dir):
        alerts = fold(read_events(alerts_dir))
        events = []
        for alert in alerts.values():
            if alert["status"] not in ACTIVE_STATUSES:
                continue
            annotation = matching_annotation(alert, annotations)
            if annotation is None:
                continue
            event = _event("expected", alert["alert_id"], now, actor, annotation=_annotation_fields(annotation))
            events.append(event)
            changed.append(alert["alert_id"])
        append_events(alerts_dir, events)
        alerts = fold(read_events(alerts_dir))
    return [alerts[alert_id] for alert_id in changed]


def reopen_unannotated(
    alerts_dir: Path, annotations: list[dict], *, now: datetime | None = None, actor: str = "annotations"
) -> list[dict]:
    """Reopen every `expected` alert that no annotation covers any more: its annotation was deleted or narrowed.

    `annotations` must be the annotations as successfully loaded (an empty list: annotations.yaml is
    gone or empty, so nothing is expected any more); a caller that could not read the file passes
    nothing here. A reopened alert is `open` again, in a new generation: every sink of its route gets
    a new page under a new idempotency key (notice `reopened` where that sink had the earlier page),
    and a later close gets its closing notice again. Alerts resolved meanwhile stay resolved.
    """
    now = now or utcnow()
    changed = []
    with _lock(alerts_dir):
        alerts = fold(read_events(alerts_dir))
        events = []
        for alert in alerts.values():
            if alert["status"] != "expected" or matching_annotation(alert, annotations) is not None:
                continue
            if (alert.get("expected_by") or {}).get("source") == "detection":
                continue  # expected by detection (a knock-on), not by an annotation
            withdrawn = (alert.get("expected_by") or {}).get("id")
            events.append(_event("reopened", alert["alert_id"], now, actor, withdrawn_annotation=withdrawn))
            changed.append(alert["alert_id"])
        append_events(alerts_dir, events)
        alerts = fold(read_events(alerts_dir))
    return [alerts[alert_id] for alert_id in changed]


# --------------------------------------------------------------------------- lifecycle by hand


def _resolve_id(alerts: dict[str, dict], alert_id: str) -> dict:
    if alert_id in alerts:
        return alerts[alert_id]
    candidates = [key for key in alerts if key.startswith(alert_id)] if len(alert_id) >= 4 else []
    if len(candidates) == 1:
        return alerts[candidates[0]]
    if candidates:
        raise AlertError(f"alert id {alert_id!r} is ambiguous: {', '.join(sorted(candidates))}")
    raise AlertError(f"no alert {alert_id!r} (perfwh alerts list --all shows every id)")


def transition(
    alerts_dir: Path,
    alert_id: str,
    action: str,
    *,
    actor: str | None = None,
    note: str | None = None,
    until: date | None = None,
    now: datetime | None = None,
    how: str = "manual",
    resolved_on: date | None = None,
) -> dict:
    """acknowledge / resolve / silence / notify one alert, or raise AlertError saying why not."""
    if action not in TRANSITIONS:
        raise AlertError(f"unknown action {action!r}; one of {sorted(TRANSITIONS)}")
    now = now or utcnow()
    actor = actor or default_actor()
    with _lock(alerts_dir):
        alerts = fold(read_events(alerts_dir))
        alert = _resolve_id(alerts, alert_id)
        status = alert["status"]
        if status not in TRANSITIONS[action]:
            by = alert.get(f"{status}_by")
            when = (alert.get(f"{status}_at") or "")[:19]
            detail = f" by {by} at {when}" if by else ""
            allowed = ", ".join(sorted(TRANSITIONS[action]))
            raise AlertError(
                f"cannot {action} alert {alert['alert_id']}: it is {status}{detail} ({action} applies to: {allowed})"
            )
        fields: dict[str, Any] = {"note": note} if note else {}
        if action == "silence":
            if until is None:
                raise AlertError("silence needs --until YYYY-MM-DD")
            if until < now.date():
                raise AlertError(f"cannot silence alert {alert['alert_id']} until {until}: that day has passed")
            event = _event("silenced", alert["alert_id"], now, actor, until=until.isoformat(), **fields)
        else:
            if action == "resolve":
                fields |= {"how": how, "resolved_on": (resolved_on or now.date()).isoformat()}
            event = _event(TARGET[action], alert["alert_id"], now, actor, **fields)
        append_events(alerts_dir, [event])
        return fold(read_events(alerts_dir))[alert["alert_id"]]


# --------------------------------------------------------------------------- automatic resolution


def recovery_day(alert: dict, tree: pd.DataFrame, days: int) -> date | None:
    """The last day of the first run of `days` days after the change whose pooled level is back.

    Back means within the 95% confidence interval of the old level for a mean of `days` days:
    before_level ∓ 1.96 · σ / √days (σ = standard deviation of the daily values in the before
    window), on the side the metric regressed from. None when it has not recovered (or no data).
    """
    metrics = (alert.get("metrics") or {}).get(alert["headline_metric"])
    if metrics is None:  # an alert updated by a re-run whose rows no longer include its headline metric
        return None
    series = _series(tree, alert["grain"], alert["entity_id"], alert["headline_metric"])
    if series.empty or metrics.get("before_level") is None:
        return None
    direction = 1
    if "direction" in tree.columns:
        node = tree[tree["node_id"] == alert["headline_metric"]]["direction"]
        direction = int(node.iloc[0]) if len(node) else 1
    change = date.fromisoformat(metrics["change_date"])
    before = series[
        (series["metric_date"] >= date.fromisoformat(metrics["before_start_date"])) & (series["metric_date"] < change)
    ]
    values = (before["numerator"] / before["denominator"]).dropna()
    if len(values) < 2:
        return None
    bound = metrics["before_level"] - direction * 1.96 * float(values.std(ddof=1)) / math.sqrt(days)
    after = series[series["metric_date"] > change].reset_index(drop=True)
    for last in range(days - 1, len(after)):
        window = after.iloc[last - days + 1 : last + 1]
        if (window["metric_date"].iloc[-1] - window["metric_date"].iloc[0]).days != days - 1:
            continue  # a gap: not `days` consecutive days
        level = window["numerator"].sum() / window["denominator"].sum()
        if direction * (level - bound) >= 0:
            return window["metric_date"].iloc[-1]
    return None


def auto_resolve(alerts_dir: Path, tree: pd.DataFrame, config: AlertConfig, now: datetime | None = None) -> list[dict]:
    """Resolve every unresolved alert whose metric has been back at its old level for N days."""
    resolved = []
    for alert in read_alerts(alerts_dir):
        if alert["status"] == "resolved" or alert["direction"] != "regression":
            continue  # an improvement notice stays as it is: "back at the old level" is a regression's recovery
        day = recovery_day(alert, tree, config.auto_resolve_days)
        if day is None:
            continue
        note = f"{alert['headline_metric']} back within the 95% CI of its old level for {config.auto_resolve_days} days"
        try:
            resolved.append(
                transition(
                    alerts_dir,
                    alert["alert_id"],
                    "resolve",
                    actor="auto-resolve",
                    note=note,
                    now=now,
                    how="auto",
                    resolved_on=day,
                )
            )
        except AlertError:
            continue  # resolved by someone else meanwhile
    return resolved
