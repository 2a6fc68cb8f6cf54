"""Adaptive permutation refinement: p-values at the floor 1/(1+B) are refined only where BH needs it."""

from __future__ import annotations

import numpy as np
import pytest

from perf_assets.lib.changepoint import REFINE_EXCEEDANCES, DetectorConfig, detect


def _batch(n_series: int = 500, length: int = 28, seed: int = 5) -> np.ndarray:
    rng = np.random.default_rng(seed)
    values = np.exp(rng.normal(0.0, 0.02, (n_series, length)))
    values[17, length // 2 :] *= 0.9  # one strong step among noise
    return values


def test_one_strong_step_among_500_series_is_found_under_bh():
    values = _batch()
    ones = np.ones_like(values)
    plain = detect(values, ones, DetectorConfig(max_permutations=999))
    assert plain.changes == []  # the floor 1/1000 x 500 series cannot pass q <= 0.05
    refined = detect(values, ones, DetectorConfig())
    assert [(c.series_index, c.index) for c in refined.changes] == [(17, 14)]
    change = refined.changes[0]
    assert change.p_value < 1.0 / 1000 and change.q_value <= 0.05
    # every other series keeps the p-value of its first 999 permutations when it rests on REFINE_EXCEEDANCES or
    # more of them; a coarser one (an effect >= 3 % and p <= 0.01 from 1 to 9 exceedances) is refined and stays
    # undiscovered
    refined_others = 0
    for before, after in zip(plain.series, refined.series):
        if before.series_index == 17:
            continue
        if round(before.p_value * 1000) - 1 >= REFINE_EXCEEDANCES:
            assert after.p_value == before.p_value
        else:
            refined_others += after.p_value != before.p_value
            assert after.q_value > 0.05
    assert refined_others >= 1  # series 384: 0.008 (7 exceedances of 999) -> 0.004 after refinement
    assert refined.series[17].p_value == change.p_value


def test_refinement_is_deterministic_and_bounded():
    values = _batch(n_series=200)
    ones = np.ones_like(values)
    first = detect(values, ones, DetectorConfig(seed=3))
    second = detect(values, ones, DetectorConfig(seed=3))
    assert [(c.series_index, c.p_value, c.q_value) for c in first.changes] == [
        (c.series_index, c.p_value, c.q_value) for c in second.changes
    ]
    # a bound too low to reach q <= 0.05 refines nothing past it and finds nothing
    low = detect(values, ones, DetectorConfig(max_permutations=1999))
    assert low.changes == [] and low.series[17].p_value == pytest.approx(1 / 1000)


def test_max_permutations_below_n_permutations_is_refused():
    with pytest.raises(ValueError, match="max_permutations"):
        DetectorConfig(n_permutations=999, max_permutations=500)


def test_epidemic_scan_finds_a_level_that_moves_and_comes_back():
    rng = np.random.default_rng(11)
    values = np.exp(rng.normal(0.0, 0.002, (1, 28)))
    values[0, 10:15] *= 0.89  # five days at -11 %, then back (a thermal throttle)
    ones = np.ones_like(values)
    single = detect(values, ones, DetectorConfig())
    assert single.changes == []  # the single-split scan sees -3 % spread over 18 days
    both = detect(values, ones, DetectorConfig(epidemic=True))
    assert [c.index for c in both.changes] == [10, 15]
    assert both.changes[0].relative_effect == pytest.approx(-0.11, abs=0.01)
    assert both.changes[1].relative_effect == pytest.approx(1 / 0.89 - 1, abs=0.01)
    # a plain step is still found with the epidemic scan (a single split is an interval touching an end)
    step = np.exp(rng.normal(0.0, 0.01, (1, 24)))
    step[0, 12:] *= 0.9
    assert [c.index for c in detect(step, np.ones_like(step), DetectorConfig(epidemic=True)).changes] == [12]
    with pytest.raises(ValueError, match="epidemic"):
        DetectorConfig(epidemic=True, statistic="welch")
