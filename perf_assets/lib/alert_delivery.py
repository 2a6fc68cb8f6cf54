"""Delivering alerts: routing to sinks (JSON lines file, HTTP webhook, Slack) with a record per (alert, sink).

Per (alert, sink) the store records `delivery_started` (with the idempotency key) before the send and
`delivered` or `delivery_failed` after it. An alert that is not delivered to every sink of its route
stays pending and is retried on the next tick. A crash between a send and its record makes the next
tick send again with the same idempotency key in the payload (and the X-Perfwh-Idempotency-Key
header): at-least-once, deduplicated by the receiver on that key. The JSON lines sink checks the key
itself, so it is exactly-once. One delivery pass runs at a time (alerts/.delivery.lock).

Closing notices: when an alert that reached a sink is resolved (by hand or automatically) or turns
expected (an annotation added later), that sink is sent one closing notice (`notice: "resolved"` or
`"expected"`, its own idempotency key), recorded and retried the same way. Only sinks that got the
opening notice get the closing one; nothing is sent while the alert is silenced.

Reopened alerts: an expected alert whose annotation is withdrawn (deleted or narrowed in
annotations.yaml) is open again in a new generation (`generation` 1, 2, ...): each routed sink gets a
new page — `notice: "reopened"` where it had the earlier page, else `"opening"` — and every key of a
later generation differs from the earlier ones, so a receiver deduplicating on keys still shows it.

Escalations: when a later detection run raises an open, notified or acknowledged alert's severity to a level it
never had (`escalated` event, alerts.py), every sink of its route that was not already sent that level gets one
`notice: "escalated"` (before/after severity and impact; key per escalation number), recorded, retried and
deduplicated like a page. A sink whose opening page is still pending gets the page instead, at the new level.
"""

from __future__ import annotations

import hashlib
import hmac
import json
import logging
import os
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path

import requests
from filelock import FileLock, Timeout

from perf_assets.lib.alert_text import escalation_text, impact_text
from perf_assets.lib.alerts import (
    ACTIVE_STATUSES,
    AlertConfig,
    _event,
    _lock,
    append_events,
    apply_annotations,
    fold,
    is_silenced,
    read_events,
    reopen_unannotated,
    severity_rank,
    utcnow,
)

log = logging.getLogger("perfwh.alerts")
SIGNATURE_HEADER = "X-Perfwh-Signature"
DEFAULT_FILE_SINK = "alerts.jsonl"  # under alerts/


class SinkUnavailable(RuntimeError):
    """The sink cannot be used here (library not installed, token not set): skipped, not failed."""


CLOSING_NOTICES = ("resolved", "expected")  # the alert statuses that close a page


OPENING_NOTICES = ("opening", "reopened")  # the notices that page (recorded under `deliveries`)


def idempotency_key(alert_id: str, sink: str, notice: str = "opening", generation: int = 0, escalation: int = 0) -> str:
    seed = f"perfwh|{alert_id}|{sink}" if notice == "opening" else f"perfwh|{alert_id}|{sink}|{notice}"
    if notice == "escalated":  # one key per escalation: the second one (major -> critical) is a new message
        seed += f"|{escalation}"
    if generation:  # a reopened alert: new keys for its new page and its new close
        seed += f"|g{generation}"
    return hashlib.sha256(seed.encode()).hexdigest()[:24]


def payload(alert: dict, sink: str, notice: str = "opening") -> dict:
    """What every sink receives: the alert without its history and delivery records, plus the key.

    `notice` says what the message is: "opening" (the page), "reopened" (a page again after its
    annotation was withdrawn), "escalated" (its severity rose to a level it never had), "resolved" or
    "expected" (its close). `impact_text` is the impact as a person reads it ("LOST 12.3 GPU-h/d", an
    improvement "GAINED ..."); an escalation adds `escalation_text` ("ESCALATED major → critical: ...").
    """
    hidden = ("history", "deliveries", "closing_deliveries", "escalation_deliveries", "sent_severity")
    body = {k: v for k, v in alert.items() if k not in hidden}
    escalation = int((alert.get("escalation") or {}).get("escalation") or 0) if notice == "escalated" else 0
    key = idempotency_key(alert["alert_id"], sink, notice, alert.get("generation", 0), escalation)
    body |= {"idempotency_key": key, "sink": sink, "notice": notice, "impact_text": impact_text(alert.get("impact"))}
    if notice == "escalated":
        body["escalation_text"] = escalation_text(alert.get("escalation"))
    return body


def closing_sinks(alert: dict) -> list[str]:
    """Sinks still owed a closing notice: the alert is closed and they were sent its page (or an escalation)."""
    if alert["status"] not in CLOSING_NOTICES:
        return []
    closed = alert.get("closing_deliveries") or {}
    paged = [sink for sink, record in alert["deliveries"].items() if record.get("status") == "delivered"]
    paged += [sink for sink in alert.get("sent_severity") or {} if sink not in paged]
    return [sink for sink in paged if closed.get(sink, {}).get("status") != "delivered"]


def escalation_sinks(alert: dict, config: AlertConfig) -> list[str]:
    """Sinks still owed the notice of the alert's latest escalation: it is open, notified or acknowledged, the
    sink is on its route (at its severity now) and was never sent the escalated level. A sink whose opening
    page is still pending is not among them: that page goes out at the new level."""
    raised = alert.get("escalation")
    if not raised or alert["status"] not in ACTIVE_STATUSES:
        return []
    sent = alert.get("sent_severity") or {}
    owed = []
    for sink in routed_sinks(alert, config):
        if alert["status"] == "open" and alert["deliveries"].get(sink, {}).get("status") != "delivered":
            continue  # the page is still owed
        if severity_rank(sent.get(sink)) < severity_rank(raised["to_severity"]):
            owed.append(sink)
    return owed


def sign(secret: str, body: bytes) -> str:
    return "sha256=" + hmac.new(secret.encode(), body, hashlib.sha256).hexdigest()


def routed_sinks(alert: dict, config: AlertConfig) -> list[str]:
    """Sinks of every route whose `match` fits the alert's owner / cluster / job / grain; else the default.

    A route's match keys: `owner`, `cluster`, `job`, `grain`, `severity` (each one value or a list);
    all given keys must fit. Sinks are the union over the matching routes, in config order.
    """
    facts = {
        "owner": alert.get("owner"),
        # a node, rack, cohort or GPU alert is its cluster's (alerts.upsert_incidents stores it from the topology)
        "cluster": alert["entity_id"] if alert["grain"] == "cluster" else alert.get("cluster"),
        "job": alert["entity_id"] if alert["grain"] == "job" else None,
        "grain": alert["grain"],
        "severity": alert.get("severity"),
    }
    chosen: list[str] = []
    for route in config.routes:
        match = route.get("match") or {}
        fits = all(
            facts.get(key) is not None and str(facts[key]) in map(str, value if isinstance(value, list) else [value])
            for key, value in match.items()
        )
        if fits:
            chosen.extend(name for name in route.get("sinks", []) if name not in chosen)
    return chosen or list(config.default_route)


# --------------------------------------------------------------------------- sinks


@dataclass
class SendOutcome:
    ok: bool
    attempts: int
    detail: str = ""
    waits: list[float] = field(default_factory=list)


def send_jsonl(spec: dict, body: dict, alerts_dir: Path) -> SendOutcome:
    path = Path(spec.get("path") or alerts_dir / DEFAULT_FILE_SINK)
    if not path.is_absolute():
        path = alerts_dir.parent / path
    path.parent.mkdir(parents=True, exist_ok=True)
    with FileLock(str(path) + ".lock", timeout=60):
        if path.exists():
            for line in path.read_text(encoding="utf-8").splitlines():
                if body["idempotency_key"] in line:
                    return SendOutcome(True, 0, f"already in {path}")
        with open(path, "a", encoding="utf-8") as handle:
            handle.write(json.dumps(body, sort_keys=True, default=str) + "\n")
            handle.flush()
            os.fsync(handle.fileno())
    return SendOutcome(True, 1, str(path))


def send_webhook(spec: dict, body: dict, sleep: Callable[[float], None] = time.sleep) -> SendOutcome:
    """POST the JSON body; retries with exponential backoff (backoff_s · 2^k) on errors, 5xx and timeouts."""
    data = json.dumps(body, sort_keys=True, default=str).encode()
    headers = {"Content-Type": "application/json", "X-Perfwh-Idempotency-Key": body["idempotency_key"]}
    secret_env = spec.get("secret_env")
    if secret_env:
        secret = os.environ.get(secret_env)
        if not secret:
            raise SinkUnavailable(f"environment variable {secret_env} (the webhook secret) is not set")
        headers[SIGNATURE_HEADER] = sign(secret, data)
    attempts = int(spec.get("attempts", 3))
    backoff = float(spec.get("backoff_s", 1.0))
    timeout = float(spec.get("timeout_s", 5.0))
    detail = ""
    waits = []
    for attempt in range(1, attempts + 1):
        try:
            response = requests.post(spec["url"], data=data, headers=headers, timeout=timeout)
            if 200 <= response.status_code < 300:
                return SendOutcome(True, attempt, f"HTTP {response.status_code}", waits)
            detail = f"HTTP {response.status_code}"
            if 400 <= response.status_code < 500 and response.status_code not in (408, 429):
                return SendOutcome(False, attempt, detail + " (not retried)", waits)
        except requests.RequestException as error:
            detail = f"{type(error).__name__}: {error}"
        if attempt < attempts:
            wait = backoff * 2 ** (attempt - 1)
            waits.append(wait)
            sleep(wait)
    return SendOutcome(False, attempts, detail, waits)


def send_slack(spec: dict, body: dict) -> SendOutcome:
    """chat.postMessage through dagster-slack's SlackResource (optional: pip install dagster-slack)."""
    token_env = spec.get("token_env", "SLACK_TOKEN")
    token = os.environ.get(token_env)
    if not token:
        raise SinkUnavailable(f"environment variable {token_env} (the Slack token) is not set")
    try:
        from dagster_slack import SlackResource
    except ImportError:
        raise SinkUnavailable("dagster-slack is not installed (pip install dagster-slack==0.29.27)") from None
    text = slack_text(body)
    try:
        SlackResource(token=token).get_client().chat_postMessage(channel=spec["channel"], text=text)
    except Exception as error:  # slack_sdk raises SlackApiError and network errors
        return SendOutcome(False, 1, f"{type(error).__name__}: {error}")
    return SendOutcome(True, 1, spec["channel"])


def slack_text(body: dict) -> str:
    """The Slack message of a payload: the notice, severity, summary, impact read as LOST or GAINED, the ids."""
    notice = body.get("notice", "opening")
    prefix = {"resolved": "RESOLVED ", "expected": "EXPECTED ", "reopened": "REOPENED "}.get(notice, "")
    size = body.get("impact_text") or impact_text(body.get("impact"))
    if notice == "escalated":
        head = f"{body.get('escalation_text') or 'ESCALATED'}; [{body.get('severity', '?')}] {body['summary']}"
    else:
        head = f"{prefix}[{body.get('severity', '?')}] {body['summary']}; {size}"
    text = f"{head} (alert {body['alert_id']}, key {body['idempotency_key']})"
    if notice == "expected" and body.get("expected_by"):
        text += f"; covered by annotation {body['expected_by'].get('id')}: {body['expected_by'].get('note', '')}"
    if notice == "reopened" and body.get("withdrawn_annotation"):
        text += f"; annotation {body['withdrawn_annotation'].get('id')} no longer covers it"
    return text


def check_available(spec: dict) -> None:
    """Raise SinkUnavailable when this sink cannot be used here (before anything is recorded)."""
    if spec["type"] == "webhook" and spec.get("secret_env") and not os.environ.get(spec["secret_env"]):
        raise SinkUnavailable(f"environment variable {spec['secret_env']} (the webhook secret) is not set")
    if spec["type"] == "slack":
        token_env = spec.get("token_env", "SLACK_TOKEN")
        if not os.environ.get(token_env):
            raise SinkUnavailable(f"environment variable {token_env} (the Slack token) is not set")
        try:
            import dagster_slack  # noqa: F401
        except ImportError:
            raise SinkUnavailable("dagster-slack is not installed (pip install dagster-slack==0.29.27)") from None


def send(spec: dict, body: dict, alerts_dir: Path, sleep: Callable[[float], None] = time.sleep) -> SendOutcome:
    kind = spec["type"]
    if kind == "jsonl":
        return send_jsonl(spec, body, alerts_dir)
    if kind == "webhook":
        return send_webhook(spec, body, sleep=sleep)
    if kind == "slack":
        return send_slack(spec, body)
    raise SinkUnavailable(f"unknown sink type {kind!r}")


# --------------------------------------------------------------------------- one delivery pass


@dataclass
class DeliveryReport:
    delivered: list[tuple[str, str]] = field(default_factory=list)  # (alert_id, sink)
    failed: list[tuple[str, str, str]] = field(default_factory=list)  # (alert_id, sink, detail)
    skipped: list[str] = field(default_factory=list)  # log lines: sinks unavailable here
    notified: list[str] = field(default_factory=list)
    closed: list[tuple[str, str, str]] = field(default_factory=list)  # (alert_id, sink, notice)
    expected: list[str] = field(default_factory=list)  # alerts an annotation turned expected in this pass
    reopened: list[str] = field(default_factory=list)  # expected alerts whose annotation was withdrawn
    escalated: list[tuple[str, str]] = field(default_factory=list)  # (alert_id, sink): escalation notices sent
    pending: int = 0
    silenced: int = 0

    def line(self) -> str:
        return (
            f"delivered {len(self.delivered)}, failed {len(self.failed)}, notified {len(self.notified)} alert(s), "
            f"{len(self.closed)} closing notice(s); "
            + (f"{len(self.escalated)} escalation notice(s); " if self.escalated else "")
            + (f"{len(self.expected)} turned expected by annotations; " if self.expected else "")
            + (f"{len(self.reopened)} reopened (annotation withdrawn); " if self.reopened else "")
            + f"{self.pending} pending, {self.silenced} silenced"
            + (f"; skipped: {'; '.join(self.skipped)}" if self.skipped else "")
        )


def pending_alerts(alerts_dir: Path, now: datetime) -> list[dict]:
    """Open alerts not silenced: what a delivery pass sends (expected/acknowledged/resolved never are)."""
    alerts = fold(read_events(alerts_dir)).values()
    return [alert for alert in alerts if alert["status"] == "open" and not is_silenced(alert, now)]


def deliver(
    alerts_dir: Path,
    config: AlertConfig,
    *,
    now: datetime | None = None,
    actor: str = "delivery",
    sleep: Callable[[float], None] = time.sleep,
    record: Callable[[Path, list[dict]], None] = append_events,
    budget_s: float | None = None,
    lock_timeout_s: float = 600.0,
    annotations: list[dict] | None = None,
) -> DeliveryReport:
    """Send every pending alert to each sink of its route not yet delivered; record each outcome.

    `annotations` (annotations.yaml, as loaded) are applied first, so an alert covered by an
    annotation written since detection ran is not paged (and one already paged is closed), and an
    expected alert whose annotation was withdrawn is reopened and paged again. None (the default, or
    annotations.yaml could not be read) leaves every alert's status as it is.

    One pass at a time (alerts/.delivery.lock; a pass that cannot take it within `lock_timeout_s`
    does nothing). A sink that fails in this pass is not tried again for the other alerts of the
    pass (they stay pending), and no send starts after `budget_s` seconds (a sensor tick is short).
    """
    report = DeliveryReport()
    alerts_dir.mkdir(parents=True, exist_ok=True)
    pass_lock = FileLock(str(alerts_dir / ".delivery.lock"), timeout=lock_timeout_s)
    try:
        pass_lock.acquire()
    except Timeout:
        report.skipped.append("another delivery pass holds alerts/.delivery.lock")
        return report
    try:
        if annotations is not None:
            report.reopened = [a["alert_id"] for a in reopen_unannotated(alerts_dir, annotations, now=now)]
            report.expected = [a["alert_id"] for a in apply_annotations(alerts_dir, annotations, now=now)]
        _deliver_pass(alerts_dir, config, report, now or utcnow(), actor, sleep, record, budget_s)
    finally:
        pass_lock.release()
    return report


def _record_outcome(
    record, alerts_dir: Path, alert_id: str, sink: str, key: str, actor: str, outcome, tags: dict
) -> None:
    fields = {"sink": sink, "idempotency_key": key, "attempts": outcome.attempts} | tags
    if outcome.ok:
        event = _event("delivered", alert_id, utcnow(), actor, detail=outcome.detail, **fields)
    else:
        event = _event("delivery_failed", alert_id, utcnow(), actor, error=outcome.detail, **fields)
    with _lock(alerts_dir):
        record(alerts_dir, [event])


def _send_notice(alerts_dir, config, report, alert, sink, notice, actor, sleep, record) -> bool | None:
    """Send one notice of one alert to one sink and record it: True sent, False failed, None sink unavailable."""
    spec = config.sinks[sink]
    try:
        check_available(spec)
    except SinkUnavailable as why:
        message = f"sink {sink!r} ({spec['type']}) skipped: {why}"
        if message not in report.skipped:
            report.skipped.append(message)
            log.warning(message)
        return None
    alert_id = alert["alert_id"]
    body = payload(alert, sink, notice)
    key = body["idempotency_key"]
    tags = _notice_tags(alert, body, notice)
    with _lock(alerts_dir):
        record(
            alerts_dir, [_event("delivery_started", alert_id, utcnow(), actor, sink=sink, idempotency_key=key, **tags)]
        )
    try:
        outcome = send(spec, body, alerts_dir, sleep=sleep)
    except SinkUnavailable as why:  # raced with the environment: recorded as a failure
        outcome = SendOutcome(False, 0, str(why))
    _record_outcome(record, alerts_dir, alert_id, sink, key, actor, outcome, tags)
    if not outcome.ok:
        report.failed.append((alert_id, sink, outcome.detail))
    return outcome.ok


def _notice_tags(alert: dict, body: dict, notice: str) -> dict:
    """What a delivery record says of its notice: the kind (an opening page says nothing), the severity a page or
    an escalation carried (the fold keeps each sink's highest), the escalation's number."""
    tags: dict = {} if notice == "opening" else {"notice": notice}
    if notice in OPENING_NOTICES:
        tags["severity"] = body.get("severity")
    elif notice == "escalated":
        tags |= {"severity": alert["escalation"]["to_severity"], "escalation": alert["escalation"]["escalation"]}
    return tags


def _paged_before(alert: dict, sink: str) -> bool:
    """Whether this sink had a page of an earlier generation of the alert (so this one is a reopening)."""
    if not alert.get("generation"):
        return False
    return any(
        entry.get("event") == "delivered"
        and entry.get("sink") == sink
        and entry.get("notice", "opening") in OPENING_NOTICES
        for entry in alert["history"]
    )


def _deliver_pass(alerts_dir, config, report, now, actor, sleep, record, budget_s) -> None:
    started = time.monotonic()
    down: set[str] = set()

    def deferred(sink: str) -> bool:  # a sink that failed in this pass, or the pass is out of time
        return sink in down or (budget_s is not None and time.monotonic() - started > budget_s)

    with _lock(alerts_dir):
        every = list(fold(read_events(alerts_dir)).values())
    report.silenced = sum(alert["status"] == "open" and is_silenced(alert, now) for alert in every)
    for alert in [a for a in every if a["status"] == "open" and not is_silenced(a, now)]:
        alert_id = alert["alert_id"]
        outstanding = []
        reached = 0
        for sink in routed_sinks(alert, config):
            if alert["deliveries"].get(sink, {}).get("status") == "delivered":
                reached += 1
                continue
            if deferred(sink):
                outstanding.append(sink)  # retried on the next tick
                continue
            notice = "reopened" if _paged_before(alert, sink) else "opening"
            sent = _send_notice(alerts_dir, config, report, alert, sink, notice, actor, sleep, record)
            if sent:
                report.delivered.append((alert_id, sink))
                reached += 1
            elif sent is False:
                outstanding.append(sink)
                down.add(sink)
        if outstanding or not reached:  # not one sink reached: stays pending, never marked notified
            report.pending += 1
            continue
        with _lock(alerts_dir):
            current = fold(read_events(alerts_dir)).get(alert_id, {})
            if current.get("status") == "open":  # not acknowledged or resolved meanwhile
                record(alerts_dir, [_event("notified", alert_id, utcnow(), actor, sinks=routed_sinks(alert, config))])
                report.notified.append(alert_id)
    with _lock(alerts_dir):  # again: the pages just sent carried the current severity
        every = list(fold(read_events(alerts_dir)).values())
    for alert in every:
        if is_silenced(alert, now):
            continue
        for sink in escalation_sinks(alert, config):
            if deferred(sink):
                report.pending += 1
                continue
            sent = _send_notice(alerts_dir, config, report, alert, sink, "escalated", actor, sleep, record)
            if sent:
                report.escalated.append((alert["alert_id"], sink))
            elif sent is False:
                report.pending += 1
                down.add(sink)
    for alert in every:
        if is_silenced(alert, now):
            continue
        for sink in closing_sinks(alert):
            if sink not in config.sinks:
                continue  # a sink removed from alerts.yaml since the page: nothing to close it on
            if deferred(sink):
                report.pending += 1
                continue
            sent = _send_notice(alerts_dir, config, report, alert, sink, alert["status"], actor, sleep, record)
            if sent:
                report.closed.append((alert["alert_id"], sink, alert["status"]))
            elif sent is False:
                report.pending += 1
                down.add(sink)
