"""Change points in daily ratio series: a max-scan Welch t, calibrated by permutation, with binary segmentation.

Pure numpy + scipy, no I/O. Input: a matrix of numerators and a matrix of denominators (one row
per series, one column per day), e.g. useful FLOPs and productive peak-FLOP-seconds per cluster-day.
Output: a list of :class:`ChangePoint`, each naming the row, the first day of the new regime, the
pooled levels before and after, the relative effect, its confidence interval and a p-value that
accounts for the scan over split points.

Method, per series (all series of the same length at once):

1. ``y = log(numerator / denominator)`` for the valid points (metric_tree.md section 2.8: run CPD
   on log-factor series, so a shift in ``ln G`` is the sum of the factors' shifts). A point is
   missing, i.e. unknown and never zero, when either value is NaN or the denominator is <= 0;
   missing points are dropped from the series (the result keeps the original column index).
   A point with a numerator of exactly 0 has no logarithm and is dropped as well; it is not an
   observation this detector can model, so surface zero days elsewhere.
2. For every split ``k`` with ``min_segment <= k <= n - min_segment`` the Welch t of
   ``mean(y[k:]) - mean(y[:k])`` is computed from cumulative sums (O(n) per series, no Python loop
   over splits). The split with the largest ``|t|`` is the candidate.
3. Its p-value is a permutation test of ``max_k |t_k|``: the points of the series are permuted
   ``n_permutations`` times and the whole scan is repeated on each permutation (a batch
   dimension), ``p = (1 + #{perm: max|t| >= observed}) / (1 + n_permutations)``. This is honest for
   the scan, which a plain t-test p-value at the chosen split is not (it is far too small). The
   permutations depend only on ``(seed, segment length)``, so a series gets the same p-value alone
   or in a batch.
4. Levels are pooled: ``sum(num) / sum(den)`` over each side (never the mean of daily ratios), and
   ``relative_effect = after_level / before_level - 1``. The confidence interval is the Welch
   interval (t distribution, Welch-Satterthwaite df) of ``d = mean(y_after) - mean(y_before)``,
   mapped through ``exp(.) - 1``: ``[exp(d_lo) - 1, exp(d_hi) - 1]``. So the point estimate is
   pooled while the interval is of the mean log ratio; both are reported (``relative_effect`` and
   ``mean_log_difference``). When denominators vary a lot between days the pooled estimate can lie
   outside the interval. The interval is conditional on the chosen split and is not widened for
   the selection of that split, so it is somewhat optimistic; the p-value is the calibrated number.
5. A candidate is accepted when ``p <= max_pvalue`` and ``|relative_effect| >= min_relative_effect``
   (effect measured inside the scanned segment). Binary segmentation: after a change is accepted,
   the left and right segments are scanned again (each needs ``>= 2 * min_segment`` valid points),
   up to ``max_changes`` per series. When a round of segmentation accepts more candidates for a
   series than its remaining budget, the smallest p-values (then the largest ``|t|``) win. A
   rejected candidate ends the recursion for its segment.
6. Final segmentation: every accepted change is then measured between its neighbouring changes
   (the series start and end for the outer ones): ``n_before``, ``n_after``, the pooled levels,
   ``relative_effect`` and the interval describe those segments, because the first scan of a
   series with two changes sees both later regimes on one side and would understate the step. If
   a change's effect falls below ``min_relative_effect`` there, the weakest such change of the
   series is merged away and the others are measured again (a merge step in the spirit of
   Hunter's, on effect size only). ``p_value`` and ``statistic`` stay those of the scan that
   found the change: the p-value is calibrated for that scan, a re-test at a chosen split would
   not be.

Related work. Matteson & James, "A Nonparametric Approach for Multiple Change Point Analysis of
Multivariate Data" (E-divisive, arXiv 1306.4933) find change points by a divergence-based
bisection whose significance is also a permutation test. Fleming et al., "Hunter: Using Change
Point Detection to Hunt for Performance Regressions" (ICPE 2023, doi 10.1145/3578244.3583719;
continued as Apache Otava) replace E-divisive's permutations by a split/merge scheme with a
Student t-test over sliding windows. This detector differs from both: it uses a single-split
scan of a mean-shift Welch t on log ratios (a parametric statistic, not an energy distance),
calibrates the maximum of the scan by permutation (Hunter's p-values are those of a t-test at a
split already chosen, not adjusted for the choice), computes the scan for all splits, all series
and all permutations as array operations, and recurses by plain binary segmentation, merging
afterwards only on effect size (step 6), not on a re-test. Its inputs are numerator and
denominator, so levels and effects are pooled ratios that the metric tree can decompose.

Zero variance: the standard error is floored at ``LOG_RESOLUTION`` (differences in ``y`` below
that are numerical noise), so a perfectly constant series gives t = 0 and no change point, and a
noiseless step gives a very large, finite t.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
from scipy import stats

__all__ = [
    "DEFAULT_CONFIG",
    "LOG_RESOLUTION",
    "ChangePoint",
    "DetectorConfig",
    "detect_change_points",
    "log_ratios",
    "scan_welch_t",
]

#: Smallest standard error (in log-ratio units) the t statistics use; smaller is rounding noise.
LOG_RESOLUTION = 1e-9
# Relative tolerance when counting permuted statistics >= the observed one (rounding ties).
_TIE_RTOL = 1e-9
# Elements of the (series x permutations x points) block scanned at once; bounds memory (~16 MB).
_CHUNK_ELEMENTS = 2_000_000


@dataclass(frozen=True)
class DetectorConfig:
    """Every knob of :func:`detect_change_points`; immutable, so a shared default is safe."""

    min_segment: int = 3  # valid points on each side of a change
    max_pvalue: float = 0.01  # significance after the scan correction
    min_relative_effect: float = 0.03  # |after/before - 1| below this is not reported
    n_permutations: int = 999  # for the scan p-value
    confidence: float = 0.95  # of the relative-effect interval
    seed: int = 0  # of the permutations
    max_changes: int = 3  # per series (binary segmentation depth)

    def __post_init__(self) -> None:
        if self.min_segment < 2:
            raise ValueError(f"min_segment must be >= 2 (a variance needs 2 points), got {self.min_segment}")
        if not 0.0 < self.max_pvalue <= 1.0:
            raise ValueError(f"max_pvalue must be in (0, 1], got {self.max_pvalue}")
        if self.min_relative_effect < 0.0:
            raise ValueError(f"min_relative_effect must be >= 0, got {self.min_relative_effect}")
        if self.n_permutations < 1:
            raise ValueError(f"n_permutations must be >= 1, got {self.n_permutations}")
        if 1.0 / (1 + self.n_permutations) > self.max_pvalue:
            raise ValueError(
                f"n_permutations={self.n_permutations} cannot reach max_pvalue={self.max_pvalue}: "
                f"the smallest permutation p-value is 1/(1+n_permutations)"
            )
        if not 0.0 < self.confidence < 1.0:
            raise ValueError(f"confidence must be in (0, 1), got {self.confidence}")
        if self.seed < 0:
            raise ValueError(f"seed must be >= 0, got {self.seed}")
        if self.max_changes < 1:
            raise ValueError(f"max_changes must be >= 1, got {self.max_changes}")

    @property
    def test_name(self) -> str:
        return (
            f"max-scan Welch t on daily log ratios, permutation p ({self.n_permutations}), "
            f"Welch CI ({self.confidence:.0%})"
        )


DEFAULT_CONFIG = DetectorConfig()


@dataclass(frozen=True)
class ChangePoint:
    """One accepted change. Levels are pooled, ``sum(num) / sum(den)`` over the segment.

    The before/after segments run to the neighbouring changes of the same series (or its ends);
    counts, sums, levels, effect and interval describe them. ``p_value`` and ``statistic`` come
    from the scan that found the change.
    """

    series_index: int  # row of the input matrix
    index: int  # original column of the first valid point of the new regime
    n_before: int  # valid points from the previous change (or the start) up to this one
    n_after: int  # valid points from this change up to the next one (or the end)
    before_level: float
    after_level: float
    before_numerator: float
    before_denominator: float
    after_numerator: float
    after_denominator: float
    relative_effect: float  # after_level / before_level - 1 (pooled)
    ci_low: float  # exp(d_lo) - 1, Welch CI of d = mean(y_after) - mean(y_before)
    ci_high: float
    p_value: float  # permutation p of max |t| over all splits of the scanned segment
    statistic: float  # Welch t of the chosen split in that scan (negative for a drop)
    test: str
    mean_log_difference: float  # d, the centre of the interval on the log scale


def log_ratios(numerators: np.ndarray, denominators: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Return ``(y, valid)``: ``log(num/den)`` (NaN where not valid) and the validity mask.

    Valid means both values are finite, the denominator is > 0 and the numerator is > 0.
    Raises ``ValueError`` on infinite values and on negative numerators with a positive
    denominator: those are broken inputs, not missing ones.
    """
    num = np.asarray(numerators, dtype=float)
    den = np.asarray(denominators, dtype=float)
    if num.shape != den.shape:
        raise ValueError(f"numerators {num.shape} and denominators {den.shape} differ in shape")
    if np.isinf(num).any() or np.isinf(den).any():
        raise ValueError("infinite numerator or denominator (use NaN for a missing point)")
    with np.errstate(invalid="ignore"):
        present = ~np.isnan(num) & ~np.isnan(den) & (den > 0)
        if (present & (num < 0)).any():
            row, col = np.argwhere(present & (num < 0))[0]
            raise ValueError(f"negative numerator at series {row}, point {col}")
        valid = present & (num > 0)
    y = np.full(num.shape, np.nan)
    y[valid] = np.log(num[valid] / den[valid])
    return y, valid


def _scan_moments(yc: np.ndarray, min_segment: int) -> tuple[np.ndarray, np.ndarray]:
    """Mean difference (right - left) and floored Welch variance for every split, last axis.

    ``yc`` is complete (no NaN) and should be centred per series for accuracy. Split ``j`` of the
    output has ``min_segment + j`` points on the left.
    """
    n = yc.shape[-1]
    m = min_segment
    s1 = np.cumsum(yc, axis=-1)
    s2 = np.cumsum(yc * yc, axis=-1)
    sl = s1[..., m - 1 : n - m]
    ql = s2[..., m - 1 : n - m]
    sr = s1[..., -1:] - sl
    qr = s2[..., -1:] - ql
    nl = np.arange(m, n - m + 1, dtype=float)
    nr = n - nl
    ml = sl / nl
    mr = sr / nr
    vl = np.maximum(ql - sl * ml, 0.0) / (nl - 1.0)
    vr = np.maximum(qr - sr * mr, 0.0) / (nr - 1.0)
    se2 = np.maximum(vl / nl + vr / nr, LOG_RESOLUTION * LOG_RESOLUTION)
    return mr - ml, se2


def scan_welch_t(y: np.ndarray, min_segment: int) -> np.ndarray:
    """Welch t of ``mean(y[k:]) - mean(y[:k])`` for ``k = min_segment .. n - min_segment``.

    ``y`` has any leading shape and complete rows on the last axis (no NaN). The result has the
    same leading shape and ``n - 2 * min_segment + 1`` splits on the last axis (empty if the
    series is too short). Standard errors are floored at ``LOG_RESOLUTION``.
    """
    y = np.asarray(y, dtype=float)
    n = y.shape[-1]
    if n < 2 * min_segment:
        return np.empty(y.shape[:-1] + (0,))
    diff, se2 = _scan_moments(y - y.mean(axis=-1, keepdims=True), min_segment)
    return diff / np.sqrt(se2)


def _permutations(seed: int, length: int, count: int) -> np.ndarray:
    """``count`` permutations of ``range(length)``, a function of ``(seed, length)`` only."""
    rng = np.random.default_rng([seed, length])
    return rng.permuted(np.tile(np.arange(length), (count, 1)), axis=1)


@dataclass(frozen=True)
class _Scan:
    split: np.ndarray  # (G,) points on the left of the chosen split
    statistic: np.ndarray  # (G,) Welch t at the split
    p_value: np.ndarray  # (G,)


def _scan_group(y: np.ndarray, config: DetectorConfig) -> _Scan:
    """Best split and its permutation p-value for each row of the complete matrix ``y`` (G, L)."""
    g, length = y.shape
    m = config.min_segment
    yc = y - y.mean(axis=1, keepdims=True)
    diff, se2 = _scan_moments(yc, m)
    t2 = diff * diff / se2
    best = np.argmax(t2, axis=1)
    rows = np.arange(g)
    statistic = diff[rows, best] / np.sqrt(se2[rows, best])
    threshold = t2[rows, best] * (1.0 - _TIE_RTOL)

    perms = _permutations(config.seed, length, config.n_permutations)
    exceed = np.zeros(g, dtype=np.int64)
    chunk = max(1, _CHUNK_ELEMENTS // (config.n_permutations * length))
    for start in range(0, g, chunk):
        stop = min(start + chunk, g)
        permuted = yc[start:stop][:, perms]  # (chunk, P, L)
        pdiff, pse2 = _scan_moments(permuted, m)
        pmax = (pdiff * pdiff / pse2).max(axis=-1)  # (chunk, P)
        exceed[start:stop] = (pmax >= threshold[start:stop, None]).sum(axis=1)
    p_value = (1.0 + exceed) / (1.0 + config.n_permutations)
    return _Scan(split=best + m, statistic=statistic, p_value=p_value)


def _pooled_effect(num: np.ndarray, den: np.ndarray, split: np.ndarray) -> np.ndarray:
    """``after_level / before_level - 1`` with pooled levels, for each row of (G, L) at ``split``."""
    left = np.arange(num.shape[1])[None, :] < split[:, None]
    before = np.where(left, num, 0.0).sum(axis=1) / np.where(left, den, 0.0).sum(axis=1)
    after = np.where(left, 0.0, num).sum(axis=1) / np.where(left, 0.0, den).sum(axis=1)
    return after / before - 1.0


def _split_summary(
    y: np.ndarray, num: np.ndarray, den: np.ndarray, split: np.ndarray, confidence: float
) -> dict[str, np.ndarray]:
    """Pooled levels, mean log difference and Welch CI at ``split`` for each row of (G, L)."""
    length = y.shape[1]
    left = np.arange(length)[None, :] < split[:, None]
    right = ~left
    nb = split.astype(float)
    na = length - nb
    mb = np.where(left, y, 0.0).sum(axis=1) / nb
    ma = np.where(right, y, 0.0).sum(axis=1) / na
    vb = np.where(left, (y - mb[:, None]) ** 2, 0.0).sum(axis=1) / (nb - 1.0)
    va = np.where(right, (y - ma[:, None]) ** 2, 0.0).sum(axis=1) / (na - 1.0)
    ab = vb / nb
    aa = va / na
    se2 = ab + aa
    df_den = ab * ab / (nb - 1.0) + aa * aa / (na - 1.0)
    safe = df_den > 0
    df = np.where(safe, se2 * se2 / np.where(safe, df_den, 1.0), nb + na - 2.0)
    se = np.sqrt(np.maximum(se2, LOG_RESOLUTION * LOG_RESOLUTION))
    q = stats.t.ppf(0.5 + confidence / 2.0, df)
    d = ma - mb
    bn = np.where(left, num, 0.0).sum(axis=1)
    bd = np.where(left, den, 0.0).sum(axis=1)
    an = np.where(right, num, 0.0).sum(axis=1)
    ad = np.where(right, den, 0.0).sum(axis=1)
    before_level = bn / bd
    after_level = an / ad
    return {
        "n_before": split,
        "n_after": length - split,
        "before_level": before_level,
        "after_level": after_level,
        "before_numerator": bn,
        "before_denominator": bd,
        "after_numerator": an,
        "after_denominator": ad,
        "relative_effect": after_level / before_level - 1.0,
        "ci_low": np.expm1(d - q * se),
        "ci_high": np.expm1(d + q * se),
        "mean_log_difference": d,
    }


def detect_change_points(
    numerators: np.ndarray,
    denominators: np.ndarray,
    config: DetectorConfig = DEFAULT_CONFIG,
) -> list[ChangePoint]:
    """Change points of every row of ``numerators / denominators`` (n_series x n_points).

    A 1-D input is one series (``series_index`` 0). NaN or a denominator <= 0 marks a missing
    point; it is left out of that series' statistics, and ``index`` is the original column of the
    first valid point after the change. Rows are processed in groups of equal valid length, so
    the scan and the permutations stay array operations. The result is sorted by
    ``(series_index, index)`` and is a deterministic function of the inputs and ``config``; a row
    gets the same result alone or in a batch. See the module docstring for the method.
    """
    num = np.asarray(numerators, dtype=float)
    den = np.asarray(denominators, dtype=float)
    if num.ndim == 1 and den.ndim == 1:
        num, den = num[None, :], den[None, :]
    if num.ndim != 2 or num.shape != den.shape:
        raise ValueError(f"expected two 2-D arrays of one shape, got {num.shape} and {den.shape}")
    y, valid = log_ratios(num, den)
    m = config.min_segment

    # Compact each row: valid points first, in order; `order` maps back to original columns.
    order = np.argsort(~valid, axis=1, kind="stable")
    n_valid = valid.sum(axis=1)
    yc = np.take_along_axis(np.where(valid, y, 0.0), order, axis=1)
    numc = np.take_along_axis(np.where(valid, num, 0.0), order, axis=1)
    denc = np.take_along_axis(np.where(valid, den, 0.0), order, axis=1)

    # Phase 1, binary segmentation. Pending segments [start, end) are in compacted coordinates;
    # one round of bisection at a time, all pending segments of one length scanned together.
    rows = np.flatnonzero(n_valid >= 2 * m)
    starts = np.zeros(rows.size, dtype=np.int64)
    ends = n_valid[rows].astype(np.int64)
    budget = np.full(num.shape[0], config.max_changes, dtype=np.int64)
    accepted: dict[int, dict[int, tuple[float, float]]] = {}  # row -> {compact split: (p, t)}

    while rows.size:
        lengths = ends - starts
        candidates: list[tuple[float, float, int, int, int, int, float]] = []
        for length in np.unique(lengths):
            sel = np.flatnonzero(lengths == length)
            r, s = rows[sel], starts[sel]
            cols = s[:, None] + np.arange(length)[None, :]
            gy = yc[r[:, None], cols]
            scan = _scan_group(gy, config)
            effect = _pooled_effect(numc[r[:, None], cols], denc[r[:, None], cols], scan.split)
            ok = (scan.p_value <= config.max_pvalue) & (np.abs(effect) >= config.min_relative_effect)
            for i in np.flatnonzero(ok):
                p, t = float(scan.p_value[i]), float(scan.statistic[i])
                mid = int(s[i] + scan.split[i])
                candidates.append((p, -abs(t), int(r[i]), int(s[i]), mid, int(ends[sel[i]]), t))

        next_segments: list[tuple[int, int, int]] = []
        for p, _, row, start, mid, end, t in sorted(candidates):
            if budget[row] <= 0:
                continue
            budget[row] -= 1
            accepted.setdefault(row, {})[mid] = (p, t)
            next_segments += [(row, a, b) for a, b in ((start, mid), (mid, end)) if b - a >= 2 * m]
        next_segments = [seg for seg in next_segments if budget[seg[0]] > 0]
        rows = np.asarray([seg[0] for seg in next_segments], dtype=np.int64)
        starts = np.asarray([seg[1] for seg in next_segments], dtype=np.int64)
        ends = np.asarray([seg[2] for seg in next_segments], dtype=np.int64)

    # Phase 2, final segmentation: each change is measured between its neighbouring changes (the
    # first scan of a series with two changes sees both later regimes on one side). If that makes
    # an effect smaller than min_relative_effect, the weakest such change of the series is merged
    # away and its neighbours are measured again.
    splits = {row: sorted(mids) for row, mids in accepted.items()}
    while True:
        items: list[tuple[int, int, int, int]] = []  # (row, previous bound, change, next bound)
        for row, mids in sorted(splits.items()):
            bounds = [0, *mids, int(n_valid[row])]
            items += [(row, bounds[i], bounds[i + 1], bounds[i + 2]) for i in range(len(mids))]
        summaries = _summaries(items, yc, numc, denc, config.confidence)
        weakest: dict[int, tuple[float, int]] = {}
        for (row, _, mid, _), summary in zip(items, summaries):
            effect = abs(summary["relative_effect"])
            if effect < config.min_relative_effect and effect < weakest.get(row, (math.inf, 0))[0]:
                weakest[row] = (effect, mid)
        if not weakest:
            break
        for row, (_, mid) in weakest.items():
            splits[row].remove(mid)

    test_name = config.test_name
    found = []
    for (row, _, mid, _), summary in zip(items, summaries):
        p, t = accepted[row][mid]
        found.append(
            ChangePoint(
                series_index=row,
                index=int(order[row, mid]),
                n_before=int(summary["n_before"]),
                n_after=int(summary["n_after"]),
                before_level=float(summary["before_level"]),
                after_level=float(summary["after_level"]),
                before_numerator=float(summary["before_numerator"]),
                before_denominator=float(summary["before_denominator"]),
                after_numerator=float(summary["after_numerator"]),
                after_denominator=float(summary["after_denominator"]),
                relative_effect=float(summary["relative_effect"]),
                ci_low=float(summary["ci_low"]),
                ci_high=float(summary["ci_high"]),
                p_value=p,
                statistic=t,
                test=test_name,
                mean_log_difference=float(summary["mean_log_difference"]),
            )
        )
    return sorted(found, key=lambda cp: (cp.series_index, cp.index))


def _summaries(
    items: list[tuple[int, int, int, int]],
    yc: np.ndarray,
    numc: np.ndarray,
    denc: np.ndarray,
    confidence: float,
) -> list[dict[str, float]]:
    """:func:`_split_summary` of each ``(row, lo, split, hi)`` (compacted), grouped by ``hi - lo``."""
    out: list[dict[str, float]] = [{} for _ in items]
    if not items:
        return out
    arr = np.asarray(items, dtype=np.int64).reshape(-1, 4)
    lengths = arr[:, 3] - arr[:, 1]
    for length in np.unique(lengths):
        sel = np.flatnonzero(lengths == length)
        r, lo = arr[sel, 0], arr[sel, 1]
        cols = lo[:, None] + np.arange(length)[None, :]
        summary = _split_summary(
            yc[r[:, None], cols], numc[r[:, None], cols], denc[r[:, None], cols], arr[sel, 2] - lo, confidence
        )
        for j, i in enumerate(sel):
            out[i] = {key: value[j] for key, value in summary.items()}
    return out
