"""Mix versus rate for one change: did the parent's ratio move because its segments changed, or their weights?

A parent ratio over segments s (a fleet over its clusters, a cluster over its nodes) is

    R = Σ N_s / Σ D_s = Σ w_s · r_s,   w_s = D_s / Σ D,   r_s = N_s / D_s,

so between a before window (b) and an after window (a) the change splits exactly (the symmetric
two-factor form, the Shapley split of a product of two factors):

    R_a − R_b = Σ (w_a − w_b) · (r_a + r_b) / 2   [mix: the weights moved]
              + Σ (r_a − r_b) · (w_a + w_b) / 2   [rate: the segments' own ratios moved]

A segment seen in one window only (no denominator in the other) has weight 0 there and the rate of
the window it has: it contributes only mix. Every figure keeps its numerator and denominator; the
relative effects are divided by R_b. ``attribution`` is 'mix' when |mix| > |rate|, else 'rate'.

Which weights: the segments' shares of the ratio's denominator (``mix_basis``), as metric_tree.md §6 says:
"mix is always relative to the chosen denominator". For a ratio over capacity (goodput = useful FLOPs over
installed peak-FLOP-seconds) those shares are installed capacity, which does not move when work moves between
segments: §6 notes that the capacity lens shows such a move as a change of each segment's allocation, never
as mix. ``work_weighted_split`` therefore splits a capacity ratio as §6 does, by work done: with W the work
(allocated peak-FLOP-seconds) and C the capacity,

    G = Σ N / Σ C = O · RG,   O = Σ W / Σ C (occupancy),   RG = Σ N / Σ W = Σ w_s · g_s,   w_s = W_s / Σ W,

and the change of the product splits symmetrically (the Shapley split of two factors) into

    G_a − G_b = (O_a − O_b) · (RG_a + RG_b) / 2                 [occupancy: the share of capacity at work moved]
              + (mix_RG + rate_RG) · (O_a + O_b) / 2            [mix and rate of RG over the work shares, as above]

with nothing left over. ``attribution`` is then the largest of |mix|, |rate| and |occupancy|.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

TOP_SEGMENTS = 5  # segments listed per change, by |mix| + |rate| contribution


@dataclass(frozen=True)
class MixRateSplit:
    before_level: float  # R_b = Σ N_b / Σ D_b over the segments
    after_level: float
    mix_effect: float  # Σ mix contributions / R_b
    rate_effect: float  # Σ rate contributions / R_b
    attribution: str  # mix | rate | occupancy
    segments: list[dict]  # the largest contributors: name, weights, rates, numerators, denominators, parts
    mix_basis: str | None = None  # what the weights are shares of (the ratio's denominator, or 'allocated_pfs')
    occupancy_effect: float | None = None  # work_weighted_split only: (O_a − O_b)·mean(RG) / G_b; else None

    def as_columns(self, segment_type: str) -> dict:
        return {
            "segment_type": segment_type,
            "mix_effect": self.mix_effect,
            "rate_effect": self.rate_effect,
            "occupancy_effect": self.occupancy_effect,
            "mix_basis": self.mix_basis,
            "attribution": self.attribution,
            "segments": self.segments,
        }


def mix_rate_split(
    names: list[str],
    before_numerators: np.ndarray,
    before_denominators: np.ndarray,
    after_numerators: np.ndarray,
    after_denominators: np.ndarray,
    top: int = TOP_SEGMENTS,
    mix_basis: str | None = None,
) -> MixRateSplit | None:
    """The split of R_a − R_b into mix and rate over the segments; None when it is not defined.

    Not defined: fewer than two segments with a denominator in some window, a window without any
    denominator, or R_b = 0 (no relative effect). Unknown numerators (NaN) are unknown, not zero:
    a segment whose numerator is unknown in a window is left out of that window.
    """
    nb, db = np.asarray(before_numerators, float), np.asarray(before_denominators, float)
    na, da = np.asarray(after_numerators, float), np.asarray(after_denominators, float)
    known_b = np.isfinite(nb) & np.isfinite(db) & (db > 0)
    known_a = np.isfinite(na) & np.isfinite(da) & (da > 0)
    if (known_b | known_a).sum() < 2 or not known_b.any() or not known_a.any():
        return None
    db_k, da_k = np.where(known_b, db, 0.0), np.where(known_a, da, 0.0)
    nb_k, na_k = np.where(known_b, nb, 0.0), np.where(known_a, na, 0.0)
    before_level = nb_k.sum() / db_k.sum()
    after_level = na_k.sum() / da_k.sum()
    if not before_level or not math.isfinite(before_level):
        return None
    w_b, w_a = db_k / db_k.sum(), da_k / da_k.sum()
    with np.errstate(invalid="ignore", divide="ignore"):
        r_b = np.where(known_b, nb_k / np.where(known_b, db_k, 1.0), np.nan)
        r_a = np.where(known_a, na_k / np.where(known_a, da_k, 1.0), np.nan)
    r_b_filled = np.where(known_b, r_b, r_a)  # a segment in one window only: its rate did not move
    r_a_filled = np.where(known_a, r_a, r_b)
    mix = (w_a - w_b) * (r_a_filled + r_b_filled) / 2
    rate = (r_a_filled - r_b_filled) * (w_a + w_b) / 2
    mix_total, rate_total = float(mix.sum()), float(rate.sum())
    order = np.argsort(-(np.abs(mix) + np.abs(rate)), kind="stable")[:top]
    segments = [
        {
            "segment": names[i],
            "weight_before": float(w_b[i]),
            "weight_after": float(w_a[i]),
            "rate_before": _finite(r_b[i]),
            "rate_after": _finite(r_a[i]),
            "numerator_before": _finite(nb[i]) if known_b[i] else None,
            "denominator_before": _finite(db[i]) if known_b[i] else None,
            "numerator_after": _finite(na[i]) if known_a[i] else None,
            "denominator_after": _finite(da[i]) if known_a[i] else None,
            "mix_effect": float(mix[i] / before_level),
            "rate_effect": float(rate[i] / before_level),
        }
        for i in order
    ]
    return MixRateSplit(
        before_level=float(before_level),
        after_level=float(after_level),
        mix_effect=mix_total / before_level,
        rate_effect=rate_total / before_level,
        attribution="mix" if abs(mix_total) > abs(rate_total) else "rate",
        segments=segments,
        mix_basis=mix_basis,
    )


def work_weighted_split(
    names: list[str],
    before: tuple[np.ndarray, np.ndarray, np.ndarray],
    after: tuple[np.ndarray, np.ndarray, np.ndarray],
    top: int = TOP_SEGMENTS,
    mix_basis: str = "allocated_pfs",
) -> MixRateSplit | None:
    """Occupancy, mix and rate of a ratio over capacity (module docstring); None when it is not defined.

    ``before`` and ``after``: per segment (numerator, work, capacity), e.g. (useful FLOPs, allocated pfs, installed
    pfs). A segment whose numerator, work or capacity is unknown (NaN) in a window is left out of that window, as
    in ``mix_rate_split``; a segment with capacity but no work has weight 0 in RG and still counts in O. Not
    defined: the work split is not (``mix_rate_split``), or a window has no capacity. Effects are relative to
    G_b and add up to G_a / G_b − 1 over the segments kept.
    """
    parts = []
    for numerators, work, capacity in (before, after):
        n, w, c = (np.asarray(x, float) for x in (numerators, work, capacity))
        known = np.isfinite(n) & np.isfinite(w) & np.isfinite(c) & (c > 0) & (w >= 0)
        parts.append((np.where(known, n, np.nan), np.where(known, w, np.nan), np.where(known, c, 0.0)))
    (nb, wb, cb), (na, wa, ca) = parts
    if cb.sum() <= 0 or ca.sum() <= 0:
        return None
    work_split = mix_rate_split(names, nb, wb, na, wa, top=len(names))
    if work_split is None:
        return None
    occupancy_b, occupancy_a = np.nansum(wb) / cb.sum(), np.nansum(wa) / ca.sum()
    level_b, level_a = work_split.before_level * occupancy_b, work_split.after_level * occupancy_a
    if not level_b or not math.isfinite(level_b):
        return None
    mean_rg = (work_split.before_level + work_split.after_level) / 2
    to_g = (occupancy_b + occupancy_a) / 2 * work_split.before_level / level_b  # a part of ΔRG/RG_b -> of ΔG/G_b
    occupancy = (np.nan_to_num(wa) / ca.sum() - np.nan_to_num(wb) / cb.sum()) * mean_rg / level_b
    by_name = {seg["segment"]: seg for seg in work_split.segments}
    rows = []
    for i, name in enumerate(names):
        seg = dict(by_name.get(name) or {"segment": name, "mix_effect": 0.0, "rate_effect": 0.0})
        seg["mix_effect"] *= to_g
        seg["rate_effect"] *= to_g
        seg["occupancy_effect"] = float(occupancy[i])
        seg["work_before"], seg["work_after"] = _finite(wb[i]), _finite(wa[i])
        seg["capacity_before"], seg["capacity_after"] = _finite(cb[i]) or None, _finite(ca[i]) or None
        rows.append(seg)
    rows.sort(key=lambda seg: -(abs(seg["mix_effect"]) + abs(seg["rate_effect"]) + abs(seg["occupancy_effect"])))
    effects = {
        "mix": work_split.mix_effect * to_g,
        "rate": work_split.rate_effect * to_g,
        "occupancy": float(occupancy.sum()),
    }
    return MixRateSplit(
        before_level=float(level_b),
        after_level=float(level_a),
        mix_effect=effects["mix"],
        rate_effect=effects["rate"],
        attribution=max(effects, key=lambda name: abs(effects[name])),
        segments=rows[:top],
        mix_basis=mix_basis,
        occupancy_effect=effects["occupancy"],
    )


def _finite(value: float) -> float | None:
    return float(value) if math.isfinite(value) else None
