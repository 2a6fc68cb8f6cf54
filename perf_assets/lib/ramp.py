"""Where a gradual change began: a flat - linear - flat (ramp) fit against a step, by least squares.

A step detector puts the change point of a ramp (an HBM bandwidth that decays over five days) where the
level has moved most, the middle or the end of the ramp, days after the drift began. Here the segment
around a change is fitted by a continuous piecewise-linear curve with two knots ``a < b`` (positions in
the segment): ``y = L1`` up to ``a``, a straight line from ``(a, L1)`` to ``(b, L2)``, ``y = L2`` from
``b`` on. A step is the case ``b = a + 1``. For fixed knots the curve is ``L1 + (L2 - L1) x`` with
``x = clip((t - a) / (b - a), 0, 1)``, a simple regression on ``x``, so every pair of knots is one
closed-form fit (``O(n^3)`` for all pairs of a segment of ``n`` points, vectorised).

The ramp is preferred when its extra knot pays for itself by the Bayesian information criterion:
``n ln(RSS_ramp / RSS_step) + ln n < 0`` (one parameter more than the step: the second knot), and the
ramp spans at least two intervals (``b - a >= 2``). Its onset is ``a + 1``: the first point off the
before level, the same convention as a change point's index (the first point of the new regime).
Pure numpy, no I/O.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

MIN_RAMP_POINTS = 5  # a segment shorter than this has no room for a flat, a ramp and a flat


@dataclass(frozen=True)
class RampFit:
    onset: int  # position (in the points given) of the first point off the before level: a + 1
    end: int  # position of the first point at the after level: b
    rss_ramp: float
    rss_step: float
    step_split: int  # position of the first point after the best step
    bic_gain: float  # n ln(RSS_step / RSS_ramp) - ln n (> 0: the ramp is preferred)


def _fits(y: np.ndarray, a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """Residual sum of squares of the ramp with knots (a, b) for each pair, one row per pair."""
    t = np.arange(y.size, dtype=float)[None, :]
    x = np.clip((t - a[:, None]) / (b - a)[:, None], 0.0, 1.0)
    xc = x - x.mean(axis=1, keepdims=True)
    yc = y - y.mean()
    sxx = (xc * xc).sum(axis=1)
    sxy = (xc * yc[None, :]).sum(axis=1)
    syy = float((yc * yc).sum())
    return np.maximum(syy - np.where(sxx > 0, sxy * sxy / np.where(sxx > 0, sxx, 1.0), 0.0), 0.0)


def fit_ramp(y: np.ndarray | list[float]) -> RampFit | None:
    """The best ramp and the best step of ``y`` (finite values, in time order); None when too short.

    Knots range over the whole segment: ``0 <= a < b <= n - 1``. ``onset``/``end`` are those of the best
    ramp (``b - a >= 2``) whether or not it beats the step; ``bic_gain > 0`` says it does.
    """
    values = np.asarray(y, dtype=float)
    n = values.size
    if n < MIN_RAMP_POINTS or not np.all(np.isfinite(values)):
        return None
    a, b = np.triu_indices(n, k=1)
    rss = _fits(values, a.astype(float), b.astype(float))
    is_step = b - a == 1
    step = int(np.argmin(np.where(is_step, rss, np.inf)))
    ramp = int(np.argmin(np.where(is_step, np.inf, rss)))
    rss_step, rss_ramp = float(rss[step]), float(rss[ramp])
    floor = 1e-300  # an exact fit: both sides tie at the floor, the step (fewer parameters) wins
    gain = n * math.log(max(rss_step, floor) / max(rss_ramp, floor)) - math.log(n)
    return RampFit(
        onset=int(a[ramp]) + 1,
        end=int(b[ramp]),
        rss_ramp=rss_ramp,
        rss_step=rss_step,
        step_split=int(b[step]),
        bic_gain=gain,
    )
