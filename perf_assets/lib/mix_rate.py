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
    attribution: str  # mix | rate
    segments: list[dict]  # the largest contributors: name, weights, rates, numerators, denominators, parts

    def as_columns(self, segment_type: str) -> dict:
        return {
            "segment_type": segment_type,
            "mix_effect": self.mix_effect,
            "rate_effect": self.rate_effect,
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
    )


def _finite(value: float) -> float | None:
    return float(value) if math.isfinite(value) else None
