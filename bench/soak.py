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


def score_alerts(alerts: list[dict], labels: list[dict], topology, delivered: dict[str, int]) -> dict:
    from perf_assets.lib.evaluation import MATCH_DAYS, overlaps

    real = [label for label in labels if not label.get("decoy")]
    decoys = [label for label in labels if label.get("decoy")]

    def matches(alert: dict, label: dict) -> bool:
        start = date.fromisoformat(label["start"][:10])
        change = date.fromisoformat(str(alert["change_date"])[:10])
        return overlaps(alert["grain"], alert["entity_id"], label, topology) and abs((change - start).days) <= (
            MATCH_DAYS
        )

    paged = [a for a in alerts if a["status"] != "expected"]
    per_label = {label["incident_id"]: [a["alert_id"] for a in paged if matches(a, label)] for label in real}
    decoy_hits = {label["incident_id"]: [a["alert_id"] for a in paged if matches(a, label)] for label in decoys}
    matched = {alert_id for ids in per_label.values() for alert_id in ids}
    return {
        "labels": len(real),
        "alerted_once": sorted(k for k, v in per_label.items() if len(v) == 1),
        "alerted_more_than_once": {k: v for k, v in per_label.items() if len(v) > 1},
        "not_alerted": sorted(k for k, v in per_label.items() if not v),
        "decoys_alerted": {k: v for k, v in decoy_hits.items() if v},
        "alerts": len(paged),
        "alerts_matching_no_label": sorted(a["alert_id"] for a in paged if a["alert_id"] not in matched),
        "opening_notices_per_alert": dict(sorted(delivered.items())),
        "alerts_paged_more_than_once": sorted(k for k, v in delivered.items() if v > 1),
    }


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
    args = parser.parse_args()

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
    from perf_assets.lib.evaluation import load_labels
    from perf_assets.lib.paths import DataHome
    from perf_assets.lib.simulate import simulate
    from perf_assets.lib.topology import read_topology
    from perf_assets.lib.warehouse import published_frame

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

    labels = load_labels(source_home.labels_file)
    topology = read_topology(lambda sql: published_frame(home, sql))
    score = score_alerts(read_alerts(home.alerts_dir), labels, topology, opening_notices(home.alerts_dir))

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
        f"labels {score['labels']}: alerted once {len(score['alerted_once'])}, more than once "
        f"{len(score['alerted_more_than_once'])} {score['alerted_more_than_once'] or ''}, not alerted "
        f"{len(score['not_alerted'])} {score['not_alerted']}; decoys alerted {score['decoys_alerted'] or 0}; "
        f"alerts {score['alerts']}, matching no label {len(score['alerts_matching_no_label'])}; "
        f"alerts paged more than once {score['alerts_paged_more_than_once'] or 0}; peak RSS "
        f"{result['peak_rss_mib']:.0f} MiB"
    )
    if args.json:
        args.json.write_text(json.dumps(result, indent=2, default=str) + "\n")
    return 0 if result["all_days_ok"] and full_ok and not score["alerts_paged_more_than_once"] else 1


if __name__ == "__main__":
    raise SystemExit(main())
