"""Soak: a simulated fleet delivered one day at a time through the landing sensor, detection and alerts daily.

What it does (issue 9, "Load"): simulate a scenario into a source folder; then for each day, copy that
day's landed files into a fresh warehouse's landing zone, evaluate `landing_sensor` (it must request a
run), run what that run runs (`ingest_and_build`: ingest, dbt build, detection, alert store, evaluation)
in-process, and evaluate the `alert_delivery` sensor (pages go to the default JSON lines sink). At the
end it rebuilds everything once from scratch on a second home, for the baseline.

It reports, per day, the build's wall time and the alerts opened; at the end, against labels.json:
each labeled incident alerted how many times (goal: exactly once), pages delivered per alert (goal:
exactly one opening notice each), decoys alerted (goal: none), alerts matching no label, and the cost
of an incremental day as a ratio of the full rebuild's (the baseline, measured in the same run).

What the score counts (`score_alerts`): an alert that paged (created `open`, or reopened; one stored
`expected` from the start, a knock-on or an annotated change, never paged even if resolved later),
counted for one label (scope overlap, change day within 2 days of the label's start, nearest first,
then a label of its direction, of its headline's factor, of its spine factors, whose nodes its root fits
best), labels taking alerts one to one first as evaluation.py matches groups, an alert left over
counting for its best label as a second page of it; so one alert near two labels is not counted
twice. An alert left over that is a real change back at a label's end (its recovery, or a mix shift's
receiving side as the work arrives or leaves: evaluation.py's rule for groups) counts for neither
(`changes_back`). An improvement label is `noticed` when an improvement notice in the store (docs/alerts.md,
"Improvements": stored, never paged) matches it; it is `alerted` only when a page matches it (a
mix shift's sending side regresses). `--rescore` scores a kept --work folder again without running.

Files land by the day folder the simulator wrote them under (landing/<source>/<cluster>/<day>/), so a
job's step events arrive on its start day with its whole run (the simulator writes a job's events in
one file): later days of long jobs arrive early. That is noted in the output, not hidden.

Run: `.venv/bin/python bench/soak.py [--scenario incidents] [--seed 1] [--days N] [--work /tmp/perfwh-soak]`
(about a minute per simulated day on 2 cores for `incidents`; `--days` shortens the window).
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import shutil
import sys
import time
from collections import defaultdict
from datetime import date
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))


def day_folders(landing: Path) -> dict[date, list[Path]]:
    """Landed files by the day folder they were written under (labels.json excluded)."""
    by_day: dict[date, list[Path]] = defaultdict(list)
    for path in sorted(landing.rglob("*")):
        if not path.is_file() or path.name.startswith("."):
            continue
        try:
            day = date.fromisoformat(path.parent.name)
        except ValueError:
            continue
        by_day[day].append(path)
    return dict(sorted(by_day.items()))


def deliver_day(files: list[Path], source_landing: Path, target_landing: Path) -> int:
    for path in files:
        target = target_landing / path.relative_to(source_landing)
        target.parent.mkdir(parents=True, exist_ok=True)
        temporary = target.with_name(f".{target.name}.part")
        shutil.copyfile(path, temporary)
        os.replace(temporary, target)  # whole files only, as an exporter should
    return len(files)


class quiet_fds:
    """Send file descriptors 1 and 2 (Dagster's console log, dbt's output) to a log file for a while."""

    def __init__(self, log: Path):
        self.log = log

    def __enter__(self):
        sys.stdout.flush()
        sys.stderr.flush()
        self.saved = (os.dup(1), os.dup(2))
        self.handle = open(self.log, "ab")
        os.dup2(self.handle.fileno(), 1)
        os.dup2(self.handle.fileno(), 2)
        return self

    def __exit__(self, *exc):
        sys.stdout.flush()
        sys.stderr.flush()
        os.dup2(self.saved[0], 1)
        os.dup2(self.saved[1], 2)
        for fd in self.saved:
            os.close(fd)
        self.handle.close()
        return False


def peak_rss_mib() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def was_paged(alert: dict) -> bool:
    """Opened as a page (created `open`) or paged again (`reopened`): an alert stored `expected` from the
    start (annotation, knock-on, improvement notice) was never sent, even if it is `resolved` now."""
    history = alert.get("history") or []
    created_open = bool(history) and history[0].get("event") == "created" and history[0].get("status") == "open"
    return created_open or any(event.get("event") == "reopened" for event in history)


def is_improvement_notice(alert: dict) -> bool:
    return alert.get("direction") == "improvement" and (alert.get("expected_by") or {}).get("id") == "improvement"


def score_alerts(alerts: list[dict], labels: list[dict], topology, delivered: dict[str, int]) -> dict:
    """Each label's alerts (goal: exactly one page per labeled regression), each alert counted for one label.

    An alert counts for the label it matches best (scope overlap and change day within MATCH_DAYS of the
    label's start, as in evaluation.py, the change day being the one the alert opened with or the one it
    holds now, the two days the store's dedup compares; the nearest start day, then a label of the alert's direction,
    then a label whose factor is the alert's top factor (its headline's, as evaluation.py's tie), then one whose
    factor is among the alert's spine factors, then the label whose nodes the alert's root fits best, then the label
    order). Labels take alerts one to one first, in that order over all pairs, as evaluation.py matches groups (fleet-1k
    seed 126: h200-east-n10's HBM decay alert, re-dated to its HBM probes' 10-16, lay a day nearer the half-cluster
    driver rollout, which its cohort's alert pages, than the decay); an alert left over counts for its best
    label, a second page of it (decoys take no alert in the first pass). So one alert near two
    labels (a cluster's checkpoint slowdown two days before a mix shift there) is not counted twice;
    `alerts_matching_several_labels` lists those. An alert left over that is a real change back at a label's end
    (``change_back_of``) counts for neither label nor false alarm: `changes_back`. Only alerts that paged count
    (`was_paged`). An improvement label
    (direction improvement) is `noticed` when an improvement notice of the store matches it: improvements are
    recorded, never paged (docs/alerts.md).
    """
    from perf_assets.lib.evaluation import MATCH_DAYS, is_recovery, overlaps, receiving_day, scope_fit

    def distance(alert: dict, label: dict) -> int | None:
        start = date.fromisoformat(label["start"][:10])
        changes = {alert["change_date"], alert.get("dedup_change_date") or alert["change_date"]}
        days = min(abs((date.fromisoformat(str(change)[:10]) - start).days) for change in changes)
        return days if overlaps(alert["grain"], alert["entity_id"], label, topology) and days <= MATCH_DAYS else None

    def change_back_of(alert: dict) -> str | None:
        """The real label whose change back this alert is, as evaluation.py counts groups (neither a match nor a
        false alarm): its recovery (the other direction, in its scope, within MATCH_DAYS of its end), or a mix
        shift's receiving side (on the label's receiving `cluster`: the other direction near its start, its own
        direction near its end, as the work arrives and leaves). fleet-1k seeds 127 and 128: a100-west's allocation
        fell on 10-26/27 as the shift to it ended (10-26), and counted as a second page of a100-west-n05's thermal
        throttle (10-26)."""
        day = date.fromisoformat(str(alert["change_date"])[:10])
        grain, entity, direction = str(alert["grain"]), str(alert["entity_id"]), alert["direction"]
        on_cluster = topology.cluster_of(grain, entity) if grain not in ("fleet", "job") else None
        for label in labels:
            if label.get("decoy"):
                continue
            receiving = receiving_day(label, direction) if on_cluster == label.get("cluster") else None
            if is_recovery(label, direction, grain, entity, day, topology) or (
                receiving is not None and abs((day - receiving).days) <= MATCH_DAYS
            ):
                return label["incident_id"]
        return None

    def root_fit(alert: dict, label: dict) -> float:
        """|common| / |either| of the alert's root's nodes and the label's (evaluation.scope_fit's root key)."""
        nodes = topology.nodes_of(str(alert["grain"]), str(alert["entity_id"])) if alert["grain"] != "fleet" else set()
        return scope_fit(nodes, label)

    def ranked_labels(alert: dict) -> list[tuple]:
        ranked = []
        factors = set(alert.get("factors") or []) | set(alert.get("dedup_factors") or [])
        for order, label in enumerate(labels):
            days = distance(alert, label)
            if days is not None:
                other_top = not label.get("factor") or label.get("factor") != alert.get("top_factor")
                other_factor = label.get("factor") not in factors
                ranked.append(
                    (
                        days,
                        label.get("direction") != alert["direction"],
                        other_top,
                        other_factor,
                        -root_fit(alert, label),
                        order,
                        label["incident_id"],
                    )
                )
        return sorted(ranked)

    real = [label["incident_id"] for label in labels if not label.get("decoy")]
    decoys = [label["incident_id"] for label in labels if label.get("decoy")]
    paged = [a for a in alerts if was_paged(a)]
    per_label: dict[str, list[str]] = {label: [] for label in real + decoys}
    candidates = {alert["alert_id"]: ranked_labels(alert) for alert in paged}
    several = {alert_id: [item[-1] for item in ranked] for alert_id, ranked in candidates.items() if len(ranked) > 1}
    # one to one first, as evaluation.py matches groups: the (alert, real label) pairs in rank order, each label taking
    # its first alert; an alert left over then counts for its own best label, a second page of it (a decoy's only when
    # no real label ranks before it: decoys take no alert in the first pass, a real label's second page is not a decoy's)
    pairs = sorted(
        (key, order, alert_id) for order, (alert_id, ranked) in enumerate(candidates.items()) for key in ranked
    )
    assigned: set[str] = set()
    for key, _, alert_id in pairs:
        label = key[-1]
        if label in real and alert_id not in assigned and not per_label[label]:
            assigned.add(alert_id)
            per_label[label].append(alert_id)
    changes_back: dict[str, str] = {}
    for alert in paged:
        alert_id, ranked = alert["alert_id"], candidates[alert["alert_id"]]
        if alert_id in assigned:
            continue
        back = change_back_of(alert)  # a real change back at a label's end: neither a second page nor a false alarm
        if back is not None:
            changes_back[alert_id] = back
        elif ranked:
            per_label[ranked[0][-1]].append(alert_id)
    notices = [a for a in alerts if is_improvement_notice(a)]
    improvement_labels = [
        label for label in labels if label.get("direction") == "improvement" and not label.get("decoy")
    ]
    noticed = {
        label["incident_id"]: [a["alert_id"] for a in notices if distance(a, label) is not None]
        for label in improvement_labels
    }
    matched = {alert_id for ids in per_label.values() for alert_id in ids} | set(changes_back)
    return {
        "labels": len(real),
        "alerts_per_label": {label: per_label[label] for label in real},
        "alerted_once": sorted(k for k in real if len(per_label[k]) == 1),
        "alerted_more_than_once": {k: per_label[k] for k in real if len(per_label[k]) > 1},
        "not_alerted": sorted(k for k in real if not per_label[k]),
        "improvement_labels_noticed": {k: v for k, v in noticed.items() if v},
        "improvement_labels_not_noticed": sorted(k for k, v in noticed.items() if not v),
        "improvement_notices": len(notices),
        "decoys_alerted": {k: per_label[k] for k in decoys if per_label[k]},
        "alerts": len(paged),
        "alerts_matching_no_label": sorted(a["alert_id"] for a in paged if a["alert_id"] not in matched),
        "alerts_matching_several_labels": several,
        "changes_back": dict(sorted(changes_back.items())),
        "stored_never_paged": sorted(
            a["alert_id"] for a in alerts if not was_paged(a) and not is_improvement_notice(a)
        ),
        "opening_notices_per_alert": dict(sorted(delivered.items())),
        "alerts_paged_more_than_once": sorted(k for k, v in delivered.items() if v > 1),
    }


def score_home(source: Path, home: Path) -> dict:
    """Score the alert store of a soak's home against its source's labels (also on a kept work folder)."""
    from perf_assets.lib.alerts import read_alerts
    from perf_assets.lib.evaluation import load_labels
    from perf_assets.lib.paths import DataHome
    from perf_assets.lib.topology import read_topology
    from perf_assets.lib.warehouse import published_frame

    home_data = DataHome(home)
    labels = load_labels(DataHome(source).labels_file)
    topology = read_topology(lambda sql: published_frame(home_data, sql))
    return score_alerts(read_alerts(home_data.alerts_dir), labels, topology, opening_notices(home_data.alerts_dir))


def opening_notices(alerts_dir: Path) -> dict[str, int]:
    counts: dict[str, int] = defaultdict(int)
    sink = alerts_dir / "alerts.jsonl"
    if sink.exists():
        for line in sink.read_text(encoding="utf-8").splitlines():
            body = json.loads(line)
            if body.get("notice", "opening") == "opening":
                counts[body["alert_id"]] += 1
    return dict(counts)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--scenario", default="incidents")
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--days", type=int, default=None, help="simulate only the first N days of the scenario")
    parser.add_argument("--work", type=Path, default=Path("/tmp/perfwh-soak"))
    parser.add_argument("--json", type=Path, default=None, help="also write the result as JSON here")
    parser.add_argument(
        "--rescore", action="store_true", help="only score the alert store of the kept --work folder, print JSON"
    )
    args = parser.parse_args()
    if args.rescore:
        print(json.dumps(score_home(args.work / "source", args.work / "home"), indent=2))
        return 0

    shutil.rmtree(args.work, ignore_errors=True)
    args.work.mkdir(parents=True)
    source, home_dir, full_dir = args.work / "source", args.work / "home", args.work / "full"
    os.environ.pop("DAGSTER_HOME", None)  # an ephemeral Dagster instance per run
    os.environ["PERFWH_HOME"] = str(source)

    import dagster as dg

    from perf_assets.defs.alerts.automation import alert_delivery
    from perf_assets.defs.ingest.sensors import landing_sensor
    from perf_assets.lib.alerts import read_alerts
    from perf_assets.lib.build import build, prepare_dbt_manifest
    from perf_assets.lib.paths import DataHome
    from perf_assets.lib.simulate import simulate

    prepare_dbt_manifest()
    started = time.perf_counter()
    simulated = simulate(DataHome(source).ensure(), scenario=args.scenario, seed=args.seed, days=args.days)
    print(
        f"simulated {args.scenario} seed {args.seed}: {simulated.days} days, {len(simulated.files)} files, "
        f"{simulated.size_bytes / 2**20:.0f} MiB in {time.perf_counter() - started:.0f} s"
    )
    source_home = DataHome(source)
    by_day = day_folders(source_home.landing)

    home = DataHome(home_dir).ensure()
    os.environ["PERFWH_HOME"] = str(home.root)
    cursor = None
    days = []
    print("| day | files | sensor | build s | alerts opened (total) | pages | peak RSS MiB |")
    print("|---|---|---|---|---|---|---|")
    for day, files in by_day.items():
        deliver_day(files, source_home.landing, home.landing)
        tick = landing_sensor(dg.build_sensor_context(cursor=cursor))
        requested = isinstance(tick, dg.SensorResult) and bool(tick.run_requests)
        if requested:
            cursor = tick.cursor
        before = {a["alert_id"] for a in read_alerts(home.alerts_dir)}
        t0 = time.perf_counter()
        with quiet_fds(args.work / "builds.log"):
            ok = build(home, log_level="WARNING") if requested else True
        seconds = time.perf_counter() - t0
        with quiet_fds(args.work / "builds.log"):
            alert_delivery(dg.build_sensor_context())
        alerts = read_alerts(home.alerts_dir)
        opened = [a for a in alerts if a["alert_id"] not in before]
        pages = sum(opening_notices(home.alerts_dir).values())
        days.append({"day": day.isoformat(), "files": len(files), "build_s": seconds, "ok": ok, "opened": len(opened)})
        print(
            f"| {day} | {len(files)} | {'run' if requested else 'skip'} | {seconds:.1f}{'' if ok else ' FAILED'} | "
            f"{len(opened)} ({len(alerts)}) | {pages} | {peak_rss_mib():.0f} |",
            flush=True,
        )

    score = score_home(source_home.root, home.root)

    full = DataHome(full_dir).ensure()
    shutil.copytree(source_home.landing, full.landing, dirs_exist_ok=True)
    os.environ["PERFWH_HOME"] = str(full.root)
    t0 = time.perf_counter()
    with quiet_fds(args.work / "builds.log"):
        full_ok = build(full, log_level="WARNING")
    full_s = time.perf_counter() - t0
    steady = sorted(d["build_s"] for d in days[-5:])
    median_day = steady[len(steady) // 2] if steady else float("nan")
    result = {
        "scenario": args.scenario,
        "seed": args.seed,
        "days": len(days),
        "per_day": days,
        "all_days_ok": all(d["ok"] for d in days),
        "full_rebuild_s": full_s,
        "full_rebuild_ok": full_ok,
        "median_last5_day_s": median_day,
        "incremental_over_full": median_day / full_s if full_s else None,
        "peak_rss_mib": peak_rss_mib(),
        "score": score,
        "note": "files land by the simulator's day folder: a job's step events arrive on its start day",
    }
    print(
        f"\nbaseline: full rebuild of all {len(days)} days {full_s:.1f} s ({'ok' if full_ok else 'FAILED'}); "
        f"an incremental day (median of the last 5) {median_day:.1f} s = {result['incremental_over_full']:.2f}x "
        "the full rebuild (the DCGM telemetry chain rebuilds only the new days and the lookback, docs/incremental.md; "
        "the other models rebuild every day)"
    )
    print(
        f"improvement labels noticed {score['improvement_labels_noticed'] or 0}, not noticed "
        f"{score['improvement_labels_not_noticed'] or 0}; alerts matching several labels "
        f"{score['alerts_matching_several_labels'] or 0}"
    )
    print(
        f"labels {score['labels']}: alerted once {len(score['alerted_once'])}, more than once "
        f"{len(score['alerted_more_than_once'])} {score['alerted_more_than_once'] or ''}, not alerted "
        f"{len(score['not_alerted'])} {score['not_alerted']}; decoys alerted {score['decoys_alerted'] or 0}; "
        f"alerts {score['alerts']}, matching no label {len(score['alerts_matching_no_label'])}, changes back "
        f"{score['changes_back'] or 0}; alerts paged more than once {score['alerts_paged_more_than_once'] or 0}; peak RSS "
        f"{result['peak_rss_mib']:.0f} MiB"
    )
    if args.json:
        args.json.write_text(json.dumps(result, indent=2, default=str) + "\n")
    return 0 if result["all_days_ok"] and full_ok and not score["alerts_paged_more_than_once"] else 1


if __name__ == "__main__":
    raise SystemExit(main())
