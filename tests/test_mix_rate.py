"""Mix versus rate on literal segments, and per change on the simulated mix shift."""

from __future__ import annotations

import json
import math

import numpy as np
import pytest

from perf_assets.lib.mix_rate import mix_rate_split


def test_weights_moving_at_fixed_rates_is_all_mix():
    # two clusters at fixed ratios 0.5 and 0.2; the capacity moves from the first to the second
    split = mix_rate_split(
        ["h100", "a100"],
        before_numerators=np.array([50.0, 20.0]),
        before_denominators=np.array([100.0, 100.0]),
        after_numerators=np.array([25.0, 30.0]),
        after_denominators=np.array([50.0, 150.0]),
    )
    assert split.before_level == pytest.approx(0.35) and split.after_level == pytest.approx(0.275)
    assert split.mix_effect == pytest.approx(0.275 / 0.35 - 1) and split.rate_effect == pytest.approx(0.0)
    assert split.attribution == "mix"
    first = split.segments[0]
    assert first["numerator_before"] == 50.0 and first["denominator_after"] == 50.0


def test_rates_moving_at_fixed_weights_is_all_rate():
    split = mix_rate_split(
        ["a", "b"], np.array([50.0, 20.0]), np.array([100.0, 100.0]), np.array([40.0, 20.0]), np.array([100.0, 100.0])
    )
    assert split.mix_effect == pytest.approx(0.0) and split.rate_effect == pytest.approx(-10 / 70)
    assert split.attribution == "rate" and split.segments[0]["segment"] == "a"


def test_mix_plus_rate_is_the_pooled_change_exactly():
    rng = np.random.default_rng(5)
    for _ in range(200):
        n = rng.integers(2, 12)
        db, da = rng.uniform(1, 100, n), rng.uniform(1, 100, n)
        nb, na = db * rng.uniform(0.1, 0.6, n), da * rng.uniform(0.1, 0.6, n)
        split = mix_rate_split([str(i) for i in range(n)], nb, db, na, da, top=n)
        assert math.isclose(
            split.mix_effect + split.rate_effect,
            split.after_level / split.before_level - 1,
            rel_tol=1e-9,
            abs_tol=1e-12,
        )
        assert math.isclose(
            sum(s["mix_effect"] + s["rate_effect"] for s in split.segments),
            split.mix_effect + split.rate_effect,
            rel_tol=1e-9,
            abs_tol=1e-12,
        )


def test_a_segment_in_one_window_only_is_mix_and_unknown_is_not_zero():
    split = mix_rate_split(
        ["old", "new"],
        np.array([30.0, np.nan]),
        np.array([100.0, np.nan]),
        np.array([30.0, 10.0]),
        np.array([100.0, 100.0]),
    )
    new = next(s for s in split.segments if s["segment"] == "new")
    assert new["rate_effect"] == 0.0 and new["mix_effect"] > 0 and new["numerator_before"] is None
    assert split.rate_effect == pytest.approx(0.0) and split.mix_effect == pytest.approx(0.2 / 0.3 - 1)


def test_undefined_without_two_segments_or_a_known_window():
    assert mix_rate_split(["a"], np.array([1.0]), np.array([2.0]), np.array([1.0]), np.array([2.0])) is None
    assert (
        mix_rate_split(
            ["a", "b"], np.array([np.nan] * 2), np.array([np.nan] * 2), np.array([1.0, 1.0]), np.array([2.0, 2.0])
        )
        is None
    )
    assert (
        mix_rate_split(["a", "b"], np.zeros(2), np.array([1.0, 1.0]), np.array([1.0, 1.0]), np.array([2.0, 2.0]))
        is None
    )


@pytest.mark.slow
def test_fleet_and_cluster_changes_carry_their_split_on_the_incidents_scenario(incidents_home):
    from perf_assets.lib.warehouse import published_frame

    found = published_frame(incidents_home, "select * from regressions")
    split = found[found["attribution"].notna()]
    assert set(split["grain"]) <= {"fleet", "cluster"} and not split.empty
    assert set(found[found["grain"].isin(["node", "gpu"])]["attribution"].dropna()) == set()
    for row in split.itertuples():
        total = (row.after_numerator / row.after_denominator) / (row.before_numerator / row.before_denominator) - 1
        # the segments partition their parent, so mix + rate is the parent's own pooled change
        assert math.isclose(row.mix_effect + row.rate_effect, total, rel_tol=1e-6, abs_tol=1e-9), row
        assert row.segment_type == {"fleet": "cluster", "cluster": "node"}[row.grain]
        assert json.loads(row.segments)[0]["denominator_before"] is not None
