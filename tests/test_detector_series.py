"""The labeled series of the detector benchmark (bench/detector_series.py): seeded, labels where the steps are.

Fast and self-contained: the generator needs only numpy, never the benchmark's own venvs.
"""

from __future__ import annotations

import numpy as np
import pytest

from bench.detector_series import FAMILIES, HELD_OUT_SEED, MARGIN, TUNING_SEED, generate, make_series

STEP_FAMILIES = {"step_1pct": 0.01, "step_3pct": 0.03, "step_5pct": 0.05, "step_10pct": 0.10, "step_20pct": 0.20}


def test_same_seed_same_series_and_independent_of_count():
    a = generate(7, 4)
    b = generate(7, 4)
    assert a == b
    # series i of a family does not depend on how many are generated, nor on the other families
    assert generate(7, 2, ["drift"]) == [s for s in a if s.family == "drift"][:2]
    assert make_series("two_steps", 7, 3) == next(s for s in a if s.key == "two_steps/3")


def test_different_seeds_differ():
    assert TUNING_SEED != HELD_OUT_SEED
    a = generate(TUNING_SEED, 3)
    b = generate(HELD_OUT_SEED, 3)
    assert all(x.values != y.values for x, y in zip(a, b))


def test_every_family_and_shapes():
    series = generate(3, 6)
    assert [s.family for s in series] == [f for f in FAMILIES for _ in range(6)]
    for s in series:
        values = np.asarray(s.values)
        assert np.all(np.isfinite(values)) and np.all(values > 0)
        n = values.size
        assert (10 <= n <= 20) if s.family == "short" else (30 <= n <= 90)
        assert list(s.changes) == sorted(s.changes) and len(s.changes) == len(s.effects)
        margin = 4 if s.family == "short" else MARGIN
        assert all(margin <= c <= n - margin for c in s.changes)
        assert s.cadence in {"daily", "hourly"}
    counts = {f: [len(s.changes) for s in series if s.family == f] for f in FAMILIES}
    assert counts["none"] == [0] * 6
    assert counts["two_steps"] == [2] * 6
    for family in STEP_FAMILIES:
        assert counts[family] == [1] * 6
    for family in ("heavy_tail", "outliers", "drift", "short"):
        assert counts[family] == [1, 0] * 3  # even-numbered series step, odd ones do not


@pytest.mark.parametrize("family", list(STEP_FAMILIES))
def test_fixed_steps_have_their_magnitude_and_alternate_sign(family):
    magnitude = STEP_FAMILIES[family]
    series = generate(11, 6, [family])
    assert [s.effects[0] for s in series] == [magnitude, -magnitude] * 3


def test_labels_are_where_the_level_moves():
    # The mean log level after a labeled change differs from before by about log(1 + effect); noise CV <= 3 %.
    for s in generate(5, 20, ["step_10pct", "step_20pct", "two_steps"]):
        y = np.log(np.asarray(s.values))
        bounds = [0, *s.changes, y.size]
        means = [y[a:b].mean() for a, b in zip(bounds[:-1], bounds[1:])]
        for (before, after), effect in zip(zip(means[:-1], means[1:]), s.effects):
            assert after - before == pytest.approx(np.log1p(effect), abs=0.035)


def test_no_change_series_are_flat():
    for s in generate(5, 20, ["none"]):
        y = np.log(np.asarray(s.values))
        half = y.size // 2
        assert abs(y[half:].mean() - y[:half].mean()) < 0.03


def test_unknown_family_is_refused():
    with pytest.raises(ValueError, match="unknown families"):
        generate(1, 1, ["nope"])
