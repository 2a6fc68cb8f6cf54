"""A node's change dated to a rollout of its own node (detection.rollout_anchored, changepoint.measure_split).

fleet-1k seed 113: torch 2.5.1 -> 2.6.0 reached all 32 nodes of a100-west on 10-08 (a 3 % speedup); a100-west-n23's
program goodput had crept up over 10-01..10-07, and the scan split it on 10-05, three days before the upgrade, in a
group of five nodes apart from the upgrade's, with no cause. The series below is n23's, 10-01..10-20.
"""

from __future__ import annotations

import dataclasses
from datetime import date, timedelta

import numpy as np
import pandas as pd

from perf_assets.lib.changepoint import DetectorConfig, detect, measure_split
from perf_assets.lib.detection import SeriesBatch, rollout_anchored, scan_splits

N23 = [0.4662, 0.4694, 0.4709, 0.4704, 0.476, 0.4748, 0.4738, 0.4823, 0.4945, 0.5013]
N23 += [0.4771, 0.4884, 0.4879, 0.4885, 0.4911, 0.4893, 0.4948, 0.4851, 0.496, 0.4906]
DAYS = [date(2026, 10, 1) + timedelta(days=i) for i in range(len(N23))]
CONFIG = DetectorConfig()


def batch(*series: tuple[str, str, list[float]]) -> SeriesBatch:
    values = np.asarray([values for _, _, values in series], dtype=float)
    return SeriesBatch(
        keys=[(grain, entity, "program_goodput") for grain, entity, _ in series],
        dates=DAYS,
        numerators=values,
        denominators=np.ones_like(values),
        directions=[1] * len(series),
    )


def scan_change(series: list[float], split: int):
    """The change as the scan reported it: split at ``split`` over the whole window (its summary and interval are
    measure_split's, which a test below checks against the detector's own)."""
    values = np.asarray(series)
    measured = measure_split(values, np.ones_like(values), 0, split, len(values), CONFIG)
    change = detect(values, np.ones_like(values), CONFIG).changes[0]
    return dataclasses.replace(
        change,
        index=split,
        n_before=split,
        n_after=len(values) - split,
        before_level=measured["before_level"],
        after_level=measured["after_level"],
        relative_effect=measured["relative_effect"],
    )


def rollout(nodes: list[str], day: date, component: str = "torch", old: str = "2.5.1", new: str = "2.6.0"):
    at = pd.Timestamp(day, tz="UTC")
    return pd.DataFrame(
        [(node, at, component, old, new) for node in nodes],
        columns=["node", "changed_at", "component", "from_version", "to_version"],
    )


NODES = [f"a100-west-n{i:02d}" for i in range(1, 33)]


def test_measure_split_at_the_detector_s_split_gives_the_detector_s_change():
    step = np.r_[np.full(10, 0.50), np.full(10, 0.46)] + np.tile([0.002, -0.002], 10)
    change = detect(step, np.ones_like(step), CONFIG).changes[0]
    measured = measure_split(step, np.ones_like(step), 0, change.index, len(step), CONFIG)
    assert change.index == 10
    assert measured["before_level"] == change.before_level and measured["after_level"] == change.after_level
    assert measured["relative_effect"] == change.relative_effect
    assert (measured["ci_low"], measured["ci_high"]) == (change.ci_low, change.ci_high)
    assert measured["p_value"] < 1e-10  # a fixed split: no Bonferroni factor for choosing it
    assert measure_split(step, np.ones_like(step), 0, 2, len(step), CONFIG) is None  # 2 points before: too few


def test_a_change_split_days_before_its_node_s_rollout_is_dated_to_the_rollout():
    data = batch(("node", "a100-west-n23", N23), ("cluster", "a100-west", N23))
    change = scan_change(N23, 4)  # 10-05
    cluster_change = dataclasses.replace(change, series_index=1, index=7)
    splits = scan_splits(data, [change, cluster_change], lambda grain, entity: entity)
    found = rollout_anchored(
        data, change, 0, 20, rollout(NODES, date(2026, 10, 8)), ["a100-west-n23"], CONFIG, 0.03, splits, "a100-west"
    )
    assert found is not None
    anchored, note = found
    assert DAYS[anchored.index] == date(2026, 10, 8)
    assert (anchored.n_before, anchored.n_after) == (7, 13)
    assert round(anchored.relative_effect, 4) == 0.0384 and anchored.ci_low < 0.0384 < anchored.ci_high
    assert anchored.p_value == change.p_value  # the scan's evidence that the series changed stands
    assert "dated to its node's torch 2.5.1 -> 2.6.0 of 2026-10-08: the scan split on 2026-10-05" in note


def test_a_rollout_that_moved_nothing_else_or_lies_too_far_or_fits_worse_does_not_move_the_change():
    data = batch(("node", "a100-west-n23", N23))
    change = scan_change(N23, 4)
    lone = scan_splits(data, [change], lambda grain, entity: entity)
    torch = rollout(NODES, date(2026, 10, 8))
    # a null rollout: neither the cluster nor at least half of its 32 nodes moved on 10-08
    assert rollout_anchored(data, change, 0, 20, torch, ["a100-west-n23"], CONFIG, 0.03, lone, "a100-west") is None
    # a rollout to three nodes is too small to judge by how many moved
    few = rollout(NODES[21:24], date(2026, 10, 8))
    assert rollout_anchored(data, change, 0, 20, few, ["a100-west-n23"], CONFIG, 0.03, lone, "a100-west") is not None
    # five days away: another event
    far = rollout(NODES[21:24], date(2026, 10, 10))
    assert rollout_anchored(data, change, 0, 20, far, ["a100-west-n23"], CONFIG, 0.03, lone, "a100-west") is None
    # within a day: the change already coincides with it (coinciding_changes), nothing to move
    near = rollout(NODES[21:24], date(2026, 10, 6))
    assert rollout_anchored(data, change, 0, 20, near, ["a100-west-n23"], CONFIG, 0.03, lone, "a100-west") is None
    # a clean step on 10-05, flat before and after: a step on 10-08 fits it far worse
    step = [0.466] * 4 + [0.486] * 16
    stepped = batch(("node", "a100-west-n23", step))
    change = scan_change(step, 4)
    assert rollout_anchored(stepped, change, 0, 20, few, ["a100-west-n23"], CONFIG, 0.03, lone, "a100-west") is None
