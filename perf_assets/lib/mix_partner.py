"""Where the work came from: the other side of a cluster's allocation change, tested on the same days.

Work that moves between clusters at about constant demand raises one cluster's allocation and lowers another's on the
same days (a mix shift; incident_joins.mix_shift_sides joins the two sides into one incident). The scan often sees
only one side. The receiving cluster fills up smoothly (fleet-1k a100-west: 0.80-0.85 allocated before, 0.95-1.0
during the shift), while the sending one drains unevenly, as its running jobs end and new ones go elsewhere:
h100-west on seed 109 read 0.78, 0.64, 0.68, 0.41, 0.13, 0.56 over the shift's six days against 0.84-0.93 before.
On the log scale the scan tests, the day at 0.13 is an outlier that widens the noise estimate of every split, and
the 30-day scan's p stayed at 0.13 with the epidemic interval. The question "where did the work come from?" is
narrower than "did this series change anywhere?", and has a direct test.

For every allocation change the scan found on a cluster (its split day and direction), and every cluster goodput change
whose factor is allocation (detection.ALLOCATION_SIDE_OF: its allocation's levels over the change's windows; a split
chosen on goodput, so the partner is also tested a day either side, ``GOODPUT_SIDE_SPLITS``), every other cluster whose
allocation has no change of its own within ``GROUP_WINDOW_DAYS`` of that day is tested over the same days:

* Windows: up to ``WINDOW_DAYS`` days before the split day and from it on, inside the series; at least
  ``MIN_DAYS`` valid days each side (a day is valid when its denominator is positive; unknown is never zero).
* Estimate: the relative change of the pooled allocation, Σnumerator/Σdenominator after over before, with a 95 %
  percentile bootstrap interval over days (resampled within each window: changepoint.pooled_effect_interval, a
  change's own interval).
* Test: one-sided Mann-Whitney U on the daily allocation, the alternative being that the cluster moved against the
  first one (exact for these sizes, scipy.stats.mannwhitneyu). Ranks, so a drained day counts as the lowest, not by
  how low; days are taken as exchangeable within the two windows.
* Balance: the GPUs each side gained or lost, (after - before level) x the cluster's installed GPUs, of opposite
  signs, the smaller at least ``MIX_BALANCE`` of the larger: the partner must have given (or taken) about the work
  the first cluster took (or gave), the same rule that joins the two sides in grouping.
* Call: p <= ``max_pvalue``, Benjamini-Hochberg q across the run's partner tests <= ``max_qvalue``, and |effect| at
  least the cluster allocation's minimum effect. A call is a `regressions` row of the partner cluster's allocation,
  split on the first cluster's day; grouping then joins it to the first side.

Plain numpy and scipy over a cluster-grain series; no I/O.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
from scipy.stats import mannwhitneyu

from perf_assets.lib.changepoint import DetectorConfig, benjamini_hochberg, pooled_effect_interval
from perf_assets.lib.incident_joins import GROUP_WINDOW_DAYS, MIX_BALANCE

WINDOW_DAYS = 7
MIN_DAYS = 4  # valid days each side; with 4 + 4 the one-sided exact p can reach 1/70 = 0.014, with 5 + 5 0.004
# A first side seen in goodput (detection.ALLOCATION_SIDE_OF) has its split where goodput moved, which the cluster's
# other factors move too, so the partner is tested with its split up to this many days either side of it, the smallest
# p times the number of splits tried (Bonferroni). fleet-1k seed 126: h100-west's goodput split on 10-21, a100-west
# full from 10-20; at 10-21 its 10-20 falls in the before window (p 0.013), at 10-20 p 0.0006 (x 3).
GOODPUT_SIDE_SPLITS = 1


@dataclass(frozen=True)
class AllocationChange:
    """An allocation change the scan found on a cluster: its split (a column of the series) and levels."""

    cluster: str
    split: int
    before_level: float
    after_level: float
    seen_as: str = "allocation"  # the series the scan found it in: allocation, or goodput through its allocation


def _valid_window(num: np.ndarray, den: np.ndarray, lo: int, hi: int) -> tuple[np.ndarray, np.ndarray]:
    part_num, part_den = num[lo:hi], den[lo:hi]
    keep = np.isfinite(part_num) & np.isfinite(part_den) & (part_den > 0)
    return part_num[keep], part_den[keep]


def partner_tests(
    changes: list[AllocationChange],
    series: dict[str, tuple[np.ndarray, np.ndarray]],
    gpus: dict[str, int],
    *,
    max_pvalue: float,
    max_qvalue: float | None,
    min_effect: float,
    confidence: float = 0.95,
    n_bootstrap: int = 999,
    seed: int = 0,
) -> list[dict]:
    """One result per (allocation change, other cluster) pair that could be tested, with its call (``called``).

    ``series``: per cluster, the allocation's daily numerators and denominators (one column per day, as the scan's);
    ``gpus``: installed GPUs per cluster (unknown: that pair is not tested, an unknown is not a balance)."""
    split_days = {}
    for change in changes:
        split_days.setdefault(change.cluster, []).append(change.split)
    results = []
    interval = DetectorConfig(confidence=confidence, n_bootstrap=n_bootstrap, seed=seed, scale="linear")
    for change in changes:
        moved_first = (change.after_level - change.before_level) * gpus.get(change.cluster, 0)
        if not moved_first or not math.isfinite(moved_first):
            continue
        for partner, (num, den) in sorted(series.items()):
            if partner == change.cluster or not gpus.get(partner):
                continue
            if any(abs(split - change.split) <= GROUP_WINDOW_DAYS for split in split_days.get(partner, [])):
                continue  # its own change near that day: the scan saw this side, grouping weighs the pair
            against = "less" if moved_first > 0 else "greater"  # the partner moves the other way
            tested = []
            for split in _splits(change, num.size):
                start, stop = max(0, split - WINDOW_DAYS), min(num.size, split + WINDOW_DAYS)
                before = _valid_window(num, den, start, split)
                after = _valid_window(num, den, split, stop)
                if before[0].size < MIN_DAYS or after[0].size < MIN_DAYS:
                    continue
                before_level = float(before[0].sum() / before[1].sum())
                if not before_level > 0:
                    continue
                p_split = float(
                    mannwhitneyu(after[0] / after[1], before[0] / before[1], alternative=against, method="exact").pvalue
                )
                tested.append((p_split, abs(split - change.split), split, start, stop, before, after))
            if not tested:
                continue
            p_value, _, split, start, stop, before, after = min(tested, key=lambda item: item[:2])
            p_value = min(1.0, p_value * len(tested))  # Bonferroni over the splits tried
            before_level = float(before[0].sum() / before[1].sum())
            after_level = float(after[0].sum() / after[1].sum())
            effect = after_level / before_level - 1
            moved = (after_level - before_level) * gpus[partner]
            small, large = sorted((abs(moved), abs(moved_first)))
            balanced = moved * moved_first < 0 and small >= MIX_BALANCE * large
            low, high = pooled_effect_interval(before, after, interval)
            results.append(
                {
                    "cluster": partner,
                    "first_cluster": change.cluster,
                    "first_seen_as": change.seen_as,
                    "split": split,
                    "first_split": change.split,
                    "splits_tested": len(tested),
                    "start": start,
                    "stop": stop,
                    "n_before": int(before[0].size),
                    "n_after": int(after[0].size),
                    "before_level": before_level,
                    "after_level": after_level,
                    "before_numerator": float(before[0].sum()),
                    "before_denominator": float(before[1].sum()),
                    "after_numerator": float(after[0].sum()),
                    "after_denominator": float(after[1].sum()),
                    "relative_effect": effect,
                    "ci_low": low,
                    "ci_high": high,
                    "p_value": p_value,
                    "gpus_moved": moved,
                    "first_gpus_moved": moved_first,
                    "first_relative_effect": change.after_level / change.before_level - 1
                    if change.before_level
                    else math.nan,
                    "balanced": balanced,
                }
            )
    q_values = benjamini_hochberg(np.asarray([r["p_value"] for r in results])) if results else []
    for result, q_value in zip(results, q_values):
        result["q_value"] = float(q_value)
        result["called"] = bool(
            result["balanced"]
            and result["p_value"] <= max_pvalue
            and (max_qvalue is None or q_value <= max_qvalue)
            and abs(result["relative_effect"]) >= min_effect
        )
    return results


def _splits(change: AllocationChange, length: int) -> list[int]:
    """The partner's splits to test: the first side's, and for a side seen in goodput the days either side too
    (``GOODPUT_SIDE_SPLITS``)."""
    if change.seen_as == "allocation":
        return [change.split]
    return [
        split
        for split in range(change.split - GOODPUT_SIDE_SPLITS, change.split + GOODPUT_SIDE_SPLITS + 1)
        if 0 < split < length
    ]


def describe_partner(result: dict, first_day: str) -> str:
    """The `test` text of a partner's row."""
    return (
        f"mix-shift partner: {result['cluster']}'s allocation over up to {WINDOW_DAYS} days either side of "
        f"{result['first_cluster']}'s "
        + (
            "allocation change"
            if result.get("first_seen_as", "allocation") == "allocation"
            else f"{result['first_seen_as']} change through its allocation"
        )
        + f" of {first_day} "
        f"({result['first_relative_effect']:+.1%}, {result['first_gpus_moved']:+.1f} GPUs): "
        f"{result['gpus_moved']:+.1f} GPUs; one-sided exact Mann-Whitney on the daily allocation "
        f"({result['n_before']} + {result['n_after']} days"
        + (
            f", the best of {result['splits_tested']} splits within {GOODPUT_SIDE_SPLITS} day of it, Bonferroni"
            if result.get("splits_tested", 1) > 1
            else ""
        )
        + "), BH across the run's partner tests, bootstrap CI over days"
    )
