"""The detector's robust scan, BH q-values, short series, drift, directions, bootstrap CI and verdict.

Literal and seeded series; perf_assets/lib/changepoint.py explains the method.
"""

from __future__ import annotations

import math

import numpy as np
import pytest
from scipy import stats

from perf_assets.lib.changepoint import DetectorConfig, benjamini_hochberg, detect, detect_change_points, scan_rank_z

ONES30 = np.ones(30)
# 30 days around 10 with ~1% noise (rounded draws of 10 * exp(N(0, 0.01)), seed 3), written out.
CALM = [10.21, 9.75, 10.04, 9.94, 9.95, 9.98, 9.8, 9.98, 9.91, 10.34, 10.02, 9.96, 9.97, 9.93, 9.9,
        9.96, 10.05, 9.98, 10.1, 9.98, 10.0, 10.16, 10.05, 9.95, 9.98, 10.05, 10.2, 9.97, 9.98, 10.1]  # fmt: skip


def _noise(n_series: int, n_points: int, seed: int, sd: float = 0.01) -> np.ndarray:
    return 0.9 * np.exp(np.random.default_rng(seed).normal(0.0, sd, (n_series, n_points)))


# --------------------------------------------------------------------------- a clean step


def test_a_clean_step_is_found_at_the_right_index_and_the_bootstrap_ci_covers_the_effect():
    rng = np.random.default_rng(1)
    hits = 0
    for seed in range(20):
        at = 8 + seed % 10
        values = 10.0 * np.exp(rng.normal(0.0, 0.01, 30))
        values[at:] *= 0.9
        (cp,) = detect_change_points(values, ONES30)
        assert abs(cp.index - at) <= 1, seed
        assert cp.direction == "down" and cp.statistic < 0
        hits += cp.ci_low <= -0.1 <= cp.ci_high
    assert hits >= 17  # 95% intervals, 20 series


# --------------------------------------------------------------------------- no change: calibration


def test_false_positive_rate_on_200_noise_series_is_near_the_nominal_level():
    values = _noise(200, 20, seed=5)
    # per-series testing at p <= 0.05, no effect filter: the permutation p-value alone decides
    for statistic in ("student", "welch", "rank"):
        config = DetectorConfig(
            statistic=statistic, max_pvalue=0.05, max_qvalue=None, min_relative_effect=0.0, max_changes=1
        )
        result = detect(values, np.ones_like(values), config)
        rate = sum(s.status == "changed" for s in result.series) / 200
        # Binomial(200, 0.05): mean 10, sd 3.1; a band of about +-2.3 sd
        assert 0.015 <= rate <= 0.085, (statistic, rate)
        rejected = np.mean([s.p_value <= 0.05 for s in result.series])
        assert rejected == rate
    # the defaults (p <= 0.01, BH q <= 0.05 across the 200, 3% minimum effect) find nothing
    assert detect_change_points(values, np.ones_like(values)) == []
    assert detect_change_points(values, np.ones_like(values), DetectorConfig(statistic="rank")) == []


# --------------------------------------------------------------------------- outliers: the robust scan


def test_spikes_at_the_start_fool_the_welch_scan_but_not_the_rank_scan():
    # three warm-up spikes among the first four days of an otherwise flat series
    values = np.array(CALM)
    values[[0, 1, 3]] = [15.0, 16.0, 14.5]
    (plain,) = detect_change_points(values, ONES30)
    assert plain.index == 4 and plain.relative_effect < -0.2  # a "regression" that is only the spikes
    robust = detect(values, ONES30, DetectorConfig(statistic="rank"))
    assert robust.changes == []
    assert robust.series[0].status == "no_change" and robust.series[0].p_value > 0.01


def test_the_rank_scan_finds_a_step_that_spikes_hide_from_the_welch_scan():
    values = np.array(CALM)
    values[15:] = np.round(values[15:] * 0.92, 2)  # -8% from day 15
    values[[5, 20, 26]] = [16.0, 15.0, 17.0]  # and three spikes
    plain = detect(values, ONES30)
    assert plain.changes == [] and plain.series[0].p_value > 0.01
    (robust,) = detect_change_points(values, ONES30, DetectorConfig(statistic="rank"))
    assert robust.index == 15
    # levels are medians of the daily values, so the spikes do not move the effect
    assert robust.before_level == pytest.approx(np.median(values[:15]))
    assert robust.after_level == pytest.approx(np.median(values[15:]))
    assert robust.relative_effect == pytest.approx(-0.08, abs=0.015)
    assert robust.ci_low <= -0.08 <= robust.ci_high
    assert robust.test.startswith("max-scan rank-sum z")


def test_rank_scan_statistic_is_the_mann_whitney_z_at_every_split():
    rng = np.random.default_rng(4)
    y = np.round(rng.normal(0.0, 1.0, (3, 14)), 1)  # rounding makes ties
    z = scan_rank_z(y, 3)
    for i in range(3):
        for j, k in enumerate(range(3, 14 - 3 + 1)):
            ref = stats.mannwhitneyu(y[i, k:], y[i, :k], use_continuity=False, method="asymptotic")
            n1, n2 = 14 - k, k
            u_mean = n1 * n2 / 2
            # scipy's two-sided p gives |z|; the sign is that of U - mean
            expected = math.copysign(stats.norm.isf(ref.pvalue / 2), ref.statistic - u_mean)
            assert z[i, j] == pytest.approx(expected, rel=1e-6, abs=1e-9)


def test_heavy_tailed_noise_the_rank_scan_keeps_its_power():
    rng = np.random.default_rng(8)
    values = 10.0 * np.exp(0.01 * rng.standard_t(1.5, (100, 30)))
    values[:, 15:] *= 0.95
    config = DetectorConfig(max_qvalue=None)
    welch = {cp.series_index for cp in detect_change_points(values, np.ones_like(values), config)}
    rank = {
        cp.series_index
        for cp in detect_change_points(values, np.ones_like(values), DetectorConfig(max_qvalue=None, statistic="rank"))
    }
    assert len(rank) >= 85 and len(rank) > len(welch) + 15


# --------------------------------------------------------------------------- gradual drift


def test_a_ramp_gives_changes_where_the_level_moved_flagged_as_drift():
    ramp = np.r_[np.full(10, 1.0), np.linspace(1.0, 0.8, 20)] * np.exp(np.random.default_rng(2).normal(0, 0.003, 30))
    result = detect(ramp, ONES30)
    assert result.changes, "a 20% ramp must not pass as 'no change'"
    assert all(cp.direction == "down" and 10 <= cp.index < 30 for cp in result.changes)  # inside the ramp
    # changes inside the ramp are drifts; the first one, at the hinge of flat and ramp, may read as a step
    assert [cp.shape for cp in result.changes].count("drift") >= len(result.changes) - 1 >= 1
    assert result.series[0].drift and result.series[0].status == "changed"
    # a clean step is a step, not a drift
    step = np.array(CALM)
    step[15:] *= 0.9
    (cp,) = detect_change_points(step, ONES30)
    assert cp.shape == "step"


# --------------------------------------------------------------------------- short series


def test_too_short_series_are_not_tested_and_say_so():
    config = DetectorConfig()  # p <= 0.01: the smallest possible scan p of 9 points is 2/C(9,4) = 0.016
    assert config.min_testable_length() == 10
    step9 = np.r_[np.full(5, 1.0), np.full(4, 0.5)]
    result = detect(np.stack([np.r_[step9, np.nan], np.r_[step9, 0.5]]), np.ones((2, 10)), config)
    short, tested = result.series
    assert (short.status, short.n_valid, short.p_value, short.q_value) == ("too_short", 9, None, None)
    assert tested.status == "changed" and tested.n_valid == 10
    assert [cp.series_index for cp in result.changes] == [1]
    assert DetectorConfig(max_pvalue=0.05).min_testable_length() == 8
    assert DetectorConfig(max_pvalue=1.0).min_testable_length() == 6  # 2 * min_segment


# --------------------------------------------------------------------------- both directions


def test_a_rise_and_a_drop_are_both_reported_with_their_direction():
    values = np.array(CALM * 2)
    values[20:40] *= 1.1
    ups_and_downs = detect_change_points(values, np.ones(60), DetectorConfig(max_changes=2))
    assert [(cp.index, cp.direction) for cp in ups_and_downs] == [(20, "up"), (40, "down")]
    assert ups_and_downs[0].relative_effect == pytest.approx(0.1, abs=0.01) and ups_and_downs[0].statistic > 0
    assert ups_and_downs[1].relative_effect == pytest.approx(-1 / 11, abs=0.01) and ups_and_downs[1].statistic < 0


# --------------------------------------------------------------------------- Benjamini-Hochberg


def test_benjamini_hochberg_on_a_known_example():
    p = np.array([0.01, 0.04, 0.03, 0.005])
    # sorted 0.005 0.01 0.03 0.04 -> x 4/1 4/2 4/3 4/4 = 0.02 0.02 0.04 0.04 (already monotone)
    assert benjamini_hochberg(p) == pytest.approx([0.02, 0.04, 0.04, 0.02])
    rng = np.random.default_rng(0)
    p = rng.uniform(0, 1, 50) ** 3
    q = benjamini_hochberg(p)
    assert np.all(q >= p) and np.all(q <= 1.0)
    order = np.argsort(p)
    assert np.all(np.diff(q[order]) >= 0)  # monotone in p
    assert q == pytest.approx(stats.false_discovery_control(p, method="bh"))
    assert benjamini_hochberg([]).size == 0


def test_acceptance_is_on_q_across_the_series_of_a_call():
    step = np.array(CALM[:20])
    step[10:] *= 0.9
    noise = _noise(99, 20, seed=9)
    values = np.vstack([step, noise])
    den = np.ones_like(values)
    alone = detect(step, np.ones(20))
    assert alone.changes[0].p_value == alone.changes[0].q_value == 0.001
    # with 99 quiet series its q is 100 x 0.001 = 0.1 > 0.05: not accepted at the default FDR
    # without refinement (max_permutations = n_permutations) ...
    batch = detect(values, den, DetectorConfig(max_permutations=999))
    assert batch.changes == []
    assert batch.series[0].p_value == 0.001 and batch.series[0].q_value == pytest.approx(0.1)
    qs = [s.q_value for s in batch.series]
    assert qs == pytest.approx(list(benjamini_hochberg([s.p_value for s in batch.series])))
    # ... accepted per series (BH off), or with enough permutations for the 100-series family
    assert [cp.series_index for cp in detect_change_points(values, den, DetectorConfig(max_qvalue=None))] == [0]
    fine = detect_change_points(values, den, DetectorConfig(n_permutations=9999))
    assert [cp.series_index for cp in fine] == [0] and fine[0].q_value <= 0.05
    # ... or by the default adaptive refinement of its floor p-value (the other series keep theirs)
    refined = detect(values, den)
    assert [cp.series_index for cp in refined.changes] == [0] and refined.changes[0].q_value <= 0.05
    assert [s.p_value for s in refined.series[1:]] == [s.p_value for s in batch.series[1:]]


# --------------------------------------------------------------------------- bootstrap CI


def test_bootstrap_interval_coverage_on_200_step_series():
    rng = np.random.default_rng(21)
    n = 200
    ratio = np.exp(rng.normal(0.0, 0.02, (n, 24)))
    ratio[:, 12:] *= 0.95
    den = rng.uniform(0.5e6, 1.5e6, (n, 24))
    changes = detect_change_points(ratio * den, den, DetectorConfig(max_qvalue=None, max_changes=1))
    assert len(changes) == n
    # a 2.5-sigma step: the split is exact for most series, within 2 days for almost all
    assert sum(cp.index == 12 for cp in changes) >= 140 and sum(abs(cp.index - 12) <= 2 for cp in changes) >= 185
    changes = [cp for cp in changes if cp.index == 12]  # coverage given the right split
    boot = np.mean([cp.ci_low <= -0.05 <= cp.ci_high for cp in changes])
    welch = np.mean([cp.welch_ci_low <= -0.05 <= cp.welch_ci_high for cp in changes])
    # percentile bootstrap with 12 points a side undercovers a little; the Welch interval is exact-ish
    assert 0.86 <= boot <= 0.99
    assert 0.90 <= welch <= 0.99
    # seeded: the same interval again, another seed another one
    again = detect_change_points(ratio[:1] * den[:1], den[:1], DetectorConfig(max_qvalue=None, max_changes=1))[0]
    assert again.index == 12 and (again.ci_low, again.ci_high) == (changes[0].ci_low, changes[0].ci_high)
    other = detect_change_points(ratio[:1] * den[:1], den[:1], DetectorConfig(max_qvalue=None, max_changes=1, seed=1))[
        0
    ]
    assert (other.ci_low, other.ci_high) != (changes[0].ci_low, changes[0].ci_high)


# --------------------------------------------------------------------------- verdict


def test_verdict_is_provisional_until_enough_points_follow_the_change():
    late = np.array(CALM)
    late[25:] *= 0.85  # 5 points after the change
    (cp,) = detect_change_points(late, ONES30)
    assert (cp.index, cp.n_after, cp.verdict) == (25, 5, "provisional")
    (cp,) = detect_change_points(late, ONES30, DetectorConfig(confirm_points=5))
    assert cp.verdict == "confirmed"
    early = np.array(CALM)
    early[15:] *= 0.85
    assert detect_change_points(early, ONES30)[0].verdict == "confirmed"


# --------------------------------------------------------------------------- minimum effect per metric


def test_minimum_effect_per_metric():
    values = np.array(CALM * 2).reshape(2, 30)
    values[:, 15:] *= 0.96  # -4%, measured -3.5% (CALM's second half is 0.55% higher)
    config = DetectorConfig(min_relative_effect=0.05, min_relative_effects={"availability": 0.01})
    found = detect_change_points(values, np.ones_like(values), config, metrics=["availability", "goodput"])
    assert [cp.series_index for cp in found] == [0]  # goodput keeps the default 5%
    assert found[0].relative_effect == pytest.approx(-0.035, abs=0.005)
    assert config.min_effect_for("availability") == 0.01 and config.min_effect_for("goodput") == 0.05
    with pytest.raises(ValueError, match="metric names"):
        detect(values, np.ones_like(values), config, metrics=["availability"])
    with pytest.raises(ValueError, match="min_relative_effects"):
        DetectorConfig(min_relative_effects={"x": -1.0})


# --------------------------------------------------------------------------- linear scale


def test_linear_scale_takes_zero_and_negative_values():
    values = np.array(CALM) - 10.0  # around 0, both signs
    values[15:] -= 1.0
    with pytest.raises(ValueError, match="negative numerator"):
        detect(values, ONES30)
    (cp,) = detect_change_points(values, ONES30, DetectorConfig(scale="linear", min_relative_effect=0.0))
    assert cp.index == 15 and cp.direction == "down"
    assert cp.absolute_effect == pytest.approx(-1.0 + 0.055, abs=0.01)  # CALM's second half is 0.055 higher
    assert cp.relative_effect == pytest.approx(cp.absolute_effect / abs(cp.before_level))
    assert "linear" in cp.test


# --------------------------------------------------------------------------- Huber scan, sub-segment p, effect floor


def test_huber_scan_keeps_the_nominal_rate_on_noise_and_finds_a_step_among_spikes():
    values = _noise(200, 20, seed=5)
    config = DetectorConfig(statistic="huber", max_pvalue=0.05, max_qvalue=None, min_relative_effect=0.0)
    result = detect(values, np.ones_like(values), DetectorConfig(**{**config.__dict__, "max_changes": 1}))
    rate = sum(s.status == "changed" for s in result.series) / 200
    assert 0.015 <= rate <= 0.085, rate  # clipping bounds depend on the values only: the permutation test is exact
    spiky = np.array(CALM)
    spiky[15:] = np.round(spiky[15:] * 0.92, 2)
    spiky[[5, 20, 26]] = [16.0, 15.0, 17.0]
    p = {
        st: detect(spiky, ONES30, DetectorConfig(statistic=st)).series[0].p_value for st in ("student", "huber", "rank")
    }
    # clipping at median +- 2 MAD-sigmas of the whole segment (the -8% step widens it) takes the spikes' weight
    # only partly: better than the plain t scan, not as robust as ranks
    assert p["rank"] <= 0.01 < p["huber"] < p["student"] / 4
    # its levels are pooled (sum / sum, as for the t scans): the spikes after day 15 cancel the -8% there, so
    # only without the minimum effect is the change reported
    loose = DetectorConfig(statistic="huber", max_pvalue=0.2, max_qvalue=None)
    assert detect_change_points(spiky, ONES30, loose) == []
    (cp,) = detect_change_points(spiky, ONES30, DetectorConfig(**{**loose.__dict__, "min_relative_effect": 0.0}))
    assert cp.index == 15 and abs(cp.relative_effect) < 0.03 and cp.test.startswith("max-scan Huber-clipped t")


def test_sub_segment_scans_need_the_stricter_split_pvalue():
    assert DetectorConfig(max_pvalue=0.1).sub_segment_pvalue == 0.01
    assert DetectorConfig(max_pvalue=0.001).sub_segment_pvalue == 0.001
    with pytest.raises(ValueError, match="sub-segments"):
        DetectorConfig(max_pvalue=0.1, n_permutations=49)
    # 40 noise series with one clear step each: at max_pvalue 0.5 for every round, sub-segments of pure noise
    # split often; with the default split_pvalue (0.01) hardly ever
    values = _noise(40, 40, seed=11)
    values[:, 20:] *= 1.2
    loose = DetectorConfig(max_pvalue=0.5, split_pvalue=1.0, max_qvalue=None, min_relative_effect=0.0)
    strict = DetectorConfig(max_pvalue=0.5, max_qvalue=None, min_relative_effect=0.0)
    n_loose = len(detect_change_points(values, np.ones_like(values), loose))
    n_strict = len(detect_change_points(values, np.ones_like(values), strict))
    assert n_strict <= 40 + 4 and n_loose > n_strict + 10


def test_interval_effect_floor_keeps_a_significant_step_whose_estimate_is_just_under_the_floor():
    rng = np.random.default_rng(12)
    noise = rng.normal(0.0, 0.01, 40)
    noise[:20] -= noise[:20].mean()
    noise[20:] -= noise[20:].mean()
    values = 10.0 * np.exp(noise)
    values[20:] *= 0.972  # a -2.8% step: significant, its estimate under the 3% floor
    assert detect_change_points(values, np.ones(40), DetectorConfig(max_qvalue=None)) == []
    (cp,) = detect_change_points(values, np.ones(40), DetectorConfig(max_qvalue=None, effect_floor="interval"))
    assert cp.index == 20 and -0.03 < cp.relative_effect < -0.02  # reported with its own estimate
    # a change the interval puts entirely under the floor stays out
    small = 10.0 * np.exp(rng.normal(0.0, 0.002, 40))
    small[20:] *= 0.99
    assert detect_change_points(small, np.ones(40), DetectorConfig(max_qvalue=None, effect_floor="interval")) == []


def test_bootstrap_resample_counts_are_multinomial():
    from perf_assets.lib.changepoint import _resample_counts

    counts = _resample_counts(np.random.default_rng(0), 4000, 7)
    assert counts.shape == (4000, 7) and (counts.sum(axis=1) == 7).all()
    # Multinomial(7, 1/7 each): every cell has mean 1 and variance 6/7
    assert np.abs(counts.mean(axis=0) - 1.0).max() < 0.06
    assert np.abs(counts.var(axis=0) - 6.0 / 7.0).max() < 0.08


# h100-west's daily allocation on fleet-1k seed 124 (perfwh sql over metric_tree_daily): a mix shift sends its work
# to a100-west for six days from 10-20 (index 19), between ordinary days of 0.77-0.99
H100_WEST_ALLOCATION = [0.846, 0.992, 0.898, 0.806, 0.869, 0.859, 0.769, 0.91, 0.908, 0.793, 0.833, 0.894, 0.838,
                        0.836, 0.848, 0.831, 0.773, 0.857, 0.858, 0.692, 0.162, 0.261, 0.675, 0.652, 0.342, 0.713,
                        0.897, 0.96, 0.829, 0.929]  # fmt: skip


def test_clipped_metrics_give_the_named_series_the_huber_scan_and_leave_the_others_student():
    series = np.array([H100_WEST_ALLOCATION, H100_WEST_ALLOCATION])
    student = DetectorConfig(epidemic=True)
    # the dip's own days inflate the t scan's variance: Student p misses the 0.01 threshold
    plain = detect(series[:1], ONES30[None, :], student)
    assert plain.changes == [] and 0.01 < plain.series[0].p_value < 0.05
    config = DetectorConfig(epidemic=True, clipped_metrics=("cluster/allocation",))
    result = detect(series, np.ones_like(series), config, metrics=["cluster/allocation", "node/allocation"])
    clipped, other = result.series
    assert other.status == "no_change" and other.p_value == plain.series[0].p_value  # unnamed: the Student scan
    assert clipped.status == "changed" and clipped.p_value <= 0.002
    first = min((cp for cp in result.changes if cp.series_index == 0), key=lambda cp: cp.index)
    assert first.index == 19 and first.direction == "down" and first.relative_effect < -0.2
    assert first.test.startswith("max-scan Huber-clipped t")
    # the same as statistic="huber" for that series alone
    huber = detect(series[:1], ONES30[None, :], DetectorConfig(epidemic=True, statistic="huber"))
    assert huber.series[0].p_value == clipped.p_value and [cp.index for cp in huber.changes] == [
        cp.index for cp in result.changes if cp.series_index == 0
    ]
    assert not [cp for cp in result.changes if cp.series_index == 1]
    with pytest.raises(ValueError, match="clipped_metrics"):
        DetectorConfig(statistic="rank", clipped_metrics=("cluster/allocation",))
