"""The change-point detector on literal and seeded series (perf_assets/lib/changepoint.py)."""

from __future__ import annotations

import dataclasses
import math
import warnings

import numpy as np
import pytest
from scipy import stats

from perf_assets.lib.changepoint import (
    ChangePoint,
    DetectorConfig,
    detect_change_points,
    log_ratios,
    scan_welch_t,
)


def _ratio_series(levels: list[tuple[int, float]], noise_sd: float, seed: int) -> tuple[np.ndarray, np.ndarray]:
    """Numerator and denominator of a piecewise-constant ratio with log-normal noise.

    Denominators vary day to day (0.5e6..1.5e6 peak-FLOP-seconds), as they do in the fleet.
    """
    rng = np.random.default_rng(seed)
    ratio = np.concatenate([np.full(n, level) for n, level in levels])
    ratio = ratio * np.exp(rng.normal(0.0, noise_sd, ratio.size))
    den = rng.uniform(0.5e6, 1.5e6, ratio.size)
    return ratio * den, den


def _step_20(seed: int = 7) -> tuple[np.ndarray, np.ndarray]:
    return _ratio_series([(10, 1.0), (10, 0.87)], noise_sd=0.01, seed=seed)


# --------------------------------------------------------------------------- the basic step


def test_step_of_minus_13_percent_at_index_10_is_the_only_change():
    num, den = _step_20()
    cps = detect_change_points(num, den)
    assert [cp.index for cp in cps] == [10]
    cp = cps[0]
    assert cp.series_index == 0
    assert (cp.n_before, cp.n_after) == (10, 10)
    assert abs(cp.relative_effect - (-0.13)) <= 0.01
    assert cp.ci_low <= -0.13 <= cp.ci_high
    assert cp.ci_high < 0.0
    assert cp.p_value <= 0.01
    # p = (1 + #exceeding) / (1 + 999): one of the 1000 lattice values, and at most a couple of the
    # 999 permutations can match a clean step (only near-sorted orders do)
    assert cp.p_value * 1000 == pytest.approx(round(cp.p_value * 1000), abs=1e-9)
    assert cp.p_value <= 3 / 1000
    assert cp.statistic < -10.0
    assert cp.test == "max-scan Student t on daily log ratios, permutation p (999), BH q<=0.05, bootstrap CI (95%, 999)"
    # the Welch interval is centred on the mean log difference, mapped through exp(.) - 1
    assert cp.welch_ci_low < math.expm1(cp.mean_log_difference) < cp.welch_ci_high
    # the bootstrap interval is of the pooled effect itself
    assert cp.ci_low < cp.relative_effect < cp.ci_high
    assert (cp.direction, cp.verdict, cp.shape) == ("down", "confirmed", "step")
    assert cp.q_value == cp.p_value  # one series: a family of one


def test_step_is_found_for_every_seed_with_the_right_index():
    for seed in range(20):
        num, den = _step_20(seed)
        cps = detect_change_points(num, den)
        assert [cp.index for cp in cps] == [10], seed
        assert abs(cps[0].relative_effect + 0.13) <= 0.01, seed


def test_a_rise_gives_a_positive_effect_and_statistic():
    num, den = _ratio_series([(12, 0.8), (12, 0.9)], noise_sd=0.01, seed=3)
    (cp,) = detect_change_points(num, den)
    assert cp.index == 12
    assert cp.relative_effect == pytest.approx(0.125, abs=0.01)
    assert cp.statistic > 0 and 0 < cp.ci_low <= 0.125 <= cp.ci_high


# --------------------------------------------------------------------------- calibration of the scan


def _null_batch(n_series: int = 200, n_points: int = 20, seed: int = 11) -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(seed)
    ratio = 0.9 * np.exp(rng.normal(0.0, 0.01, (n_series, n_points)))
    den = rng.uniform(0.5e6, 1.5e6, (n_series, n_points))
    return ratio * den, den


def test_false_positive_rate_on_constant_series_is_controlled_by_the_scan_correction():
    num, den = _null_batch()
    # effect filter off, so the p-value alone decides
    config = DetectorConfig(max_pvalue=0.01, min_relative_effect=0.0, max_changes=1)
    cps = detect_change_points(num, den, config)
    fpr = len({cp.series_index for cp in cps}) / num.shape[0]
    assert fpr <= 0.03

    # The same series, judged by a plain Welch t-test p-value at the best split, fail the bound:
    # this is what the permutation calibration fixes.
    y, _ = log_ratios(num, den)
    m, n = config.min_segment, y.shape[1]
    t = scan_welch_t(y, m)
    naive_p = np.ones(y.shape[0])
    for i, j in enumerate(np.argmax(np.abs(t), axis=1)):
        k = m + j
        naive_p[i] = stats.ttest_ind(y[i, k:], y[i, :k], equal_var=False).pvalue
    assert n == 20
    assert np.mean(naive_p <= 0.01) > 0.03


def test_p_values_of_null_series_are_roughly_uniform():
    num, den = _null_batch(n_series=200, seed=12)
    config = DetectorConfig(max_pvalue=1.0, min_relative_effect=0.0, max_changes=1, n_permutations=199, max_qvalue=None)
    cps = detect_change_points(num, den, config)
    # every row reports its best split (p <= 1 always); the p-values behave like U(0, 1)
    assert len(cps) == 200
    p = np.array([cp.p_value for cp in cps])
    assert 0.4 <= np.mean(p) <= 0.6
    assert np.mean(p <= 0.1) <= 0.16


def test_a_perfectly_constant_series_has_no_change_and_no_warning():
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert detect_change_points(np.full((3, 20), 0.7), np.ones((3, 20))) == []
        t = scan_welch_t(np.zeros((2, 12)), 3)
    assert np.all(t == 0.0)


def test_a_noiseless_step_is_found_with_a_finite_statistic():
    num = np.r_[np.full(10, 1.0), np.full(10, 0.87)]
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        (cp,) = detect_change_points(num, np.ones(20))
    assert cp.index == 10
    assert math.isfinite(cp.statistic) and cp.statistic < 0
    assert cp.relative_effect == pytest.approx(-0.13)
    assert cp.ci_low == pytest.approx(-0.13, abs=1e-6) and cp.ci_high == pytest.approx(-0.13, abs=1e-6)
    assert cp.welch_ci_low == pytest.approx(-0.13, abs=1e-6) and cp.welch_ci_high == pytest.approx(-0.13, abs=1e-6)


def test_scan_statistic_equals_scipy_welch_t_at_every_split():
    rng = np.random.default_rng(5)
    y = rng.normal(0.0, 1.0, (4, 15)) + np.r_[np.zeros(6), np.ones(9)]
    m = 3
    t = scan_welch_t(y, m)
    assert t.shape == (4, 15 - 2 * m + 1)
    for i in range(4):
        for j, k in enumerate(range(m, 15 - m + 1)):
            ref = stats.ttest_ind(y[i, k:], y[i, :k], equal_var=False).statistic
            assert t[i, j] == pytest.approx(ref, rel=1e-9)


def test_welch_ci_is_the_welch_interval_of_the_mean_log_difference():
    num, den = _step_20(seed=21)
    (cp,) = detect_change_points(num, den)
    y = np.log(num / den)
    ref = stats.ttest_ind(y[10:], y[:10], equal_var=False).confidence_interval(0.95)
    assert cp.welch_ci_low == pytest.approx(math.expm1(ref.low), rel=1e-9)
    assert cp.welch_ci_high == pytest.approx(math.expm1(ref.high), rel=1e-9)
    assert cp.mean_log_difference == pytest.approx(y[10:].mean() - y[:10].mean(), rel=1e-12)
    narrower = detect_change_points(num, den, DetectorConfig(confidence=0.8))[0]
    assert cp.welch_ci_low < narrower.welch_ci_low < narrower.welch_ci_high < cp.welch_ci_high
    assert cp.ci_low < narrower.ci_low < narrower.ci_high < cp.ci_high


# --------------------------------------------------------------------------- pooling


def test_levels_are_pooled_sums_not_means_of_daily_ratios():
    # High-volume days run a bit better than low-volume days, so the pooled level sits above the
    # mean of daily ratios.
    den = np.tile([1.0e6, 10.0e6], 10)
    ratio = np.r_[np.tile([0.98, 1.02], 5), np.tile([0.78, 0.82], 5)]
    num = ratio * den
    (cp,) = detect_change_points(num, den)
    assert cp.index == 10
    assert cp.before_numerator == pytest.approx(num[:10].sum())
    assert cp.before_denominator == pytest.approx(den[:10].sum())
    assert cp.before_level == pytest.approx(num[:10].sum() / den[:10].sum(), rel=1e-12)
    assert cp.after_level == pytest.approx(num[10:].sum() / den[10:].sum(), rel=1e-12)
    assert cp.before_level == pytest.approx(1.0164, abs=1e-3)
    assert abs(cp.before_level - ratio[:10].mean()) > 0.01
    assert cp.relative_effect == pytest.approx(cp.after_level / cp.before_level - 1.0, rel=1e-12)


# --------------------------------------------------------------------------- missing points


def test_nan_and_zero_denominator_points_are_skipped_and_indices_are_original():
    num, den = _step_20(seed=7)
    num_gap, den_gap = num.copy(), den.copy()
    num_gap[2] = np.nan  # unknown numerator
    den_gap[7] = 0.0  # no productive time: unknown ratio
    den_gap[14] = np.nan
    den_gap[17] = -1.0
    (cp,) = detect_change_points(num_gap, den_gap)
    assert cp.index == 10
    assert (cp.n_before, cp.n_after) == (8, 8)
    keep = np.ones(20, dtype=bool)
    keep[[2, 7, 14, 17]] = False
    assert cp.before_numerator == pytest.approx(num[:10][keep[:10]].sum())
    assert cp.after_denominator == pytest.approx(den[10:][keep[10:]].sum())

    # identical statistics to the compacted series, apart from the index
    (compact,) = detect_change_points(num[keep], den[keep])
    assert compact.index == 8
    assert dataclasses.replace(compact, index=10) == cp


def test_a_missing_first_day_of_the_new_regime_moves_the_index_to_the_next_valid_day():
    num, den = _step_20(seed=7)
    num[10] = np.nan
    num[11] = np.nan
    (cp,) = detect_change_points(num, den)
    assert cp.index == 12
    assert (cp.n_before, cp.n_after) == (10, 8)


def test_rows_with_different_numbers_of_valid_points_are_handled_together():
    num, den = _step_20(seed=7)
    nums = np.tile(num, (3, 1))
    dens = np.tile(den, (3, 1))
    nums[1, [0, 1, 19]] = np.nan
    dens[2, :] = np.nan  # entirely unknown: nothing to say
    dens[2, :4] = 1.0
    cps = detect_change_points(nums, dens)
    assert [(cp.series_index, cp.index) for cp in cps] == [(0, 10), (1, 10)]
    assert cps[1].n_before == 8 and cps[1].n_after == 9


def test_too_short_series_yield_nothing():
    assert detect_change_points(np.ones((2, 5)), np.ones((2, 5))) == []
    assert detect_change_points(np.empty((0, 20)), np.empty((0, 20))) == []


def test_broken_inputs_raise():
    with pytest.raises(ValueError, match="shape"):
        detect_change_points(np.ones((2, 10)), np.ones((2, 11)))
    with pytest.raises(ValueError, match="negative numerator"):
        detect_change_points(np.r_[np.ones(9), -1.0], np.ones(10))
    with pytest.raises(ValueError, match="infinite"):
        detect_change_points(np.r_[np.ones(9), np.inf], np.ones(10))
    with pytest.raises(ValueError, match="min_segment"):
        DetectorConfig(min_segment=1)
    with pytest.raises(ValueError, match="cannot reach"):
        DetectorConfig(n_permutations=50, max_pvalue=0.01)


# --------------------------------------------------------------------------- several changes


def test_two_changes_in_40_points_are_both_found():
    levels = [(15, 1.0), (13, 0.88), (12, 0.95)]
    num, den = _ratio_series(levels, noise_sd=0.01, seed=4)
    cps = detect_change_points(num, den, DetectorConfig(max_changes=2))
    assert [cp.index for cp in cps] == [15, 28]
    first, second = cps
    assert first.relative_effect == pytest.approx(-0.12, abs=0.01)
    assert second.relative_effect == pytest.approx(0.95 / 0.88 - 1, abs=0.01)
    # the second change is measured inside its own segment, after the first one
    assert (second.n_before, second.n_after) == (13, 12)
    assert all(cp.p_value <= 0.01 for cp in cps)

    only_one = detect_change_points(num, den, DetectorConfig(max_changes=1))
    assert len(only_one) == 1 and only_one[0].index in (15, 28)


def test_max_changes_caps_a_staircase():
    levels = [(10, 1.0), (10, 0.9), (10, 0.8), (10, 0.7), (10, 0.6)]
    num, den = _ratio_series(levels, noise_sd=0.005, seed=9)
    assert [cp.index for cp in detect_change_points(num, den, DetectorConfig(max_changes=4))] == [10, 20, 30, 40]
    assert len(detect_change_points(num, den, DetectorConfig(max_changes=2))) == 2


def test_effects_are_measured_between_neighbouring_changes_and_weak_ones_are_merged_away():
    # A slow slide: 1.00 -> 0.97 -> 0.945 -> 0.93. Scanned in its own segment the change at day 6
    # clears 3%; measured against its neighbours (days 0-5 vs 6-12) it is -3.0% < 3%, so it is
    # merged away and the change at day 13 is then measured over days 0-12 vs 13-32.
    num, den = _ratio_series([(6, 1.0), (7, 0.97), (9, 0.945), (11, 0.93)], noise_sd=0.004, seed=2)
    (cp,) = detect_change_points(num, den, DetectorConfig(min_relative_effect=0.03))
    assert (cp.index, cp.n_before, cp.n_after) == (13, 13, 20)
    assert cp.before_level == pytest.approx(num[:13].sum() / den[:13].sum(), rel=1e-12)
    assert cp.relative_effect == pytest.approx(-0.048, abs=0.005)

    finer = detect_change_points(num, den, DetectorConfig(min_relative_effect=0.02))
    assert [(c.index, c.n_before, c.n_after) for c in finer] == [(6, 6, 7), (13, 7, 20)]
    assert -0.03 < finer[0].relative_effect < -0.02
    finest = detect_change_points(num, den, DetectorConfig(min_relative_effect=0.01))
    assert [c.index for c in finest] == [6, 13, 22]
    for c in [cp, *finer, *finest]:
        assert c.p_value <= 0.01


# --------------------------------------------------------------------------- vectorization, determinism


def test_batch_results_equal_one_series_at_a_time():
    rng = np.random.default_rng(17)
    rows = []
    for i in range(24):
        if i % 3 == 0:
            num, den = _ratio_series([(12, 1.0), (18, 0.9)], noise_sd=0.01, seed=i)
        elif i % 3 == 1:
            num, den = _ratio_series([(8, 1.0), (10, 1.1), (12, 0.95)], noise_sd=0.01, seed=i)
        else:
            num, den = _ratio_series([(30, 0.8)], noise_sd=0.02, seed=i)
        drop = rng.choice(30, size=i % 5, replace=False)
        num[drop] = np.nan
        rows.append((num, den))
    nums = np.stack([r[0] for r in rows])
    dens = np.stack([r[1] for r in rows])
    # per-series testing (no BH): only the q-values, which are relative to the family, differ
    config = DetectorConfig(min_relative_effect=0.02, max_qvalue=None)

    batch = detect_change_points(nums, dens, config)
    one_by_one: list[ChangePoint] = []
    for i, (num, den) in enumerate(rows):
        one_by_one += [dataclasses.replace(cp, series_index=i) for cp in detect_change_points(num, den, config)]
    assert len(batch) >= 16  # the comparison is not vacuous
    assert [dataclasses.replace(cp, q_value=0.0) for cp in batch] == [
        dataclasses.replace(cp, q_value=0.0) for cp in one_by_one
    ]
    assert all(cp.q_value >= cp.p_value for cp in batch)


def test_same_seed_same_p_values_and_another_seed_other_p_values():
    num, den = _null_batch(n_series=40, seed=3)
    config = DetectorConfig(
        max_pvalue=1.0, min_relative_effect=0.0, max_changes=1, n_permutations=199, seed=42, max_qvalue=None
    )
    first = detect_change_points(num, den, config)
    again = detect_change_points(num, den, config)
    assert [cp.p_value for cp in first] == [cp.p_value for cp in again]
    assert first == again
    other = detect_change_points(num, den, dataclasses.replace(config, seed=43))
    assert [cp.index for cp in other] == [cp.index for cp in first]  # the scan does not depend on the seed
    assert [cp.p_value for cp in other] != [cp.p_value for cp in first]


# --------------------------------------------------------------------------- the effect filter


def test_a_significant_effect_below_min_relative_effect_is_not_reported():
    num, den = _ratio_series([(10, 1.0), (10, 0.99)], noise_sd=0.001, seed=2)
    assert detect_change_points(num, den, DetectorConfig(min_relative_effect=0.03)) == []
    (cp,) = detect_change_points(num, den, DetectorConfig(min_relative_effect=0.005))
    assert cp.index == 10 and cp.p_value <= 0.01
    assert cp.relative_effect == pytest.approx(-0.01, abs=0.002)


def test_a_large_but_insignificant_jump_is_not_reported():
    # two noisy halves: a 5% difference of pooled levels with 10% daily noise is not evidence
    num, den = _ratio_series([(10, 1.0), (10, 0.95)], noise_sd=0.10, seed=1)
    cps = detect_change_points(num, den, DetectorConfig(max_pvalue=0.01, min_relative_effect=0.0))
    assert cps == []
