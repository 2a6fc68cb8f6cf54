"""Change points in daily ratio series: a max-scan statistic calibrated by permutation, split-and-merge segmentation,
Benjamini-Hochberg across the series of a run, bootstrap intervals and a verdict.

Pure numpy + scipy, no I/O. Input: a matrix of numerators and a matrix of denominators (one row
per series, one column per day), e.g. useful FLOPs and productive peak-FLOP-seconds per cluster-day;
a series of plain values has denominator 1. :func:`detect` returns every accepted
:class:`ChangePoint` and one :class:`SeriesResult` per row (tested or too short, first-scan p and q);
:func:`detect_change_points` returns the change points only (the original interface).

Method, per series (all series of the same length at once):

1. ``y = log(numerator / denominator)`` for the valid points (``scale="log"``, the default;
   metric_tree.md section 2.8: run CPD on log-factor series, so a shift in ``ln G`` is the sum of
   the factors' shifts). A point is missing, i.e. unknown and never zero, when either value is NaN
   or the denominator is <= 0; missing points are dropped from the series (the result keeps the
   original column index). In log scale a numerator of exactly 0 has no logarithm and is dropped
   as well, a negative one is an error. ``scale="linear"`` uses ``y = numerator / denominator``
   and accepts any sign (for values that can be <= 0); effects are then
   ``(after - before) / |before|`` (NaN when the before level is 0).
2. Too short: a series (or a segment in the recursion) is tested only when it has at least
   ``config.min_testable_length()`` valid points: ``>= 2 * min_segment`` and enough points that
   the scan's permutation p-value CAN reach ``max_pvalue``. The smallest p-value any scan over
   the ``n!`` orders of ``n`` distinct values can have is ``2 / C(n, n // 2)`` (the two halves
   perfectly separated at the middle split); with ``max_pvalue = 0.01`` that needs ``n >= 10``.
   A shorter series is reported with status ``too_short`` (no test), never as "no change".
3. For every split ``k`` with ``min_segment <= k <= n - min_segment`` a two-sample statistic of
   "the points from ``k`` on differ from those before" is computed from cumulative sums (O(n)
   per series, no Python loop over splits); the split with the largest ``|statistic|`` is the
   candidate. ``statistic="student"`` (the default): the pooled-variance t of
   ``mean(y[k:]) - mean(y[:k])``, i.e. the likelihood-ratio scan for one mean shift in Gaussian
   noise. ``statistic="welch"``: the Welch t (each side its own variance; this detector's first
   statistic). Welch's t at a split with 3 points on one side divides by a 2-degree-of-freedom
   variance, so permuted series often reach a large maximum there; the permutation p of a real
   step is then large. Measured: a -5% step in 12 + 12 days with 2% noise, 200 series, p <= 0.01:
   Welch finds 151, Student 200, rank 197; all three keep the nominal rate on noise.
   ``statistic="rank"`` (the robust variant): the standardised rank sum of ``y[k:]`` (a
   Mann-Whitney / Wilcoxon z with mid-ranks for ties, ranks taken within the scanned segment;
   the scan is Pettitt's test, standardised per split). Ranks make a few spikes count as "the
   largest points", not by their size, so heavy tails and outliers neither inflate the noise
   estimate (which costs the t scans their power on a real step) nor drive the split.
   ``statistic="huber"``: the Student scan of the values clipped to ``median +- HUBER_K * 1.4826 *
   MAD`` of the scanned segment (Huber's psi around the median, ``HUBER_K = 2``). The bounds are a
   function of the segment's multiset of values, so clipping commutes with permutation and the test
   stays exact; a clean step keeps its power (the step itself widens the MAD, so its points are
   hardly clipped), while a spike counts at most ``2`` robust standard deviations. Its levels and
   effects are pooled, as for the t scans.
4. Its p-value is a permutation test of ``max_k |statistic_k|``: the points of the segment are
   permuted ``n_permutations`` times and the whole scan is repeated on each permutation (a batch
   dimension), ``p = (1 + #{perm: max >= observed}) / (1 + n_permutations)``. For the Student
   and rank scans the maximum |t| (|z|) is the maximum of ``S_k^2 / (n_left n_right)`` (``S_k`` the
   cumulative sum of the centred values or ranks; the total sum of squares does not change under
   permutation), so each permutation costs one cumulative sum. This is honest for
   the scan, which a plain t-test p-value at the chosen split is not (far too small), and it is
   exact under exchangeable noise of any distribution, for each statistic. The permutations
   depend only on ``(seed, segment length)``, so the p-value of a segment does not depend on the
   other series of the batch.
5. False discovery rate: the p-values of one round of scans across all series of the call are
   turned into Benjamini-Hochberg q-values (round 1: one hypothesis per tested series, "this
   series has a change"; each later round of the binary segmentation: one per segment opened by
   the previous round's discoveries: sub-segments are tested only under a discovered parent, in
   the spirit of Yekutieli's hierarchical FDR (2008), but each round is one pooled family and the
   FDR bound of the whole tree is not proven here; the first round is plain BH). A
   candidate is accepted when ``p <= max_pvalue`` (for a sub-segment of the binary segmentation,
   step 6: ``p <= min(max_pvalue, split_pvalue)``), ``q <= max_qvalue`` (unless ``max_qvalue`` is
   None: per-series testing, the q-value is then only reported) and
   ``|relative_effect| >= min_relative_effect`` (per metric from ``min_relative_effects`` when
   :func:`detect` gets metric names; effect measured inside the scanned segment). With
   ``effect_floor="interval"`` the minimum is judged on the far end (away from zero) of the
   effect's two-sided ``floor_confidence`` (0.8) Welch interval instead: a significant change is
   dropped only when the data put its effect under the minimum, so a real 3 % step estimated at
   2.9 % is kept (and reported with its 2.9 % estimate). The default, ``"estimate"``, drops it: the
   minimum effect is the warehouse's "too small to matter" line, and on the benchmark
   (docs/benchmarks.md) the interval rule found more 3 % steps but more spurious drift changes.
   A permutation p-value is never below ``1 / (1 + n_permutations)``, so with ``m`` tested series
   a single discovery would need ``m / (1 + n_permutations) <= max_qvalue``. Adaptive refinement
   (:func:`_refine_floor_pvalues`, in the spirit of Besag & Clifford's sequential Monte Carlo
   p-values, 1991): a hypothesis whose p is at the floor (no permutation reached its maximum), that
   is otherwise acceptable (p <= the round's p threshold, effect large enough) and that BH rejects
   now but would accept at the floor ``1 / (1 + max_permutations)`` gets more permutations, in
   batches that double its count, for it alone, until one permutation reaches its maximum, BH
   accepts it, or ``max_permutations`` is reached. The others keep their p-values. Deterministic: a
   batch's permutations depend on ``(seed, segment length, permutations so far)``. With BH on, the
   q-value and so the acceptance of a series depend on the other
   series of the call, by design.
6. Binary segmentation: after a change is accepted, the left and right segments are scanned again
   (each needs ``min_testable_length`` valid points), up to ``max_changes`` per series. A
   sub-segment's change needs ``p <= min(max_pvalue, split_pvalue)`` (default 0.01): with a
   lenient ``max_pvalue`` (0.1) each sub-segment of a series with one real change would otherwise
   add a spurious change with probability up to 0.1 per scan; a real second change is usually far
   below 0.01. (With permutations, ``1 / (1 + n_permutations)`` must reach that threshold.) When a
   round accepts more candidates for a series than its remaining budget, the smallest p-values
   (then the largest ``|statistic|``) win. With ``segmentation="binary"`` a rejected candidate ends the
   recursion for its segment.
   Split and merge (``segmentation="split_merge"``, the default; in the manner of Hunter / Apache Otava's
   split-then-merge and E-divisive's proposals). A staircase (two or more steps in one direction, or steps close
   together) defeats plain binary segmentation: the first scan takes the largest step, and a sub-segment that
   still holds two steps has its variance inflated by the one its split does not take, so its p misses
   ``split_pvalue`` and the recursion stops (incidents seeds 101/102: a framework upgrade seen three days late).
   So a sub-segment candidate that misses ``split_pvalue`` but has ``p <= propose_pvalue`` (0.05), BH
   ``q <= max_qvalue`` in its round (``propose_fdr``: the FDR across the run's series still decides; only the
   per-scan guard is relaxed) and a large enough effect is a *proposal*: it is kept provisionally and the
   recursion continues under it (a budget of ``max_changes`` proposals per series, apart from the changes the
   scans accept). Step 7 then tests each proposal between its neighbouring changes (merge test) and merges away
   the weakest until every proposal left passes.
7. Final segmentation: every accepted change is then measured between its neighbouring changes
   (the series start and end for the outer ones): ``n_before``, ``n_after``, the pooled levels
   ``sum(num) / sum(den)`` (never the mean of daily ratios), ``relative_effect = after / before - 1``
   and its intervals describe those segments. With ``statistic="rank"`` the levels are the medians
   of the daily ratios instead (a spike must not move the effect that the minimum-effect rule
   judges), for the effect filter of step 5 as well; the numerator and denominator sums are still
   reported. If a change's effect falls below its minimum there (judged as in step 5: the
   estimate, or with ``effect_floor="interval"`` the far end of its interval), the weakest such
   change of the series is merged away and the others are measured again (a merge step in the
   spirit of Hunter's, on effect size only). ``p_value``, ``q_value`` and
   ``statistic`` stay those of the scan that found the change.
   Merge test (split_merge): each proposal's split is tested on the window between its neighbouring changes
   (:func:`_merge_pvalues`): a two-sided Student t (Welch for ``"welch"``, the Huber-clipped t for ``"huber"``,
   the rank-sum z for ``"rank"``) multiplied by the number of splits the window allows (Bonferroni for the split
   having been chosen in it). Parametric, because a window between two close changes is too short for a
   permutation p to reach a small threshold (8 points: 2 / C(8, 4) = 0.029 at best). Per series and pass: an
   effect under its minimum is merged first (as above), else the proposal with the largest merge p above
   ``merge_pvalue`` (0.001), else, while more than ``max_changes`` changes are left, the proposal with the
   largest merge p; then all are measured again. A kept proposal reports its merge p (``merge_p_value``; None
   for a change its scan accepted on its own).
   Interval ends (``epidemic``, ``merge_interval_ends``, the default): the end an epidemic scan reports was accepted on
   the test of its interval against the rest, never on a test of its own split. While the interval's other end is a
   change of the series too (a split within ``min_segment`` points of it), the reported end must pass the merge test
   between its neighbouring changes at ``sub_segment_pvalue`` (the guard any sub-segment change needs), else it is
   merged away; while the other end is not a change, the interval's test stands for it (a dip and its recovery: a
   step test across both reads p = 1). fleet-1k seed 1: an upgrade on 10-08 after a two-day dip on 10-02/03 and a
   rollout on 10-21 gave the interval [10-04, 10-21) against the rest; 10-04 stayed, +4.6 %, four days before the
   upgrade (merge p 0.013-0.027 on the seven nodes that had it), a false alarm of seven rows.
8. Evidence per change. ``ci_low``/``ci_high``: a percentile bootstrap interval of the pooled
   relative effect itself (days resampled with replacement within each side, ``n_bootstrap``
   resamples; the resampling weights depend only on ``(seed, n_before, n_after)`` and are applied
   to all changes of those sizes at once as one weighted sum). ``welch_ci_low``/``welch_ci_high``:
   the Welch interval of the mean log difference ``d`` mapped through ``exp(.) - 1`` (linear scale:
   of the mean difference, divided by ``|before level|``). Both are conditional on the chosen split
   and not widened for its selection; the percentile bootstrap also undercovers on very short
   sides (3-5 points). ``direction``: ``up`` or ``down`` (an improvement or a regression depending
   on the metric; :mod:`perf_assets.lib.detection` maps it with the metric's direction).
   ``verdict``: ``confirmed`` when the after-window has at least ``confirm_points`` valid points
   (a later window has confirmed the new level), else ``provisional``. ``shape``: ``drift`` when
   a straight line through the segment around the change fits better (smaller residual sum of
   squares) than the two levels of a step, else ``step``.

Gradual drift. A ramp has no single split, but the scan still finds one where the level has moved
(for a linear ramp, the middle), and the recursion then splits the halves while the effects clear
``min_relative_effect``: a ramp becomes one to ``max_changes`` changes, each flagged
``shape="drift"`` and measured as the pooled before/after levels of its segments.
:attr:`SeriesResult.drift` is set when any change of the series is a drift.

Choosing the statistic. The Student scan has the most power on Gaussian-like noise, in particular
for a change close to the end (3-5 points after it); it is the default, for the pooled daily
ratios of the metric tree. The rank scan is for heavy-tailed series and those with spikes (raw
samples, per-job or per-node values): its power is little affected by outliers, while a few large
spikes inflate the t scans' variance and mask a real step, and spikes bunched at one end of a
series read as a t-scan "level change" (tests/test_changepoint_extensions.py has both cases). The
Huber scan is in between: it bounds a spike's weight at two robust standard deviations of the
segment and keeps the t scan's power on clean steps, but a segment that holds a large step has a
wide MAD, so large spikes still weigh; on the benchmark's tuning series it tied the Student scan
(F1 0.846 vs 0.847), so Student stays the default. All four are exact permutation tests, so none
is "more calibrated"; a per-series automatic choice is not offered because any rule that looks
only at the values (and so keeps the permutation test exact) cannot tell a few spikes from a short
new regime. A single-split scan has little power for an "epidemic" change (a level that moves and
comes back in the middle of a segment): the scan of the whole series sees a mixture on one side.
``epidemic=True`` scans every interval ``[i, j)`` against the rest as well (circular binary
segmentation, Olshen et al. 2004; :func:`_epidemic_score`), calibrated by the same permutations;
when the best interval is interior, the end whose remaining piece holds the other end is reported
first (its effect for the minimum-effect rule: the interval's level against the rest) and the
binary segmentation finds the other end.

Related work. Matteson & James, "A Nonparametric Approach for Multiple Change Point Analysis of
Multivariate Data" (E-divisive, arXiv 1306.4933) find change points by a divergence-based
bisection whose significance is also a permutation test. Fleming et al., "Hunter: Using Change
Point Detection to Hunt for Performance Regressions" (ICPE 2023, doi 10.1145/3578244.3583719;
continued as Apache Otava) replace E-divisive's permutations by a split/merge scheme with a
Student t-test over sliding windows. This detector differs from both: it uses a single-split
scan of a mean-shift t (or a rank-sum z) on log ratios (not an energy distance),
calibrates the maximum of the scan by permutation (Hunter's p-values are those of a t-test at a
split already chosen, not adjusted for the choice), adds BH across series, computes the scan for
all splits, all series and all permutations as array operations, and recurses by binary
segmentation whose weaker sub-segment candidates are proposals that a merge test between their
neighbours keeps or drops (step 6 and 7; a Bonferroni factor for the split's choice in its window). Its inputs are
numerator and denominator, so levels and effects are pooled ratios that the metric tree can
decompose. docs/benchmarks.md compares it with Apache Otava and ruptures PELT on seeded labeled series.

Zero variance: the t statistics' standard error is floored at ``LOG_RESOLUTION`` (differences in ``y``
below that are numerical noise), so a perfectly constant series gives t = 0 and no change point,
and a noiseless step gives a very large, finite t. A constant series has rank statistic 0.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace

import numpy as np
from scipy import stats

__all__ = [
    "DEFAULT_CONFIG",
    "LOG_RESOLUTION",
    "SCALES",
    "STATISTICS",
    "ChangePoint",
    "Detection",
    "DetectorConfig",
    "SeriesResult",
    "benjamini_hochberg",
    "detect",
    "detect_change_points",
    "log_ratios",
    "pooled_effect_interval",
    "scan_rank_z",
    "scan_student_t",
    "scan_welch_t",
    "series_values",
]

#: Smallest standard error (in log-ratio units) the t statistics use; smaller is rounding noise.
LOG_RESOLUTION = 1e-9
STATISTICS = ("student", "welch", "rank", "huber")
EFFECT_FLOORS = ("estimate", "interval")
FDR_FAMILIES = ("auto", "flat", "tree")
SEGMENTATIONS = ("split_merge", "binary")
#: Huber clipping constant of ``statistic="huber"``: values beyond ``median +- HUBER_K * 1.4826 * MAD`` are clipped.
HUBER_K = 2.0
SCALES = ("log", "linear")
# Relative tolerance when counting permuted statistics >= the observed one (rounding ties).
_TIE_RTOL = 1e-9
# Elements of the (series x permutations x points) block scanned at once (512 KB of float64): small enough to stay
# in cache; 2 million (16 MB) made a batched call at 999 permutations slower than one call per series.
_CHUNK_ELEMENTS = 65_536
# Refinement (step 5) continues for a hypothesis until this many permutations reached its maximum (Besag & Clifford's
# sequential p-value, 1991: h exceedances give a relative standard error of about 1 / sqrt(h)). With 1 (the first
# version) a p-value whose exact value is 0.00058 (14 days) stopped at 2 / 1000 four times in ten.
REFINE_EXCEEDANCES = 10


@dataclass(frozen=True)
class DetectorConfig:
    """Every knob of :func:`detect`; immutable, so a shared default is safe."""

    min_segment: int = 3  # valid points on each side of a change
    max_pvalue: float = 0.01  # significance of one scan, after the scan correction
    min_relative_effect: float = 0.03  # |after/before - 1| below this is not reported
    n_permutations: int = 999  # for the scan p-value
    max_permutations: int = 99_999  # adaptive refinement of floor p-values under BH (step 5); = n_permutations: off
    confidence: float = 0.95  # of the relative-effect intervals
    seed: int = 0  # of the permutations and the bootstrap
    max_changes: int = 3  # per series (binary segmentation depth)
    statistic: str = "student"  # "student" or "welch" (mean shift t), "rank" (rank-sum z), "huber" (clipped t)
    max_qvalue: float | None = 0.05  # Benjamini-Hochberg FDR across the series of a call; None: off
    min_relative_effects: Mapping[str, float] = field(default_factory=dict)  # per metric name
    confirm_points: int = 7  # valid points after a change for the verdict "confirmed"
    n_bootstrap: int = 999  # resamples of the bootstrap interval
    scale: str = "log"  # "log" (ratios > 0) or "linear" (any sign)
    # also scan intervals [i, j) against the rest (a level that moves and comes back; student and rank)
    epidemic: bool = False
    split_pvalue: float = 0.01  # sub-segment scans (binary segmentation) need p <= min(max_pvalue, split_pvalue)
    effect_floor: str = "estimate"  # the minimum effect judges the "estimate" or the far end of its "interval"
    floor_confidence: float = 0.8  # two-sided level of the Welch interval that effect_floor="interval" uses
    # BH families when detect() gets `parents`: "flat" (one family), "tree" (hierarchical: a row is tested only
    # when its parent is discovered, BH within the children of one parent), "auto" (tree when flat BH could not
    # discover a lone change at all: series x smallest permutation p > max_qvalue; see `tree_needed`)
    fdr_families: str = "auto"
    # Segmentation (module docstring, step 6): "split_merge" proposes sub-segment changes at the looser
    # propose_pvalue and keeps a proposal only while its test between its neighbouring changes passes merge_pvalue;
    # "binary" is plain binary segmentation (a sub-segment change needs split_pvalue, a rejected one ends the recursion)
    segmentation: str = "split_merge"
    propose_pvalue: float = 0.05  # sub-segment scans at or under this propose a change (split_merge)
    merge_pvalue: float = 0.001  # a proposal survives when its test between its neighbours has p <= this
    propose_fdr: bool = True  # a proposal needs the round's BH q <= max_qvalue too (only split_pvalue is relaxed)
    # epidemic (module docstring, step 7): the reported end of an interval whose other end is a change of the series
    # too must pass its own split test between its neighbours at sub_segment_pvalue (the interval's test is not its)
    merge_interval_ends: bool = True
    # metric names (as in min_relative_effects: "grain/metric" from detection.py) whose series the Student scan and
    # its merge tests read Huber-clipped, as statistic="huber" does for every series; for series whose noise is
    # heavy-tailed by nature while the others keep the Student scan's power ("Choosing the statistic")
    clipped_metrics: tuple[str, ...] = ()

    def __post_init__(self) -> None:
        if self.min_segment < 2:
            raise ValueError(f"min_segment must be >= 2 (a variance needs 2 points), got {self.min_segment}")
        if not 0.0 < self.max_pvalue <= 1.0:
            raise ValueError(f"max_pvalue must be in (0, 1], got {self.max_pvalue}")
        if self.min_relative_effect < 0.0:
            raise ValueError(f"min_relative_effect must be >= 0, got {self.min_relative_effect}")
        for metric, value in self.min_relative_effects.items():
            if not value >= 0.0:
                raise ValueError(f"min_relative_effects[{metric!r}] must be >= 0, got {value}")
        if self.n_permutations < 1:
            raise ValueError(f"n_permutations must be >= 1, got {self.n_permutations}")
        if self.max_permutations < self.n_permutations:
            raise ValueError(
                f"max_permutations must be >= n_permutations ({self.n_permutations}), got {self.max_permutations}"
            )
        if 1.0 / (1 + self.n_permutations) > self.max_pvalue:
            raise ValueError(
                f"n_permutations={self.n_permutations} cannot reach max_pvalue={self.max_pvalue}: "
                f"the smallest permutation p-value is 1/(1+n_permutations)"
            )
        if self.max_qvalue is not None and not 0.0 < self.max_qvalue <= 1.0:
            raise ValueError(f"max_qvalue must be in (0, 1] or None, got {self.max_qvalue}")
        if not 0.0 < self.confidence < 1.0:
            raise ValueError(f"confidence must be in (0, 1), got {self.confidence}")
        if self.seed < 0:
            raise ValueError(f"seed must be >= 0, got {self.seed}")
        if self.max_changes < 1:
            raise ValueError(f"max_changes must be >= 1, got {self.max_changes}")
        if self.statistic not in STATISTICS:
            raise ValueError(f"statistic must be one of {STATISTICS}, got {self.statistic!r}")
        if self.epidemic and self.statistic == "welch":
            raise ValueError("epidemic=True needs statistic 'student' or 'rank' (a CUSUM score)")
        if self.scale not in SCALES:
            raise ValueError(f"scale must be one of {SCALES}, got {self.scale!r}")
        if self.clipped_metrics and self.statistic not in ("student", "huber"):
            raise ValueError(f"clipped_metrics needs statistic 'student' (or 'huber'), got {self.statistic!r}")
        if not 0.0 < self.split_pvalue <= 1.0:
            raise ValueError(f"split_pvalue must be in (0, 1], got {self.split_pvalue}")
        if 1.0 / (1 + self.n_permutations) > self.sub_segment_pvalue:
            raise ValueError(
                f"n_permutations={self.n_permutations} cannot reach min(max_pvalue, split_pvalue)="
                f"{self.sub_segment_pvalue} for sub-segments: the smallest permutation p-value is 1/(1+n_permutations)"
            )
        if self.effect_floor not in EFFECT_FLOORS:
            raise ValueError(f"effect_floor must be one of {EFFECT_FLOORS}, got {self.effect_floor!r}")
        if not 0.0 < self.floor_confidence < 1.0:
            raise ValueError(f"floor_confidence must be in (0, 1), got {self.floor_confidence}")
        if self.fdr_families not in FDR_FAMILIES:
            raise ValueError(f"fdr_families must be one of {FDR_FAMILIES}, got {self.fdr_families!r}")
        if self.segmentation not in SEGMENTATIONS:
            raise ValueError(f"segmentation must be one of {SEGMENTATIONS}, got {self.segmentation!r}")
        if not 0.0 < self.propose_pvalue <= 1.0:
            raise ValueError(f"propose_pvalue must be in (0, 1], got {self.propose_pvalue}")
        if not 0.0 < self.merge_pvalue <= 1.0:
            raise ValueError(f"merge_pvalue must be in (0, 1], got {self.merge_pvalue}")
        if self.confirm_points < 1:
            raise ValueError(f"confirm_points must be >= 1, got {self.confirm_points}")
        if self.n_bootstrap < 1:
            raise ValueError(f"n_bootstrap must be >= 1, got {self.n_bootstrap}")

    def min_effect_for(self, metric: str | None) -> float:
        """The minimum |relative effect| of a metric: its entry in ``min_relative_effects``, else the default."""
        return (
            float(self.min_relative_effects.get(metric, self.min_relative_effect))
            if metric
            else self.min_relative_effect
        )

    @property
    def sub_segment_pvalue(self) -> float:
        """Largest p-value that accepts a change found in a sub-segment (binary segmentation, round 2 on)."""
        return min(self.max_pvalue, self.split_pvalue)

    def min_testable_length(self) -> int:
        """Fewest valid points a series needs to be tested at all (module docstring, step 2)."""
        n = 2 * self.min_segment
        while 2.0 / math.comb(n, n // 2) > self.max_pvalue:
            n += 1
        return n

    @property
    def test_name(self) -> str:
        return self.test_name_for(None)

    def clips(self, metric: str | None) -> bool:
        """Whether the scan reads this metric's series Huber-clipped (``statistic="huber"`` or ``clipped_metrics``)."""
        return self.statistic == "huber" or (metric is not None and metric in self.clipped_metrics)

    def test_name_for(self, metric: str | None) -> str:
        """The test a series of ``metric`` gets, in words."""
        statistic = "huber" if self.clips(metric) else self.statistic
        statistic = {"student": "Student t", "welch": "Welch t", "rank": "rank-sum z", "huber": "Huber-clipped t"}[
            statistic
        ]
        values = "log ratios" if self.scale == "log" else "ratios (linear)"
        fdr = f", BH q<={self.max_qvalue:g}" if self.max_qvalue is not None else ""
        return (
            f"max-scan {statistic} on daily {values}, permutation p ({self.n_permutations}){fdr}, "
            f"bootstrap CI ({self.confidence:.0%}, {self.n_bootstrap})"
        )


DEFAULT_CONFIG = DetectorConfig()


@dataclass(frozen=True)
class ChangePoint:
    """One accepted change. Levels are pooled, ``sum(num) / sum(den)`` over the segment (rank scan: medians).

    The before/after segments run to the neighbouring changes of the same series (or its ends);
    counts, sums, levels, effect and intervals describe them. ``p_value``, ``q_value`` and
    ``statistic`` come from the scan that found the change.
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
    relative_effect: float  # after_level / before_level - 1 (pooled); linear: (after - before) / |before|
    ci_low: float  # percentile bootstrap interval of relative_effect
    ci_high: float
    p_value: float  # permutation p of max |statistic| over all splits of the scanned segment
    statistic: float  # Welch t (or rank-sum z) of the chosen split in that scan (negative for a drop)
    test: str
    mean_log_difference: float  # d = mean(y_after) - mean(y_before) (linear scale: of the ratios)
    q_value: float = 1.0  # Benjamini-Hochberg q of p_value within its round of scans
    direction: str = "up"  # "up" or "down" (sign of relative_effect)
    verdict: str = "confirmed"  # "confirmed" (n_after >= confirm_points) or "provisional"
    shape: str = "step"  # "step" or "drift" (a line fits the segment around the change better)
    welch_ci_low: float = 0.0  # Welch interval of d, mapped to a relative effect
    welch_ci_high: float = 0.0
    absolute_effect: float = 0.0  # after_level - before_level
    # split_merge: p of the change's test between its neighbouring changes (Bonferroni over the window's splits);
    # None for a change its scan accepted on its own (first scan, or a sub-segment scan with p <= split_pvalue)
    merge_p_value: float | None = None


@dataclass(frozen=True)
class SeriesResult:
    """What happened to one row: tested or not, and the first scan's evidence."""

    series_index: int
    n_points: int  # columns, missing included
    n_valid: int
    status: str  # "too_short" (not tested), "no_change" or "changed"
    min_length: int  # valid points needed for a test (DetectorConfig.min_testable_length)
    p_value: float | None  # of the first scan of the whole series; None when not tested
    q_value: float | None  # its BH q among the first scans of the call
    n_changes: int
    drift: bool  # some change of the series has shape "drift"


@dataclass(frozen=True)
class Detection:
    changes: list[ChangePoint]  # sorted by (series_index, index)
    series: list[SeriesResult]  # one per row, in row order


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


def series_values(
    numerators: np.ndarray, denominators: np.ndarray, scale: str = "log"
) -> tuple[np.ndarray, np.ndarray]:
    """``(y, valid)`` on the detector's scale: :func:`log_ratios`, or ``num / den`` of any sign (linear)."""
    if scale == "log":
        return log_ratios(numerators, denominators)
    if scale != "linear":
        raise ValueError(f"scale must be one of {SCALES}, got {scale!r}")
    num = np.asarray(numerators, dtype=float)
    den = np.asarray(denominators, dtype=float)
    if num.shape != den.shape:
        raise ValueError(f"numerators {num.shape} and denominators {den.shape} differ in shape")
    if np.isinf(num).any() or np.isinf(den).any():
        raise ValueError("infinite numerator or denominator (use NaN for a missing point)")
    with np.errstate(invalid="ignore"):
        valid = ~np.isnan(num) & ~np.isnan(den) & (den > 0)
    y = np.full(num.shape, np.nan)
    y[valid] = num[valid] / den[valid]
    return y, valid


def benjamini_hochberg(p_values: Sequence[float] | np.ndarray) -> np.ndarray:
    """Benjamini-Hochberg q-values (step-up adjusted p-values) of one family, in input order.

    ``q_(i) = min_{j >= i} p_(j) * m / j`` over the sorted p-values, capped at 1; ``q >= p``.
    Rejecting every hypothesis with ``q <= alpha`` is the BH procedure at FDR level ``alpha``.
    """
    p = np.asarray(p_values, dtype=float)
    m = p.size
    if m == 0:
        return p.copy()
    order = np.argsort(p, kind="stable")
    scaled = p[order] * m / np.arange(1, m + 1)
    q_sorted = np.minimum(np.minimum.accumulate(scaled[::-1])[::-1], 1.0)
    q = np.empty(m)
    q[order] = q_sorted
    return q


def benjamini_hochberg_by_family(p_values: Sequence[float] | np.ndarray, families: np.ndarray | None) -> np.ndarray:
    """:func:`benjamini_hochberg` within each family (rows with equal labels), in input order; one family if None."""
    p = np.asarray(p_values, dtype=float)
    if families is None:
        return benjamini_hochberg(p)
    q = np.empty(p.size)
    for family in np.unique(families):
        members = np.flatnonzero(families == family)
        q[members] = benjamini_hochberg(p[members])
    return q


def smallest_permutation_pvalue(n: int, min_segment: int = 3) -> float:
    """The smallest p-value any single-split permutation scan of ``n`` distinct points can have, ``2 / C(n, n // 2)``
    (the halves perfectly separated at the middle split); the epidemic scan's is larger. No number of
    permutations goes below it: it is the exact permutation distribution's floor, not Monte Carlo error."""
    if n < 2 * min_segment:
        return 1.0
    return min(1.0, 2.0 / math.comb(n, n // 2))


def tree_needed(n_series: int, n_points: int, config: DetectorConfig) -> bool:
    """Whether one BH family over ``n_series`` series of ``n_points`` cannot discover a lone change at all: even at
    the smallest permutation p-value, ``n_series * p > max_qvalue`` (14 days: ``2 / C(14, 7) = 0.00058``, so more
    than 86 series). A function of the design (how many series, how long), never of the p-values."""
    if config.max_qvalue is None:
        return False
    return n_series * smallest_permutation_pvalue(n_points, config.min_segment) > config.max_qvalue


def _scan_moments(yc: np.ndarray, min_segment: int, pooled: bool = False) -> tuple[np.ndarray, np.ndarray]:
    """Mean difference (right - left) and floored variance of it for every split, last axis.

    Welch's variance ``s_l^2 / n_l + s_r^2 / n_r``, or with ``pooled`` Student's
    ``s_p^2 (1 / n_l + 1 / n_r)`` where ``s_p^2`` pools both sides' squares over ``n - 2`` degrees
    of freedom. ``yc`` is complete (no NaN) and should be centred per series for accuracy. Split
    ``j`` of the output has ``min_segment + j`` points on the left.
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
    ssl = np.maximum(ql - sl * ml, 0.0)
    ssr = np.maximum(qr - sr * mr, 0.0)
    if pooled:
        se2 = (ssl + ssr) / (n - 2.0) * (1.0 / nl + 1.0 / nr)
    else:
        se2 = ssl / (nl - 1.0) / nl + ssr / (nr - 1.0) / nr
    return mr - ml, np.maximum(se2, LOG_RESOLUTION * LOG_RESOLUTION)


def _rank_moments(rc: np.ndarray, variance: np.ndarray, min_segment: int) -> tuple[np.ndarray, np.ndarray]:
    """Rank-sum excess of the right side and its permutation variance for every split, last axis.

    ``rc`` are centred ranks (sum 0 per row) and ``variance`` their mean square per row, shaped to
    broadcast against ``rc``'s leading axes with a trailing axis of 1. The excess of the right
    side's rank sum over its expectation is ``-cumsum`` of the left; its variance when the
    ``n_right`` points are a random subset is ``n_left * n_right * variance / (n - 1)``.
    """
    n = rc.shape[-1]
    m = min_segment
    sl = np.cumsum(rc, axis=-1)[..., m - 1 : n - m]
    nl = np.arange(m, n - m + 1, dtype=float)
    nr = n - nl
    return -sl, nl * nr * variance / (n - 1.0)


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


def scan_student_t(y: np.ndarray, min_segment: int) -> np.ndarray:
    """Student (pooled-variance) t of ``mean(y[k:]) - mean(y[:k])`` per split; shapes as :func:`scan_welch_t`."""
    y = np.asarray(y, dtype=float)
    n = y.shape[-1]
    if n < 2 * min_segment:
        return np.empty(y.shape[:-1] + (0,))
    diff, se2 = _scan_moments(y - y.mean(axis=-1, keepdims=True), min_segment, pooled=True)
    return diff / np.sqrt(se2)


def scan_rank_z(y: np.ndarray, min_segment: int) -> np.ndarray:
    """Standardised rank sum (Mann-Whitney z, mid-ranks, no continuity correction) of ``y[k:]`` per split.

    Same shapes as :func:`scan_welch_t`; positive when the points from ``k`` on rank higher. A
    row of equal values gives 0.
    """
    y = np.asarray(y, dtype=float)
    n = y.shape[-1]
    if n < 2 * min_segment:
        return np.empty(y.shape[:-1] + (0,))
    rc, variance = _centred_ranks(y)
    excess, var = _rank_moments(rc, variance, min_segment)
    return np.where(var > 0, excess / np.sqrt(np.where(var > 0, var, 1.0)), 0.0)


def _centred_ranks(y: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    r = stats.rankdata(y, axis=-1)
    rc = r - r.mean(axis=-1, keepdims=True)
    return rc, (rc * rc).mean(axis=-1, keepdims=True)


def _huber_clip(y: np.ndarray) -> np.ndarray:
    """``y`` clipped per row to ``median +- HUBER_K * 1.4826 * MAD`` (Huber's psi around the median).

    The bounds depend only on the multiset of the row's values, so clipping commutes with any
    permutation of the row: the permutation test of a scan of the clipped values stays exact.
    A row whose MAD is 0 (more than half its values equal) is left as it is.
    """
    med = np.median(y, axis=-1, keepdims=True)
    scale = 1.4826 * np.median(np.abs(y - med), axis=-1, keepdims=True)
    width = np.where(scale > 0, HUBER_K * scale, np.inf)
    return np.clip(y, med - width, med + width)


def _permutations(seed: int, length: int, count: int) -> np.ndarray:
    """``count`` permutations of ``range(length)``, a function of ``(seed, length)`` only."""
    rng = np.random.default_rng([seed, length])
    return rng.permuted(np.tile(np.arange(length), (count, 1)), axis=1)


@dataclass(frozen=True)
class _Scan:
    split: np.ndarray  # (G,) points on the left of the chosen split
    statistic: np.ndarray  # (G,) Welch t or rank z at the split
    p_value: np.ndarray  # (G,)
    exceed: np.ndarray  # (G,) permutations whose maximum reached the observed one
    x: np.ndarray  # (G, L) the values the permutations shuffle (centred values or centred ranks)
    threshold: np.ndarray  # (G,) the observed maximum score, less the tie tolerance
    block_lo: np.ndarray | None = None  # (G,) epidemic scan: the interval [lo, hi) that differs from the rest
    block_hi: np.ndarray | None = None


def _exceedances(x: np.ndarray, threshold: np.ndarray, perms: np.ndarray, config: DetectorConfig) -> np.ndarray:
    """For each row of ``x`` (G, L): how many of ``perms`` (P, L) give a maximum score >= its threshold."""
    g, length = x.shape
    m = config.min_segment
    count = perms.shape[0]
    width = _epidemic_pairs(length, m)[0].size if config.epidemic else length
    exceed = np.zeros(g, dtype=np.int64)
    per_chunk = max(1, _CHUNK_ELEMENTS // width)  # (series x permutations) per block
    chunk = max(1, per_chunk // count)
    step = max(1, min(count, per_chunk))
    for start in range(0, g, chunk):
        stop = min(start + chunk, g)
        for first in range(0, count, step):
            permuted = x[start:stop][:, perms[first : first + step]]  # (chunk, P', L)
            if config.epidemic:
                pmax = _epidemic_score(permuted, m).max(axis=-1)
            elif config.statistic == "welch":
                pdiff, pse2 = _scan_moments(permuted, m)
                pmax = (pdiff * pdiff / pse2).max(axis=-1)  # (chunk, P')
            else:
                pmax = _cusum_score(permuted, m).max(axis=-1)
            exceed[start:stop] += (pmax >= threshold[start:stop, None]).sum(axis=1)
    return exceed


_PAIRS: dict[tuple[int, int], tuple[np.ndarray, np.ndarray]] = {}


def _epidemic_pairs(length: int, m: int) -> tuple[np.ndarray, np.ndarray]:
    """Intervals ``[i, j)`` of the epidemic scan: every piece (before, inside, after) has >= m points or is empty.

    ``i = 0`` or ``j = length`` is a single split; ``(0, length)`` is excluded.
    """
    key = (length, m)
    if key not in _PAIRS:
        pairs = [
            (i, j)
            for i in [0, *range(m, length - m + 1)]
            for j in range(i + m, length + 1)
            if (j == length or length - j >= m) and length - (j - i) >= m
        ]
        lo, hi = (np.asarray(v, dtype=np.int64) for v in zip(*pairs))
        _PAIRS[key] = (lo, hi)
    return _PAIRS[key]


def _epidemic_score(xc: np.ndarray, min_segment: int) -> np.ndarray:
    """``(S_j - S_i)^2 / (l (n - l))`` for every interval of :func:`_epidemic_pairs`, ``l = j - i``.

    For centred values this is the between-groups sum of squares of "inside [i, j)" against "the
    rest" over ``n``, so Student's t^2 of that contrast (and the rank-sum z^2 for centred ranks) is an
    increasing function of it, as for :func:`_cusum_score` (circular binary segmentation, Olshen et
    al. 2004, with a permutation reference). Single splits are the intervals that touch an end.
    """
    n = xc.shape[-1]
    lo, hi = _epidemic_pairs(n, min_segment)
    cum = np.concatenate([np.zeros(xc.shape[:-1] + (1,)), np.cumsum(xc, axis=-1)], axis=-1)
    inside = cum[..., hi] - cum[..., lo]
    size = (hi - lo).astype(float)
    return inside * inside / (size * (n - size))


def _refine_floor_pvalues(
    p_value: np.ndarray,
    exceed: np.ndarray,
    eligible: np.ndarray,
    groups: list[tuple[np.ndarray, np.ndarray, np.ndarray]],
    config: DetectorConfig,
    families: np.ndarray | None = None,
) -> tuple[np.ndarray, np.ndarray]:
    """Adaptive permutation refinement of the p-values at the floor ``1 / (1 + permutations)`` (step 5).

    ``p_value`` and ``exceed`` are one BH family (one round); ``groups`` are ``(indices, x, threshold)``
    of its scans per segment length, as :func:`_scan_group` returned them. A hypothesis is refined
    when fewer than ``REFINE_EXCEEDANCES`` permutations reached its maximum (its p is at or near the floor,
    resolved too coarsely to decide), it is ``eligible`` (p <= max_pvalue and a large enough effect), BH
    rejects it at the current p-values and would accept it were its p at the finest floor
    ``1 / (1 + max_permutations)``. Each batch runs ``1 + B`` more permutations (B those run so far for
    it: the floor halves), for those hypotheses only; a hypothesis leaves the refinement as soon as
    ``REFINE_EXCEEDANCES`` permutations reached its maximum (its p is resolved) or BH accepts it, and
    none goes past ``max_permutations``. The batches' permutations are a function of ``(seed, segment
    length, permutations so far)``, so the result is deterministic; the other hypotheses keep their
    p-value. ``families``: BH within each label (hierarchical families), else one family. Returns
    ``(p_value, permutations)`` per hypothesis.
    """
    p = p_value.copy()
    exceed = exceed.copy()
    n_perm = np.full(p.size, config.n_permutations, dtype=np.int64)
    if config.max_qvalue is None or config.max_permutations <= config.n_permutations or not p.size:
        return p, n_perm
    where = {int(i): (j, x, threshold) for indices, x, threshold in groups for j, i in enumerate(indices)}
    finest = 1.0 / (1.0 + config.max_permutations)
    while True:
        floor = (exceed < REFINE_EXCEEDANCES) & eligible & (n_perm < config.max_permutations)
        if not floor.any():
            break
        q = benjamini_hochberg_by_family(p, families)
        best = np.where((exceed < REFINE_EXCEEDANCES) & eligible, finest, p)
        need = floor & (q > config.max_qvalue) & (benjamini_hochberg_by_family(best, families) <= config.max_qvalue)
        if not need.any():
            break
        todo = np.flatnonzero(need)
        keys = sorted({(int(where[int(i)][1].shape[1]), int(n_perm[i])) for i in todo})
        for length, done in keys:
            members = [int(i) for i in todo if where[int(i)][1].shape[1] == length and n_perm[i] == done]
            extra = min(done + 1, config.max_permutations - done)
            rng = np.random.default_rng([config.seed, length, done, 3])
            perms = rng.permuted(np.tile(np.arange(length), (extra, 1)), axis=1)
            x = np.stack([where[i][1][where[i][0]] for i in members])
            threshold = np.asarray([where[i][2][where[i][0]] for i in members])
            exceed[members] += _exceedances(x, threshold, perms, config)
            n_perm[members] += extra
        p = (1.0 + exceed) / (1.0 + n_perm)
    return p, n_perm


def _cusum_score(xc: np.ndarray, min_segment: int) -> np.ndarray:
    """``S_k^2 / (n_left * n_right)`` for every split, ``S_k`` the cumulative sum of centred ``xc``.

    For centred values the between-sides sum of squares is ``n * S_k^2 / (n_left * n_right)`` and
    the total sum of squares does not change under permutation, so Student's
    ``t^2 = (n - 2) B / (TSS - B)`` is an increasing function of this score, and so is the rank-sum
    ``z^2`` (for centred ranks). The permutation test of ``max |t|`` (or ``max |z|``) is therefore
    the permutation test of the maximum score: one cumulative sum per permutation, no squares.
    """
    n = xc.shape[-1]
    m = min_segment
    sl = np.cumsum(xc, axis=-1)[..., m - 1 : n - m]
    nl = np.arange(m, n - m + 1, dtype=float)
    return sl * sl / (nl * (n - nl))


def _scan_group(y: np.ndarray, config: DetectorConfig, clip: np.ndarray | None = None) -> _Scan:
    """Best split and its permutation p-value for each row of the complete matrix ``y`` (G, L).

    ``clip`` (G,): rows the Student scan reads Huber-clipped (``clipped_metrics``); the clipping is a function of the
    row's multiset of values, so the permutation test stays exact."""
    g, length = y.shape
    m = config.min_segment
    rows = np.arange(g)
    if config.statistic == "welch":
        x = y - y.mean(axis=1, keepdims=True)
        signed, se2 = _scan_moments(x, m)
        score = signed * signed / se2
        best = np.argmax(score, axis=1)
        statistic = signed[rows, best] / np.sqrt(se2[rows, best])
    else:  # student and rank: the maximum |t| (|z|) is the maximum CUSUM score (_cusum_score)
        if config.statistic == "rank":
            x, variance = _centred_ranks(y)
        elif config.statistic == "huber":
            x = _huber_clip(y)
            x = x - x.mean(axis=1, keepdims=True)
        else:
            x = _clipped_rows(y, clip)
            x = x - x.mean(axis=1, keepdims=True)
        score = _cusum_score(x, m)
        best = np.argmax(score, axis=1)
        if config.epidemic:  # the best interval; the change reported first is one of its ends
            lo_all, hi_all = _epidemic_pairs(length, m)
            escore = _epidemic_score(x, m)
            ebest = np.argmax(escore, axis=1)
            block_lo, block_hi = lo_all[ebest], hi_all[ebest]
            # keep the end whose remaining piece (that holds the other end) is the longer
            split_at = np.where(block_lo == 0, block_hi, np.where(block_hi == length, block_lo, 0))
            interior = (block_lo > 0) & (block_hi < length)
            split_at = np.where(interior, np.where(length - block_lo >= block_hi, block_lo, block_hi), split_at)
            best = split_at - m
            epidemic_threshold = escore[rows, ebest] * (1.0 - _TIE_RTOL)
        if config.statistic == "rank":
            excess, var = _rank_moments(x, variance, m)
            ok = var[rows, best] > 0
            statistic = np.where(ok, excess[rows, best] / np.sqrt(np.where(ok, var[rows, best], 1.0)), 0.0)
        else:
            signed, se2 = _scan_moments(x, m, pooled=True)
            statistic = signed[rows, best] / np.sqrt(se2[rows, best])
    threshold = score[rows, best] * (1.0 - _TIE_RTOL)
    blocks: tuple[np.ndarray | None, np.ndarray | None] = (None, None)
    if config.epidemic:
        threshold = epidemic_threshold
        blocks = (block_lo, block_hi)

    exceed = _exceedances(x, threshold, _permutations(config.seed, length, config.n_permutations), config)
    p_value = (1.0 + exceed) / (1.0 + config.n_permutations)
    return _Scan(
        split=best + m,
        statistic=statistic,
        p_value=p_value,
        exceed=exceed,
        x=x,
        threshold=threshold,
        block_lo=blocks[0],
        block_hi=blocks[1],
    )


def _clipped_rows(y: np.ndarray, clip: np.ndarray | None) -> np.ndarray:
    """``y`` with the rows that ``clip`` marks Huber-clipped (the others as they are)."""
    if clip is None or not clip.any():
        return y
    out = y.copy()
    out[clip] = _huber_clip(y[clip])
    return out


def _relative(after: np.ndarray, before: np.ndarray, scale: str) -> np.ndarray:
    """``after / before - 1`` (log scale, levels > 0); linear: ``(after - before) / |before|``, NaN at 0."""
    with np.errstate(divide="ignore", invalid="ignore"):
        if scale == "log":
            return after / before - 1.0
        return np.where(before != 0, (after - before) / np.abs(before), np.nan)


def _levels(
    num: np.ndarray, den: np.ndarray, inside: np.ndarray, config: DetectorConfig
) -> tuple[np.ndarray, np.ndarray]:
    """Levels inside and outside a (G, L) mask per row: pooled Σnum/Σden, medians of the ratios for the rank scan."""
    if config.statistic == "rank":
        ratio = num / den
        return (
            np.nanmedian(np.where(inside, ratio, np.nan), axis=1),
            np.nanmedian(np.where(inside, np.nan, ratio), axis=1),
        )
    level_in = np.where(inside, num, 0.0).sum(axis=1) / np.where(inside, den, 0.0).sum(axis=1)
    level_out = np.where(inside, 0.0, num).sum(axis=1) / np.where(inside, 0.0, den).sum(axis=1)
    return level_in, level_out


def _pooled_effect(num: np.ndarray, den: np.ndarray, split: np.ndarray, config: DetectorConfig) -> np.ndarray:
    """Relative effect of the levels (pooled; medians for the rank scan) for each row of (G, L) at ``split``."""
    before, after = _levels(num, den, np.arange(num.shape[1])[None, :] < split[:, None], config)
    return _relative(after, before, config.scale)


def _block_effect(
    num: np.ndarray, den: np.ndarray, lo: np.ndarray, hi: np.ndarray, config: DetectorConfig
) -> np.ndarray:
    """Relative effect of the level inside ``[lo, hi)`` against the rest (pooled; medians for rank)."""
    cols = np.arange(num.shape[1])[None, :]
    level_in, level_out = _levels(num, den, (cols >= lo[:, None]) & (cols < hi[:, None]), config)
    return _relative(level_in, level_out, config.scale)


def _split_summary(
    y: np.ndarray, num: np.ndarray, den: np.ndarray, split: np.ndarray, config: DetectorConfig
) -> dict[str, np.ndarray]:
    """Pooled levels, mean difference, Welch CI and step-vs-line fit at ``split`` for each row of (G, L)."""
    length = y.shape[1]
    left = np.arange(length)[None, :] < split[:, None]
    right = ~left
    nb = split.astype(float)
    na = length - nb
    mb = np.where(left, y, 0.0).sum(axis=1) / nb
    ma = np.where(right, y, 0.0).sum(axis=1) / na
    ssb = np.where(left, (y - mb[:, None]) ** 2, 0.0).sum(axis=1)
    ssa = np.where(right, (y - ma[:, None]) ** 2, 0.0).sum(axis=1)
    ab = ssb / (nb - 1.0) / nb
    aa = ssa / (na - 1.0) / na
    se2 = ab + aa
    df_den = ab * ab / (nb - 1.0) + aa * aa / (na - 1.0)
    safe = df_den > 0
    df = np.where(safe, se2 * se2 / np.where(safe, df_den, 1.0), nb + na - 2.0)
    se = np.sqrt(np.maximum(se2, LOG_RESOLUTION * LOG_RESOLUTION))
    q = stats.t.ppf(0.5 + config.confidence / 2.0, df)
    d = ma - mb
    bn = np.where(left, num, 0.0).sum(axis=1)
    bd = np.where(left, den, 0.0).sum(axis=1)
    an = np.where(right, num, 0.0).sum(axis=1)
    ad = np.where(right, den, 0.0).sum(axis=1)
    if config.statistic == "rank":  # robust levels: medians of the daily ratios, so a spike does not move them
        ratio = num / den
        before_level = np.nanmedian(np.where(left, ratio, np.nan), axis=1)
        after_level = np.nanmedian(np.where(right, ratio, np.nan), axis=1)
    else:
        before_level = bn / bd
        after_level = an / ad
    if config.scale == "log":
        welch_low, welch_high = np.expm1(d - q * se), np.expm1(d + q * se)
    else:
        with np.errstate(divide="ignore", invalid="ignore"):
            base = np.where(before_level != 0, np.abs(before_level), np.nan)
            welch_low, welch_high = (d - q * se) / base, (d + q * se) / base
    interval = config.effect_floor == "interval"  # else floor_reach is |effect| of d, unused
    # The far end (in the direction of d) of the floor_confidence Welch interval, as a |relative effect|.
    far = d + np.sign(d) * stats.t.ppf(0.5 + config.floor_confidence / 2.0, df) * se if interval else d
    if config.scale == "log":
        floor_reach = np.abs(np.expm1(far))
    else:
        with np.errstate(divide="ignore", invalid="ignore"):
            floor_reach = np.abs(far) / np.where(before_level != 0, np.abs(before_level), np.nan)
    # Step (two levels) versus a straight line through the whole segment: residual sums of squares.
    xs = np.arange(length, dtype=float) - (length - 1) / 2.0
    yc = y - y.mean(axis=1, keepdims=True)
    slope = (yc * xs).sum(axis=1) / (xs * xs).sum()
    ss_line = np.maximum((yc * yc).sum(axis=1) - slope * slope * (xs * xs).sum(), 0.0)
    return {
        "n_before": split,
        "n_after": length - split,
        "before_level": before_level,
        "after_level": after_level,
        "before_numerator": bn,
        "before_denominator": bd,
        "after_numerator": an,
        "after_denominator": ad,
        "relative_effect": _relative(after_level, before_level, config.scale),
        "absolute_effect": after_level - before_level,
        "welch_ci_low": welch_low,
        "welch_ci_high": welch_high,
        "mean_log_difference": d,
        "drift": ss_line < ssb + ssa,
        "floor_reach": floor_reach,
        "ss_within": ssb + ssa,  # the two levels' residual sum of squares (on the detector's scale)
    }


def _weighted(values: np.ndarray, weights: np.ndarray) -> np.ndarray:
    """``values (G, n) x weights (B, n) -> (G, B)`` sums, row by row the same whatever ``G`` is.

    einsum without BLAS: a matrix product's rounding would depend on how many changes share it.
    """
    return np.einsum("gn,bn->gb", values, weights, optimize=False)


def _resample_counts(rng: np.random.Generator, resamples: int, n: int) -> np.ndarray:
    """``(resamples, n)`` counts of each day in ``resamples`` draws of ``n`` days with replacement.

    The same distribution as ``rng.multinomial(n, [1/n] * n, size=resamples)``, from one integer draw
    and one bincount (several times faster than numpy's multinomial for these sizes).
    """
    picks = rng.integers(0, n, (resamples, n)) + (np.arange(resamples) * n)[:, None]
    return np.bincount(picks.ravel(), minlength=resamples * n).reshape(resamples, n).astype(float)


def _bootstrap_intervals(
    items: list[tuple[int, int, int, int]], numc: np.ndarray, denc: np.ndarray, config: DetectorConfig
) -> list[tuple[float, float]]:
    """Percentile bootstrap interval of the relative effect of each ``(row, lo, split, hi)``.

    Days are resampled with replacement within each side; the levels of a resample are pooled (or,
    for the rank scan, medians of daily ratios) as for the point estimate. The resamples are drawn
    once per ``(seed, n_before, n_after)`` and applied to all changes of those sizes at once.
    """
    out: list[tuple[float, float]] = [(math.nan, math.nan)] * len(items)
    if not items:
        return out
    arr = np.asarray(items, dtype=np.int64).reshape(-1, 4)
    sizes = np.stack([arr[:, 2] - arr[:, 1], arr[:, 3] - arr[:, 2]], axis=1)
    alpha = 1.0 - config.confidence
    b = config.n_bootstrap
    for nb, na in np.unique(sizes, axis=0):
        sel = np.flatnonzero((sizes[:, 0] == nb) & (sizes[:, 1] == na))
        rng = np.random.default_rng([config.seed, int(nb), int(na), 2])
        r, lo, mid = arr[sel, 0], arr[sel, 1], arr[sel, 2]
        before_cols = lo[:, None] + np.arange(nb)[None, :]
        after_cols = mid[:, None] + np.arange(na)[None, :]
        bn, bd = numc[r[:, None], before_cols], denc[r[:, None], before_cols]  # (G, nb)
        an, ad = numc[r[:, None], after_cols], denc[r[:, None], after_cols]
        if config.statistic == "rank":  # medians of the resampled daily ratios
            ib, ia = rng.integers(0, nb, (b, nb)), rng.integers(0, na, (b, na))
            rb, ra = bn / bd, an / ad
            before, after = np.empty((sel.size, b)), np.empty((sel.size, b))
            chunk = max(1, _CHUNK_ELEMENTS // (b * max(nb, na)))
            for start in range(0, sel.size, chunk):  # (chunk, B, n) blocks bound memory
                before[start : start + chunk] = np.median(rb[start : start + chunk][:, ib], axis=-1)
                after[start : start + chunk] = np.median(ra[start : start + chunk][:, ia], axis=-1)
        else:  # pooled levels of the resamples, from resampling counts
            wb, wa = _resample_counts(rng, b, int(nb)), _resample_counts(rng, b, int(na))  # (B, nb), (B, na)
            before = _weighted(bn, wb) / _weighted(bd, wb)
            after = _weighted(an, wa) / _weighted(ad, wa)
        effect = _relative(after, before, config.scale)
        finite = np.isfinite(effect)
        bounds = np.full((sel.size, 2), np.nan)
        ok = finite.any(axis=1)
        if finite.all():  # the usual case; np.quantile is several times faster than np.nanquantile
            bounds = np.quantile(effect, [alpha / 2.0, 1.0 - alpha / 2.0], axis=1).T
        elif ok.any():
            masked = np.where(finite[ok], effect[ok], np.nan)
            bounds[ok] = np.nanquantile(masked, [alpha / 2.0, 1.0 - alpha / 2.0], axis=1).T
        for j, i in enumerate(sel):
            out[i] = (float(bounds[j, 0]), float(bounds[j, 1]))
    return out


def pooled_effect_interval(
    before: tuple[np.ndarray, np.ndarray], after: tuple[np.ndarray, np.ndarray], config: DetectorConfig = DEFAULT_CONFIG
) -> tuple[float, float]:
    """The percentile bootstrap interval of ``Σnum_after/Σden_after / (Σnum_before/Σden_before) - 1`` for two windows
    of valid days (numerators, denominators), days resampled within each window, as a change's interval
    (``config``: confidence, n_bootstrap, seed, scale; pooled levels whatever the statistic)."""
    numc = np.concatenate([before[0], after[0]])[None, :]
    denc = np.concatenate([before[1], after[1]])[None, :]
    items = [(0, 0, before[0].size, before[0].size + after[0].size)]
    return _bootstrap_intervals(items, numc, denc, replace(config, statistic="student"))[0]


def _measured_fields(summary: dict, config: DetectorConfig) -> dict:
    """The fields of a ``ChangePoint`` that its split's summary (``_split_summary``) gives: counts, levels, sums,
    effects, Welch interval, verdict and shape (not the scan's evidence, the bootstrap interval or the direction)."""
    return {
        "n_before": int(summary["n_before"]),
        "n_after": int(summary["n_after"]),
        "before_level": float(summary["before_level"]),
        "after_level": float(summary["after_level"]),
        "before_numerator": float(summary["before_numerator"]),
        "before_denominator": float(summary["before_denominator"]),
        "after_numerator": float(summary["after_numerator"]),
        "after_denominator": float(summary["after_denominator"]),
        "relative_effect": float(summary["relative_effect"]),
        "mean_log_difference": float(summary["mean_log_difference"]),
        "verdict": "confirmed" if int(summary["n_after"]) >= config.confirm_points else "provisional",
        "shape": "drift" if bool(summary["drift"]) else "step",
        "welch_ci_low": float(summary["welch_ci_low"]),
        "welch_ci_high": float(summary["welch_ci_high"]),
        "absolute_effect": float(summary["absolute_effect"]),
    }


def measured_at(
    change: ChangePoint,
    numerators: np.ndarray,
    denominators: np.ndarray,
    lo: int,
    split: int,
    hi: int,
    config: DetectorConfig = DEFAULT_CONFIG,
) -> ChangePoint | None:
    """``change`` with its split moved to ``split`` (``measure_split`` over ``[lo, hi)``): counts, levels, sums, effects,
    both intervals, verdict and shape at that split; the scan's p, q, statistic and test kept (the evidence that the
    series changed). None where ``measure_split`` is."""
    measured = measure_split(numerators, denominators, lo, split, hi, config)
    if measured is None:
        return None
    return replace(
        change,
        index=split,
        **_measured_fields(measured, config),
        ci_low=measured["ci_low"],
        ci_high=measured["ci_high"],
    )


def measure_split(
    numerators: np.ndarray,
    denominators: np.ndarray,
    lo: int,
    split: int,
    hi: int,
    config: DetectorConfig = DEFAULT_CONFIG,
    interval: bool = True,
) -> dict[str, float] | None:
    """One series' change measured at a split fixed in advance (not chosen from these data): original columns
    ``[lo, split)`` against ``[split, hi)``, their valid points only. The summary a change gets (``_split_summary``:
    counts, sums, levels, ``relative_effect``, Welch interval, ``drift``, ``ss_within``), its percentile bootstrap interval
    (``ci_low``, ``ci_high``) and ``p_value``, the merge test's two-sided p at that split without the Bonferroni
    factor for a chosen split (``_merge_pvalues``); ``interval=False`` leaves out the bootstrap (NaN), the costly part.
    None with fewer than ``min_segment`` valid points on a side."""
    num = np.asarray(numerators, dtype=float)[None, lo:hi]
    den = np.asarray(denominators, dtype=float)[None, lo:hi]
    y, valid = series_values(num, den, config.scale)
    columns = np.flatnonzero(valid[0])
    k, length = int((columns < split - lo).sum()), int(columns.size)
    if k < config.min_segment or length - k < config.min_segment:
        return None
    yc, numc, denc = y[:, columns], num[:, columns], den[:, columns]
    items = [(0, 0, k, length)]
    summary = _summaries(items, yc, numc, denc, config)[0]
    ci_low, ci_high = _bootstrap_intervals(items, numc, denc, config)[0] if interval else (math.nan, math.nan)
    p_value = float(_merge_pvalues(items, yc, config, chosen=False)[0])
    return {key: float(value) for key, value in summary.items()} | {
        "ci_low": ci_low,
        "ci_high": ci_high,
        "p_value": p_value,
    }


def detect_change_points(
    numerators: np.ndarray,
    denominators: np.ndarray,
    config: DetectorConfig = DEFAULT_CONFIG,
    metrics: Sequence[str] | None = None,
) -> list[ChangePoint]:
    """Change points of every row of ``numerators / denominators``: ``detect(...).changes``."""
    return detect(numerators, denominators, config, metrics).changes


def _tree_round(
    p_value: np.ndarray,
    exceed: np.ndarray,
    eligible: np.ndarray,
    groups: list[tuple[np.ndarray, np.ndarray, np.ndarray]],
    config: DetectorConfig,
    rows: np.ndarray,
    parent_of: np.ndarray,
    max_p: float,
) -> tuple[np.ndarray, np.ndarray]:
    """Hierarchical BH of the first round (Yekutieli 2008): the root family (rows without a parent) first; then,
    level by level, the children of every discovered row (p <= max_p, q <= max_qvalue; the minimum effect is a
    reporting rule, not part of the test), one BH family per parent, each with its own floor refinement. Returns
    ``(p, q)``; a row whose parent was not discovered is not tested: q is NaN."""
    p = p_value.copy()
    q = np.full(p.size, np.nan)
    reached = parent_of[rows] < 0
    done = np.zeros(p.size, dtype=bool)
    while True:
        level = reached & ~done
        if not level.any():
            return p, q
        # the rows of this level in their parents' families; every other row alone (it takes no part)
        labels = np.where(level, parent_of[rows], -2 - np.arange(p.size))
        refined, _ = _refine_floor_pvalues(p, exceed, eligible & level, groups, config, labels)
        p = np.where(level, refined, p)
        q = np.where(level, benjamini_hochberg_by_family(p, labels), q)
        done |= level
        discovered = rows[level & (p <= max_p) & (q <= config.max_qvalue)]
        reached |= np.isin(parent_of[rows], discovered)


def detect(
    numerators: np.ndarray,
    denominators: np.ndarray,
    config: DetectorConfig = DEFAULT_CONFIG,
    metrics: Sequence[str] | None = None,
    parents: Sequence[int] | None = None,
) -> Detection:
    """Change points and per-series status of every row of ``numerators / denominators`` (n_series x n_points).

    A 1-D input is one series (``series_index`` 0). NaN or a denominator <= 0 marks a missing
    point; it is left out of that series' statistics, and ``index`` is the original column of the
    first valid point after the change. ``metrics`` (one name per row) selects each row's minimum
    effect from ``config.min_relative_effects``. Rows are processed in groups of equal valid
    length, so the scan and the permutations stay array operations. The result is a deterministic
    function of the inputs and ``config``; with ``max_qvalue=None`` a row gets the same result
    alone or in a batch (with BH its q-value depends on the batch). See the module docstring.

    ``parents`` (one per row: the row index of its parent series, e.g. a node's cluster series of the same
    metric, or -1) turns on hierarchical FDR families when ``config.fdr_families`` is ``"tree"``, or ``"auto"``
    and :func:`tree_needed` (module docstring, step 5): a row is tested only when its parent is discovered, and
    BH runs within the children of each parent. A row whose parent is too short to test is a root.
    """
    num = np.asarray(numerators, dtype=float)
    den = np.asarray(denominators, dtype=float)
    if num.ndim == 1 and den.ndim == 1:
        num, den = num[None, :], den[None, :]
    if num.ndim != 2 or num.shape != den.shape:
        raise ValueError(f"expected two 2-D arrays of one shape, got {num.shape} and {den.shape}")
    n_rows = num.shape[0]
    if metrics is not None and len(metrics) != n_rows:
        raise ValueError(f"{len(metrics)} metric names for {n_rows} series")
    min_effect = np.array(
        [config.min_effect_for(metric) for metric in metrics]
        if metrics is not None
        else [config.min_relative_effect] * n_rows,
        dtype=float,
    )
    clip = (
        np.array([config.clips(metric) for metric in metrics], dtype=bool)
        if metrics is not None and config.clipped_metrics and config.statistic == "student"
        else None
    )
    y, valid = series_values(num, den, config.scale)
    min_length = config.min_testable_length()

    # Compact each row: valid points first, in order; `order` maps back to original columns.
    order = np.argsort(~valid, axis=1, kind="stable")
    n_valid = valid.sum(axis=1)
    yc = np.take_along_axis(np.where(valid, y, 0.0), order, axis=1)
    numc = np.take_along_axis(np.where(valid, num, 0.0), order, axis=1)
    denc = np.take_along_axis(np.where(valid, den, 0.0), order, axis=1)

    parent_of = np.full(n_rows, -1, dtype=np.int64)
    testable = n_valid >= min_length
    if parents is not None:
        given = np.asarray(parents, dtype=np.int64)
        if given.shape != (n_rows,) or ((given < -1) | (given >= n_rows) | (given == np.arange(n_rows))).any():
            raise ValueError("parents: one row index (or -1) per series, never the row itself")
        use_tree = config.max_qvalue is not None and (
            config.fdr_families == "tree"
            or (config.fdr_families == "auto" and tree_needed(int(testable.sum()), num.shape[1], config))
        )
        if use_tree:
            parent_of = np.where((given >= 0) & testable[np.maximum(given, 0)], given, -1)
    use_tree = bool((parent_of >= 0).any())

    # Phase 1, binary segmentation. Pending segments [start, end) are in compacted coordinates;
    # one round of bisection at a time, all pending segments of one length scanned together, and
    # the p-values of a round form one Benjamini-Hochberg family.
    rows = np.flatnonzero(n_valid >= min_length)
    starts = np.zeros(rows.size, dtype=np.int64)
    ends = n_valid[rows].astype(np.int64)
    budget = np.full(n_rows, config.max_changes, dtype=np.int64)
    split_merge = config.segmentation == "split_merge"
    # proposals (split_merge) have a budget of their own, so they never take the place of a change a scan accepted
    extra = np.full(n_rows, config.max_changes if split_merge else 0, dtype=np.int64)
    proposed: dict[int, set[int]] = {}  # row -> compact splits accepted only as proposals (tested in phase 2)
    interval_ends: dict[int, dict[int, int]] = {}  # row -> {compact split reported as an interval's end: other end}
    accepted: dict[int, dict[int, tuple[float, float, float]]] = {}  # row -> {compact split: (p, q, t)}
    first_scan: dict[int, tuple[float, float]] = {}  # row -> (p, q) of the scan of the whole series

    while rows.size:
        lengths = ends - starts
        p_round = np.ones(rows.size)
        t_round = np.zeros(rows.size)
        mid_round = np.zeros(rows.size, dtype=np.int64)
        effect_round = np.zeros(rows.size)
        exceed_round = np.zeros(rows.size, dtype=np.int64)
        interval_round = np.zeros(rows.size, dtype=bool)  # the reported end of an interior epidemic interval
        other_end_round = np.zeros(rows.size, dtype=np.int64)  # ... and its interval's other end (compacted)
        groups: list[tuple[np.ndarray, np.ndarray, np.ndarray]] = []
        for length in np.unique(lengths):
            sel = np.flatnonzero(lengths == length)
            r, s = rows[sel], starts[sel]
            cols = s[:, None] + np.arange(length)[None, :]
            scan = _scan_group(yc[r[:, None], cols], config, None if clip is None else clip[r])
            p_round[sel] = scan.p_value
            exceed_round[sel] = scan.exceed
            groups.append((sel, scan.x, scan.threshold))
            t_round[sel] = scan.statistic
            mid_round[sel] = s + scan.split
            effect_round[sel] = _pooled_effect(numc[r[:, None], cols], denc[r[:, None], cols], scan.split, config)
            if scan.block_lo is not None:  # epidemic: the interval against the rest, seen from the reported end
                inner = (scan.block_lo > 0) & (scan.block_hi < length)
                interval_round[sel] = inner
                other_end_round[sel] = s + np.where(scan.split == scan.block_lo, scan.block_hi, scan.block_lo)
                if inner.any():
                    block = _block_effect(
                        numc[r[:, None], cols], denc[r[:, None], cols], scan.block_lo, scan.block_hi, config
                    )
                    toward = np.where(scan.split == scan.block_lo, block, 1.0 / (1.0 + block) - 1.0)
                    effect_round[sel] = np.where(inner, toward, effect_round[sel])
            if config.effect_floor == "interval":  # the floor judges the far end of the effect's interval
                reach = _split_summary(
                    yc[r[:, None], cols], numc[r[:, None], cols], denc[r[:, None], cols], scan.split, config
                )["floor_reach"]
                effect_round[sel] = np.where(reach > np.abs(effect_round[sel]), reach, effect_round[sel])
        first_round = not first_scan
        with np.errstate(invalid="ignore"):
            big_enough = (np.abs(effect_round) >= min_effect[rows]) | (min_effect[rows] == 0.0)
        max_p = config.max_pvalue if first_round else config.sub_segment_pvalue
        eligible = big_enough & (p_round <= max_p)
        families = parent_of[rows] if use_tree else None  # sub-segments stay in their series' family
        if first_round and use_tree:
            p_round, q_round = _tree_round(p_round, exceed_round, eligible, groups, config, rows, parent_of, max_p)
        else:
            p_round, _ = _refine_floor_pvalues(p_round, exceed_round, eligible, groups, config, families)
            q_round = benjamini_hochberg_by_family(p_round, families)
        if not first_scan:
            first_scan = {int(row): (float(p), float(q)) for row, p, q in zip(rows, p_round, q_round)}
        ok = (p_round <= max_p) & big_enough
        if config.max_qvalue is not None:
            ok &= q_round <= config.max_qvalue
        # split_merge: a sub-segment scan that misses the thresholds but has p <= propose_pvalue (and a large
        # enough effect) proposes its split; phase 2 keeps it only if its test between its neighbours passes
        propose = (
            ~ok & big_enough & (p_round <= config.propose_pvalue)
            if split_merge and not first_round
            else np.zeros(rows.size, dtype=bool)
        )
        if config.max_qvalue is not None and config.propose_fdr:  # BH across the run's series still decides
            propose &= q_round <= config.max_qvalue
        candidates = sorted((float(p_round[i]), -abs(float(t_round[i])), i) for i in np.flatnonzero(ok | propose))

        next_segments: list[tuple[int, int, int]] = []
        for p, _, i in candidates:
            row, start, mid, end = int(rows[i]), int(starts[i]), int(mid_round[i]), int(ends[i])
            pool = extra if propose[i] else budget
            if pool[row] <= 0:
                continue
            pool[row] -= 1
            accepted.setdefault(row, {})[mid] = (p, float(q_round[i]), float(t_round[i]))
            if propose[i]:
                proposed.setdefault(row, set()).add(mid)
            elif config.merge_interval_ends and interval_round[i]:
                interval_ends.setdefault(row, {})[mid] = int(other_end_round[i])
            next_segments += [(row, a, b) for a, b in ((start, mid), (mid, end)) if b - a >= min_length]
        next_segments = [seg for seg in next_segments if budget[seg[0]] + extra[seg[0]] > 0]
        rows = np.asarray([seg[0] for seg in next_segments], dtype=np.int64)
        starts = np.asarray([seg[1] for seg in next_segments], dtype=np.int64)
        ends = np.asarray([seg[2] for seg in next_segments], dtype=np.int64)

    # Phase 2, final segmentation: each change is measured between its neighbouring changes (the
    # first scan of a series with two changes sees both later regimes on one side). If that makes
    # an effect smaller than its minimum, the weakest such change of the series is merged away and
    # its neighbours are measured again.
    # ``splits``: row -> [(compact split, evidence of the scan that found it)], in order.
    # split_merge adds the merge test: a proposal (phase 1) stays only while the test of its split between its
    # neighbouring changes has p <= merge_pvalue; per row and pass, an effect under its minimum is merged first,
    # else the proposal with the largest merge p above merge_pvalue, else (more than max_changes left) the
    # proposal with the largest merge p.
    splits = {row: sorted(found_at.items()) for row, found_at in accepted.items()}
    while True:
        items: list[tuple[int, int, int, int]] = []  # (row, previous bound, change, next bound)
        evidence: list[tuple[float, float, float]] = []
        for row, row_splits in sorted(splits.items()):
            bounds = [0, *(mid for mid, _ in row_splits), int(n_valid[row])]
            items += [(row, bounds[i], bounds[i + 1], bounds[i + 2]) for i in range(len(row_splits))]
            evidence += [ev for _, ev in row_splits]
        summaries = _summaries(items, yc, numc, denc, config)
        merge_p = _merge_pvalues(items, yc, config, clip=clip) if proposed or interval_ends else np.ones(len(items))
        weakest: dict[int, tuple[float, int]] = {}
        for (row, _, mid, _), summary in zip(items, summaries):
            effect = abs(summary["relative_effect"])
            if config.effect_floor == "interval":
                effect = max(effect, summary["floor_reach"]) if math.isfinite(effect) else effect
            small = not effect >= min_effect[row] and min_effect[row] > 0.0  # NaN (linear, before 0) is small
            if small and not effect >= weakest.get(row, (math.inf, 0))[0]:
                weakest[row] = (effect, mid)
        unproven: dict[int, tuple[float, int]] = {}
        for (row, _, mid, _), p in zip(items, merge_p):
            if row in weakest:
                continue
            if mid in interval_ends.get(row, {}):
                # an interval's end stands on the interval's test alone while its other end is not a change
                over = p > config.sub_segment_pvalue and _other_end_kept(interval_ends[row][mid], splits[row], config)
            elif mid in proposed.get(row, ()):
                over = p > config.merge_pvalue or len(splits[row]) > config.max_changes
            else:
                continue
            if over and p >= unproven.get(row, (-1.0, 0))[0]:
                unproven[row] = (float(p), mid)
        if not weakest and not unproven:
            break
        for row, (_, mid) in (weakest | unproven).items():
            splits[row] = [(m, ev) for m, ev in splits[row] if m != mid]

    intervals = _bootstrap_intervals(items, numc, denc, config)

    def merge_tested(row: int, mid: int) -> bool:
        if mid in proposed.get(row, ()):
            return True
        return mid in interval_ends.get(row, {}) and _other_end_kept(interval_ends[row][mid], splits[row], config)

    found = []
    for (row, _, mid, _), summary, (ci_low, ci_high), (p, q, t), mp in zip(
        items, summaries, intervals, evidence, merge_p
    ):
        measured = _measured_fields(summary, config)
        effect, absolute = measured["relative_effect"], measured["absolute_effect"]
        rising = effect > 0 if math.isfinite(effect) and effect != 0 else absolute > 0 or (absolute == 0 and t > 0)
        found.append(
            ChangePoint(
                series_index=row,
                index=int(order[row, mid]),
                **measured,
                ci_low=ci_low,
                ci_high=ci_high,
                p_value=p,
                statistic=t,
                test=config.test_name_for(metrics[row] if metrics is not None else None),
                q_value=q,
                direction="up" if rising else "down",
                merge_p_value=float(mp) if merge_tested(row, mid) else None,
            )
        )
    found.sort(key=lambda cp: (cp.series_index, cp.index))

    per_row: dict[int, list[ChangePoint]] = {}
    for cp in found:
        per_row.setdefault(cp.series_index, []).append(cp)
    series = []
    for row in range(n_rows):
        tested = row in first_scan
        changes = per_row.get(row, [])
        series.append(
            SeriesResult(
                series_index=row,
                n_points=num.shape[1],
                n_valid=int(n_valid[row]),
                status=("changed" if changes else "no_change") if tested else "too_short",
                min_length=min_length,
                p_value=first_scan[row][0] if tested else None,
                # NaN: its parent was not discovered (hierarchical families), so it was not tested in the tree
                q_value=first_scan[row][1] if tested and math.isfinite(first_scan[row][1]) else None,
                n_changes=len(changes),
                drift=any(cp.shape == "drift" for cp in changes),
            )
        )
    return Detection(changes=found, series=series)


def _other_end_kept(other: int, row_splits: list, config: DetectorConfig) -> bool:
    """Whether the other end of an epidemic interval (compacted) is a change of the series: a split within
    ``min_segment`` points of it (binary segmentation finds it in the piece the reported end leaves)."""
    return any(abs(mid - other) < config.min_segment for mid, _ in row_splits)


def _merge_pvalues(
    items: list[tuple[int, int, int, int]],
    yc: np.ndarray,
    config: DetectorConfig,
    chosen: bool = True,
    clip: np.ndarray | None = None,
) -> np.ndarray:
    """Merge test of each ``(row, lo, split, hi)`` (compacted): does ``y[split:hi]`` differ from ``y[lo:split]``?

    A parametric two-sided test at the given split between the neighbouring changes, as Hunter/Otava's merge step
    does, multiplied by the number of splits the window allows (Bonferroni for the split having been chosen in it),
    capped at 1: Student's t (pooled variance, ``n - 2`` degrees of freedom), Welch's t for ``statistic="welch"``,
    the t of the Huber-clipped window for ``"huber"`` and the rank-sum z (normal approximation, mid-ranks) for
    ``"rank"``. Parametric because a window between two close changes is too short for a permutation p to reach a
    small threshold (8 points: at best 2 / C(8, 4) = 0.029). Grouped by window length, vectorized. ``chosen=False``:
    a split fixed before looking at the data (``measure_split``), so no Bonferroni factor. ``clip`` (one per row of
    ``yc``): rows tested on their Huber-clipped window (``clipped_metrics``), as ``"huber"`` tests every row.
    """
    out = np.ones(len(items))
    if not items:
        return out
    arr = np.asarray(items, dtype=np.int64).reshape(-1, 4)
    lengths = arr[:, 3] - arr[:, 1]
    m = config.min_segment
    for length in np.unique(lengths):
        sel = np.flatnonzero(lengths == length)
        r, lo = arr[sel, 0], arr[sel, 1]
        y = yc[r[:, None], lo[:, None] + np.arange(length)[None, :]]
        split = arr[sel, 2] - lo
        rows = np.arange(sel.size)
        if config.statistic == "rank":
            x, variance = _centred_ranks(y)
            excess, var = _rank_moments(x, variance, m)
        else:
            x = _huber_clip(y) if config.statistic == "huber" else _clipped_rows(y, None if clip is None else clip[r])
            x = x - x.mean(axis=1, keepdims=True)
            excess, var = _scan_moments(x, m, pooled=config.statistic != "welch")
        at = split - m
        signed, var = excess[rows, at], var[rows, at]
        score = np.where(var > 0, np.abs(signed) / np.sqrt(np.where(var > 0, var, 1.0)), 0.0)
        if config.statistic == "rank":
            p = 2.0 * stats.norm.sf(score)
        else:
            if config.statistic == "welch":
                nl, nr = split.astype(float), length - split.astype(float)
                left = np.arange(length)[None, :] < split[:, None]
                ml = np.where(left, x, 0.0).sum(axis=1) / nl
                mr = np.where(left, 0.0, x).sum(axis=1) / nr
                al = np.where(left, (x - ml[:, None]) ** 2, 0.0).sum(axis=1) / (nl - 1.0) / nl
                ar = np.where(left, 0.0, (x - mr[:, None]) ** 2).sum(axis=1) / (nr - 1.0) / nr
                den = al * al / (nl - 1.0) + ar * ar / (nr - 1.0)
                df = np.where(den > 0, (al + ar) ** 2 / np.where(den > 0, den, 1.0), length - 2.0)
            else:
                df = np.full(sel.size, length - 2.0)
            p = 2.0 * stats.t.sf(score, df)
        out[sel] = np.minimum(1.0, p * (length - 2 * m + 1)) if chosen else p
    return out


def _summaries(
    items: list[tuple[int, int, int, int]],
    yc: np.ndarray,
    numc: np.ndarray,
    denc: np.ndarray,
    config: DetectorConfig,
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
            yc[r[:, None], cols], numc[r[:, None], cols], denc[r[:, None], cols], arr[sel, 2] - lo, config
        )
        for j, i in enumerate(sel):
            out[i] = {key: value[j] for key, value in summary.items()}
    return out
