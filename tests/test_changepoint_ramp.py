"""Ramp onset (perf_assets/lib/ramp.py): where a gradual change began, on literal series."""

import math

import numpy as np

from perf_assets.lib.ramp import fit_ramp

# h200-n04's HBM stream-triad probe ratio on `incidents` seed 1 (28 days from 2026-10-01): flat at 0.909,
# a 5-day decay from 2026-10-15 (index 14) to 0.772, then flat. A step scan splits it at index 17 (10-18).
HBM_DECAY = [
    0.9085, 0.9079, 0.9104, 0.9094, 0.9104, 0.9087, 0.9095, 0.9092, 0.9098, 0.9088, 0.9094, 0.9086, 0.9094, 0.9087,
    0.9081, 0.8812, 0.8541, 0.8265, 0.799, 0.7717, 0.7724, 0.7728, 0.7714, 0.7735, 0.7727, 0.7717, 0.7718, 0.7727,
]  # fmt: skip


def test_ramp_onset_is_the_first_point_off_the_before_level():
    fit = fit_ramp(np.log(HBM_DECAY))
    assert fit is not None
    assert fit.bic_gain > 0  # the ramp beats the step
    assert fit.step_split == 17  # where the step would put it: mid-ramp, 3 days late
    assert (fit.onset, fit.end) == (15, 19)
    assert fit.rss_ramp < fit.rss_step / 100


def test_a_step_stays_a_step():
    y = np.log([1.0, 1.01, 0.99, 1.0, 1.01, 1.0, 0.99, 1.0, 0.9, 0.91, 0.89, 0.9, 0.91, 0.9, 0.89, 0.9])
    fit = fit_ramp(y)
    assert fit is not None
    assert fit.bic_gain < 0
    assert fit.step_split == 8


def test_noise_free_step_is_a_step():
    fit = fit_ramp([0.0] * 6 + [-0.1] * 6)
    assert fit is not None and fit.step_split == 6 and fit.rss_step == 0.0 and fit.bic_gain < -math.log(12)


def test_ramp_start_at_the_knot_of_an_exact_ramp():
    y = [0.0] * 8 + [-0.02 * k for k in range(1, 6)] + [-0.1] * 8  # knots at 7 and 12
    fit = fit_ramp(y)
    assert fit is not None and fit.bic_gain > 0
    assert (fit.onset, fit.end) == (8, 12)


def test_too_short_or_unknown_points_are_not_fitted():
    assert fit_ramp([0.0, 0.1, 0.2, 0.3]) is None
    assert fit_ramp([0.0, 0.1, float("nan"), 0.3, 0.4, 0.5]) is None
