"""Issue 7's detector paths for what the step scan cannot see, on literal series: short bursts
(perf_assets/lib/bursts.py), excess fault rates (fault_rates.py), their rows in `regressions`
(detection.py), and the grouping links by job co-membership and by split day (grouping.py)."""

from __future__ import annotations

import json
import math
from datetime import date, timedelta

import numpy as np
import pandas as pd
import pytest
from test_attribution_evaluation import TOPOLOGY, frame, row

from perf_assets.lib.bursts import scan_burst
from perf_assets.lib.changepoint import DetectorConfig
from perf_assets.lib.detection import burst_rows, fault_rate_rows, job_peer_nodes
from perf_assets.lib.fault_rates import excess_rate
from perf_assets.lib.grouping import group_regressions

# The a100 cluster's idle_fragmented_share on `incidents` seed 1 (28 days from 2026-10-01), in % of its
# available capacity: a node stranded by the scheduler on 10-10 and 10-11 (indices 9 and 10).
FRAGMENTED_PCT = [
    0.0064, 0.0168, 0.637, 0.0, 0.0, 0.058, 0.0218, 0.855, 3.88, 47.9, 37.5, 0.0, 2.13, 0.0,
    2.65, 0.037, 0.083, 0.0, 0.0139, 0.0, 0.0296, 0.085, 0.14, 0.109, 0.09, 0.083, 0.0486, 0.112,
]  # fmt: skip
# Node faults (xid_node_faults) per day of rack a100-r1 (two nodes of one hardware batch, failing at
# 0.2 per node-day from 10-05) on the same seed; the other 11 nodes of the fleet had 2 in 308 node-days.
RACK_FAULTS = [0, 0, 0, 0, 0, 2, 1, 0, 0, 0, 0, 0, 1, 0, 0, 0, 0, 2, 0, 0, 1, 0, 0, 0, 0, 0, 0, 0]
DAYS = [date(2026, 10, 1) + timedelta(days=i) for i in range(28)]


def test_a_two_day_burst_is_found_with_its_days_and_effect():
    burst = scan_burst(np.array(FRAGMENTED_PCT) / 100, np.ones(28))
    assert burst is not None
    assert (burst.start, burst.stop, burst.n_inside, burst.n_rest) == (9, 11, 2, 26)
    assert burst.inside_level == pytest.approx((0.479 + 0.375) / 2)
    assert burst.rest_level == pytest.approx(sum(FRAGMENTED_PCT[:9] + FRAGMENTED_PCT[11:]) / 100 / 26)
    assert burst.intervals == 27  # 2-day intervals, Bonferroni over them
    # Cantelli: both days lie k > 38 rest standard deviations up; p <= 27 * 2 / ((1 + k1^2)(1 + k2^2))
    assert burst.statistic > 38 and 1e-6 < burst.p_value < 1e-4 and burst.ci_low > 0.3


def test_a_one_sided_gaussian_test_would_call_a_lone_heavy_tail_day_a_burst_and_cantelli_does_not():
    values = np.array(FRAGMENTED_PCT) / 100
    values[9:11] = values[0]  # the fragmentation removed: left are 0.9 % and 3.9 % on 10-08 and 10-09
    burst = scan_burst(values, np.ones(28))
    assert burst is not None and (burst.start, burst.stop) == (7, 9)
    assert 0 < burst.statistic < 1.5 and burst.p_value > 0.5


def test_bursts_need_enough_known_days():
    values = np.array(FRAGMENTED_PCT[:10]) / 100
    assert scan_burst(values, np.ones(10)) is None
    assert scan_burst(np.array(FRAGMENTED_PCT) / 100, np.where(np.arange(28) < 18, np.nan, 1.0)) is None


# Cluster a100b's idle fragmented share on `incidents` seed 1's soak, run of 10-24 (24 days): settled days ~0 (a
# spare cluster, full from the mix shift of 10-21), and its two latest days, which the next build rebuilds, read
# 2.3 % while the jobs that ran over midnight were not yet reported; settled, those days were 0.14 % and 0.03 %.
SOAK_FRAGMENTED_PCT = [0.0] * 20 + [0.03, 0.07, 2.3, 2.4]


def test_a_burst_made_only_of_provisional_days_is_not_tested_yet():
    values = np.array(SOAK_FRAGMENTED_PCT) / 100
    assert scan_burst(values, np.ones(24)).start == 22  # the latest two days, were they settled
    settled = np.arange(24) < 22
    rest = scan_burst(values, np.ones(24), settled=settled)  # the strongest interval left is no burst
    assert rest.intervals == 22 and rest.p_value == 1.0 and not 22 <= rest.start
    # the a100 fragmentation (47.9 %, 37.5 %) on a series' latest two days after 12 quiet ones: found once its first
    # day has settled, as before
    fragmented = np.array(FRAGMENTED_PCT[11:23] + FRAGMENTED_PCT[9:11]) / 100
    found = scan_burst(fragmented, np.ones(14), settled=np.arange(14) < 13)
    assert (found.start, found.stop, found.intervals) == (12, 14, 13) and found.p_value < 1e-3
    assert scan_burst(fragmented, np.ones(14), settled=np.arange(14) < 12).stop <= 12


def test_burst_rows_leave_a_burst_on_provisional_days_for_the_next_build():
    tree = _tree([("cluster", "a100b", "idle_fragmented_share", [v / 100 for v in SOAK_FRAGMENTED_PCT], [1.0] * 24)])

    def min_effect(grain: str, metric: str) -> float:
        return 0.01

    (burst,), _ = burst_rows(tree, DetectorConfig(), min_effect)
    assert burst["change_date"] == DAYS[22] and burst["verdict"] == "provisional"
    tree["is_provisional"] = tree["metric_date"] >= DAYS[22]  # the run's lookback of 2 days
    assert burst_rows(tree, DetectorConfig(), min_effect) == ([], 1)


def test_two_faults_are_no_excess_rate_however_small_their_p():
    # fleet-1k seed 1's soak, run of 10-06: h200-east-n08 had 2 XID faults in 6 days, its 127 peers 8 in 762
    # node-days: exact p = P(X >= 2 | 10, 6 / 768) = 0.0027, and beside the bad batches' tests BH let it through
    rows = [("node", "h200-east-n08", "xid_node_faults", [1.0, 0, 0, 0, 1.0, 0], [1.0] * 6)]
    rows += [("node", f"n{i}", "xid_node_faults", [1.0 if i < 8 and day == 2 else 0.0 for day in range(6)], [1.0] * 6)
             for i in range(127)]  # fmt: skip
    tree = _tree(rows)  # six days: _tree pairs each series with as many of DAYS as it has values

    def min_effect(grain: str, metric: str) -> float:
        return 0.03

    third = tree.copy()
    third.loc[(third["entity_id"] == "h200-east-n08") & (third["metric_date"] == DAYS[2]), "numerator"] = 1.0
    config = DetectorConfig(max_qvalue=None)  # each entity on its own p: the rule, not the family, decides
    assert fault_rate_rows(tree, {}, config, min_effect) == ([], 128)
    (three,), _ = fault_rate_rows(third, {}, config, min_effect)
    assert three["entity_id"] == "h200-east-n08" and three["after_numerator"] == 3.0 and three["p_value"] < 1e-3


def test_an_excess_fault_rate_against_peers_and_its_onset():
    found = excess_rate(np.array(RACK_FAULTS, dtype=float), np.full(28, 2.0), 2, 308)
    assert found is not None
    assert (found.events, found.exposure, found.onset) == (7, 56.0, 5)  # onset: the first fault, 10-06
    # corrected for the wait for the first fault: ((7 + 1) * 5.5 - 28) / 7 = 2.29 -> 10-03 (labelled: 10-05)
    assert found.start == 2
    assert found.rate_ratio == pytest.approx((7 / 56) / (2 / 308))
    # exact: P(X >= 7), X ~ Bin(9, 56 / 364)
    share = 56 / 364
    expected = sum(math.comb(9, j) * share**j * (1 - share) ** (9 - j) for j in range(7, 10))
    assert found.p_value == pytest.approx(expected)
    assert found.ci_low < found.rate_ratio < found.ci_high and found.ci_low > 1


def test_a_rate_like_the_peers_is_not_an_excess():
    counts = np.zeros(28)
    counts[12] = 1
    found = excess_rate(counts, np.ones(28), 5, 12 * 28)
    assert found is not None and found.p_value > 0.2
    assert excess_rate(np.zeros(28), np.ones(28), 5, 300) is None  # no event: nothing to test


def _tree(rows: list[tuple[str, str, str, list[float], list[float]]]) -> pd.DataFrame:
    return pd.DataFrame(
        [
            {
                "grain": grain,
                "entity_id": entity,
                "node_id": node_id,
                "metric_date": day,
                "numerator": num,
                "denominator": den,
                "direction": -1,
            }
            for grain, entity, node_id, nums, dens in rows
            for day, num, den in zip(DAYS, nums, dens)
        ]
    )


def test_burst_and_fault_rows_carry_their_evidence():
    quiet = [0.001 * (1 + (i % 3)) for i in range(28)]
    tree = _tree(
        [
            ("cluster", "a100", "idle_fragmented_share", [v / 100 for v in FRAGMENTED_PCT], [1.0] * 28),
            ("cluster", "h100", "idle_fragmented_share", quiet, [1.0] * 28),
        ]
        + [("node", f"a100-n{i}", "xid_node_faults", [c / 2 for c in RACK_FAULTS], [1.0] * 28) for i in (1, 2)]
        + [("node", f"h100-n{i}", "xid_node_faults", [0.0] * 28, [1.0] * 28) for i in range(1, 12)]
    )
    tree.loc[(tree["entity_id"] == "h100-n3") & (tree["metric_date"] == DAYS[20]), "numerator"] = 2.0
    config = DetectorConfig()

    def min_effect(grain: str, metric: str) -> float:
        return {"cluster": 0.01, "node": 0.03, "rack": 0.03}[grain]

    bursts, tested = burst_rows(tree, config, min_effect)
    assert tested == 2
    (burst,) = bursts
    assert (burst["entity_id"], burst["change_date"], burst["after_end_date"]) == ("a100", DAYS[9], DAYS[10])
    assert burst["change_kind"] == "regression" and burst["top_factor"] == "allocation"
    assert burst["p_value"] < 1e-4 and burst["ci_low"] > 0 and burst["test"].startswith("burst")

    racks = {f"a100-n{i}": "a100-r1" for i in (1, 2)} | {f"h100-n{i}": f"h100-r{(i + 1) // 2}" for i in range(1, 12)}
    faults, tested = fault_rate_rows(tree, racks, config, min_effect)
    assert tested == 13 + 6  # 13 nodes, 6 racks of two or more nodes (h100-r6 has one)
    by_entity = {(r["grain"], r["entity_id"]): r for r in faults}
    rack = by_entity[("rack", "a100-r1")]
    assert (rack["change_date"], rack["split_date"]) == (DAYS[2], DAYS[5]) and rack["change_kind"] == "regression"
    assert (rack["after_numerator"], rack["after_denominator"], rack["before_numerator"]) == (7.0, 56.0, 2.0)
    assert rack["q_value"] <= 0.05 and rack["top_factor"] == "availability"
    assert ("node", "h100-n3") not in by_entity  # two faults on one day: not an excess at this fleet size


def test_job_peers_are_the_nodes_of_allocations_around_the_change():
    allocations = pd.DataFrame(
        {
            "slurm_job_id": ["1", "1", "2", "2", "3"],
            "node": ["n1", "n2", "n3", "n4", "n1"],
            "start_at": pd.to_datetime(
                ["2026-10-05", "2026-10-05", "2026-10-05", "2026-10-05", "2026-10-20"], utc=True
            ),
            "end_at": pd.to_datetime(["2026-10-07", "2026-10-07", "2026-10-07", "2026-10-07", "2026-10-21"], utc=True),
        }
    )
    assert job_peer_nodes(allocations, ["n1"], date(2026, 10, 6)) == ["n2"]
    assert job_peer_nodes(allocations, ["n1"], date(2026, 10, 15)) == []
    assert job_peer_nodes(None, ["n1"], date(2026, 10, 6)) is None


def test_job_peers_and_split_days_link_groups():
    peers = frame(
        row("h100-n1", grain="node", day=10, job_peer_nodes=json.dumps(["h100-n3"])),
        row("h100-n3", grain="node", day=10, job_peer_nodes=json.dumps(["h100-n1"])),
    )
    assert group_regressions(peers, TOPOLOGY)["group_id"].nunique() == 1
    strangers = frame(row("h100-n1", grain="node", day=10), row("h100-n3", grain="node", day=10))
    assert group_regressions(strangers, TOPOLOGY)["group_id"].nunique() == 2
    # a ramp's onset (change_date) 4 days before the changes of its incident: linked by the split day
    split = date(2026, 10, 1) + timedelta(days=14)
    ramp = frame(
        row("h100-n1", grain="node", day=10, metric="probe_hbm_bw_ratio", split_date=split),
        row("h100", day=14),
        row("h100", day=7, metric="power_ratio"),  # 3 days before the onset's neighbours: another incident
    )
    groups = group_regressions(ramp, TOPOLOGY)["group_id"]
    assert groups[0] == groups[1] and groups[2] != groups[0]


def test_two_incidents_of_one_cluster_on_different_factors_are_two_groups():
    rows = frame(
        row("h100", day=18, metric="runtime_goodput"),  # checkpoint storage slower
        row("h100", day=20, metric="allocation"),  # work moved away: the cluster idles
        row("h100", day=20, metric="goodput", top_factor="allocation"),
        row("h100-n1", grain="node", day=20, metric="goodput", top_factor="allocation"),
        row("h100-n1", grain="node", day=19, metric="clock_ratio"),  # a companion: program goodput
    )
    groups = group_regressions(rows, TOPOLOGY)["group_id"]
    assert groups[1] == groups[2] == groups[3]
    assert len({groups[0], groups[1], groups[4]}) == 3


def test_a_node_whose_job_peers_are_a_rollout_cohort_joins_the_cohort_s_incident():
    # fleet-1k seed 116: the image stall on h200-east-n25..n28 (10-07) showed only in its cohort's canary row;
    # n29-n31 ran jobs with those nodes and lost 4.4-6.0 % of program goodput that day, a group of their own
    cohort = row("h100-n1+h100-n2", grain="cohort", day=6, metric="program_goodput", effect=-0.039)
    peer = row("h100-n3", grain="node", day=6, metric="program_goodput", effect=-0.06, job_peer_nodes='["h100-n2"]')
    assert group_regressions(frame(cohort, peer), TOPOLOGY)["group_id"].nunique() == 1
    # other job peers, or three days later: no link
    stranger = peer | {"job_peer_nodes": '["h100-n4"]'}
    later = row("h100-n3", grain="node", day=9, metric="program_goodput", effect=-0.06, job_peer_nodes='["h100-n2"]')
    for other in (stranger, later):
        assert group_regressions(frame(cohort, other), TOPOLOGY)["group_id"].nunique() == 2


def test_an_onset_the_window_cannot_place_is_the_first_excess_fault():
    counts = np.zeros(28)
    counts[[5, 17, 20]] = 1  # three faults from day 5: ((3 + 1) * 5.5 - 28) / 3 < 1
    found = excess_rate(counts, np.ones(28), 5, 336)
    assert found is not None and found.onset == found.start == 5


def test_an_excess_fault_rate_explains_later_availability_dips_of_its_scope():
    rate = row("a100-r1", grain="rack", day=6, metric="xid_node_faults", shape="rate", top_factor="availability")
    rate["after_end_date"] = date(2026, 10, 28)
    rows = frame(
        rate,
        row("a100", day=12, metric="availability"),  # six days later, inside the condition: the same incident
        row("a100", day=12, metric="allocation"),  # another factor: not explained by faults
        row("fleet", grain="fleet", day=20, metric="goodput"),  # the fleet joins by days, not by the condition
    )
    groups = group_regressions(rows, TOPOLOGY)["group_id"]
    assert groups[0] == groups[1] and groups[2] != groups[0] and groups[3] != groups[0]


def test_a_node_back_up_inside_an_excess_fault_rate_is_the_same_incident():
    # fleet-1k seed 112: h100-east-n36 of the bad batch (racks r9, r10) down 10-11 to 10-13, availability -18 % on
    # 10-11 and +22 % on 10-14; the return was an alert of its own inside the noise-burst decoy of 10-14
    rate = row("a100-r1", grain="rack", day=6, metric="xid_node_faults", shape="rate", top_factor="availability")
    rate["after_end_date"] = date(2026, 10, 28)
    rows = frame(
        rate,
        row("a100-n1", grain="node", day=10, metric="availability", effect=-0.183, top_factor="availability"),
        row("a100-n1", grain="node", day=13, metric="availability", kind="improvement", effect=0.224),
        row("a100-n2", grain="node", day=13, metric="program_goodput", kind="improvement", effect=0.08),
        row("a100-n3", grain="node", day=13, metric="availability", kind="improvement", effect=0.2),  # rack r2
    )
    groups = group_regressions(rows, TOPOLOGY)["group_id"]
    assert groups[0] == groups[1] == groups[2]
    assert groups[3] != groups[0]  # faster work is not what faults explain
    assert groups[4] != groups[0]  # outside the rate's rack


def test_excess_fault_rates_on_two_racks_of_one_cluster_are_one_batch():
    # fleet-1k's h100-east bad batch spans racks r9 and r10: one incident, not a match and a false alarm
    def rate(entity: str, day: int, grain: str = "rack") -> dict:
        out = row(entity, grain=grain, day=day, metric="xid_node_faults", shape="rate", top_factor="availability")
        return out | {"after_end_date": date(2026, 10, 28)}

    rows = frame(rate("a100-r1", 2), rate("a100-r2", 1), rate("h100-r1", 2), rate("h100-n3", 9, grain="node"))
    groups = group_regressions(rows, TOPOLOGY)["group_id"]
    assert groups[0] == groups[1]  # two racks of a100
    assert groups[2] != groups[0]  # another cluster's rack: another batch
    assert groups[3] == groups[2]  # a node of h100 inside h100's condition


def test_a_rollout_that_begins_inside_a_ramp_is_another_incident():
    # fleet-1k: h100-west-n03's HBM decay from 10-05 (split 10-09) and an NCCL rollout on 10-09 on nodes n03 among
    # them; the ramp's rows share both days, the rollout's rows came with their own configuration change
    nccl = json.dumps([{"component": "nccl", "from": "2.21.5", "to": "2.22.3", "nodes": 2, "of_nodes": 2}])
    split = date(2026, 10, 1) + timedelta(days=8)
    ramp = {"split_date": split, "ramp_end_date": split + timedelta(days=5)}
    rows = frame(
        row("h100-n1", grain="node", day=4, metric="probe_hbm_bw_ratio", **ramp),
        row("h100-n1", grain="node", day=4, metric="probe_gemm_ratio", **ramp),
        row("h100", day=8, metric="program_goodput", coinciding_changes=nccl),
        row("h100-n1", grain="node", day=8, metric="program_goodput", coinciding_changes=nccl),
        row("h100-n2", grain="node", day=8, metric="program_goodput", coinciding_changes=nccl),
    )
    groups = group_regressions(rows, TOPOLOGY)["group_id"]
    assert groups[0] == groups[1] and groups[2] == groups[3] == groups[4] and groups[0] != groups[2]
    # the same steps with nothing rolled out are the ramp's own (its node's pace, its cluster): one group
    own = frame(*(record | {"coinciding_changes": "[]"} for record in rows.to_dict("records")))
    assert group_regressions(own, TOPOLOGY)["group_id"].nunique() == 1
    # steps whose top cause candidate is a configuration change count as having one too
    ranked = own.assign(top_cause_dimension=[None, None, "nccl", "nccl", "nccl"])
    assert group_regressions(ranked, TOPOLOGY)["group_id"].nunique() == 2


def test_a_fault_rate_from_zero_is_described_with_its_unknowns_not_a_crash():
    """`incidents` seed 1 delivered day by day (bench/soak.py), the 10-07 run: rack a100-r1's first faults after five
    days without any. Its relative effect and the interval's upper bound have no value (a change from zero), and the
    snapshot gives them back as None: the alert's line used to raise TypeError and fail the alert_outbox step."""
    from perf_assets.lib.detection import describe_regression

    line = describe_regression(
        {
            "grain": "rack",
            "entity_id": "a100-r1",
            "metric": "xid_node_faults",
            "change_kind": "regression",
            "change_date": DAYS[5],
            "before_level": 0.0,
            "after_level": 3 / 14,
            "relative_effect": None,
            "ci_low": 1.2727724526699178,
            "ci_high": None,
            "p_value": 0.003641329085116068,
            "q_value": 0.010923987255348204,
            "n_before": 5,
            "n_after": 2,
            "verdict": "provisional",
            "shape": "rate",
            "top_factor": "availability",
            "coinciding_changes": "[]",
            "peer_relative_effect": None,
            "did_relative_effect": None,
        }
    )
    assert line == (
        "regression: xid_node_faults of rack a100-r1 from 2026-10-06: 0.0000 → 0.2143 (from zero, "
        "95% CI +127.3% to unknown, p=0.00364, q=0.0109, n=5+2 days, provisional); factor: availability"
    )
