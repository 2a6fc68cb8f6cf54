"""Where the work came from (perf_assets/lib/mix_partner.py): the other side of a cluster's allocation change, on
literal daily series shaped like fleet-1k seed 109's mix shift (a100-west filling up from 10-18 while h100-west
drained unevenly to 0.13 and back, a drain the 30-day scan did not find: its first-scan p 0.13)."""

from __future__ import annotations

import dataclasses
from datetime import date, timedelta

import numpy as np
import pandas as pd
import pytest
from test_attribution_evaluation import TOPOLOGY, frame, label

from perf_assets.defs.detection.assets import DetectionConfig
from perf_assets.lib.changepoint import detect
from perf_assets.lib.detection import GRAIN_MIN_EFFECTS, SeriesBatch, mix_partner_rows
from perf_assets.lib.evaluation import evaluate
from perf_assets.lib.grouping import group_regressions
from perf_assets.lib.mix_partner import AllocationChange, partner_tests

# seed 109's daily allocation, 10-01..10-30
H100_WEST = [0.72, 0.85, 0.86, 0.80, 0.84, 0.81, 0.72, 0.92, 0.89, 0.88, 0.86, 0.87, 0.92, 0.93, 0.90]
H100_WEST += [0.87, 0.89, 0.84, 0.87, 0.78, 0.64, 0.68, 0.41, 0.13, 0.56, 0.76, 0.82, 0.82, 0.89, 0.78]
A100_WEST = [0.86, 0.88, 0.82, 0.87, 0.95, 0.92, 0.82, 0.80, 0.74, 0.79, 0.80, 0.77, 0.75, 0.82, 0.79]
A100_WEST += [0.85, 0.80, 0.88, 0.90, 0.95, 0.97, 1.00, 0.99, 0.99, 1.00, 0.83, 0.82, 0.85, 0.84, 0.81]
FLAT = [0.85 + 0.03 * np.sin(day) for day in range(30)]  # a cluster whose allocation did not move
GPUS = {"h100-west": 192, "a100-west": 256, "h200-east": 256}
SPLIT = 17  # a100-west's split on 10-18
CONFIG = dataclasses.replace(DetectionConfig().detector_config(), n_bootstrap=199)


def series(*values: list[float]) -> dict[str, tuple[np.ndarray, np.ndarray]]:
    names = ("h100-west", "a100-west", "h200-east")
    return {name: (np.asarray(v, dtype=float) * 1e6, np.full(len(v), 1e6)) for name, v in zip(names, values)}


def rise(split: int = SPLIT) -> AllocationChange:
    before = float(np.mean(A100_WEST[split - 11 : split]))
    return AllocationChange("a100-west", split, before, float(np.mean(A100_WEST[split : split + 8])))


def test_the_cluster_the_work_came_from_is_found_where_its_own_scan_was_not():
    results = partner_tests(
        [rise()], series(H100_WEST, A100_WEST, FLAT), GPUS, max_pvalue=0.01, max_qvalue=0.05, min_effect=0.01
    )
    by_cluster = {result["cluster"]: result for result in results}
    drained = by_cluster["h100-west"]
    assert drained["called"] and drained["balanced"]
    pooled = np.mean(H100_WEST[SPLIT : SPLIT + 7]) / np.mean(H100_WEST[SPLIT - 7 : SPLIT]) - 1  # 7 + 7 days
    assert drained["relative_effect"] == pytest.approx(pooled) and pooled < -0.3
    assert drained["ci_low"] < drained["relative_effect"] < drained["ci_high"] < 0
    assert drained["p_value"] == pytest.approx(1 / 3432 * 2, abs=1e-3)  # exact one-sided rank-sum, 7 + 7 days
    assert drained["gpus_moved"] < 0 < drained["first_gpus_moved"]
    assert not by_cluster["h200-east"]["called"]  # no move: p large
    # the days before the split are the first's: a cluster that moved the same way is no partner
    same_way = partner_tests(
        [rise()], series(A100_WEST, A100_WEST, FLAT), GPUS, max_pvalue=0.01, max_qvalue=0.05, min_effect=0.01
    )
    assert not any(result["called"] for result in same_way)


def test_a_partner_must_give_about_the_work_the_first_took_and_not_have_changed_on_its_own():
    few = GPUS | {"h100-west": 16}  # 16 GPUs draining by a third cannot have fed a100-west's +40
    results = partner_tests(
        [rise()], series(H100_WEST, A100_WEST, FLAT), few, max_pvalue=0.01, max_qvalue=0.05, min_effect=0.01
    )
    assert not next(r for r in results if r["cluster"] == "h100-west")["called"]
    # the scan found h100-west's own change within two days: grouping weighs that pair, no test here
    own = AllocationChange("h100-west", SPLIT + 2, 0.88, 0.55)
    results = partner_tests(
        [rise(), own], series(H100_WEST, A100_WEST, FLAT), GPUS, max_pvalue=0.01, max_qvalue=0.05, min_effect=0.01
    )
    assert not any(r["cluster"] == "h100-west" and r["first_cluster"] == "a100-west" for r in results)
    # unknown GPU counts: not a balance, not tested
    assert not partner_tests(
        [rise()],
        series(H100_WEST, A100_WEST, FLAT),
        {"a100-west": 256},
        max_pvalue=0.01,
        max_qvalue=0.05,
        min_effect=0.01,
    )
    # too few valid days on a side (unknown days are dropped, never zero)
    gappy = [np.nan if 10 <= day < 17 else value for day, value in enumerate(H100_WEST)]
    results = partner_tests(
        [rise()], series(gappy, A100_WEST, FLAT), GPUS, max_pvalue=0.01, max_qvalue=0.05, min_effect=0.01
    )
    assert not any(r["cluster"] == "h100-west" for r in results)


def test_the_partner_joins_the_first_side_and_the_shift_is_detected():
    """Through detection's row builder, grouping and the evaluation: without the partner the group is the
    receiving side alone (neither a detection nor a false alarm) and the shift is missed."""
    dates = [date(2026, 10, 1) + timedelta(days=day) for day in range(30)]
    values = series(H100_WEST, A100_WEST, FLAT)
    batch = SeriesBatch(
        keys=[("cluster", name, "allocation") for name in values],
        dates=dates,
        numerators=np.vstack([num for num, _ in values.values()]),
        denominators=np.vstack([den for _, den in values.values()]),
        directions=[1, 1, 1],
    )
    scan = detect(batch.numerators, batch.denominators, dataclasses.replace(CONFIG, max_qvalue=None))
    found = [(batch.keys[c.series_index][1], c.index) for c in scan.changes]
    assert ("a100-west", SPLIT) in found and not any(n == "h100-west" and abs(i - SPLIT) <= 2 for n, i in found)
    windows = []  # the fleet split is asked for over the partner's windows: before from 10-11, split, to 10-24
    rows, tests = mix_partner_rows(
        batch,
        scan.changes,
        [],
        GPUS,
        CONFIG,
        lambda grain, metric: GRAIN_MIN_EFFECTS[grain],
        lambda *w: windows.append(w) or {},
    )
    assert (SPLIT - 7, SPLIT, SPLIT + 7) in windows
    assert tests >= 2 and [(r["entity_id"], r["change_date"]) for r in rows] == [("h100-west", dates[SPLIT])]
    partner = rows[0]
    assert partner["change_kind"] == "regression" and partner["test"].startswith("mix-shift partner: h100-west's")
    first = next(c for c in scan.changes if c.index == SPLIT)
    assert partner["change_date"] == dates[first.index]
    receiving = {
        "regression_id": "a100-west rise",
        "metric": "allocation",
        "grain": "cluster",
        "entity_id": "a100-west",
        "change_date": dates[first.index],
        "change_kind": "improvement",
        "before_level": first.before_level,
        "after_level": first.after_level,
        "relative_effect": first.relative_effect,
        "p_value": first.p_value,
        "top_factor": "allocation",
    }
    topology = TOPOLOGY.__class__.from_frame(
        pd.DataFrame(
            [
                {"cluster": cluster, "node": f"{cluster}-n1", "rack": f"{cluster}-r1", "gpu_uuid": f"GPU-{cluster}-{i}"}
                for cluster, gpus in GPUS.items()
                for i in range(gpus)
            ]
        )
    )
    grouped = group_regressions(frame(receiving, partner), topology)
    assert grouped["group_id"].nunique() == 1
    assert "work moved from h100-west to a100-west" in grouped["joined_because"].dropna().iloc[0]
    shift = label(
        "mix",
        kind="workload_mix_shift",
        day=17,
        end_day=25,
        clusters=("a100-west", "h100-west"),
        grain="fleet",
        attribution="mix",
    )
    shift |= {"cluster": "a100-west", "factor": "allocation", "cause": {"dimension": "sku", "value": "A100"}}
    assert evaluate(frame(receiving, partner), [shift], topology)["detected_labels"] == 1
    alone = evaluate(frame(receiving), [shift], topology)
    assert alone["detected_labels"] == 0 and len(alone["receiving_groups"]) == 1


# seed 126's daily allocation, 10-01..10-30: h100-west drained from 10-21 (0.46, 0.87, 0.53, 0.60, 0.25), a scan p
# of 0.056; a100-west full from 10-20; the scan found h100-west's goodput falling on 10-21, through its allocation
H100_WEST_126 = [0.657, 0.873, 0.837, 0.821, 0.724, 0.821, 0.917, 0.865, 0.867, 0.858, 0.862, 0.959, 0.79, 0.944,
                 0.922, 0.935, 0.991, 0.893, 0.833, 0.776, 0.463, 0.869, 0.534, 0.595, 0.252, 0.892, 0.736, 0.812,
                 0.981, 0.741]  # fmt: skip
A100_WEST_126 = [0.59, 0.794, 0.824, 0.788, 0.883, 0.848, 0.818, 0.932, 0.864, 0.856, 0.874, 0.862, 0.663, 0.854,
                 0.87, 0.834, 0.656, 0.775, 0.68, 0.972, 0.973, 0.998, 0.984, 0.988, 0.998, 0.851, 0.822, 0.924, 0.759,
                 0.905]  # fmt: skip


def test_a_side_seen_in_goodput_tests_its_partner_a_day_either_side_bonferroni():
    values = series(H100_WEST_126, A100_WEST_126, FLAT)
    kwargs = dict(max_pvalue=0.01, max_qvalue=0.05, min_effect=0.01)
    drained = AllocationChange("h100-west", 20, 0.857, 0.687, seen_as="goodput")
    (filled,) = [r for r in partner_tests([drained], values, GPUS, **kwargs) if r["cluster"] == "a100-west"]
    # a100-west's first full day (10-20) in the before window at the goodput's split: the exact p is 0.013; a day
    # earlier 4 / 3432, times the 3 splits tried
    assert filled["called"] and filled["split"] == 19 and filled["first_split"] == 20 and filled["splits_tested"] == 3
    assert filled["p_value"] == pytest.approx(3 * 4 / 3432)
    assert filled["gpus_moved"] > 0 > filled["first_gpus_moved"]
    # the same side as a scanned allocation change keeps its own split only: no call
    (alone,) = [
        r
        for r in partner_tests([dataclasses.replace(drained, seen_as="allocation")], values, GPUS, **kwargs)
        if r["cluster"] == "a100-west"
    ]
    assert alone["splits_tested"] == 1 and alone["split"] == 20 and not alone["called"]
    assert alone["p_value"] == pytest.approx(0.0131, abs=1e-3)
