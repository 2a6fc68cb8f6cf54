"""Per-incident table: which labelled incidents have a change at the right entity and date, at every grain.

Reads the published warehouse's `regressions` and `landing/labels.json` of a built data home:

    PERFWH_HOME=/tmp/x .venv/bin/python bench/incident_table.py [--window-days 1]

A label is found at a grain when a change of its direction (`regression`, or `improvement` for an
improvement label) starts within `--window-days` of the label's start (for a decay, up to its ramp's
end) at an entity of its scope: a GPU of `scope.gpus`, a node of `scope.nodes`, a cluster of
`scope.clusters`, or the fleet (fleet-grain labels only). A row is explained when some real label's
scope holds its entity (a GPU through its node) and the row starts within the window of the label's
start, ramp or end (the return to normal after an incident that ended reads as the opposite change);
the rest are false alarms, listed per grain. Rows near a decoy's scope and date that no real label
explains are listed as decoy hits.
"""

from __future__ import annotations

import argparse
import json
from datetime import date, timedelta

import pandas as pd

from perf_assets.lib.paths import data_home
from perf_assets.lib.warehouse import published_frame


def _day(text: str | None) -> date | None:
    return date.fromisoformat(text[:10]) if text else None


def _window(label: dict, days: int) -> list[tuple[date, date]]:
    """Date ranges where a change belongs to the label: its start (through a ramp) and its end."""
    start = _day(label["start"])
    ramp_days = int(((label.get("magnitude") or {}).get("ramp_h") or 0) // 24)
    spans = [(start - timedelta(days=days), start + timedelta(days=days + ramp_days))]
    end = _day(label.get("end"))
    if end is not None:
        spans.append((end - timedelta(days=days), end + timedelta(days=days)))
    return spans


def _in_scope(label: dict, grain: str, entity: str, gpu_nodes: dict[str, str]) -> bool:
    scope = label.get("scope") or {}
    nodes = set(scope.get("nodes") or label.get("nodes") or [])
    if grain == "gpu":
        return entity in set(scope.get("gpus") or []) or gpu_nodes.get(entity) in nodes
    if grain == "node":
        return entity in nodes
    if grain == "cluster":
        return entity in set(scope.get("clusters") or [label["cluster"]])
    return grain == "fleet"


def _exact(label: dict, grain: str, entity: str) -> bool:
    """The entity is one the label names at that grain (a GPU must be one of its GPUs)."""
    scope = label.get("scope") or {}
    if grain == "gpu":
        return entity in set(scope.get("gpus") or [])
    if grain == "node":
        return entity in set(scope.get("nodes") or [])
    if grain == "cluster":
        return entity in set(scope.get("clusters") or [label["cluster"]])
    return label.get("grain") == "fleet"


def table(regressions: pd.DataFrame, labels: list[dict], gpu_nodes: dict[str, str], days: int = 1) -> dict:
    rows = regressions.assign(day=pd.to_datetime(regressions["change_date"]).dt.date)
    real = [label for label in labels if not label.get("decoy")]
    out = []
    for label in labels:
        want = "improvement" if label.get("direction") == "improvement" else "regression"
        spans = _window(label, days)[:1]  # found: near the start (through the ramp)
        hits = rows[
            rows.apply(
                lambda r: (
                    (label.get("decoy") or r["change_kind"] == want)
                    and _exact(label, r["grain"], r["entity_id"])
                    and any(a <= r["day"] <= b for a, b in spans)
                ),
                axis=1,
            )
        ]
        by_grain = {
            grain: sorted(f"{r.entity_id[:12]}:{r.metric}:{r.day}" for r in group.itertuples())
            for grain, group in hits.groupby("grain")
        }
        out.append(
            {
                "incident_id": label["incident_id"],
                "kind": label["kind"],
                "decoy": bool(label.get("decoy")),
                "label_grain": label.get("grain"),
                "start": label["start"][:10],
                "found": {grain: len(items) for grain, items in by_grain.items()},
                "hits": by_grain,
            }
        )

    def explained(r) -> bool:
        return any(
            _in_scope(label, r["grain"], r["entity_id"], gpu_nodes)
            and any(a <= r["day"] <= b for a, b in _window(label, days))
            for label in real
        )

    flags = rows.apply(explained, axis=1) if len(rows) else pd.Series(dtype=bool)
    unexplained = rows[~flags] if len(rows) else rows
    return {
        "incidents": out,
        "rows": int(len(rows)),
        "unexplained": {
            grain: sorted(f"{r.entity_id[:12]}:{r.metric}:{r.day}:{r.change_kind}" for r in group.itertuples())
            for grain, group in unexplained.groupby("grain")
        },
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--window-days", type=int, default=1)
    parser.add_argument("--json", action="store_true")
    parser.add_argument(
        "--rerun",
        action="store_true",
        help="re-run detection in-process (asset defaults) instead of reading regressions",
    )
    args = parser.parse_args()
    home = data_home(None)
    labels = json.loads(home.labels_file.read_text())["incidents"]
    inventory = published_frame(
        home, "select distinct cluster, gpu_uuid, node from intermediate.int_companion_gpu_days"
    )
    if args.rerun:
        from perf_assets.defs.detection.assets import DetectionConfig
        from perf_assets.lib.detection import detect_regressions

        knobs = DetectionConfig()
        regressions = detect_regressions(
            published_frame(home, "select * from metric_tree_daily where grain <> 'job'"),
            pd.DataFrame(columns=["node", "valid_from_at"]),  # staging is not published: no coinciding rollouts
            inventory.groupby("cluster")["node"].apply(lambda nodes: sorted(set(nodes))).to_dict(),
            knobs.detector_config(),
            gpu_nodes=dict(zip(inventory["gpu_uuid"], inventory["node"])),
            grain_min_effects=dict(knobs.grain_min_relative_effects),
        )
    else:
        regressions = published_frame(home, "select * from regressions")
    result = table(regressions, labels, dict(zip(inventory["gpu_uuid"], inventory["node"])), args.window_days)
    if args.json:
        print(json.dumps(result, indent=1, default=str))
        return
    print(f"{'incident':32} {'kind':28} {'grain':7} {'start':10}  found at (grain: rows)")
    for item in result["incidents"]:
        found = ", ".join(f"{g}: {n}" for g, n in sorted(item["found"].items())) or "-"
        tag = " (decoy)" if item["decoy"] else ""
        print(f"{item['incident_id']:32} {item['kind'] + tag:28} {item['label_grain']:7} {item['start']}  {found}")
        for grain, hits in sorted(item["hits"].items()):
            print(f"{'':42} {grain}: {', '.join(hits[:6])}{' ...' if len(hits) > 6 else ''}")
    total = sum(len(v) for v in result["unexplained"].values())
    print(f"\nchanges: {result['rows']}, not explained by any real label: {total}")
    for grain, items in sorted(result["unexplained"].items()):
        print(f"  {grain} ({len(items)}): {', '.join(items)}")


if __name__ == "__main__":
    main()
