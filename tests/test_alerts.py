"""Alerts on literal regressions: dedup, lifecycle, silence, annotations, auto-resolve, routing, delivery."""

from __future__ import annotations

import hashlib
import hmac
import json
import os
import threading
import time
from datetime import date, datetime, timedelta, timezone
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pandas as pd
import pytest

from perf_assets.lib.alert_delivery import SIGNATURE_HEADER, deliver, routed_sinks
from perf_assets.lib.alerts import (
    AlertConfig,
    AlertError,
    append_events,
    apply_annotations,
    auto_resolve,
    build_incidents,
    confidence,
    impact,
    load_annotations,
    read_alerts,
    read_events,
    recovery_day,
    severity,
    transition,
    upsert_incidents,
)
from perf_assets.lib.detection import REGRESSION_COLUMNS

NOW = datetime(2026, 11, 20, 12, tzinfo=timezone.utc)
START = date(2026, 11, 1)
INSTALLED_PFS = 32 * 86400 * 989.4e12  # 32 H100s for a day


def regression(
    change: str = "2026-11-09",
    metric: str = "goodput",
    entity: str = "alpha",
    grain: str = "cluster",
    effect: float = -0.12,
    ci: tuple[float, float] = (-0.14, -0.10),
    p: float = 0.002,
    kind: str = "regression",
    **extra,
) -> dict:
    """One row of `regressions` with every REGRESSION_SCHEMA column (extra columns allowed)."""
    day = date.fromisoformat(change)
    row = {column: None for column in REGRESSION_COLUMNS}
    row |= {
        "regression_id": hashlib.sha256(f"{entity}{metric}{change}".encode()).hexdigest()[:16],
        "metric": metric,
        "grain": grain,
        "entity_id": entity,
        "change_date": day,
        "change_kind": kind,
        "before_start_date": day - timedelta(days=8),
        "after_end_date": day + timedelta(days=5),
        "n_before": 8,
        "n_after": 6,
        "before_level": 0.36,
        "after_level": 0.36 * (1 + effect),
        "relative_effect": effect,
        "ci_low": ci[0],
        "ci_high": ci[1],
        "p_value": p,
        "test": "permutation",
        "factor_log_contributions": "{}",
        "top_factor": "runtime_goodput",
        "top_factor_share": 1.0,
        "coinciding_changes": "[]",
        "peer_relative_effect": float("nan"),
        "did_relative_effect": float("nan"),
        "detected_at": NOW,
    }
    return row | extra


def frame(*rows: dict) -> pd.DataFrame:
    return pd.DataFrame(list(rows))


def tree(levels: list[float], entity: str = "alpha", node: str = "goodput", noise: float = 0.004) -> pd.DataFrame:
    """metric_tree_daily rows of one series from START: value = levels[i] (± a fixed alternating wiggle)."""
    rows = []
    for day, level in enumerate(levels):
        value = level * (1 + (noise if day % 2 else -noise))
        rows.append(
            {
                "grain": "cluster",
                "entity_id": entity,
                "node_id": node,
                "metric_date": START + timedelta(days=day),
                "numerator": value * INSTALLED_PFS,
                "denominator": INSTALLED_PFS,
                "direction": 1,
            }
        )
    return pd.DataFrame(rows)


def upsert(alerts_dir: Path, *rows: dict, **kwargs):
    return upsert_incidents(alerts_dir, build_incidents(frame(*rows)), now=kwargs.pop("now", NOW), **kwargs)


# --------------------------------------------------------------------------- incidents and dedup


def test_goodput_and_its_factor_are_one_incident_and_improvements_do_not_page():
    rows = frame(
        regression("2026-11-09"),
        regression("2026-11-08", metric="runtime_goodput"),
        regression("2026-11-09", entity="beta", kind="improvement", effect=0.1, ci=(0.08, 0.12)),
    )
    incidents = build_incidents(rows)
    assert len(incidents) == 1
    assert incidents[0]["headline_metric"] == "goodput" and set(incidents[0]["metrics"]) == {
        "goodput",
        "runtime_goodput",
    }


def test_a_rollout_across_grains_is_one_alert_keyed_by_its_group_root(tmp_path):
    """Cluster, node, GPU and fleet changes of one rollout: one alert on the cluster, the rest its children."""
    from perf_assets.lib.topology import Topology

    topology = Topology.from_frame(
        pd.DataFrame(
            [
                {"cluster": "alpha", "node": "alpha-n01", "gpu_uuid": "GPU-a1"},
                {"cluster": "alpha", "node": "alpha-n02", "gpu_uuid": "GPU-a2"},
                {"cluster": "beta", "node": "beta-n01", "gpu_uuid": "GPU-b1"},
            ]
        )
    )
    rows = frame(
        regression("2026-11-09"),
        regression("2026-11-09", metric="program_goodput"),
        regression("2026-11-08", entity="alpha-n01", grain="node"),
        regression("2026-11-10", entity="GPU-a2", grain="gpu", metric="sm_clock"),
        regression("2026-11-09", entity="fleet", grain="fleet", effect=-0.05),
        regression("2026-11-09", entity="beta-n01", grain="node"),  # another cluster: another incident
    )
    incidents = build_incidents(rows, topology)
    assert [(i["grain"], i["entity_id"], len(i["children"])) for i in incidents] == [
        ("cluster", "alpha", 3),
        ("node", "beta-n01", 0),
    ]
    alpha = incidents[0]
    assert set(alpha["metrics"]) == {"goodput", "program_goodput"} and len(alpha["regression_ids"]) == 5
    first = upsert_incidents(tmp_path, incidents, now=NOW)
    # the next run: a child's change point moved a day; the group (root alpha) is the same alert, updated
    moved = rows.copy()
    moved.loc[2, "change_date"] = date(2026, 11, 9)
    again = upsert_incidents(tmp_path, build_incidents(moved, topology), now=NOW)
    assert len(first.opened) == 2 and again.opened == [] and len(again.updated) == 1
    assert len(read_alerts(tmp_path)) == 2


def test_a_change_point_that_moves_by_up_to_two_days_does_not_realert(tmp_path):
    first = upsert(tmp_path, regression("2026-11-09"))
    assert len(first.opened) == 1
    for moved in ("2026-11-10", "2026-11-07", "2026-11-09"):
        again = upsert(tmp_path, regression(moved))
        assert again.opened == [] and again.expected == []
    assert len(read_alerts(tmp_path)) == 1
    alert = read_alerts(tmp_path)[0]
    assert [event["event"] for event in alert["history"]] == ["created", "updated", "updated", "updated"]
    assert alert["change_date"] == "2026-11-09"
    # three days away is another change point
    assert len(upsert(tmp_path, regression("2026-11-12")).opened) == 1


def test_float_noise_of_a_rebuild_is_not_new_evidence(tmp_path):
    upsert(tmp_path, regression(effect=-0.12))
    again = upsert(tmp_path, regression(effect=-0.12 * (1 + 1e-14)))
    assert again.unchanged == 1 and again.updated == []
    assert len(read_events(tmp_path)) == 1


def test_a_regression_that_returns_after_resolve_opens_a_new_alert(tmp_path):
    (old,) = upsert(tmp_path, regression("2026-11-09")).opened
    transition(tmp_path, old["alert_id"], "resolve", actor="ana", resolved_on=date(2026, 11, 15), now=NOW)

    assert upsert(tmp_path, regression("2026-11-10")).opened == []  # the old change point, seen again
    returned = upsert(tmp_path, regression("2026-11-17")).opened  # back after the resolution

    assert len(returned) == 1 and returned[0]["alert_id"] != old["alert_id"]
    assert [alert["status"] for alert in read_alerts(tmp_path)] == ["resolved", "open"]


def test_provisional_changes_page_marked_and_confirmation_updates_the_alert(tmp_path):
    rows = frame(
        regression("2026-11-09", verdict="confirmed", q_value=0.01),
        regression("2026-11-09", entity="beta", verdict="provisional", q_value=0.04),
    )
    incidents = build_incidents(rows)
    assert [(incident["entity_id"], incident["verdict"]) for incident in incidents] == [
        ("alpha", "confirmed"),
        ("beta", "provisional"),
    ]
    assert incidents[0]["metrics"]["goodput"]["q_value"] == 0.01
    assert build_incidents(frame(regression("2026-11-09")))[0]["verdict"] == "confirmed"  # no verdict column

    (opened,) = upsert(tmp_path, regression("2026-11-09", verdict="provisional")).opened
    assert opened["verdict"] == "provisional"
    later = upsert(tmp_path, regression("2026-11-09", verdict="confirmed"))
    assert later.opened == [] and [alert["verdict"] for alert in later.updated] == ["confirmed"]


# --------------------------------------------------------------------------- lifecycle


def test_lifecycle_and_invalid_transitions_are_rejected_with_reasons(tmp_path):
    (alert,) = upsert(tmp_path, regression()).opened
    alert_id = alert["alert_id"]

    transition(tmp_path, alert_id, "acknowledge", actor="ana", note="looking", now=NOW)
    with pytest.raises(AlertError, match="cannot notify alert .* it is acknowledged by ana"):
        transition(tmp_path, alert_id, "notify", actor="sensor", now=NOW)
    with pytest.raises(AlertError, match="it is acknowledged by ana"):
        transition(tmp_path, alert_id, "acknowledge", actor="bo", now=NOW)
    resolved = transition(tmp_path, alert_id[:6], "resolve", actor="bo", note="rolled back nccl", now=NOW)
    assert resolved["status"] == "resolved" and resolved["resolved_by"] == "bo"
    for action in ("acknowledge", "resolve", "silence", "notify"):
        with pytest.raises(AlertError, match="it is resolved by bo"):
            transition(tmp_path, alert_id, action, until=date(2026, 12, 1), now=NOW)
    with pytest.raises(AlertError, match="no alert 'ffffffff'"):
        transition(tmp_path, "ffffffff", "resolve", now=NOW)

    history = [(event["event"], event["actor"], event.get("note")) for event in read_alerts(tmp_path)[0]["history"]]
    assert history == [
        ("created", "detection", None),
        ("acknowledged", "ana", "looking"),
        ("resolved", "bo", "rolled back nccl"),
    ]
    assert all(event["at"] for event in read_events(tmp_path))


def test_silence_needs_a_future_day(tmp_path):
    (alert,) = upsert(tmp_path, regression()).opened
    with pytest.raises(AlertError, match="that day has passed"):
        transition(tmp_path, alert["alert_id"], "silence", until=date(2026, 11, 19), now=NOW)
    with pytest.raises(AlertError, match="needs --until"):
        transition(tmp_path, alert["alert_id"], "silence", now=NOW)


def test_a_torn_last_line_is_ignored_and_fenced_off(tmp_path):
    upsert(tmp_path, regression())
    with open(tmp_path / "events.jsonl", "a") as handle:
        handle.write('{"event": "acknowledged", "alert_')  # crash mid-append
    assert read_alerts(tmp_path)[0]["status"] == "open"
    transition(tmp_path, read_alerts(tmp_path)[0]["alert_id"], "acknowledge", actor="ana", now=NOW)
    assert read_alerts(tmp_path)[0]["status"] == "acknowledged"


def test_concurrent_writers_lose_no_event(tmp_path):
    ids = [alert["alert_id"] for alert in upsert(tmp_path, *(regression(entity=f"c{i}") for i in range(8))).opened]
    threads = [
        threading.Thread(target=transition, args=(tmp_path, alert_id, "acknowledge"), kwargs={"now": NOW})
        for alert_id in ids
    ]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert {alert["status"] for alert in read_alerts(tmp_path)} == {"acknowledged"}


# --------------------------------------------------------------------------- severity


def test_impact_is_lost_gpu_hours_per_day_from_the_metric_tree():
    levels = [0.36] * 8 + [0.36 * 0.85] * 6
    (incident,) = build_incidents(frame(regression("2026-11-09", metric="runtime_goodput", effect=-0.15)))
    installed = pd.DataFrame(
        [
            {
                "grain": "cluster",
                "entity_id": "alpha",
                "metric_date": START + timedelta(days=d),
                "installed_gs": 32 * 86400,
            }
            for d in range(14)
        ]
    )
    size = impact(incident, tree(levels, noise=0.0), installed)
    # G_before 0.36 x 15% = 0.054 of 768 installed GPU-hours a day
    assert size["goodput_before"] == pytest.approx(0.36)
    assert size["lost_gpu_hours_per_day"] == pytest.approx(0.054 * 768)
    assert size["lost_h100_equivalent_hours_per_day"] == pytest.approx(0.054 * 768)
    assert size["lost_gpu_hours_per_day_ci"] == pytest.approx([0.36 * 0.10 * 768, 0.36 * 0.14 * 768])
    no_gs = impact(incident, tree(levels, noise=0.0), None)
    assert no_gs["lost_gpu_hours_per_day"] is None and no_gs["lost_h100_equivalent_hours_per_day"] > 0


def test_severity_weighs_impact_and_confidence_not_the_p_value_alone():
    config = AlertConfig()
    assert confidence({"p_value": 0.002, "ci_low": -0.14, "ci_high": -0.10, "relative_effect": -0.12}) == "high"
    assert confidence({"p_value": 0.002, "ci_low": -0.3, "ci_high": -0.01, "relative_effect": -0.12}) == "medium"
    assert confidence({"p_value": 0.0001, "ci_low": -0.2, "ci_high": 0.01, "relative_effect": -0.1}) == "low"
    assert severity(150, "high", config) == "critical"
    assert severity(150, "low", config) == "major"
    assert severity(5, "high", config) == "minor"  # tiny p-value, tiny loss: minor
    assert severity(None, "high", config) == "major"


# --------------------------------------------------------------------------- annotations


def test_an_annotated_change_is_expected_stored_and_never_sent(tmp_path, capsys):
    home = tmp_path
    (home / "annotations.yaml").write_text(
        """
annotations:
  - id: nccl-rollout
    kind: rollout
    scope: {cluster: [alpha]}
    start: 2026-11-08T00:00:00Z
    end: 2026-11-09T00:00:00Z
    note: NCCL 2.22 rollout, expect a dip
  - kind: maintenance
    scope: {cluster: gamma}
    start: 2026-11-01
    end: 2026-11-30
"""
    )
    alerts_dir = home / "alerts"
    result = upsert(alerts_dir, regression(), regression(entity="beta"), annotations=load_annotations(home))
    assert [a["entity_id"] for a in result.expected] == ["alpha"]
    assert [a["entity_id"] for a in result.opened] == ["beta"]
    assert result.expected[0]["expected_by"]["id"] == "nccl-rollout"

    report = deliver(alerts_dir, AlertConfig(), now=NOW)
    sent = [json.loads(line) for line in (alerts_dir / "alerts.jsonl").read_text().splitlines()]
    assert [body["entity_id"] for body in sent] == ["beta"] and len(report.delivered) == 1

    from perf_assets.cli import main

    assert main(["alerts", "--data-dir", str(home)]) == 0
    default = capsys.readouterr().out
    assert main(["alerts", "list", "--all", "--data-dir", str(home)]) == 0
    everything = capsys.readouterr().out
    assert "alpha" not in default and "beta" in default
    assert "expected" in everything and "alpha" in everything


# --------------------------------------------------------------------------- auto-resolve


def test_auto_resolve_when_the_metric_is_back_for_n_days(tmp_path):
    dip = [0.36] * 8 + [0.30] * 5
    recovered = tree(dip + [0.359, 0.361, 0.36, 0.36])  # back from 2026-11-14
    still_low = tree(dip + [0.31, 0.30, 0.36, 0.30])  # one good day is not a recovery
    (alert,) = upsert(tmp_path, regression("2026-11-09", effect=-0.167, ci=(-0.18, -0.15))).opened

    assert recovery_day(alert, still_low, days=3) is None
    assert recovery_day(alert, recovered, days=3) == date(2026, 11, 16)
    assert auto_resolve(tmp_path, still_low, AlertConfig(auto_resolve_days=3), now=NOW) == []
    (resolved,) = auto_resolve(tmp_path, recovered, AlertConfig(auto_resolve_days=3), now=NOW)

    assert resolved["status"] == "resolved" and resolved["resolved_by"] == "auto-resolve"
    assert resolved["resolution"] == "auto" and resolved["resolved_on"] == "2026-11-16"
    assert auto_resolve(tmp_path, recovered, AlertConfig(auto_resolve_days=3), now=NOW) == []


# --------------------------------------------------------------------------- routing and sinks


ROUTES = {
    "sinks": {
        "file": {"type": "jsonl"},
        "ml-slack": {"type": "slack", "channel": "#ml-perf", "token_env": "PERFWH_TEST_SLACK_TOKEN"},
        "ops-hook": {"type": "webhook", "url": "http://127.0.0.1:9/x"},
    },
    "owners": {"alpha": "team-ml", "beta": "team-infra"},
    "routes": [
        {"match": {"owner": "team-ml"}, "sinks": ["ml-slack", "file"]},
        {"match": {"cluster": ["beta", "delta"]}, "sinks": ["ops-hook"]},
    ],
    "default_route": ["file"],
}


def test_routing_by_owner_and_cluster_with_a_default_route():
    config = AlertConfig.from_dict(ROUTES)

    def alert(entity: str, grain: str = "cluster") -> dict:
        return {"entity_id": entity, "grain": grain, "owner": config.owners.get(entity), "severity": "major"}

    assert routed_sinks(alert("alpha"), config) == ["ml-slack", "file"]
    assert routed_sinks(alert("beta"), config) == ["ops-hook"]
    assert routed_sinks(alert("fleet", "fleet"), config) == ["file"]
    with pytest.raises(AlertError, match="route names sink 'nope'"):
        AlertConfig.from_dict(ROUTES | {"default_route": ["nope"]})


def test_an_alert_below_its_cluster_takes_the_clusters_owner_and_routes(tmp_path):
    """A node's or a rollout cohort's incident is its cluster's: it carries the cluster, its owner and its routes."""
    from perf_assets.lib.topology import Topology

    config = AlertConfig.from_dict(ROUTES)
    topology = Topology.from_cluster_nodes({"alpha": ["a1", "a2", "a3"], "beta": ["b1", "b2"]})
    result = upsert(
        tmp_path,
        regression(entity="b1", grain="node"),
        regression(entity="a1+a2", grain="cohort", metric="program_goodput"),
        config=config,
        topology=topology,
    )
    by_entity = {alert["entity_id"]: alert for alert in result.opened}
    assert (by_entity["b1"]["cluster"], by_entity["b1"]["owner"]) == ("beta", "team-infra")
    assert (by_entity["a1+a2"]["cluster"], by_entity["a1+a2"]["owner"]) == ("alpha", "team-ml")
    assert routed_sinks(by_entity["b1"], config) == ["ops-hook"]
    assert routed_sinks(by_entity["a1+a2"], config) == ["ml-slack", "file"]


def test_slack_is_skipped_with_a_log_line_when_not_configured(tmp_path, monkeypatch):
    monkeypatch.delenv("PERFWH_TEST_SLACK_TOKEN", raising=False)
    upsert(tmp_path, regression(), config=AlertConfig.from_dict(ROUTES))

    report = deliver(tmp_path, AlertConfig.from_dict(ROUTES), now=NOW)

    assert report.delivered == [(read_alerts(tmp_path)[0]["alert_id"], "file")]
    assert report.skipped == [
        "sink 'ml-slack' (slack) skipped: environment variable PERFWH_TEST_SLACK_TOKEN (the Slack token) is not set"
    ]
    assert read_alerts(tmp_path)[0]["status"] == "notified"


def test_silence_holds_delivery_until_it_expires(tmp_path):
    (alert,) = upsert(tmp_path, regression()).opened
    transition(tmp_path, alert["alert_id"], "silence", until=date(2026, 11, 22), actor="ana", now=NOW)

    held = deliver(tmp_path, AlertConfig(), now=datetime(2026, 11, 22, 23, tzinfo=timezone.utc))
    assert held.delivered == [] and held.silenced == 1 and read_alerts(tmp_path)[0]["status"] == "open"

    sent = deliver(tmp_path, AlertConfig(), now=datetime(2026, 11, 23, 0, 1, tzinfo=timezone.utc))
    assert len(sent.delivered) == 1 and read_alerts(tmp_path)[0]["status"] == "notified"


class Receiver:
    """A webhook on 127.0.0.1 that answers from a script: 500s, a hang longer than the timeout, then 200."""

    def __init__(self, script: list[str], secret: str, port: int = 0):
        self.script = list(script)
        self.secret = secret
        self.requests: list[dict] = []
        outer = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self):  # noqa: N802
                body = self.rfile.read(int(self.headers["Content-Length"]))
                expected = "sha256=" + hmac.new(outer.secret.encode(), body, hashlib.sha256).hexdigest()
                step = outer.script.pop(0) if outer.script else "ok"
                outer.requests.append(
                    {
                        "at": time.monotonic(),
                        "step": step,
                        "signature_ok": hmac.compare_digest(self.headers.get(SIGNATURE_HEADER, ""), expected),
                        "key": json.loads(body)["idempotency_key"],
                        "body": json.loads(body),
                    }
                )
                if step == "hang":
                    time.sleep(1.0)
                try:
                    self.send_response(int(step) if step.isdigit() else 500 if step == "hang" else 200)
                    self.end_headers()
                except OSError:
                    pass

            def log_message(self, *args):
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", port), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}/hook"
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def accepted(self) -> list[dict]:
        return [r for r in self.requests if r["step"] == "ok" and r["signature_ok"]]

    def close(self):
        self.server.shutdown()
        self.server.server_close()


@pytest.fixture
def receiver(monkeypatch):
    monkeypatch.setenv("PERFWH_TEST_HOOK_SECRET", "s3cret")
    servers = []

    def start(script, port=0):
        servers.append(Receiver(script, "s3cret", port))
        return servers[-1]

    yield start
    for server in servers:
        server.close()


def hook_config(url: str) -> AlertConfig:
    return AlertConfig.from_dict(
        {
            "sinks": {
                "hook": {
                    "type": "webhook",
                    "url": url,
                    "secret_env": "PERFWH_TEST_HOOK_SECRET",
                    "attempts": 3,
                    "backoff_s": 0.1,
                    "timeout_s": 0.3,
                }
            },
            "default_route": ["hook"],
        }
    )


def test_webhook_retries_with_backoff_keeps_pending_and_delivers_exactly_once(tmp_path, receiver):
    server = receiver(["500", "500", "hang", "ok"])
    config = hook_config(server.url)
    upsert(tmp_path, regression())

    first = deliver(tmp_path, config, now=NOW)  # 500, 500, timeout: all attempts of the tick fail
    assert first.delivered == [] and first.pending == 1 and "timed out" in first.failed[0][2].lower()
    assert read_alerts(tmp_path)[0]["status"] == "open"
    hook = read_alerts(tmp_path)[0]["deliveries"]["hook"]
    assert (hook["status"], hook["attempts"], hook["error"]) == ("failed", 3, first.failed[0][2])
    gaps = [b["at"] - a["at"] for a, b in zip(server.requests, server.requests[1:])]
    assert gaps[0] >= 0.1 and gaps[1] >= 0.2  # backoff 0.1 s, then 0.2 s

    second = deliver(tmp_path, config, now=NOW)  # the next tick: accepted
    third = deliver(tmp_path, config, now=NOW)  # nothing left to send

    assert len(second.delivered) == 1 and third.delivered == [] and len(server.requests) == 4
    assert len(server.accepted()) == 1 and all(r["signature_ok"] for r in server.requests)
    assert len({r["key"] for r in server.requests}) == 1
    stored = read_alerts(tmp_path)[0]
    assert stored["status"] == "notified" and stored["deliveries"]["hook"]["status"] == "delivered"


def test_a_resolved_page_is_closed_on_every_sink_that_got_it_once_and_retried_until_it_lands(tmp_path, receiver):
    server = receiver(["ok", "500", "500", "500", "ok"])
    config = hook_config(server.url)
    paged, never_sent = upsert(tmp_path, regression(), regression(entity="beta")).opened
    transition(tmp_path, never_sent["alert_id"], "silence", until=date(2026, 11, 25), actor="ana", now=NOW)
    assert len(deliver(tmp_path, config, now=NOW).delivered) == 1  # beta is silenced: only alpha is paged

    transition(tmp_path, paged["alert_id"], "resolve", actor="ana", now=NOW)
    transition(tmp_path, never_sent["alert_id"], "resolve", actor="ana", now=NOW)
    failing = deliver(tmp_path, config, now=NOW)  # the close fails 3 times: it stays owed
    assert failing.closed == [] and failing.pending == 1
    closed = deliver(tmp_path, config, now=NOW)
    again = deliver(tmp_path, config, now=NOW)

    assert closed.closed == [(paged["alert_id"], "hook", "resolved")] and again.closed == []
    keys = [r["key"] for r in server.accepted()]
    assert len(keys) == 2 and len(set(keys)) == 2  # the page and its close, each once, with its own key
    stored = {a["alert_id"]: a for a in read_alerts(tmp_path)}
    assert stored[paged["alert_id"]]["closing_deliveries"]["hook"]["status"] == "delivered"
    assert stored[never_sent["alert_id"]]["closing_deliveries"] == {}  # never paged: nothing to close


def test_an_annotation_written_after_the_page_makes_the_alert_expected_and_closes_it(tmp_path):
    alerts_dir = tmp_path / "alerts"
    paged, untouched = upsert(alerts_dir, regression(), regression(entity="beta")).opened
    deliver(alerts_dir, AlertConfig(), now=NOW)
    (tmp_path / "annotations.yaml").write_text(
        "annotations:\n  - id: late-window\n    scope: {cluster: alpha}\n    start: 2026-11-09\n"
        "    end: 2026-11-09\n    note: switch firmware, announced late\n"
    )

    changed = apply_annotations(alerts_dir, load_annotations(tmp_path), now=NOW)
    assert apply_annotations(alerts_dir, load_annotations(tmp_path), now=NOW) == []  # idempotent
    report = deliver(alerts_dir, AlertConfig(), now=NOW)

    assert [a["alert_id"] for a in changed] == [paged["alert_id"]]
    stored = {a["alert_id"]: a for a in read_alerts(alerts_dir)}
    assert stored[paged["alert_id"]]["status"] == "expected"
    assert stored[paged["alert_id"]]["expected_by"]["id"] == "late-window"
    assert stored[untouched["alert_id"]]["status"] == "notified"
    sent = [json.loads(line) for line in (alerts_dir / "alerts.jsonl").read_text().splitlines()]
    assert [(b["entity_id"], b["notice"]) for b in sent] == [
        ("alpha", "opening"),
        ("beta", "opening"),
        ("alpha", "expected"),
    ]
    assert report.closed == [(paged["alert_id"], "file", "expected")]
    with pytest.raises(AlertError, match="it is expected"):
        transition(alerts_dir, paged["alert_id"], "acknowledge", actor="ana", now=NOW)


def test_a_withdrawn_annotation_reopens_the_expected_alert_and_pages_it_again_under_new_keys(tmp_path, receiver):
    server = receiver([])
    config = hook_config(server.url)
    alerts_dir = tmp_path / "alerts"
    annotations_file = tmp_path / "annotations.yaml"
    beta_window = "  - id: beta-window\n    scope: {cluster: beta}\n    start: 2026-11-09\n    end: 2026-11-09\n"
    annotations_file.write_text("annotations:\n" + beta_window)
    result = upsert(alerts_dir, regression(), regression(entity="beta"), annotations=load_annotations(tmp_path))
    (paged,), (born_expected,) = result.opened, result.expected  # beta is stored expected, never paged
    deliver(alerts_dir, config, now=NOW)  # alpha is paged
    annotations_file.write_text(
        "annotations:\n  - id: fw-window\n    scope: {cluster: alpha}\n    start: 2026-11-09\n    end: 2026-11-09\n"
        + beta_window
    )
    report = deliver(alerts_dir, config, now=NOW, annotations=load_annotations(tmp_path))
    assert report.expected == [paged["alert_id"]] and report.reopened == []

    # The firmware window was a mistake and is deleted; beta's window is narrowed to other days.
    annotations_file.write_text(
        "annotations:\n  - id: beta-window\n    scope: {cluster: beta}\n    start: 2026-10-01\n    end: 2026-10-02\n"
    )
    assert deliver(alerts_dir, config, now=NOW, annotations=None).reopened == []  # unreadable file: nothing moves
    report = deliver(alerts_dir, config, now=NOW, annotations=load_annotations(tmp_path))
    again = deliver(alerts_dir, config, now=NOW, annotations=load_annotations(tmp_path))

    assert sorted(report.reopened) == sorted([paged["alert_id"], born_expected["alert_id"]])
    assert again.reopened == [] and again.delivered == []  # idempotent
    stored = {a["alert_id"]: a for a in read_alerts(alerts_dir)}
    assert {alert["status"] for alert in stored.values()} == {"notified"}
    assert stored[paged["alert_id"]]["generation"] == 1
    assert stored[paged["alert_id"]]["withdrawn_annotation"]["id"] == "fw-window"
    notices = [(r["body"]["entity_id"], r["body"]["notice"]) for r in server.accepted()]
    assert notices == [("alpha", "opening"), ("alpha", "expected"), ("alpha", "reopened"), ("beta", "opening")]
    keys = [r["key"] for r in server.accepted()]
    assert len(set(keys)) == len(keys)  # a receiver deduplicating on keys shows every one

    transition(alerts_dir, paged["alert_id"], "resolve", actor="ana", now=NOW)
    closed = deliver(alerts_dir, config, now=NOW)
    assert closed.closed == [(paged["alert_id"], "hook", "resolved")]  # the new generation's close is owed again
    assert len({r["key"] for r in server.accepted()}) == 5


def test_a_crash_between_send_and_record_resends_with_the_same_key(tmp_path, receiver):
    server = receiver([])
    config = AlertConfig.from_dict(
        {
            "sinks": {
                "hook": hook_config(server.url).sinks["hook"],
                "file": {"type": "jsonl"},
            },
            "default_route": ["hook", "file"],
        }
    )
    upsert(tmp_path, regression())

    def crash_after_send(alerts_dir, events):
        if events[0]["event"] == "delivered":
            raise KeyboardInterrupt("killed after the send, before the record")
        append_events(alerts_dir, events)

    with pytest.raises(KeyboardInterrupt):
        deliver(tmp_path, config, now=NOW, record=crash_after_send)
    assert read_alerts(tmp_path)[0]["deliveries"]["hook"]["status"] == "sending"

    report = deliver(tmp_path, config, now=NOW)

    assert sorted(sink for _, sink in report.delivered) == ["file", "hook"]
    assert len(server.requests) == 2 and len({r["key"] for r in server.requests}) == 1  # at-least-once, one key
    assert len((tmp_path / "alerts.jsonl").read_text().splitlines()) == 1  # the file sink checks the key
    assert read_alerts(tmp_path)[0]["status"] == "notified"
    assert deliver(tmp_path, config, now=NOW).delivered == []


def test_cli_ack_resolve_silence_and_errors(tmp_path, capsys):
    from perf_assets.cli import main

    (alert,) = upsert(tmp_path / "alerts", regression()).opened
    home = ["--data-dir", str(tmp_path)]

    assert main(["alerts", "ack", alert["alert_id"], "--by", "ana", "--note", "on it", *home]) == 0
    assert main(["alerts", "ack", alert["alert_id"], *home]) == 2
    assert "cannot acknowledge alert" in capsys.readouterr().err
    assert main(["alerts", "silence", alert["alert_id"], "--until", "2099-01-01", *home]) == 0
    assert main(["alerts", "list", "--json", *home]) == 0
    (listed,) = [json.loads(line) for line in capsys.readouterr().out.splitlines() if line.startswith("{")]
    assert listed["status"] == "acknowledged" and listed["silenced_until"] == "2099-01-01"
    assert main(["alerts", "resolve", alert["alert_id"], "--by", "bo", *home]) == 0
    assert main(["alerts", "list", "--status", "resolved", *home]) == 0
    assert alert["alert_id"] in capsys.readouterr().out


def test_a_failing_webhook_is_tried_once_per_tick_and_everything_stays_pending(tmp_path, receiver):
    server = receiver(["500"] * 20)
    upsert(tmp_path, regression(entity="alpha"), regression(entity="beta"))

    for tick in (1, 2):
        report = deliver(tmp_path, hook_config(server.url), now=NOW)
        assert report.pending == 2 and len(report.failed) == 1
        assert len(server.requests) == 3 * tick  # three attempts for the first alert, the second waits
    assert {alert["status"] for alert in read_alerts(tmp_path)} == {"open"}


def _free_loopback_port() -> int:
    import socket

    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def test_webhook_down_for_several_sensor_ticks_then_back_delivers_every_alert_once(tmp_path, receiver, monkeypatch):
    """The alert_delivery sensor ticks while the webhook refuses connections (2 ticks), then answers 503 and
    hangs (2 ticks), then is back: each of three alerts arrives exactly once, and later ticks send nothing."""
    import dagster as dg
    import yaml

    from perf_assets.defs.alerts.automation import alert_delivery

    port = _free_loopback_port()  # nothing listens here yet: connection refused
    url = f"http://127.0.0.1:{port}/hook"
    (tmp_path / "alerts.yaml").write_text(yaml.safe_dump({"sinks": hook_config(url).sinks, "default_route": ["hook"]}))
    monkeypatch.setenv("PERFWH_HOME", str(tmp_path))
    opened = upsert(tmp_path / "alerts", *(regression(entity=name) for name in ("alpha", "beta", "gamma"))).opened
    assert len(opened) == 3

    def tick() -> str:
        return alert_delivery(dg.build_sensor_context()).skip_message

    for _ in range(2):
        assert tick().startswith("delivered 0, failed 1, notified 0 alert(s), 0 closing notice(s); 3 pending")
    server = receiver(["503", "503", "hang", "503", "503", "503"], port=port)
    for _ in range(2):  # up, but failing: three attempts on the first alert, the others wait
        assert tick().startswith("delivered 0, failed 1, notified 0 alert(s), 0 closing notice(s); 3 pending")
    assert tick().startswith("delivered 3, failed 0, notified 3 alert(s), 0 closing notice(s); 0 pending")
    for _ in range(2):
        assert tick().startswith("delivered 0, failed 0, notified 0 alert(s), 0 closing notice(s); 0 pending")

    accepted = [request["key"] for request in server.accepted()]
    assert len(accepted) == 3 and len(set(accepted)) == 3  # every alert once, by its idempotency key
    assert len(server.requests) == 9  # 6 failed attempts (2 ticks x 3) + 3 deliveries, nothing after
    stored = read_alerts(tmp_path / "alerts")
    assert {alert["status"] for alert in stored} == {"notified"}
    assert {alert["deliveries"]["hook"]["idempotency_key"] for alert in stored} == set(accepted)


def test_secrets_from_the_environment_never_reach_logs_the_store_or_the_cli(tmp_path, receiver, monkeypatch, caplog):
    """The webhook secret and the Slack token are read from the environment only; failed and successful
    deliveries, the sensor's logs and skip message, the CLI's output and every file of the store hold neither."""
    import logging
    import subprocess
    import sys

    import dagster as dg
    import yaml

    from perf_assets.defs.alerts.automation import alert_delivery

    secret, token = "whsec-9f3c1d7e5b2a48a0", "xoxb-5522-7c1e9d0a3f6b"
    monkeypatch.setenv("PERFWH_TEST_HOOK_SECRET", secret)
    monkeypatch.setenv("SLACK_TOKEN", token)
    monkeypatch.setenv("PERFWH_HOME", str(tmp_path))
    server = Receiver(["500", "500", "500"], secret)
    try:
        hook = hook_config(server.url).sinks["hook"]
        sinks = {"hook": hook, "slack": {"type": "slack", "channel": "#perf"}, "file": {"type": "jsonl"}}
        (tmp_path / "alerts.yaml").write_text(yaml.safe_dump({"sinks": sinks, "default_route": list(sinks)}))
        upsert(tmp_path / "alerts", regression(entity="alpha"), regression(entity="beta"))

        caplog.set_level(logging.DEBUG)
        context = dg.build_sensor_context()
        said = [alert_delivery(context).skip_message]  # the webhook fails: a warning per failure
        cli = subprocess.run(
            [str(Path(sys.executable).parent / "perfwh"), "alerts", "deliver", "--data-dir", str(tmp_path)],
            capture_output=True,
            text=True,
            env=dict(os.environ),
            timeout=120,
        )
        listed = subprocess.run(
            [
                str(Path(sys.executable).parent / "perfwh"),
                "alerts",
                "list",
                "--all",
                "--json",
                "--data-dir",
                str(tmp_path),
            ],
            capture_output=True,
            text=True,
            env=dict(os.environ),
            timeout=120,
        )
    finally:
        server.close()
    assert cli.returncode == 0 and "delivered" in cli.stdout
    assert len(server.accepted()) == 2 and all(request["signature_ok"] for request in server.requests)
    said += [cli.stdout, cli.stderr, listed.stdout, listed.stderr, caplog.text]
    for path in sorted(tmp_path.rglob("*")):
        if path.is_file():
            said.append(path.read_bytes().decode("utf-8", "replace"))
    assert "failed 1" in said[0] and "slack" in "".join(said)  # the tick failed, the Slack sink was mentioned
    for text in said:
        assert secret not in text and token not in text


def test_secrets_written_into_alerts_yaml_are_refused():
    for sink in (
        {"type": "webhook", "url": "http://127.0.0.1:9/hook", "secret": "abc"},
        {"type": "webhook", "url": "https://user:hunter2@hooks.example/x"},
        {"type": "slack", "channel": "#perf", "token": "xoxb-1"},
    ):
        with pytest.raises(AlertError, match="secrets come only from the environment"):
            AlertConfig.from_dict({"sinks": {"s": sink}, "default_route": ["s"]})


def test_a_second_delivery_pass_does_not_run_while_one_holds_the_lock(tmp_path):
    from filelock import FileLock

    upsert(tmp_path, regression())
    with FileLock(str(tmp_path / ".delivery.lock")):
        done = threading.Thread(
            target=lambda: results.append(deliver(tmp_path, AlertConfig(), now=NOW, lock_timeout_s=0.1))
        )
        results: list = []
        done.start()
        done.join()
    assert results[0].delivered == [] and "another delivery pass" in results[0].skipped[0]
    assert len(deliver(tmp_path, AlertConfig(), now=NOW).delivered) == 1


@pytest.mark.slow
def test_the_demo_build_opens_alerts_sized_in_gpu_hours(demo_home, tmp_path, capsys):
    """The demo's NCCL/image rollout on alpha: an open alert with its loss, confidence and severity."""
    import shutil

    from perf_assets.cli import main

    alerts = read_alerts(demo_home.alerts_dir)
    # the goodput group of cluster alpha (companions such as power_ratio are alert groups of their own)
    alpha = [
        alert
        for alert in alerts
        if alert["entity_id"] == "alpha"
        and alert.get("metric_group") == "goodput"
        and alert["direction"] == "regression"
    ]  # (improvements are stored too, as never-paged notices)
    assert len(alpha) == 1 and alpha[0]["status"] == "open"
    size = alpha[0]["impact"]
    assert size["installed_gpu_hours_per_day"] > 0 and size["lost_gpu_hours_per_day"] > 0
    assert (
        size["lost_gpu_hours_per_day_ci"][0] <= size["lost_gpu_hours_per_day"] <= size["lost_gpu_hours_per_day_ci"][1]
    )
    assert alpha[0]["severity"] in ("minor", "major", "critical") and alpha[0]["confidence"] in ("high", "medium")

    copy = tmp_path / "home"
    shutil.copytree(demo_home.alerts_dir, copy / "alerts")  # deliver on a copy: the session's store stays as built
    assert main(["alerts", "deliver", "--data-dir", str(copy)]) == 0
    assert main(["alerts", "list", "--data-dir", str(copy)]) == 0
    listed = capsys.readouterr().out
    assert "notified" in listed and "alpha" in listed
    # one page per open alert; an alert resolved before any delivery pass (beta's 2-day fragmentation burst
    # after its 11-05 fault and maintenance: back to its level by 11-07) is never paged
    paged = [alert for alert in alerts if alert["status"] == "open"]
    assert paged and len((copy / "alerts" / "alerts.jsonl").read_text().splitlines()) == len(paged)


def test_perfwh_alerts_deliver_applies_annotations_before_paging(tmp_path, capsys):
    from perf_assets.cli import main

    upsert(tmp_path / "alerts", regression(), regression(entity="beta"))
    (tmp_path / "annotations.yaml").write_text(
        "annotations:\n  - id: drain\n    scope: {cluster: beta}\n    start: 2026-11-08\n    end: 2026-11-10\n"
    )
    assert main(["alerts", "deliver", "--data-dir", str(tmp_path)]) == 0
    line = capsys.readouterr().out
    sent = [json.loads(x) for x in (tmp_path / "alerts" / "alerts.jsonl").read_text().splitlines()]
    assert "delivered 1," in line and "1 turned expected by annotations" in line
    assert [b["entity_id"] for b in sent] == ["alpha"]  # beta's page never went out


def test_an_incident_rooted_at_a_node_one_day_and_its_cluster_another_is_one_alert(tmp_path):
    from perf_assets.lib.topology import Topology

    topology = Topology.from_cluster_nodes({"alpha": ["alpha-n01", "alpha-n02"], "beta": ["beta-n01"]})
    (cluster,) = upsert(tmp_path, regression("2026-11-07"), topology=topology).opened
    # a later run roots the same incident at a node of alpha (a day later): the cluster's alert stands
    later = upsert(tmp_path, regression("2026-11-08", grain="node", entity="alpha-n01"), topology=topology)
    # a node of another cluster, and a fleet-grain change, are other incidents
    other = upsert(tmp_path, regression("2026-11-08", grain="node", entity="beta-n01"), topology=topology)
    fleet = upsert(tmp_path, regression("2026-11-08", grain="fleet", entity="fleet"), topology=topology)
    assert later.opened == [] and later.updated == [] and later.unchanged == 1
    assert read_alerts(tmp_path)[0]["summary"] == cluster["summary"]
    assert len(other.opened) == 1 and len(fleet.opened) == 1
    assert len(read_alerts(tmp_path)) == 3
    # without the inventory topology, only the same entity matches (the old rule)
    assert len(upsert(tmp_path / "plain", regression("2026-11-07")).opened) == 1
    assert len(upsert(tmp_path / "plain", regression("2026-11-08", grain="node", entity="alpha-n01")).opened) == 1


def test_the_clusters_change_seen_alone_later_is_the_alert_that_holds_it_as_a_child(tmp_path):
    """bench/replay_alerts.py on `incidents` seed 1: the HBM decay's alert is headed by node h200-n04 (10-17) and holds
    its cluster's HBM probe of 10-15 as a child; a later run saw the cluster's power alone on 10-14, three days from
    the node's day but one from the child's: the alert's, not a second page."""
    from perf_assets.lib.topology import Topology

    topology = Topology.from_cluster_nodes({"alpha": ["alpha-n01", "alpha-n02"]})
    node = regression("2026-11-17", grain="node", entity="alpha-n01", metric="probe_hbm_bw_ratio")
    child = regression("2026-11-15", metric="probe_hbm_bw_ratio")
    incidents = build_incidents(frame(node, child), topology)  # one group, headed by the node (its own HBM probe)
    (alert,) = upsert_incidents(tmp_path, incidents, now=NOW, topology=topology).opened
    assert alert["grain"] == "node" and [c["change_date"] for c in alert["children"]] == ["2026-11-15"]
    alone = upsert(tmp_path, regression("2026-11-14", metric="power_ratio"), topology=topology)
    assert alone.opened == [] and alone.unchanged == 1
    # four days from the node's day and three from the child's: another change
    assert len(upsert(tmp_path, regression("2026-11-12", metric="power_ratio"), topology=topology).opened) == 1


def test_one_incident_whose_headline_moves_to_an_entity_it_held_as_a_child_is_one_alert(tmp_path):
    """fleet-1k seed 113 (bench/replay_alerts.py): the bad batch of h100-east opened on rack r9's fault rate of 10-01
    with rack r10's of 10-02 as a child; the 10-09 run rooted the same group at r10, r9 its child, and paged again.
    Two racks are not nested: only the children say it is one incident."""
    from perf_assets.lib.topology import Topology

    topology = Topology.from_frame(
        pd.DataFrame(
            [
                {"cluster": "alpha", "rack": f"alpha-r{r}", "node": f"alpha-n{r}{i}", "gpu_uuid": f"GPU-{r}{i}"}
                for r in (1, 2, 3)
                for i in (1, 2)
            ]
        )
    )

    def rack(name: str, day: str, child: tuple[str, str] | None) -> dict:
        (incident,) = build_incidents(
            frame(regression(day, grain="rack", entity=name, metric="xid_node_faults", effect=9.0, ci=(3.4, 20.0))),
            topology,
        )
        if child is None:
            return incident | {"children": []}
        return incident | {
            "children": [{"grain": "rack", "entity_id": child[0], "metric": "xid_node_faults", "change_date": child[1]}]
        }

    first = upsert_incidents(tmp_path, [rack("alpha-r1", "2026-10-01", ("alpha-r2", "2026-10-02"))], now=NOW)
    rerooted = upsert_incidents(
        tmp_path, [rack("alpha-r2", "2026-10-02", ("alpha-r1", "2026-10-01"))], now=NOW, topology=topology
    )
    assert len(first.opened) == 1 and rerooted.opened == [] and rerooted.unchanged == 1
    # the held child alone, a later run's root with no children: still the alert that holds it
    alone = upsert_incidents(tmp_path, [rack("alpha-r2", "2026-10-03", None)], now=NOW, topology=topology)
    assert alone.opened == [] and alone.unchanged == 1
    # a rack neither held nor holding: another incident; the held rack three days from its child's day: another
    other = upsert_incidents(tmp_path, [rack("alpha-r3", "2026-10-02", None)], now=NOW, topology=topology)
    later = upsert_incidents(tmp_path, [rack("alpha-r2", "2026-10-05", None)], now=NOW, topology=topology)
    assert len(other.opened) == 1 and len(later.opened) == 1


def test_one_incident_seen_under_two_headlines_that_share_a_child_is_one_alert(tmp_path):
    """fleet-1k seed 126 (bench/replay_alerts.py): the h100-east bad batch opened on 10-04 as rack r10's fault rate of
    10-02 with node n37's as a child; the 10-05 run, without the rack's row, rooted it at n35 (rack r9) with n37's
    row of 10-02 as its child: neither headline holds the other, and it paged again."""
    from perf_assets.lib.topology import Topology

    topology = Topology.from_frame(
        pd.DataFrame(
            [
                {"cluster": "alpha", "rack": f"alpha-r{r}", "node": f"alpha-n{r}{i}", "gpu_uuid": f"GPU-{r}{i}"}
                for r in (1, 2)
                for i in (1, 2)
            ]
        )
    )

    def faults(grain: str, name: str, day: str, children: list[tuple[str, str]]) -> dict:
        row = regression(day, grain=grain, entity=name, metric="xid_node_faults", effect=9.0, ci=(3.4, 20.0))
        (incident,) = build_incidents(frame(row), topology)
        return incident | {
            "children": [
                {"grain": "node", "entity_id": node, "metric": "xid_node_faults", "change_date": when}
                for node, when in children
            ]
        }

    first = upsert_incidents(
        tmp_path, [faults("rack", "alpha-r2", "2026-10-02", [("alpha-n21", "2026-10-02")])], now=NOW, topology=topology
    )
    again = upsert_incidents(
        tmp_path, [faults("node", "alpha-n11", "2026-10-02", [("alpha-n21", "2026-10-02")])], now=NOW, topology=topology
    )
    assert len(first.opened) == 1 and again.opened == [] and again.unchanged == 1
    # children of other series (another node), or of the same series three days apart: another incident
    other = upsert_incidents(
        tmp_path, [faults("node", "alpha-n12", "2026-10-02", [("alpha-n22", "2026-10-02")])], now=NOW, topology=topology
    )
    later = upsert_incidents(
        tmp_path, [faults("node", "alpha-n12", "2026-10-06", [("alpha-n21", "2026-10-05")])], now=NOW, topology=topology
    )
    assert len(other.opened) == 1 and len(later.opened) == 1


# --------------------------------------------------------------------------- dedup across daily runs (bench/soak.py)


def test_a_change_point_that_walks_back_a_day_per_run_keeps_updating_one_alert(tmp_path):
    """The soak's inc-bad-batch-a100: opened on 6 Oct, then 5, 4, 3 Oct as days arrived: one alert, updated."""
    (alert,) = upsert(tmp_path, regression("2026-10-06")).opened
    for day in ("2026-10-05", "2026-10-04", "2026-10-03"):
        again = upsert(tmp_path, regression(day))
        assert again.opened == [] and [a["alert_id"] for a in again.updated] == [alert["alert_id"]]
    (stored,) = read_alerts(tmp_path)
    assert stored["change_date"] == "2026-10-03" and stored["dedup_change_date"] == "2026-10-06"
    # the anchors are the opening day (6 Oct) and the current one (3 Oct): 9 Oct is 3 days from the one and 6
    # from the other, another change point, although the alert once held 5 Oct (a day held on the way is no anchor)
    assert len(upsert(tmp_path, regression("2026-10-09")).opened) == 1
    assert upsert(tmp_path, regression("2026-10-08")).opened == []  # within 2 days of both alerts: the nearer updates


def test_the_other_direction_or_another_scope_is_a_new_alert_while_the_first_is_open(tmp_path):
    from perf_assets.lib.topology import Topology

    topology = Topology.from_cluster_nodes({"alpha": ["alpha-n01", "alpha-n02"], "beta": ["beta-n01"]})
    (first,) = upsert(tmp_path, regression("2026-11-09", grain="node", entity="alpha-n01"), topology=topology).opened
    sibling = upsert(tmp_path, regression("2026-11-09", grain="node", entity="alpha-n02"), topology=topology)
    grown = upsert(tmp_path, regression("2026-11-10"), topology=topology)  # its cluster: the group grew upwards
    improved = upsert(
        tmp_path,
        regression("2026-11-09", grain="node", entity="alpha-n01", kind="improvement", effect=0.1, ci=(0.08, 0.12)),
        topology=topology,
    )
    assert len(sibling.opened) == 1  # a node beside it is another scope
    assert grown.opened == [] and grown.unchanged >= 1  # the cluster contains the open node alert
    assert improved.opened == []  # build_incidents keeps regressions only: an improvement never opens a page
    assert [a["status"] for a in read_alerts(tmp_path)] == ["open", "open"] and first["direction"] == "regression"


def test_an_improvement_is_stored_as_a_notice_never_sent_and_never_auto_resolved(tmp_path):
    rows = frame(regression("2026-11-09", kind="improvement", effect=0.1, ci=(0.08, 0.12)))
    notices = build_incidents(rows, change_kind="improvement")
    assert build_incidents(rows) == [] and len(notices) == 1 and notices[0]["direction"] == "improvement"
    result = upsert_incidents(tmp_path, notices, now=NOW)
    (notice,) = result.expected
    assert result.opened == [] and notice["expected_by"]["id"] == "improvement"
    config = AlertConfig()
    report = deliver(tmp_path, config, now=NOW)
    assert report.delivered == [] and not (tmp_path / "alerts.jsonl").exists()
    # the level stays up after the change: "back at the old level" is a regression's recovery, not this
    assert auto_resolve(tmp_path, tree([0.36] * 8 + [0.40] * 12), config, now=NOW) == []
    # the same improvement seen by the next run updates nothing new; a regression there is a new page
    assert upsert_incidents(tmp_path, notices, now=NOW).opened == []
    assert len(upsert(tmp_path, regression("2026-11-09")).opened) == 1


def test_a_knock_on_group_that_grows_by_an_unexplained_change_pages_it(tmp_path):
    """The soak's inc-thermal-h100-n04-gpu3: a GPU's throttling (11th) chained to a job-peer knock-on on its
    node (9th), rooted at their cluster, was taken in by the silent knock-on alert and never paged."""
    from perf_assets.lib.topology import Topology

    topology = Topology.from_frame(
        pd.DataFrame(
            [
                {"cluster": "alpha", "node": "alpha-n01", "gpu_uuid": "GPU-a1"},
                {"cluster": "alpha", "node": "alpha-n02", "gpu_uuid": "GPU-a2"},
            ]
        )
    )
    knock_on = regression(
        "2026-11-09", grain="node", entity="alpha-n01", metric="program_goodput", expected_because="job peers: n02"
    )
    (silent,) = upsert(tmp_path, knock_on, topology=topology).expected
    assert upsert(tmp_path, knock_on, topology=topology).opened == []  # the knock-on seen again stays silent
    grown = (
        knock_on,
        regression("2026-11-11", grain="gpu", entity="GPU-a1", metric="thermal_ok", effect=-0.9, ci=(-0.95, -0.85)),
        regression("2026-11-11", metric="thermal_ok", effect=-0.1, ci=(-0.12, -0.08)),
    )
    (paged,) = upsert(tmp_path, *grown, topology=topology).opened
    assert (paged["grain"], paged["entity_id"], paged["change_date"]) == ("cluster", "alpha", "2026-11-11")
    assert upsert(tmp_path, *grown, topology=topology).opened == []  # the next run updates it, opens nothing
    assert [(a["alert_id"], a["status"]) for a in read_alerts(tmp_path)] == [
        (silent["alert_id"], "expected"),
        (paged["alert_id"], "open"),
    ]


def test_the_soak_counts_each_paged_alert_for_one_label_and_improvements_as_notices(tmp_path):
    """bench/soak.py's score: an alert near two labels counts once (the nearest start, then the same
    direction); an alert stored expected and resolved later never paged; an improvement label is noticed."""
    import sys

    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
    from bench.soak import score_alerts
    from perf_assets.lib.topology import Topology

    topology = Topology.from_cluster_nodes({"h100": ["h100-n01", "h100-n02"], "h200": ["h200-n01"]})

    def label(incident_id, start, cluster, direction="regression", **extra):
        scope = {"clusters": [cluster], "nodes": [], "gpus": []}
        return {
            "incident_id": incident_id,
            "start": f"{start}T00:00:00Z",
            "direction": direction,
            "grain": "cluster",
            "cluster": cluster,
            "scope": scope,
        } | extra

    labels = [
        label("ckpt", "2026-10-19", "h100"),
        label("mix", "2026-10-21", "h100", direction="improvement"),
        label("torch", "2026-10-23", "h200", direction="improvement"),
        label("decoy", "2026-10-20", "h200", decoy=True),
    ]
    ckpt = upsert(tmp_path, regression("2026-10-19", entity="h100"), topology=topology).opened[0]
    knock_on = regression("2026-10-22", grain="node", entity="h200-n01", expected_because="job peers")
    silent = upsert(tmp_path, knock_on, topology=topology).expected[0]
    transition(tmp_path, silent["alert_id"], "resolve", actor="auto-resolve", now=NOW)
    better = regression("2026-10-23", entity="h200", kind="improvement", effect=0.08, ci=(0.06, 0.1))
    upsert_incidents(tmp_path, build_incidents(frame(better), change_kind="improvement"), now=NOW)

    score = score_alerts(read_alerts(tmp_path), labels, topology, delivered={ckpt["alert_id"]: 1})
    assert score["alerts_per_label"] == {"ckpt": [ckpt["alert_id"]], "mix": [], "torch": []}
    assert score["alerts_matching_several_labels"] == {ckpt["alert_id"]: ["ckpt", "mix"]}
    assert score["alerts"] == 1 and score["stored_never_paged"] == [silent["alert_id"]]
    assert score["decoys_alerted"] == {} and list(score["improvement_labels_noticed"]) == ["torch"]
    assert score["improvement_labels_not_noticed"] == ["mix"]


def test_the_nodes_of_one_rollout_paged_before_their_cluster_moved_are_one_alert(tmp_path):
    """fleet-1k seed 118's daily path: the a100-west driver rollout of 10-21 showed on the 10-22 run as nodes' program
    goodput split on 10-20, each a group of its own (no cluster row yet), and paged as three alerts."""
    from perf_assets.lib.topology import Topology

    topology = Topology.from_cluster_nodes({"a100": [f"a100-n{i:02d}" for i in range(1, 33)]})
    driver = {"component": "driver", "from": "550.54.15", "to": "560.35.03", "nodes": 32, "of_nodes": 32}
    first_at = {"first_at": "2026-10-21T00:00:00+00:00"}

    def node(name: str, change: dict | None, day: str = "2026-10-20", **extra) -> dict:
        coinciding = json.dumps([change | first_at] if change else [])
        return (
            regression(
                day,
                grain="node",
                entity=name,
                metric="program_goodput",
                ci=(-0.09, -0.01),
                coinciding_changes=coinciding,
            )
            | extra
        )

    run = [node("a100-n01", driver), node("a100-n29", driver), node("a100-n30", driver)]
    result = upsert_incidents(tmp_path, build_incidents(frame(*run), topology), now=NOW, topology=topology)
    assert [a["entity_id"] for a in result.opened] == ["a100-n01"] and result.unchanged == 2
    # another rollout (other versions) on a node of the cluster, and a node with no rollout: their own alerts
    cuda = driver | {"component": "cuda", "from": "12.4", "to": "12.6"}
    later = upsert_incidents(
        tmp_path, build_incidents(frame(node("a100-n02", cuda), node("a100-n03", None)), topology), now=NOW
    )
    assert sorted(a["entity_id"] for a in later.opened) == ["a100-n02", "a100-n03"]


def test_the_soak_gives_an_alert_between_two_labels_to_the_one_of_its_factor(tmp_path):
    """fleet-1k seed 113's replay: a100-west-n25's fault rate of 10-12 lies one day from the checkpoint slowdown
    (10-11, runtime goodput) and one from the bad hardware batch (10-13, availability): it is the batch's."""
    import sys

    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
    from bench.soak import score_alerts
    from perf_assets.lib.topology import Topology

    topology = Topology.from_cluster_nodes({"a100": ["a100-n25", "a100-n26"]})
    scope = {"clusters": ["a100"], "nodes": [], "gpus": []}
    labels = [
        {"incident_id": i, "start": f"{day}T00:00:00Z", "direction": "regression", "scope": scope, "factor": f}
        | {"grain": "cluster", "cluster": "a100"}
        for i, day, f in (("ckpt", "2026-10-11", "runtime_goodput"), ("batch", "2026-10-13", "availability"))
    ]
    faults = regression(
        "2026-10-12", grain="node", entity="a100-n25", metric="xid_node_faults", effect=14.0, ci=(2, 49)
    ) | {"top_factor": "availability"}  # as detection writes a fault rate's row
    (alert,) = upsert(tmp_path, faults, topology=topology).opened
    assert alert["factors"] == ["availability"]
    score = score_alerts(read_alerts(tmp_path), labels, topology, delivered={alert["alert_id"]: 1})
    assert score["alerts_per_label"] == {"ckpt": [], "batch": [alert["alert_id"]]}
    # seed 126: the batch's alert also holds its job peers' lost progress (runtime goodput among its factors); its
    # headline's factor, availability, still says whose it is
    both = [a | {"factors": ["availability", "runtime_goodput"]} for a in read_alerts(tmp_path)]
    assert both[0]["top_factor"] == "availability"
    score = score_alerts(both, labels, topology, delivered={alert["alert_id"]: 1})
    assert score["alerts_per_label"] == {"ckpt": [], "batch": [alert["alert_id"]]}


def test_the_soak_gives_labels_their_alerts_one_to_one_before_counting_a_second_page(tmp_path):
    """fleet-1k seed 126's replay: h200-east-n10's HBM decay alert (10-16, its probes' day) lies a day from the decay
    (10-15) and on the day of the half-cluster driver rollout (10-16), whose cohort alert pages it: each label its
    own alert, not the rollout two and the decay none. A third alert of the rollout is a second page of it."""
    import sys

    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
    from bench.soak import score_alerts
    from perf_assets.lib.topology import Topology

    nodes = [f"h200-n{i:02d}" for i in range(1, 5)]
    topology = Topology.from_cluster_nodes({"h200": nodes})
    labels = [
        {"incident_id": i, "start": f"{day}T00:00:00Z", "direction": "regression", "factor": "program_goodput"}
        | {"grain": "node", "cluster": "h200", "scope": {"clusters": ["h200"], "nodes": scope, "gpus": []}}
        for i, day, scope in (("driver", "2026-10-16", nodes[:2]), ("hbm", "2026-10-15", nodes[1:2]))
    ]

    def paged(name: str, grain: str, entity: str, day: str = "2026-10-16") -> dict:
        opened = [{"event": "created", "status": "open"}]
        return {"alert_id": name, "status": "open", "grain": grain, "entity_id": entity, "change_date": day} | {
            "direction": "regression",
            "history": opened,
        }

    decay = paged("decay", "node", "h200-n02")
    rollout = paged("rollout", "cohort", "h200-n01+h200-n02")
    alerts = [decay | {"top_factor": "program_goodput"}, rollout | {"top_factor": "program_goodput"}]
    score = score_alerts(alerts, labels, topology, delivered={})
    assert score["alerts_per_label"] == {"driver": ["rollout"], "hbm": ["decay"]}
    again = paged("again", "node", "h200-n01") | {"top_factor": "program_goodput"}
    score = score_alerts([*alerts, again], labels, topology, delivered={})
    assert score["alerts_per_label"] == {"driver": ["rollout", "again"], "hbm": ["decay"]}
    assert score["alerted_more_than_once"] == {"driver": ["rollout", "again"]}


def test_the_soak_counts_the_work_leaving_a_mix_shifts_cluster_as_its_change_back_not_a_page(tmp_path):
    """fleet-1k seeds 127 and 128's replays: the shift of work to a100-west ended on 10-26, and a100-west's allocation
    fell on 10-26/27; that alert counted as a second page of a100-west-n05's thermal throttle (10-26). evaluation.py
    counts such a group as the receiving side's end, neither a match nor a false alarm; so does the soak now."""
    import sys

    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
    from bench.soak import score_alerts
    from perf_assets.lib.topology import Topology

    topology = Topology.from_cluster_nodes({"a100": ["a100-n01", "a100-n05"], "h100": ["h100-n01"]})
    scope = {"gpus": [], "nodes": []}
    labels = [
        {"incident_id": "thermal", "start": "2026-10-26T00:00:00Z", "direction": "regression", "grain": "gpu"}
        | {
            "factor": "program_goodput",
            "cluster": "a100",
            "scope": scope | {"clusters": ["a100"], "nodes": ["a100-n05"]},
        },
        {"incident_id": "mix", "start": "2026-10-20T00:00:00Z", "end": "2026-10-26T00:00:00Z", "grain": "fleet"}
        | {"direction": "regression", "factor": "allocation", "attribution": "mix", "cluster": "a100"}
        | {"scope": scope | {"clusters": ["a100", "h100"]}},
    ]

    def paged(name: str, grain: str, entity: str, day: str, factor: str) -> dict:
        return {"alert_id": name, "status": "open", "grain": grain, "entity_id": entity, "change_date": day} | {
            "direction": "regression",
            "top_factor": factor,
            "history": [{"event": "created", "status": "open"}],
        }

    alerts = [
        paged("throttle", "node", "a100-n05", "2026-10-26", "program_goodput"),
        paged("sending", "cluster", "h100", "2026-10-20", "allocation"),
        paged("leaving", "cluster", "a100", "2026-10-27", "allocation"),
    ]
    score = score_alerts(alerts, labels, topology, delivered={})
    assert score["alerts_per_label"] == {"thermal": ["throttle"], "mix": ["sending"]}
    assert score["changes_back"] == {"leaving": "mix"} and score["alerted_more_than_once"] == {}
    assert score["alerts_matching_no_label"] == []
    # without the shift's end in its labels, the same alert is a second page of the throttle it lies near
    ongoing = [labels[0], {key: value for key, value in labels[1].items() if key != "end"}]
    score = score_alerts(alerts, ongoing, topology, delivered={})
    assert score["changes_back"] == {} and score["alerted_more_than_once"] == {"thermal": ["throttle", "leaving"]}


def test_two_incidents_of_one_run_on_one_alert_do_not_toggle_its_change_day(tmp_path):
    (alert,) = upsert(tmp_path, regression("2026-10-19")).opened
    # one run, two incidents of alpha 2 days apart (a companion's group and goodput's): the first one's evidence
    incidents = build_incidents(frame(regression("2026-10-19"))) + build_incidents(frame(regression("2026-10-21")))
    again = upsert_incidents(tmp_path, incidents, now=NOW)
    assert again.opened == [] and again.updated == [] and again.unchanged == 2
    assert [event["event"] for event in read_alerts(tmp_path)[0]["history"]] == ["created"]


# --------------------------------------------------------------------------- factors, escalation, gains (issue 7)


def test_of_two_incidents_of_one_run_on_one_alert_the_nearer_one_takes_it_not_the_first_sorted(tmp_path):
    """fleet-1k seed 128 (bench/replay_alerts.py): h100-west's rack power cap opened on 10-22; a run whose grouping
    mixed it with the image stall moved the alert to 10-20; the next runs held the image stall (10-18) and the power cap
    (10-22) as two incidents, and the image stall, sorted first, took the power cap's alert (re-dated to 10-18)."""

    def change(day: str, metric: str) -> dict:
        return regression(day, metric=metric, top_factor="program_goodput")

    (power,) = upsert(tmp_path, change("2026-10-22", "power_ratio")).opened
    moved = upsert(tmp_path, change("2026-10-20", "program_goodput"))
    assert [a["change_date"] for a in moved.updated] == ["2026-10-20"]
    both = build_incidents(frame(change("2026-10-18", "program_goodput"))) + build_incidents(
        frame(change("2026-10-22", "power_ratio"))
    )
    assert [i["change_date"] for i in both] == ["2026-10-18", "2026-10-22"]  # the image stall sorts first
    again = upsert_incidents(tmp_path, both, now=NOW)
    assert again.opened == [] and again.unchanged == 1
    assert [(a["alert_id"], a["change_date"], a["headline_metric"]) for a in again.updated] == [
        (power["alert_id"], "2026-10-22", "power_ratio")
    ]


def test_a_nodes_hardware_incident_inside_a_rollouts_alert_is_its_own_alert(tmp_path):
    """fleet-1k seeds 126-128 (bench/replay_alerts.py): h200-east-n10's HBM decay, seen from 10-16 on its probes,
    lay inside the alert of the driver rollout to half of h200-east (10-16), which n10 took too: the rollout's alert
    stood for it (nested, the same rollout) and the decay never paged. Grouping keeps such a node apart."""
    from perf_assets.lib.topology import Topology

    topology = Topology.from_cluster_nodes({"alpha": [f"alpha-n{i:02d}" for i in range(1, 9)]})
    driver = {"component": "driver", "from": "550.54.15", "to": "560.35.03", "nodes": 4, "of_nodes": 8}
    rollout = json.dumps([driver | {"first_at": "2026-10-16T00:00:00+00:00"}])

    def cause(dimension: str, value: str) -> str:
        return json.dumps([{"dimension": dimension, "value": value, "did_effect": -0.09}])

    cluster = regression(
        "2026-10-16",
        metric="program_goodput",
        coinciding_changes=rollout,
        cause_candidates=cause("driver", "560.35.03"),
    )
    (alert,) = upsert(tmp_path, cluster, topology=topology).opened
    assert alert["dedup_top_cause"]["dimension"] == "driver"

    def node(*metrics: str) -> list[dict]:
        rows = [
            regression(
                "2026-10-16",
                grain="node",
                entity="alpha-n03",
                metric=metric,
                coinciding_changes=rollout,
                cause_candidates=cause("node", "alpha-n03"),
            )
            for metric in metrics
        ]
        return build_incidents(frame(*rows), topology)

    # the node's program goodput alone: the rollout's step on it, the rollout's alert stands
    step = upsert_incidents(tmp_path, node("program_goodput"), now=NOW, topology=topology)
    assert step.opened == [] and step.unchanged == 1
    # with its HBM probe: a hardware incident of its own
    decay = upsert_incidents(tmp_path, node("program_goodput", "probe_hbm_bw_ratio"), now=NOW, topology=topology)
    assert [(a["entity_id"], sorted(a["metrics"])) for a in decay.opened] == [
        ("alpha-n03", ["probe_hbm_bw_ratio", "program_goodput"])
    ]


def test_two_incidents_of_other_factors_on_one_cluster_within_two_days_are_two_alerts(tmp_path):
    """The soak's h100-west: a checkpoint slowdown (runtime goodput) on 19 Oct absorbed the mix shift's side there
    (allocation, 21 Oct): same cluster, same direction, 2 days apart, so one dedup key and one alert."""
    checkpoint = regression("2026-10-19", entity="h100-west", metric="runtime_goodput", top_factor="runtime_goodput")
    mix = regression(
        "2026-10-21", entity="h100-west", metric="allocation", top_factor="allocation", effect=-0.2, ci=(-0.24, -0.16)
    )
    incidents = build_incidents(frame(checkpoint, mix))
    assert [(i["headline_metric"], i["factors"]) for i in incidents] == [
        ("runtime_goodput", ["runtime_goodput"]),
        ("allocation", ["allocation"]),
    ]
    both = upsert_incidents(tmp_path, incidents, now=NOW)
    assert [a["headline_metric"] for a in both.opened] == ["runtime_goodput", "allocation"]
    assert upsert_incidents(tmp_path, incidents, now=NOW).opened == []  # the next run: each updates its own
    # the checkpoint's alert first, the mix shift a run later: a second alert, not an update of the first
    (first,) = upsert(tmp_path / "later", checkpoint).opened
    later = upsert(tmp_path / "later", checkpoint, mix)
    assert [a["headline_metric"] for a in later.opened] == ["allocation"] and later.unchanged == 1
    # the same incident with an unknown factor (a companion-only group) still dedups
    companion = regression("2026-10-20", entity="h100-west", metric="clock_ratio", top_factor=None)
    assert build_incidents(frame(companion))[0]["factors"] == ["program_goodput"]
    unknown = regression("2026-10-20", entity="h100-west", metric="power_limit_w_ratio", top_factor=None)
    assert build_incidents(frame(unknown))[0]["factors"] == []
    assert upsert(tmp_path / "later", unknown).opened == []


def test_a_goodput_change_whose_top_factor_flips_with_noise_keeps_its_alert(tmp_path):
    """Two factors share goodput's fall; the next run's LMDI top is the other one (55 %): the same incident."""
    (alert,) = upsert(tmp_path, regression("2026-10-19", top_factor="runtime_goodput", top_factor_share=0.9)).opened
    flipped = upsert(tmp_path, regression("2026-10-20", top_factor="program_goodput", top_factor_share=0.55))
    assert flipped.opened == [] and [a["alert_id"] for a in flipped.updated] == [alert["alert_id"]]
    # a change that program goodput clearly carries, on the runtime alert's cluster 2 days later: another incident
    other = upsert(tmp_path, regression("2026-10-21", top_factor="program_goodput", top_factor_share=0.95))
    assert len(other.opened) == 1


def _installed(*entities: str) -> pd.DataFrame:
    return pd.DataFrame(
        [
            {"grain": "cluster", "entity_id": e, "metric_date": START + timedelta(days=d), "installed_gs": 32 * 86400}
            for e in entities
            for d in range(20)
        ]
    )


def _sized(*entities: str) -> dict:
    """Impact inputs: goodput 0.36 flat before the change on 32 installed GPUs (768 GPU-hours a day)."""
    levels = pd.concat([tree([0.36] * 20, entity=e, noise=0.0) for e in entities], ignore_index=True)
    return {"tree": levels, "installed_gs": _installed(*entities)}


def test_a_notified_alert_whose_severity_rises_is_escalated_once_retried_until_delivered(tmp_path, receiver):
    server = receiver(["ok", "500", "500", "500", "ok"])
    config = hook_config(server.url)
    sized = _sized("alpha")

    def run(effect: float):  # one detection run: alpha's change sized by its effect (0.36 x effect x 768 GPU-h)
        return upsert(tmp_path, regression(effect=effect, ci=(effect * 1.05, effect * 0.95)), config=config, **sized)

    (alert,) = run(-0.05).opened
    assert alert["severity"] == "major"
    deliver(tmp_path, config, now=NOW)  # the page
    grown = run(-0.40)  # 110.6 GPU-h/d: critical
    assert [a["alert_id"] for a in grown.escalated] == [alert["alert_id"]]
    failing = deliver(tmp_path, config, now=NOW)  # the escalation fails 3 times: it stays owed
    assert failing.escalated == [] and failing.pending == 1
    sent = deliver(tmp_path, config, now=NOW)
    assert sent.escalated == [(alert["alert_id"], "hook")] and "1 escalation notice(s)" in sent.line()
    # the same level again, a decrease, and back to critical: never re-sent
    assert run(-0.42).escalated == [] and run(-0.05).escalated == [] and run(-0.40).escalated == []
    assert deliver(tmp_path, config, now=NOW).escalated == []

    bodies = [r["body"] for r in server.accepted()]
    assert [b["notice"] for b in bodies] == ["opening", "escalated"] and len(
        {b["idempotency_key"] for b in bodies}
    ) == 2
    assert bodies[0]["impact_text"] == "LOST 13.8 GPU-h/d"
    assert bodies[1]["escalation_text"] == "ESCALATED major → critical: LOST 13.8 GPU-h/d → LOST 110.6 GPU-h/d"
    stored = read_alerts(tmp_path)[0]
    assert stored["status"] == "notified" and stored["escalations"] == 1 and stored["peak_severity"] == "critical"
    assert [e["event"] for e in stored["history"]].count("escalated") == 1


def test_an_acknowledged_alert_that_turns_critical_notifies_again_and_a_pending_page_goes_at_the_new_level(tmp_path):
    config = AlertConfig.from_dict(
        {
            "sinks": {"file": {"type": "jsonl"}, "oncall": {"type": "jsonl", "path": "alerts/oncall.jsonl"}},
            "routes": [{"match": {"severity": "critical"}, "sinks": ["file", "oncall"]}],
            "default_route": ["file"],
        }
    )
    sized = _sized("alpha", "beta")

    def run(effect: float):  # alpha and beta move alike
        rows = [regression(effect=effect, ci=(effect * 1.05, effect * 0.95), entity=e) for e in ("alpha", "beta")]
        return upsert(tmp_path / "alerts", *rows, config=config, **sized)

    acked, never_paged = run(-0.02).opened  # 5.5 GPU-h/d: minor
    transition(tmp_path / "alerts", never_paged["alert_id"], "silence", until=date(2026, 11, 20), actor="ana", now=NOW)
    deliver(tmp_path / "alerts", config, now=NOW)
    transition(tmp_path / "alerts", acked["alert_id"], "acknowledge", actor="ana", now=NOW)
    # beta's page was silenced before it went; silence ends, its severity rises: one page, at critical
    assert len(run(-0.40).escalated) == 2
    later = datetime(2026, 11, 21, 12, tzinfo=timezone.utc)
    report = deliver(tmp_path / "alerts", config, now=later)
    assert sorted(report.escalated) == [(acked["alert_id"], "file"), (acked["alert_id"], "oncall")]
    assert sorted(report.delivered) == [(never_paged["alert_id"], "file"), (never_paged["alert_id"], "oncall")]
    file_sink = [json.loads(line) for line in (tmp_path / "alerts" / "alerts.jsonl").read_text().splitlines()]
    assert [(b["entity_id"], b["notice"], b["severity"]) for b in file_sink] == [
        ("alpha", "opening", "minor"),
        ("beta", "opening", "critical"),  # pages first, then escalations
        ("alpha", "escalated", "critical"),
    ]
    assert deliver(tmp_path / "alerts", config, now=later).escalated == []
    assert [a["status"] for a in read_alerts(tmp_path / "alerts")] == ["acknowledged", "notified"]


def test_an_improvement_reads_as_a_gain_wherever_it_is_shown(tmp_path, capsys):
    """The store keeps −ΔG × hours (negative for an improvement); the CLI, the payload, Slack and the HTML page
    show GAINED, never a negative loss; a regression still reads LOST."""
    from perf_assets.cli import main
    from perf_assets.lib import html_report
    from perf_assets.lib.alert_delivery import payload, slack_text
    from perf_assets.lib.alert_text import impact_text
    from perf_assets.lib.paths import DataHome

    better = regression("2026-11-09", entity="beta", kind="improvement", effect=0.1, ci=(0.08, 0.12))
    sized = _sized("alpha", "beta")
    upsert(tmp_path / "alerts", regression(), **sized)
    upsert_incidents(tmp_path / "alerts", build_incidents(frame(better), change_kind="improvement"), now=NOW, **sized)
    worse, notice = read_alerts(tmp_path / "alerts")
    assert notice["impact"]["lost_gpu_hours_per_day"] == pytest.approx(-0.36 * 0.1 * 768)  # stored sign kept
    assert (
        impact_text(notice["impact"]) == "GAINED 27.6 GPU-h/d" and impact_text(worse["impact"]) == "LOST 33.2 GPU-h/d"
    )
    assert impact_text({"lost_h100_equivalent_hours_per_day": -3.0}) == "GAINED 3.0 H100-eq h/d"
    assert impact_text({}) == "impact unknown"

    assert main(["alerts", "list", "--all", "--data-dir", str(tmp_path)]) == 0
    table = capsys.readouterr().out
    assert "IMPACT" in table and "GAINED 27.6 GPU-h/d" in table and "LOST 33.2 GPU-h/d" in table and "-27" not in table
    assert main(["alerts", "list", "--status", "expected", "--json", "--data-dir", str(tmp_path)]) == 0
    assert json.loads(capsys.readouterr().out)["impact_text"] == "GAINED 27.6 GPU-h/d"

    body = payload(notice, "file")
    assert body["impact_text"] == "GAINED 27.6 GPU-h/d" and "GAINED 27.6 GPU-h/d" in slack_text(body)
    data = {
        "alert": notice,
        "evidence": notice["metrics"]["goodput"],
        "series": [],
        "unit": None,
        "band": None,
        "factors": {},
        "causes": [],
        "coinciding": [],
        "children": [],
        "units": {},
        "impact": notice["impact"],
        "split": {},
    }
    html = html_report.render_alert(data, DataHome(tmp_path))
    assert "gained GPU-hours per day" in html and "GAINED 27.6 GPU-h/d" in html and "lost GPU-hours" not in html
    assert "95 % CI of the gain</td><td" in html and "22.12 GPU-h/day to 33.18 GPU-h/day" in html


def test_a_share_that_is_bad_when_it_rises_is_sized_by_what_its_factor_loses():
    """The a100 fragmentation burst of `incidents` seed 1: idle-fragmented capacity 0.6 % -> 43 % (+6849 %) was
    sized as goodput × 69, a loss of −19960 GPU-h/d (a gain of 26 times the cluster); it is allocation's fall."""
    levels = pd.concat(
        [
            tree([0.36] * 20, noise=0.0),
            tree([0.9] * 20, node="allocation", noise=0.0),
            tree([0.006] * 20, node="idle_fragmented_share", noise=0.0).assign(direction=-1),
            tree([0.5] * 20, node="xid_node_faults", noise=0.0).assign(direction=-1),
        ],
        ignore_index=True,
    )
    burst = regression(metric="idle_fragmented_share", effect=68.5, ci=(65.0, 72.0), before_level=0.006)
    (incident,) = build_incidents(frame(burst))
    size = impact(incident, levels, _installed("alpha"))
    # allocation falls by 0.006 × 68.5 = 0.411 of 0.9: goodput 0.36 × 0.411 / 0.9 of 768 GPU-hours a day
    assert size["lost_gpu_hours_per_day"] == pytest.approx(0.36 * 0.006 * 68.5 / 0.9 * 768)
    assert size["lost_gpu_hours_per_day_ci"] == pytest.approx([0.36 * 0.006 * r / 0.9 * 768 for r in (65.0, 72.0)])
    assert severity(size["lost_gpu_hours_per_day"], "high", AlertConfig()) == "critical"
    # a fault count that rises is not a share of capacity: its size is unknown (severity major), never a gain
    faults = regression(metric="xid_node_faults", effect=3.0, ci=(1.5, 5.0), before_level=0.5)
    unknown = impact(build_incidents(frame(faults))[0], levels, _installed("alpha"))
    assert unknown["lost_gpu_hours_per_day"] is None and unknown["lost_h100_equivalent_hours_per_day"] is None
