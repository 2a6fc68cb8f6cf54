"""Mix versus rate on literal segments, and per change on the simulated mix shift."""

from __future__ import annotations

import json
import math

import numpy as np
import pytest

from perf_assets.lib.mix_rate import mix_rate_split, work_weighted_split


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
    reference = published_frame(
        incidents_home,
        "select metric_date, numerator, denominator from metric_tree_daily where grain = 'fleet' and node_id = 'goodput_ref'",
    )
    reference["metric_date"] = reference["metric_date"].astype(str)
    split = found[found["attribution"].notna()]
    assert set(split["grain"]) <= {"fleet", "cluster"} and not split.empty
    assert set(found[found["grain"].isin(["node", "gpu"])]["attribution"].dropna()) == set()
    for row in split.itertuples():
        total = (row.after_numerator / row.after_denominator) / (row.before_numerator / row.before_denominator) - 1
        if row.mix_basis == "allocated_gs":  # the fleet's goodput in §6's lens: the change of its goodput_ref
            assert (row.grain, row.metric) == ("fleet", "goodput")
            days = reference["metric_date"]
            before = reference[(days >= str(row.before_start_date)) & (days < str(row.split_date))].sum()
            after = reference[(days >= str(row.split_date)) & (days <= str(row.after_end_date))].sum()
            total = (after["numerator"] / after["denominator"]) / (before["numerator"] / before["denominator"]) - 1
        # the segments partition their parent, so mix + rate (+ occupancy) is the parent's own pooled change
        occupancy = row.occupancy_effect if math.isfinite(row.occupancy_effect or math.nan) else 0.0
        assert math.isclose(row.mix_effect + row.rate_effect + occupancy, total, rel_tol=1e-6, abs_tol=1e-9), row
        expected_basis = {"fleet": "allocated_gs", "cluster": "allocated_pfs"}[row.grain]
        assert row.mix_basis == (expected_basis if row.metric == "goodput" else row.mix_basis)
        assert (row.metric == "goodput") == math.isfinite(row.occupancy_effect or math.nan), row
        assert row.segment_type == {"fleet": "cluster", "cluster": "node"}[row.grain]
        assert json.loads(row.segments)[0]["denominator_before"] is not None


# metric_tree.md §6 (worked example C): allocated GPU-hour shares w and H100-equivalent g = capability x R x P
# per SKU in two periods; the Kitagawa split is mix -0.010937 (72 % of the drop) and rate -0.004334 (28 %).
SECTION_6 = {
    "H100": ((0.700, 0.920 * 0.410), (0.655, 0.915 * 0.406)),
    "A100": ((0.300, 312 / 989 * 0.930 * 0.450), (0.345, 312 / 989 * 0.926 * 0.447)),
}


def _section_6(period: int) -> tuple[np.ndarray, np.ndarray]:
    weights = np.array([SECTION_6[sku][period][0] for sku in SECTION_6]) * 1000.0  # allocated GPU-hours
    rates = np.array([SECTION_6[sku][period][1] for sku in SECTION_6])
    return weights * rates, weights  # useful work (H100-equivalent), allocated


def test_section_6_worked_example_splits_72_percent_mix_28_percent_rate():
    (nb, db), (na, da) = _section_6(0), _section_6(1)
    split = mix_rate_split(list(SECTION_6), nb, db, na, da, mix_basis="allocated")
    assert split.before_level == pytest.approx(0.303647, abs=1e-6) and split.after_level == pytest.approx(
        0.288376, abs=1e-6
    )
    g0, dg = split.before_level, split.after_level - split.before_level
    assert split.mix_effect * g0 == pytest.approx(-0.010937, abs=1e-6)
    assert split.rate_effect * g0 == pytest.approx(-0.004334, abs=1e-6)
    assert split.mix_effect * g0 / dg == pytest.approx(0.72, abs=0.005) and split.attribution == "mix"
    h100 = next(seg for seg in split.segments if seg["segment"] == "H100")
    assert h100["rate_effect"] * g0 == pytest.approx(-0.003869, abs=1e-6)
    # the same rows as a ratio over capacity whose occupancy does not move: the work-weighted split is §6's
    capacity = np.array([1100.0, 400.0])  # installed, fixed; work / capacity = 1000 / 1500 in both periods
    work = work_weighted_split(list(SECTION_6), (nb, db, capacity), (na, da, capacity))
    assert work.occupancy_effect == pytest.approx(0.0, abs=1e-12) and work.mix_basis == "allocated_pfs"
    assert work.mix_effect == pytest.approx(split.mix_effect) and work.rate_effect == pytest.approx(split.rate_effect)
    assert work.attribution == "mix"


def test_work_moving_between_segments_at_fixed_capacity_is_mix_not_rate():
    # two clusters, 100 installed each, rates 0.5 and 0.3 that never move; work moves from the first to the
    # second (90 + 50 -> 50 + 90: the same total). Over installed capacity the split reads all rate (each
    # cluster's goodput moved); by work done it is all mix
    capacity = np.array([100.0, 100.0])
    before = (np.array([45.0, 15.0]), np.array([90.0, 50.0]), capacity)
    after = (np.array([25.0, 27.0]), np.array([50.0, 90.0]), capacity)
    installed = mix_rate_split(["h100", "a100"], before[0], capacity, after[0], capacity)
    assert installed.mix_effect == pytest.approx(0.0) and installed.attribution == "rate"
    work = work_weighted_split(["h100", "a100"], before, after)
    assert work.before_level == pytest.approx(60 / 200) and work.after_level == pytest.approx(52 / 200)
    assert work.occupancy_effect == pytest.approx(0.0) and work.rate_effect == pytest.approx(0.0)
    assert work.mix_effect == pytest.approx(52 / 60 - 1) and work.attribution == "mix"


def test_less_work_everywhere_is_occupancy_and_the_parts_add_up():
    # a scheduler outage: both clusters do half the work at unchanged rates: occupancy, neither mix nor rate
    capacity = np.array([100.0, 100.0])
    before = (np.array([45.0, 27.0]), np.array([90.0, 90.0]), capacity)
    after = (np.array([22.5, 13.5]), np.array([45.0, 45.0]), capacity)
    work = work_weighted_split(["h100", "a100"], before, after)
    assert work.occupancy_effect == pytest.approx(-0.5) and work.attribution == "occupancy"
    assert work.mix_effect == pytest.approx(0.0) and work.rate_effect == pytest.approx(0.0)
    rng = np.random.default_rng(7)
    for _ in range(200):
        n = int(rng.integers(2, 9))
        cap = [rng.uniform(50, 100, n) for _ in range(2)]
        used = [c * rng.uniform(0.0, 1.0, n) for c in cap]
        useful = [u * rng.uniform(0.1, 0.6, n) for u in used]
        split = work_weighted_split(
            [str(i) for i in range(n)], (useful[0], used[0], cap[0]), (useful[1], used[1], cap[1]), top=n
        )
        total = (useful[1].sum() / cap[1].sum()) / (useful[0].sum() / cap[0].sum()) - 1
        assert math.isclose(
            split.mix_effect + split.rate_effect + split.occupancy_effect, total, rel_tol=1e-9, abs_tol=1e-12
        )
        parts = sum(s["mix_effect"] + s["rate_effect"] + s["occupancy_effect"] for s in split.segments)
        assert math.isclose(parts, total, rel_tol=1e-9, abs_tol=1e-12)


def test_work_weighted_unknown_is_left_out_not_zero():
    capacity = np.array([100.0, 100.0, 100.0])
    before = (np.array([45.0, 15.0, np.nan]), np.array([90.0, 50.0, 80.0]), capacity)
    after = (np.array([45.0, 15.0, 20.0]), np.array([90.0, 50.0, 80.0]), capacity)
    split = work_weighted_split(["a", "b", "c"], before, after, top=3)
    assert split.before_level == pytest.approx(60 / 200) and split.after_level == pytest.approx(80 / 300)
    c = next(seg for seg in split.segments if seg["segment"] == "c")
    assert c["numerator_before"] is None and c["work_before"] is None and c["rate_effect"] == 0.0
    assert work_weighted_split(["a", "b"], (np.zeros(2), np.ones(2), np.zeros(2)), (np.ones(2),) * 3) is None
