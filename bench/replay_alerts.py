"""Replay the daily detection and alert-store update over a built home, one day at a time, without dbt.

For each day d, from the first day with `--min-days` days of data up to the last: detection
(`detect_regressions`, the asset's default DetectionConfig) on the home's metric tree, node software,
inventory and allocations cut to days <= d, then what `alert_outbox` does with the result (regression
incidents and improvement notices upserted into a fresh alert store with the inventory topology, then
auto-resolve on the cut tree). At the end the store is scored against the home's labels as
bench/soak.py scores it (each paged alert counted for one label).

It is the soak's alert path in minutes instead of an hour, for iterating on dedup and lifecycle
(perf_assets/lib/alerts.py): `--cache DIR` keeps each day's detection result (parquet), so a second
replay with changed alert code runs only the store (seconds). What it does not capture: the cut tree
is the final build's view of each day, so data that arrived late (a long job's later days, a step file
delivered on the job's start day, a pending-queue row reclassified later) is already there on the day
it describes, and the incremental build's lookback never re-derives an earlier day; the soak delivers
files a day at a time and sees those effects. Annotations and delivery are left out (no pages are sent).

Run: `.venv/bin/python bench/replay_alerts.py HOME [--labels labels.json] [--cache DIR] [--json OUT]`
(HOME is opened read-only: a kept soak work folder's `full` or `home`, or a lead fleet home).
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time
from datetime import date, datetime, timedelta, timezone
from datetime import time as clock
from pathlib import Path

import pandas as pd

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from bench.soak import score_alerts  # noqa: E402
from perf_assets.defs.alerts.assets import INSTALLED_SQL  # noqa: E402
from perf_assets.defs.detection.assets import DetectionConfig  # noqa: E402
from perf_assets.lib.alerts import AlertConfig, auto_resolve, build_incidents, read_alerts, upsert_incidents  # noqa: E402
from perf_assets.lib.changepoint import DetectorConfig  # noqa: E402
from perf_assets.lib.detection import detect_regressions  # noqa: E402
from perf_assets.lib.evaluation import load_labels  # noqa: E402
from perf_assets.lib.paths import DataHome  # noqa: E402
from perf_assets.lib.topology import Topology  # noqa: E402
from perf_assets.lib.warehouse import connect  # noqa: E402

INPUTS = {
    "tree": "select * from metric_tree_daily",
    "software": "select * from staging.stg_node_software__versions",
    "inventory": "select * from staging.stg_inventory__gpus",
    "allocations": "select slurm_job_id, node, start_at, end_at from intermediate.int_allocation_nodes",
    "installed": INSTALLED_SQL,
}


def read_home(home: DataHome) -> dict[str, pd.DataFrame]:
    connection = connect(home.warehouse_db, read_only=True)
    try:
        return {name: connection.execute(sql).df() for name, sql in INPUTS.items()}
    finally:
        connection.close()


def detector_config() -> tuple[DetectorConfig, dict[str, float]]:
    """The detection asset's defaults (DetectionConfig) as the library's DetectorConfig."""
    defaults = DetectionConfig()
    return defaults.detector_config(), dict(defaults.grain_min_relative_effects)


def _dates(column: pd.Series) -> pd.Series:
    return pd.to_datetime(column, utc=True).dt.date


def cut(inputs: dict[str, pd.DataFrame], day: date) -> dict[str, pd.DataFrame]:
    """The inputs as of the end of `day`: tree and installed rows to `day`, allocations started by then,
    software versions valid from then (one valid beyond `day` is open-ended, as it was on that day)."""
    end = pd.Timestamp(datetime.combine(day + timedelta(days=1), clock.min, tzinfo=timezone.utc))
    tree, installed, allocations = inputs["tree"], inputs["installed"], inputs["allocations"]
    software = inputs["software"]
    software = software[pd.to_datetime(software["valid_from_at"], utc=True) < end].copy()
    software.loc[pd.to_datetime(software["valid_to_at"], utc=True) >= end, "valid_to_at"] = pd.NaT  # open then
    return inputs | {
        "tree": tree[_dates(tree["metric_date"]) <= day],
        "installed": installed[_dates(installed["metric_date"]) <= day],
        "allocations": allocations[pd.to_datetime(allocations["start_at"], utc=True) < end],
        "software": software,
    }


def detect_day(inputs: dict[str, pd.DataFrame], day: date) -> pd.DataFrame:
    config, grain_min = detector_config()
    inventory = inputs["inventory"]
    cluster_nodes = inventory.groupby("cluster")["node"].apply(lambda nodes: sorted(set(nodes))).to_dict()
    return detect_regressions(
        inputs["tree"],
        inputs["software"],
        cluster_nodes,
        config,
        datetime.combine(day + timedelta(days=1), clock.min, tzinfo=timezone.utc),
        gpu_nodes=dict(zip(inventory["gpu_uuid"], inventory["node"])),
        grain_min_effects=grain_min,
        inventory=inventory,
        allocations=inputs["allocations"],
    )


def replay(
    home: DataHome, store: Path, cache: Path | None, min_days: int, log=print
) -> tuple[list[dict], Topology, list[dict]]:
    inputs = read_home(home)
    topology = Topology.from_frame(inputs["inventory"][["gpu_uuid", "node", "rack", "cluster"]].drop_duplicates())
    days = sorted(set(_dates(inputs["tree"]["metric_date"])))
    per_day = []
    for day in days[min_days - 1 :]:
        t0 = time.perf_counter()
        cached = cache / f"regressions_{day.isoformat()}.parquet" if cache else None
        today = cut(inputs, day)
        if cached is not None and cached.exists():
            found = pd.read_parquet(cached)
        else:
            found = detect_day(today, day)
            if cached is not None:
                cached.parent.mkdir(parents=True, exist_ok=True)
                table = found.copy()
                table.attrs = {}  # parquet keeps JSON attrs only, and `canaries` is a frame: the table is the cache
                table.to_parquet(cached)
        detect_s = time.perf_counter() - t0
        now = datetime.combine(day + timedelta(days=1), clock(6), tzinfo=timezone.utc)
        # alert_outbox reads the published snapshot: dates as datetime.date, as published_frame gives them
        tree = today["tree"].assign(metric_date=_dates(today["tree"]["metric_date"]))
        installed = today["installed"].assign(metric_date=_dates(today["installed"]["metric_date"]))
        incidents = build_incidents(found, topology) + build_incidents(found, topology, change_kind="improvement")
        result = upsert_incidents(
            store,
            incidents,
            config=AlertConfig(),
            tree=tree,
            installed_gs=installed,
            now=now,
            topology=topology,
        )
        resolved = auto_resolve(store, tree, AlertConfig(), now=now)
        per_day.append(
            {
                "day": day.isoformat(),
                "detect_s": round(detect_s, 1),
                "opened": [a["alert_id"] for a in result.opened],
                "notices": [a["alert_id"] for a in result.expected],
                "updated": len(result.updated),
                "escalated": [
                    f"{a['alert_id']} {a['escalation']['from_severity']}->{a['escalation']['to_severity']}"
                    for a in result.escalated
                ],
                "resolved": [a["alert_id"] for a in resolved],
            }
        )
        opened = ", ".join(f"{a['alert_id']} {a['grain']} {a['entity_id']} {a['change_date']}" for a in result.opened)
        log(
            f"{day} detect {detect_s:5.1f} s, opened {len(result.opened)} {opened}; expected/notices "
            f"{len(result.expected)}; updated {len(result.updated)}; escalated {len(result.escalated)}; "
            f"resolved {len(resolved)}"
        )
    return per_day, topology, read_alerts(store)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("home", type=Path, help="a built data home (opened read-only)")
    parser.add_argument("--labels", type=Path, default=None, help="labels.json (default: HOME/landing/labels.json)")
    parser.add_argument("--cache", type=Path, default=None, help="keep/reuse each day's detection result here")
    parser.add_argument("--store", type=Path, default=None, help="alert store folder (default: a fresh temporary one)")
    parser.add_argument("--min-days", type=int, default=4, help="first day replayed: the one with this many days")
    parser.add_argument("--json", type=Path, default=None, help="also write the per-day log and score here")
    args = parser.parse_args()

    home = DataHome(args.home)
    store = args.store or Path(tempfile.mkdtemp(prefix="replay-alerts-"))
    store.mkdir(parents=True, exist_ok=True)
    if any(store.iterdir()):
        parser.error(f"--store {store} is not empty: a replay starts from an empty store")
    started = time.perf_counter()
    per_day, topology, alerts = replay(home, store, args.cache, args.min_days)
    labels = load_labels(args.labels or home.labels_file)
    score = score_alerts(alerts, labels, topology, delivered={})
    print(f"replayed {len(per_day)} days in {time.perf_counter() - started:.0f} s; store {store}")
    escalations = [item for day in per_day for item in day["escalated"]]
    print(f"escalations {len(escalations)}: {' '.join(escalations) or 'none'} (no delivery here: every alert is open)")
    for label, ids in score["alerts_per_label"].items():
        print(f"  {label}: {len(ids)} {' '.join(ids)}")
    print(
        f"improvement labels noticed {sorted(score['improvement_labels_noticed'])}, not noticed "
        f"{score['improvement_labels_not_noticed']}; decoys alerted {score['decoys_alerted'] or 0}; "
        f"alerts {score['alerts']}, matching no label {score['alerts_matching_no_label']}, changes back "
        f"{score['changes_back'] or 0}, several labels "
        f"{score['alerts_matching_several_labels'] or 0}"
    )
    if args.json:
        args.json.write_text(json.dumps({"per_day": per_day, "score": score}, indent=2, default=str) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
