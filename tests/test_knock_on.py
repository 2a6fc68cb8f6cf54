"""Knock-on changes (perf_assets/lib/knock_on.py): job peers, the power that follows their pace, down time, power
that moves alone (fleet-1k seeds 110 and 111).

Literal rows in the shape of `regressions`, with the figures of `incidents` seed 1 (h100-n05 joining and leaving the
jobs of the NCCL rollout's nodes) and of the demo (beta's fragmentation burst after beta-n03's fault).
"""

from __future__ import annotations

import json
from datetime import date, datetime, timezone

import pandas as pd

from perf_assets.lib.alerts import build_incidents, upsert_incidents
from perf_assets.lib.detection import REGRESSION_COLUMNS
from perf_assets.lib.evaluation import evaluate
from perf_assets.lib.knock_on import (
    down_time_knock_ons,
    job_peer_knock_ons,
    maintenance_knock_ons,
    no_demand_knock_ons,
    own_cause,
    pace_companions,
    power_alone,
)
from perf_assets.lib.topology import Topology


def row(entity: str, metric: str, day: int, effect: float, *, grain: str = "node", **fields) -> dict:
    out = {column: None for column in REGRESSION_COLUMNS}
    change = date(2026, 10, day)
    out |= {
        "regression_id": f"{entity}-{metric}-{day}",
        "grain": grain,
        "entity_id": entity,
        "metric": metric,
        "change_date": change,
        "split_date": change,
        "change_kind": "regression" if effect < 0 else "improvement",
        "relative_effect": effect,
        "p_value": 0.001,
        "before_start_date": date(2026, 10, 1),
        "after_end_date": date(2026, 10, 28),
        "shape": "step",
        "before_level": 1.0,
        "after_level": 1.0 + effect,
        "ci_low": effect - 0.01,
        "ci_high": effect + 0.01,
        "q_value": 0.01,
        "n_before": 10,
        "n_after": 5,
        "coinciding_changes": "[]",
    }
    return out | fields


def at(day: int, hour: int = 0) -> datetime:
    return datetime(2026, 10, day, hour, tzinfo=timezone.utc)


def allocations(*jobs: tuple[str, list[str], datetime, datetime]) -> pd.DataFrame:
    return pd.DataFrame(
        [(job, node, start, end) for job, nodes, start, end in jobs for node in nodes],
        columns=["slurm_job_id", "node", "start_at", "end_at"],
    )


# n02 slowed from 10-06 (an NCCL rollout); n05 runs alone until 10-22, then in n02's job until 10-26, then alone
ALLOCATIONS = allocations(
    ("j1", ["n02"], at(6), at(28)),
    ("j2", ["n05"], at(12), at(22)),
    ("j3", ["n05", "n02"], at(22), at(26)),
    ("j4", ["n05"], at(26), at(28)),
)


def test_joining_and_leaving_a_slowed_peer_is_expected():
    found = pd.DataFrame(
        [
            row("n02", "program_goodput", 6, -0.127, before_start_date=date(2026, 10, 1)),
            row(
                "n05",
                "program_goodput",
                22,
                -0.117,
                before_start_date=date(2026, 10, 12),
                after_end_date=date(2026, 10, 25),
            ),
            row(
                "n05",
                "program_goodput",
                26,
                0.129,
                before_start_date=date(2026, 10, 22),
                after_end_date=date(2026, 10, 28),
            ),
        ]
    )
    expected = job_peer_knock_ons(found, ALLOCATIONS, min_effect=0.03)
    assert set(expected) == {1, 2}  # not n02's own change: it has no slowed peer before it
    assert expected[1].startswith("job peers: joined allocations with nodes whose program_goodput was already lower")
    assert "n02 (-12.7% since 2026-10-06)" in expected[1] and "0% of its job time before" in expected[1]
    assert expected[2].startswith("job peers: left")
    # a peer whose change is within the grouping window is the same incident, not an earlier one
    same_days = found.assign(change_date=date(2026, 10, 21), split_date=date(2026, 10, 21)).iloc[[0, 1]]
    assert job_peer_knock_ons(same_days.reset_index(drop=True), ALLOCATIONS, 0.03) == {}
    assert job_peer_knock_ons(found, None, 0.03) == {}  # allocations unknown: nothing is explained


def test_a_change_the_exposure_does_not_mostly_predict_stays_an_incident():
    # n05 shares n02's job a quarter of its time before 10-22 and half after: the exposure predicts
    # 0.25 x 12.7 % = 3.2 % of a 11.7 % drop, less than half of it (a framework upgrade, a fault: its own change)
    partly = allocations(
        ("j1", ["n02"], at(6), at(28)),
        ("j2", ["n05"], at(19), at(21, 6)),
        ("j3", ["n05", "n02"], at(21, 6), at(22)),
        ("j4", ["n05", "n02"], at(22), at(23, 12)),
        ("j5", ["n05"], at(23, 12), at(25)),
    )
    found = pd.DataFrame(
        [
            row("n02", "program_goodput", 6, -0.127),
            row(
                "n05",
                "program_goodput",
                22,
                -0.117,
                before_start_date=date(2026, 10, 19),
                after_end_date=date(2026, 10, 24),
            ),
        ]
    )
    assert job_peer_knock_ons(found, partly, 0.03) == {}


# incidents seed 103 in miniature: an image stall slows n03 and n04 alike on 10-07 (one job); n03 leaves n04's job on
# 10-22, when a torch upgrade reaches it and speeds it up 10 %
SHARED_ALLOCATIONS = allocations(
    ("j1", ["n03", "n04"], at(7), at(22)),
    ("j2", ["n03"], at(22), at(28)),
    ("j3", ["n04"], at(22), at(28)),
)


def leaving_after_a_shared_incident(**fields) -> pd.DataFrame:
    return pd.DataFrame(
        [
            row("n03", "program_goodput", 7, -0.16),
            row("n04", "program_goodput", 7, -0.19),
            row(
                "n03",
                "program_goodput",
                22,
                0.103,
                before_start_date=date(2026, 10, 7),
                after_end_date=date(2026, 10, 28),
                **fields,
            ),
        ]
    )


def test_a_peer_slowed_by_the_incident_that_slowed_the_node_too_explains_nothing():
    found = leaving_after_a_shared_incident()
    assert job_peer_knock_ons(found, SHARED_ALLOCATIONS, 0.03) == {}
    # without n03's own change of 10-07, n04 was slower than n03 and leaving its job explains the improvement
    alone = found.drop(index=0).reset_index(drop=True)
    assert set(job_peer_knock_ons(alone, SHARED_ALLOCATIONS, 0.03)) == {1}
    # a peer change of the other direction on the node's day is not shared: n04 still counts as slowed
    opposite = alone.copy()
    opposite.loc[len(opposite)] = row("n03", "program_goodput", 8, 0.05)
    assert set(job_peer_knock_ons(opposite, SHARED_ALLOCATIONS, 0.03)) == {1}


def test_a_change_with_its_own_configuration_change_is_never_set_aside():
    torch = json.dumps([{"component": "torch", "from": "2.5.1", "to": "2.6.0", "nodes": 1, "of_nodes": 1}])
    # n04 alone was slowed before (the case above, set aside without a cause of its own)
    own = leaving_after_a_shared_incident(coinciding_changes=torch).drop(index=0).reset_index(drop=True)
    assert job_peer_knock_ons(own, SHARED_ALLOCATIONS, 0.03) == {}
    ranked = leaving_after_a_shared_incident(top_cause_dimension="image", top_cause_value="trainer:2026.10.1")
    assert job_peer_knock_ons(ranked.drop(index=0).reset_index(drop=True), SHARED_ALLOCATIONS, 0.03) == {}
    # a rack or node candidate is not a configuration change: the knock-on stands
    rack = leaving_after_a_shared_incident(top_cause_dimension="rack", top_cause_value="r1")
    assert set(job_peer_knock_ons(rack.drop(index=0).reset_index(drop=True), SHARED_ALLOCATIONS, 0.03)) == {1}
    assert own_cause({"coinciding_changes": torch}) == "torch 2.5.1 -> 2.6.0"
    assert own_cause({"coinciding_changes": "[]", "top_cause_dimension": "node"}) is None


def test_power_that_follows_the_pace_is_expected_and_a_power_cap_is_not():
    found = pd.DataFrame(
        [
            row("n02", "program_goodput", 6, -0.127),
            row(
                "n05",
                "program_goodput",
                22,
                -0.117,
                before_start_date=date(2026, 10, 12),
                after_end_date=date(2026, 10, 25),
            ),
            row("n05", "power_ratio", 22, -0.034),
            row("GPU-5", "power_ratio", 23, -0.035, grain="gpu"),
            row("GPU-6", "power_ratio", 22, -0.23, grain="gpu"),  # a 550 W cap: more than the pace's 11.7 %
            row("GPU-7", "clock_ratio", 22, -0.05, grain="gpu"),  # the clock is the GPU's own, not the pace
        ]
    )
    expected = job_peer_knock_ons(found, ALLOCATIONS, 0.03)
    pace = pace_companions(found, expected, {"GPU-5": "n05", "GPU-6": "n05", "GPU-7": "n05"})
    assert set(pace) == {2, 3}
    assert pace[3].startswith("pace: power_ratio -3.5% follows node n05's program_goodput (11.7%, regression)")


def tree(cluster: str, days: dict[int, tuple[float, float]]) -> pd.DataFrame:
    """Cluster availability rows: day -> (available, installed) capacity."""
    return pd.DataFrame(
        [
            {
                "grain": "cluster",
                "entity_id": cluster,
                "node_id": "availability",
                "metric_date": date(2026, 11, day),
                "numerator": available,
                "denominator": installed,
            }
            for day, (available, installed) in days.items()
        ]
    )


def burst(cluster: str, first: int, last: int, stranded: float) -> dict:
    return row(
        cluster,
        "idle_fragmented_share",
        1,
        0.1,
        grain="cluster",
        change_kind="regression",
        change_date=date(2026, 11, first),
        after_end_date=date(2026, 11, last),
        after_numerator=stranded,
        shape="burst",
    )


def test_a_fragmentation_burst_after_down_time_is_expected():
    # the demo: beta lost 1.32e20 of its 8.63e20 on 11-05; 1.69e20 idle-fragmented over 11-05 and 11-06 (1.28 x)
    availability = tree("beta", {4: (8.63e20, 8.63e20), 5: (7.31e20, 8.63e20), 6: (8.63e20, 8.63e20)})
    found = pd.DataFrame([burst("beta", 5, 6, 1.69e20)])
    reason = down_time_knock_ons(found, availability)[0]
    assert reason.startswith("down time: cluster beta lost capacity to down time from 2026-11-04 to 2026-11-06")
    assert "1.28 times that" in reason
    # an injected fragmentation strands whole nodes: 12 x the down time of the day before (incidents seed 1)
    assert down_time_knock_ons(pd.DataFrame([burst("beta", 5, 6, 1.6e21)]), availability) == {}
    # no down time around the burst: nothing explains it
    quiet = tree("beta", {4: (8.63e20, 8.63e20), 5: (8.63e20, 8.63e20), 6: (8.63e20, 8.63e20)})
    assert down_time_knock_ons(found, quiet) == {}


def test_evaluation_and_alerts_set_an_all_expected_group_aside():
    reason = "job peers: joined allocations with nodes whose program_goodput was already lower (n02)"
    found = pd.DataFrame(
        [
            row("n01", "program_goodput", 6, -0.13),  # the labelled incident
            row("n05", "program_goodput", 22, -0.117, expected_because=reason),
            row("n05", "power_ratio", 22, -0.034, expected_because="pace: power_ratio follows"),
        ]
    )
    topology = Topology.from_cluster_nodes({"c": ["n01", "n02", "n05"]})
    label = {
        "incident_id": "inc-1",
        "kind": "node_rollout_slowdown",
        "start": "2026-10-06T00:00:00Z",
        "end": None,
        "grain": "node",
        "direction": "regression",
        "scope": {"clusters": ["c"], "nodes": ["n01"], "gpus": []},
    }
    report = evaluate(found, [label], topology, series_days=100)
    assert report["overall"]["precision"]["successes"] == 1 and report["overall"]["precision"]["n"] == 1
    assert report["false_alarm_groups"] == []
    assert [(g["root"], g["rows"], g["expected_because"]) for g in report["expected_groups"]] == [
        ("node/n05/program_goodput", 2, reason)
    ]
    # one group with a row that nothing explains is an incident as before
    mixed = found.assign(expected_because=[None, reason, None])
    assert len(evaluate(mixed, [label], topology)["false_alarm_groups"]) == 1

    incidents = build_incidents(found, topology)
    assert [incident.get("expected_because") for incident in incidents] == [None, reason]


def test_an_expected_incident_is_stored_as_expected_and_not_reopened(tmp_path):
    from perf_assets.lib.alerts import fold, read_events, reopen_unannotated

    found = pd.DataFrame([row("n05", "program_goodput", 22, -0.117, expected_because="job peers: joined")])
    result = upsert_incidents(tmp_path, build_incidents(found), now=at(28))
    assert result.opened == [] and [alert["status"] for alert in result.expected] == ["expected"]
    assert result.expected[0]["expected_by"] == {"id": "knock-on", "note": "job peers: joined", "source": "detection"}
    assert reopen_unannotated(tmp_path, []) == []  # no annotation made it expected: none withdrawn
    assert [alert["status"] for alert in fold(read_events(tmp_path)).values()] == ["expected"]
    json.dumps(result.expected[0], default=str)  # stored as JSON


def maintenance_tree(node: str, shares: dict[int, float]) -> pd.DataFrame:
    """Node down_maintenance_share rows (October): day -> share of the day down for planned maintenance."""
    return pd.DataFrame(
        [
            {
                "grain": "node",
                "entity_id": node,
                "node_id": "down_maintenance_share",
                "metric_date": date(2026, 10, day),
                "numerator": share * 8.0e20,
                "denominator": 8.0e20,
            }
            for day, share in shares.items()
        ]
    )


def test_an_allocation_change_beside_a_planned_maintenance_is_the_drain():
    # incidents seeds 1-3: h200-n01 down for maintenance a quarter of 10-04, drained on 10-03 and 10-04
    planned = maintenance_tree("h200-n01", {3: 0.0, 4: 0.25, 5: 0.0})
    found = pd.DataFrame(
        [
            row("h200-n01", "allocation", 5, 0.35),  # the refill after it
            row("h200-n01", "allocation", 3, -0.6),  # the drain before it
            row("h200-n01", "allocation", 7, 0.2),  # three days later: not the maintenance's
            row("h200-n02", "allocation", 5, 0.3),  # another node
            row("h200-n01", "program_goodput", 5, 0.1),  # not what a drain moves
            row("h200", "allocation", 5, 0.1, grain="cluster"),
        ]
    )
    expected = maintenance_knock_ons(found, planned)
    assert set(expected) == {0, 1}
    assert expected[0].startswith("planned maintenance: node h200-n01 was down for maintenance on 2026-10-04")
    # no planned maintenance (a fault's down time is not in down_maintenance_share): nothing is expected
    assert maintenance_knock_ons(found, maintenance_tree("h200-n01", {4: 0.0})) == {}


def share_tree(node: str, shares: dict[str, list[float]]) -> pd.DataFrame:
    """Node rows of ``node_id -> [share on 10-01, 10-02, ...]`` over a constant 8e20 FLOP-seconds a day."""
    return pd.DataFrame(
        [
            {
                "grain": "node",
                "entity_id": node,
                "node_id": node_id,
                "metric_date": date(2026, 10, day),
                "numerator": share * 8.0e20,
                "denominator": 8.0e20,
            }
            for node_id, values in shares.items()
            for day, share in enumerate(values, start=1)
        ]
    )


def test_an_idle_node_with_no_demand_is_not_an_incident_but_stranded_capacity_is():
    # fleet-1k seed 2, a100-west-n30: allocation 0.8-0.9 until 10-15, then 0.30-0.49 for five days, idle with no
    # eligible work pending (idle_no_demand_share 0.40-0.72); a100-west-n23 (seed 1): its dip is requeue gaps and
    # fragmentation, work waiting that did not run there, which stays an incident
    quiet = {"allocation": [0.85] * 15 + [0.35] * 5, "idle_no_demand_share": [0.15] * 15 + [0.62] * 5}
    stranded = {"allocation": [0.85] * 15 + [0.35] * 5, "idle_no_demand_share": [0.15] * 15 + [0.1] * 5}
    tree = pd.concat([share_tree("a100-west-n30", quiet), share_tree("a100-west-n23", stranded)])
    window = {"before_start_date": date(2026, 10, 1), "after_end_date": date(2026, 10, 20)}
    found = pd.DataFrame(
        [
            row("a100-west-n30", "allocation", 16, -0.59, top_factor="allocation", **window),
            row("a100-west-n30", "goodput", 16, -0.57, top_factor="allocation", **window),
            row("a100-west-n30", "goodput", 16, -0.2, top_factor="program_goodput", **window),  # not allocation's
            row("a100-west-n23", "allocation", 16, -0.59, top_factor="allocation", **window),  # stranded, not quiet
            row("a100-west", "allocation", 16, -0.1, grain="cluster", top_factor="allocation", **window),
            row(  # a configuration change on the node that day: a rollout changes how fast work runs, not
                # whether eligible work waits (fleet-1k seed 2: h100-east-n25's idle days from 10-12, its NCCL
                # rollout of 10-13 in between), so the idle time with no demand still explains the allocation
                "a100-west-n30",
                "allocation",
                16,
                -0.59,
                top_factor="allocation",
                coinciding_changes='[{"component": "image", "from": "a", "to": "b"}]',
                **window,
            ),
        ]
    )
    expected = no_demand_knock_ons(found, tree)
    assert set(expected) == {0, 1, 5}
    assert expected[0].startswith("no demand: node a100-west-n30's allocation 0.85 -> 0.35 (split 2026-10-16)")
    assert "0.15 -> 0.62" in expected[0]
    # unknown idle time (no idle_no_demand_share rows) is not evidence
    assert no_demand_knock_ons(found, tree[tree["node_id"] == "allocation"]) == {}


# fleet-1k seed 3 in miniature: an NCCL rollout on 10-09 took 5.5 % from n07 and 11.6 % from n03, whose HBM was
# decaying; from 10-14 n07 runs in n03's jobs and falls 11.8 %
EXCESS_ALLOCATIONS = allocations(
    ("j1", ["n03"], at(9), at(28)),
    ("j2", ["n07"], at(9), at(14)),
    ("j3", ["n07", "n03"], at(14), at(28)),
)


def joining_a_peer_hit_harder(peer_effect: float = -0.116, **fields) -> pd.DataFrame:
    return pd.DataFrame(
        [
            row("n03", "program_goodput", 9, peer_effect),
            row("n07", "program_goodput", 9, -0.055),
            row("n07", "program_goodput", 14, -0.118, before_start_date=date(2026, 10, 9), **fields),
        ]
    )


def test_a_peer_hit_harder_by_a_shared_incident_is_slower_by_the_difference():
    expected = job_peer_knock_ons(joining_a_peer_hit_harder(), EXCESS_ALLOCATIONS, 0.03)
    assert set(expected) == {2}
    assert "n03 (-6.5% since 2026-10-09)" in expected[2]  # 0.884 / 0.945: 6.5 % slower than n07, not 11.6 %
    assert "predicts 6.5% of the 11.8% change" in expected[2]
    # hit about alike (-7 % against -5.5 %: 1.6 % slower, under the minimum effect): no slower peer
    assert job_peer_knock_ons(joining_a_peer_hit_harder(-0.07), EXCESS_ALLOCATIONS, 0.03) == {}


def test_the_slowest_peer_in_the_job_sets_the_pace():
    # n05 joins a job with n02 (12.7 % slower since 10-06) and n09 (3.5 % slower since 10-05) on 10-22 and falls 10 %:
    # the job runs at n02's pace (predicted 12.7 %), not at the mildest peer's (3.5 %, under half of the change)
    jobs = allocations(
        ("j1", ["n02"], at(6), at(22)),
        ("j0", ["n09"], at(5), at(22)),
        ("j2", ["n05"], at(12), at(22)),
        ("j3", ["n05", "n02", "n09"], at(22), at(28)),
    )
    found = pd.DataFrame(
        [
            row("n02", "program_goodput", 6, -0.127),
            row("n09", "program_goodput", 5, -0.035),
            row("n05", "program_goodput", 22, -0.10, before_start_date=date(2026, 10, 12)),
        ]
    )
    expected = job_peer_knock_ons(found, jobs, 0.03)
    assert set(expected) == {2} and "predicts 12.7% of the 10.0% change" in expected[2]


def firmware_rollout(nodes: list[str]) -> pd.DataFrame:
    return pd.DataFrame(
        [(node, at(13), "firmware", "96.00.89", "96.00.99") for node in nodes],
        columns=["node", "changed_at", "component", "from_version", "to_version"],
    )


def test_a_rollout_its_other_nodes_ignored_does_not_shield_a_knock_on():
    """fleet-1k seed 3: a firmware rollout without effect reached all of h100-west on 10-13; n07 joined the jobs of
    n03 (HBM decay) the next day. 1 of the 8 nodes that got it moved: a coincidence, not n07's cause."""
    firmware = json.dumps([{"component": "firmware", "from": "96.00.89", "to": "96.00.99", "nodes": 1, "of_nodes": 1}])
    found = pd.DataFrame(
        [
            row("n03", "program_goodput", 9, -0.116),
            row("n07", "program_goodput", 14, -0.118, before_start_date=date(2026, 10, 9), coinciding_changes=firmware),
        ]
    )
    nodes = [f"n{i:02d}" for i in range(1, 9)]
    assert job_peer_knock_ons(found, EXCESS_ALLOCATIONS, 0.03) == {}  # rollouts unknown: a cause of its own
    assert set(job_peer_knock_ons(found, EXCESS_ALLOCATIONS, 0.03, firmware_rollout(nodes))) == {1}
    # half of its nodes moved with it: the rollout's own incident, never set aside
    moved = pd.concat(
        [found, pd.DataFrame([row(n, "program_goodput", 13, -0.1, coinciding_changes=firmware) for n in nodes[1:4]])]
    )
    assert 1 not in job_peer_knock_ons(moved.reset_index(drop=True), EXCESS_ALLOCATIONS, 0.03, firmware_rollout(nodes))
    # the cluster moved with it
    cluster = pd.concat(
        [found, pd.DataFrame([row("c", "program_goodput", 13, -0.02, grain="cluster", coinciding_changes=firmware)])]
    )
    assert job_peer_knock_ons(cluster.reset_index(drop=True), EXCESS_ALLOCATIONS, 0.03, firmware_rollout(nodes)) == {}
    # a rollout to three nodes is too small to judge by how many moved
    assert job_peer_knock_ons(found, EXCESS_ALLOCATIONS, 0.03, firmware_rollout(["n06", "n07", "n08"])) == {}
    # the cause analysis ranks the firmware first
    ranked = found.assign(top_cause_dimension=[None, "firmware"])
    assert job_peer_knock_ons(ranked, EXCESS_ALLOCATIONS, 0.03, firmware_rollout(nodes)) == {}


# fleet-1k seed 111: h100-west-n12 and four of its GPUs drew 3.0-3.1 % more from 10-14 with nothing else moving
N12_GPUS = {f"GPU-n12-{i}": "h100-west-n12" for i in range(4)}


def power_alone_rows(**fields) -> list[dict]:
    return [row("h100-west-n12", "power_ratio", 14, 0.030, **fields)] + [
        row(gpu, "power_ratio", 14, effect, grain="gpu", **fields)
        for gpu, effect in zip(N12_GPUS, (0.030, 0.031, 0.031, 0.030))
    ]


def test_a_power_draw_that_moves_alone_is_the_job_mix():
    found = pd.DataFrame(power_alone_rows())
    alone = power_alone(found, N12_GPUS)
    assert set(alone) == {0, 1, 2, 3, 4}
    assert alone[0].startswith("power alone: power_ratio +3.0% with no other metric of node h100-west-n12")
    # a GPU whose node is unknown is not set aside
    assert set(power_alone(found, dict(list(N12_GPUS.items())[:2]))) == {0, 1, 2}
    # seed 110: h100-west-n19 refilled (allocation +156 %, no demand before) a day before its GPU drew 3.4 % less:
    # other jobs run there, which is the job mix itself
    refilled = pd.DataFrame(
        [
            row("h100-west-n19", "allocation", 26, 1.559),
            row("h100-west-n19", "goodput", 26, 1.396, top_factor="allocation"),
            row("GPU-n19-0", "power_ratio", 27, -0.034, grain="gpu"),
        ]
    )
    assert set(power_alone(refilled, {"GPU-n19-0": "h100-west-n19"})) == {2}


def test_power_with_a_clock_pace_or_probe_beside_it_or_a_large_move_is_not_alone():
    gpus = N12_GPUS | {"GPU-n12-7": "h100-west-n12"}
    # a power cap: the clock of one GPU of the node fell with it (seed 107's rack cap: power -29 %, clock -9 %)
    for metric, effect in (("clock_ratio", -0.09), ("program_goodput", -0.12), ("probe_hbm_bw_ratio", -0.07)):
        other = row("GPU-n12-7" if metric != "program_goodput" else "h100-west-n12", metric, 15, effect)
        other["grain"] = "node" if metric == "program_goodput" else "gpu"
        assert power_alone(pd.DataFrame(power_alone_rows() + [other]), gpus) == {}, metric
    # the same metric's move three days away is another incident's
    far = row("GPU-n12-7", "clock_ratio", 17, -0.09, grain="gpu")
    assert set(power_alone(pd.DataFrame(power_alone_rows() + [far]), gpus)) == {0, 1, 2, 3, 4}
    # one of the node's power rows moved by 5 % or more: none of them is alone
    large = row("GPU-n12-7", "power_ratio", 14, 0.052, grain="gpu")
    assert power_alone(pd.DataFrame(power_alone_rows() + [large]), gpus) == {}
    # another node's clock does not count
    elsewhere = row("GPU-n13-0", "clock_ratio", 14, -0.09, grain="gpu")
    assert set(power_alone(pd.DataFrame(power_alone_rows() + [elsewhere]), gpus | {"GPU-n13-0": "n13"})) == {
        0,
        1,
        2,
        3,
        4,
    }


def test_power_with_a_rollout_of_its_own_is_alone_only_when_the_rollout_s_other_nodes_ignored_it():
    """seed 111: the null firmware rollout reached all 24 nodes of h100-west on 10-13; n12 alone drew more."""
    firmware = json.dumps([{"component": "firmware", "from": "96.00.89", "to": "96.00.99", "nodes": 1, "of_nodes": 1}])
    found = pd.DataFrame(power_alone_rows(coinciding_changes=firmware))
    nodes = [f"h100-west-n{i:02d}" for i in range(1, 25)]
    assert power_alone(found, N12_GPUS) == {}  # rollouts unknown: a cause of its own
    assert set(power_alone(found, N12_GPUS, firmware_rollout(nodes))) == {0, 1, 2, 3, 4}
    # a lowered power limit on the node's own rack (three nodes: too few to judge by how many moved)
    cap = json.dumps([{"component": "power_limit_w", "from": "700", "to": "680", "nodes": 1, "of_nodes": 1}])
    capped = pd.DataFrame(power_alone_rows(coinciding_changes=cap))
    limits = pd.DataFrame(
        [(n, at(13), "power_limit_w", "700", "680") for n in nodes[10:13]],
        columns=["node", "changed_at", "component", "from_version", "to_version"],
    )
    assert power_alone(capped, N12_GPUS, limits) == {}
