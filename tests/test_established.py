"""An incident whose every unexplained change has a 95 % interval that includes zero is not established: it opens
no alert, and the evaluation scores it aside (perf_assets/lib/established.py)."""

from __future__ import annotations

from datetime import timedelta

import pytest
from test_alerts import NOW, regression, upsert
from test_attribution_evaluation import START, TOPOLOGY, frame, label, row

from perf_assets.lib.alerts import read_alerts
from perf_assets.lib.established import interval_includes_zero, moved_with_peers, not_established
from perf_assets.lib.evaluation import evaluate

# fleet-1k seed 117: cluster h200-east's program goodput of 10-28, three days before the window's end, inside the
# null-image decoy (the nodes n21..n24 that left jobs with driver-slowed peers carried it: knock-ons, all expected)
SEED_117_CLUSTER = {"relative_effect": 0.014313, "ci_low": -0.006554, "ci_high": 0.037274}
SEED_117_NODE_N21 = {"relative_effect": 0.128928, "ci_low": 0.093, "ci_high": 0.162}


@pytest.mark.parametrize(
    "low,high,includes",
    [(-0.0066, 0.0373, True), (0.0, 0.05, True), (-0.05, -0.001, False), (0.093, 0.162, False)]
    + [(float("nan"), 0.03, False), (None, None, False), (-0.01, float("inf"), False)],
)
def test_an_interval_includes_zero_only_when_both_ends_are_known(low, high, includes):
    assert interval_includes_zero({"ci_low": low, "ci_high": high}) is includes


def test_only_unexplained_changes_decide_and_one_clear_change_establishes_the_incident():
    cluster = {"grain": "cluster", "entity_id": "h200-east", "metric": "program_goodput"} | SEED_117_CLUSTER
    node = {"grain": "node", "entity_id": "h200-east-n21", "metric": "program_goodput"} | SEED_117_NODE_N21
    explained = node | {"expected_because": "job peers: left allocations with nodes whose program_goodput ..."}
    reason = not_established([cluster, explained])
    assert reason and "cluster/h200-east/program_goodput +1.4% [-0.7%, +3.7%]" in reason
    assert "h200-east-n21" not in reason  # a knock-on is explained: it neither establishes nor is listed
    assert not_established([cluster, node]) is None  # n21 unexplained, its interval excludes zero
    assert not_established([explained]) is None  # all knock-ons: expected_because describes the group instead
    unknown = cluster | {"ci_low": float("nan"), "ci_high": float("nan")}
    assert not_established([unknown]) is None  # unknown is not "no change"


def test_a_not_established_incident_opens_no_alert_until_a_later_run_excludes_zero(tmp_path):
    early = regression("2026-11-17", effect=-0.014, ci=(-0.037, 0.007))  # two days after: still reaches zero
    first = upsert(tmp_path, early)
    assert first.opened == [] and len(first.not_established) == 1
    assert "not established" in first.not_established[0]["not_established"]
    assert read_alerts(tmp_path) == []
    later = upsert(tmp_path, regression("2026-11-17", effect=-0.016, ci=(-0.026, -0.007)), now=NOW + timedelta(days=2))
    assert len(later.opened) == 1 and later.not_established == []
    # an alert already open is updated by a run whose interval widens back over zero, not dropped or re-opened
    again = upsert(tmp_path, regression("2026-11-17", effect=-0.012, ci=(-0.03, 0.004)), now=NOW + timedelta(days=3))
    assert again.opened == [] and len(again.updated) == 1 and again.not_established == []
    (alert,) = read_alerts(tmp_path)
    assert alert["status"] == "open" and alert["confidence"] == "low"


def test_the_evaluation_scores_a_not_established_group_neither_as_detection_nor_as_false_alarm():
    decoy = label("null-image", kind="null_rollout", day=17, decoy=True)
    real = label("rollout", day=10)
    weak = row("h100", day=18, kind="improvement", effect=0.014, ci_low=-0.0066, ci_high=0.0373)
    report = evaluate(frame(row(day=10), weak), [real, decoy], TOPOLOGY)
    assert report["false_alarms"]["count"] == 0 and report["overall"]["precision"]["value"] == 1.0
    assert [(g["root"], g["change_date"]) for g in report["unestablished_groups"]] == [
        ("cluster/h100/goodput", str(START + timedelta(days=18)))
    ]
    # the same group with an interval that excludes zero alerts inside the decoy's window
    clear = evaluate(frame(row(day=10), weak | {"ci_low": 0.004}), [real, decoy], TOPOLOGY)
    assert clear["false_alarm_groups"][0]["attributed_to"] == "null-image" and clear["unestablished_groups"] == []


# fleet-1k seed 120: h200-east-n30's (and n31's, the same jobs) program goodput of 10-05, four days into the window;
# the cluster's other nodes moved -1.4 % over the same windows, so the node's own part was -2.0 %
SEED_120_N30 = {
    "grain": "node",
    "entity_id": "h200-east-n30",
    "metric": "program_goodput",
    "relative_effect": -0.033631,
    "ci_low": -0.045423,
    "ci_high": -0.021698,
    "peer_relative_effect": -0.013770,
    "did_relative_effect": -0.020138,
    "shape": "drift",
    "top_factor": "program_goodput",
    "coinciding_changes": "[]",
    "top_cause_dimension": "node",
}


def test_a_nodes_pace_moving_with_its_cluster_is_not_established():
    n31 = SEED_120_N30 | {"entity_id": "h200-east-n31"}
    reason = not_established([SEED_120_N30, n31])
    assert reason and reason.startswith("not established: a node's pace moved with its cluster")
    assert "node/h200-east-n30/program_goodput -3.4% against its cluster's other nodes -1.4%" in reason
    assert "(difference in differences -2.0%)" in reason and "3% minimum effect" in reason
    assert moved_with_peers([SEED_120_N30]) == not_established([SEED_120_N30])
    goodput = SEED_120_N30 | {"metric": "goodput", "top_factor": "program_goodput"}
    assert not_established([SEED_120_N30, goodput])  # its goodput, program goodput the largest factor: the pace too


@pytest.mark.parametrize(
    "other",
    [
        {"did_relative_effect": -0.031},  # its own part reaches the node's minimum effect
        {"did_relative_effect": float("nan")},  # unknown is not "with its cluster"
        {"peer_relative_effect": None},
        {"grain": "cluster", "entity_id": "h200-east"},  # a cluster's change is the cluster's
        {"metric": "goodput", "top_factor": "allocation"},  # another factor moved
        {"metric": "clock_ratio"},  # its hardware moved: a node's own evidence
        {"shape": "rate"},  # a fault rate
        {"coinciding_changes": '[{"component": "driver", "from": "550", "to": "560"}]'},  # a rollout on it
        {"top_cause_dimension": "power_limit_w", "top_cause_value": "600"},
    ],
)
def test_a_node_change_with_evidence_of_its_own_is_established(other):
    assert not_established([SEED_120_N30, SEED_120_N30 | {"entity_id": "h200-east-n29"} | other]) is None


def test_a_node_pace_group_moving_with_its_cluster_opens_no_alert_and_is_scored_aside(tmp_path):
    report = evaluate(
        frame(row(day=10), row("h100-n1", day=4) | SEED_120_N30 | {"entity_id": "h100-n1"}),
        [label("rollout", day=10)],
        TOPOLOGY,
    )
    assert report["false_alarms"]["count"] == 0 and report["overall"]["precision"]["value"] == 1.0
    assert [g["root"] for g in report["unestablished_groups"]] == ["node/h100-n1/program_goodput"]
    early = regression("2026-11-17") | SEED_120_N30 | {"entity_id": "h100-n1"}
    result = upsert(tmp_path, early)
    assert result.opened == [] and len(result.not_established) == 1 and read_alerts(tmp_path) == []
