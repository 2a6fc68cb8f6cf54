"""Short bursts: a level that leaves its baseline for fewer days than the change-point scan's minimum segment.

The permutation scan (changepoint.py) needs ``min_segment`` (3) points on each side and cannot give a
2-day excursion among 28 days a p-value under ~0.07 whatever its size (the chance that the two largest
of 28 exchangeable values are adjacent). A scheduler fragmentation that strands a node for two days is
such a burst: the cluster's `idle_fragmented_share` goes from ~0.5 % to ~40 % and back.

Here, per series of daily ratios (pooled Σnum / Σden per day, linear scale), every interval of
``min_length`` to ``max_length`` days (default 2 to 2: the scan sees 3 days and more; a single day of idle
capacity is a scheduling hiccup) is tested against the rest of the series. The shares this reads are
heavy-tailed (mostly ~0, single days of a few %), so a Gaussian test is far too confident (a lone day of
3.9 % next to one of 0.9 % among days of ~0.3 %: Student p = 0.004). The test is distribution-free instead:
Cantelli's one-sided inequality bounds the chance that one day lies ``k`` standard deviations from the
mean by ``1 / (1 + k^2)``, for any distribution with a variance; with the days independent, a burst whose
days all lie on one side has ``p <= 2 * prod_i 1 / (1 + k_i^2)`` (two-sided), ``k_i`` the day's distance from
the rest's mean in the rest's standard deviations (their estimation error is not accounted for). The
series' p-value is the smallest interval bound times the number of intervals tested (Bonferroni); the
caller adjusts across series (Benjamini-Hochberg). Reported: the interval with the smallest p, its
absolute and relative effect, the smallest ``k_i`` as the statistic, and a Student interval of the
difference of means (conditional on the interval, Gaussian: a description, not the test). Pure numpy +
scipy, no I/O.

A burst needs at least one settled day (``settled``: not provisional, docs/incremental.md) among its own: an interval
made only of the days the next build rebuilds is not tested (nor counted in the Bonferroni factor). On the daily
path those are the latest days, whose allocations are incomplete until the jobs that ran over midnight are reported:
`incidents` seed 1's soak read cluster a100b's idle fragmented share (a spare cluster, full from the mix shift of
10-21 on) as 1.5-3.5 % on its two latest days at every run from 10-23 to 10-27, and 0.03-0.14 % once those days had
settled, so one 2-day "burst" walked a day per run and paged. A real burst is then reported when its first day
settles: a lookback later, dated as before.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
from scipy import stats

MIN_REST_POINTS = 10  # days outside the burst needed to estimate the baseline and its noise


@dataclass(frozen=True)
class Burst:
    start: int  # original column of the burst's first day
    stop: int  # original column after its last day
    n_inside: int
    n_rest: int
    inside_level: float  # pooled Σnum/Σden over the burst's days
    rest_level: float  # pooled over the other valid days
    inside_numerator: float
    inside_denominator: float
    rest_numerator: float
    rest_denominator: float
    absolute_effect: float  # mean daily ratio inside - outside
    ci_low: float  # Student interval of the absolute effect (confidence of the call)
    ci_high: float
    statistic: float  # the smallest |day - rest mean| / rest sd over the burst's days (signed by the burst)
    p_value: float  # Cantelli bound, Bonferroni over the intervals of the series: min(1, p_min * intervals)
    intervals: int


def scan_burst(
    numerators: np.ndarray,
    denominators: np.ndarray,
    max_length: int = 2,
    confidence: float = 0.95,
    min_length: int = 2,
    settled: np.ndarray | None = None,
) -> Burst | None:
    """The strongest burst of one series (1-D arrays, one value per day; NaN or den <= 0 unknown), or None
    when fewer than ``MIN_REST_POINTS + 1`` days are known or the rest has no spread. ``settled`` (booleans, one per
    day; default all): an interval of unsettled days only is not a candidate."""
    num = np.asarray(numerators, dtype=float)
    den = np.asarray(denominators, dtype=float)
    with np.errstate(divide="ignore", invalid="ignore"):
        valid = np.isfinite(num) & np.isfinite(den) & (den > 0)
    columns = np.flatnonzero(valid)
    n = columns.size
    if n < MIN_REST_POINTS + 1:
        return None
    y = num[columns] / den[columns]
    settled_days = np.ones(n, dtype=bool) if settled is None else np.asarray(settled, dtype=bool)[columns]
    best: tuple[float, int, int, float, float, float] | None = None
    intervals = 0
    for length in range(min_length, max_length + 1):
        if n - length < MIN_REST_POINTS:
            break
        for i in range(n - length + 1):
            if columns[i + length - 1] - columns[i] != length - 1:
                continue  # a burst is consecutive days
            if not settled_days[i : i + length].any():
                continue  # only days the next build rebuilds: not tested yet
            intervals += 1
            inside = y[i : i + length]
            rest = np.concatenate([y[:i], y[i + length :]])
            sd = rest.std(ddof=1)
            if not sd > 0:
                continue
            se = sd * math.sqrt(1.0 / length + 1.0 / rest.size)
            diff = float(inside.mean() - rest.mean())
            k = (inside - rest.mean()) / sd
            if not (np.all(k > 0) or np.all(k < 0)):
                continue  # not a burst: its days lie on both sides of the baseline
            p = min(1.0, float(2.0 * np.prod(1.0 / (1.0 + k * k))))
            weakest = float(np.sign(diff) * np.min(np.abs(k)))
            if best is None or p < best[0] or (p == best[0] and abs(weakest) > abs(best[3])):
                best = (p, i, length, weakest, diff, se)
    if best is None:
        return None
    p, i, length, t, diff, se = best
    df = n - length - 1
    q = float(stats.t.ppf(0.5 + confidence / 2.0, df))
    inside_cols = columns[i : i + length]
    rest_cols = np.concatenate([columns[:i], columns[i + length :]])
    inside_num, inside_den = float(num[inside_cols].sum()), float(den[inside_cols].sum())
    rest_num, rest_den = float(num[rest_cols].sum()), float(den[rest_cols].sum())
    return Burst(
        start=int(inside_cols[0]),
        stop=int(inside_cols[-1]) + 1,
        n_inside=length,
        n_rest=int(rest_cols.size),
        inside_level=inside_num / inside_den,
        rest_level=rest_num / rest_den,
        inside_numerator=inside_num,
        inside_denominator=inside_den,
        rest_numerator=rest_num,
        rest_denominator=rest_den,
        absolute_effect=diff,
        ci_low=diff - q * se,
        ci_high=diff + q * se,
        statistic=float(t),
        p_value=min(1.0, p * intervals),
        intervals=intervals,
    )
