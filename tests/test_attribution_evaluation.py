"""Cause ranking, hierarchical grouping and the evaluation protocol on literal frames and labels."""

from __future__ import annotations

import json
from datetime import date, datetime, timedelta, timezone

import numpy as np
import pandas as pd
import pytest

from perf_assets.lib.alerts import build_incidents
from perf_assets.lib.causes import cause_candidates, dimension_changes, rank_causes
from perf_assets.lib.detection import REGRESSION_COLUMNS
from perf_assets.lib.evaluation import evaluate, wilson
from perf_assets.lib.grouping import group_regressions
from perf_assets.lib.topology import Topology

START = date(2026, 10, 1)
TOPOLOGY = Topology.from_frame(
    pd.DataFrame(
        [
            {
                "cluster": cluster,
                "node": f"{cluster}-n{i}",
                "rack": f"{cluster}-r{(i + 1) // 2}",
                "gpu_uuid": f"GPU-{cluster}-{i}",
            }
            for cluster in ("h100", "a100")
            for i in range(1, 5)
        ]
    )
)


def row(
    entity: str = "h100",
    grain: str = "cluster",
    metric: str = "goodput",
    day: int = 10,
    kind: str = "regression",
    effect: float = -0.1,
    p: float = 0.001,
    **extra,
) -> dict:
    change = START + timedelta(days=day)
    out = {column: None for column in REGRESSION_COLUMNS}
    out |= {
        "regression_id": f"{grain}-{entity}-{metric}-{day}-{kind}",
        "metric": metric,
        "grain": grain,
        "entity_id": entity,
        "change_date": change,
        "change_kind": kind,
        "before_start_date": change - timedelta(days=7),
        "after_end_date": change + timedelta(days=6),
        "n_before": 7,
        "n_after": 7,
        "before_level": 0.4,
        "after_level": 0.4 * (1 + effect),
        "relative_effect": effect,
        "ci_low": effect - 0.02,
        "ci_high": effect + 0.02,
        "p_value": p,
        "top_factor": "program_goodput",
        "coinciding_changes": "[]",
    }
    return out | extra


def label(
    incident_id: str = "inc",
    kind: str = "node_rollout_slowdown",
    day: int = 10,
    clusters: tuple[str, ...] = ("h100",),
    nodes: tuple[str, ...] = (),
    grain: str = "node",
    decoy: bool = False,
    end_day: int | None = None,
    **extra,
) -> dict:
    return {
        "incident_id": incident_id,
        "kind": kind,
        "decoy": decoy,
        "start": f"{START + timedelta(days=day)}T00:00:00Z",
        "end": None if end_day is None else f"{START + timedelta(days=end_day)}T00:00:00Z",
        "cluster": clusters[0],
        "nodes": list(nodes),
        "grain": grain,
        "scope": {"clusters": list(clusters), "nodes": list(nodes), "gpus": []},
        "factor": None if decoy else "program_goodput",
        "expected_relative_change": 0 if decoy else -0.13,
        "attribution": "rate",
        "cause": None if decoy else {"dimension": "nccl", "value": "2.22.3"},
        "direction": "none" if decoy else "regression",
    } | extra


def frame(*rows: dict) -> pd.DataFrame:
    return pd.DataFrame(list(rows))


# --------------------------------------------------------------------------- Wilson


@pytest.mark.parametrize("successes,n", [(0, 5), (3, 10), (7, 7), (45, 120)])
def test_wilson_interval_matches_statsmodels(successes, n):
    from statsmodels.stats.proportion import proportion_confint

    low, high = proportion_confint(successes, n, alpha=0.05, method="wilson")
    assert wilson(successes, n) == pytest.approx([low, high], abs=1e-12)
    assert wilson(0, 0) is None  # no denominator: unknown


# --------------------------------------------------------------------------- matching


@pytest.mark.parametrize("offset,matched", [(-3, False), (-2, True), (0, True), (2, True), (3, False)])
def test_the_date_window_is_two_days_either_side(offset, matched):
    report = evaluate(frame(row(day=10 + offset)), [label(day=10)], TOPOLOGY)
    assert report["detected_labels"] == int(matched)
    assert report["overall"]["precision"]["value"] == (1.0 if matched else 0.0)
    if matched:
        assert report["matches"][0]["delay_days"] == offset
        assert report["delay_days"]["median"] == offset


def test_scope_overlap_by_grain():
    node_label = label(nodes=("h100-n1",), grain="node")
    assert evaluate(frame(row("h100")), [node_label], TOPOLOGY)["detected_labels"] == 1  # cluster holds the node
    assert evaluate(frame(row("h100-n1", grain="node")), [node_label], TOPOLOGY)["detected_labels"] == 1
    assert evaluate(frame(row("h100-n2", grain="node")), [node_label], TOPOLOGY)["detected_labels"] == 0
    assert evaluate(frame(row("GPU-h100-1", grain="gpu")), [node_label], TOPOLOGY)["detected_labels"] == 1
    assert evaluate(frame(row("a100")), [node_label], TOPOLOGY)["detected_labels"] == 0
    # the fleet overlaps only a fleet-grain label; a fleet-grain label matches fleet and cluster groups
    assert evaluate(frame(row("fleet", grain="fleet")), [node_label], TOPOLOGY)["detected_labels"] == 0
    mix = label(kind="workload_mix_shift", grain="fleet", clusters=("a100", "h100"), attribution="mix")
    assert evaluate(frame(row("fleet", grain="fleet")), [mix], TOPOLOGY)["detected_labels"] == 1
    assert evaluate(frame(row("a100")), [mix], TOPOLOGY)["detected_labels"] == 1


def test_one_group_matches_one_label_greedy_by_date_distance():
    labels = [label("far", day=8), label("near", day=11)]
    report = evaluate(frame(row(day=10)), labels, TOPOLOGY)
    assert [m["incident_id"] for m in report["matches"]] == ["near"]
    assert report["missed"][0]["incident_id"] == "far"
    assert report["overall"]["recall"]["value"] == 0.5 and report["overall"]["precision"]["value"] == 1.0
    # two groups, one label: the nearer group matches; the other is a false alarm inside the label's window
    two = evaluate(frame(row("h100", day=11), row("h100", day=14)), [label(day=13)], TOPOLOGY)
    assert two["matches"][0]["change_date"] == str(START + timedelta(days=14))
    assert two["false_alarms"]["count"] == 1 and two["false_alarm_groups"][0]["why"] == "label_window"
    assert two["by_kind"]["node_rollout_slowdown"]["precision"]["value"] == 0.5


def test_groups_in_a_decoys_scope_and_window_are_false_alarms_and_unknown_is_null():
    decoy = label("noise", kind="noise_burst", day=5, end_day=6, decoy=True)
    report = evaluate(
        frame(row(day=7), row("a100", day=20)), [decoy, label(day=12, end_day=14, clusters=("a100",))], TOPOLOGY
    )
    assert report["labels"] == 1 and report["decoys"] == 1 and report["detected_labels"] == 0
    attributed = {alarm["attributed_to"] for alarm in report["false_alarm_groups"]}
    assert attributed == {"noise", None}
    assert report["by_kind"]["noise_burst"]["false_alarms"] == 1
    assert report["by_kind"]["noise_burst"]["recall"]["value"] is None  # decoys are not targets
    assert report["false_alarms"]["per_1000_series_days"] is None and report["false_alarms"]["reason"]
    assert report["factor_accuracy"]["value"] is None and report["factor_accuracy"]["reason"]
    assert (
        evaluate(frame(row(day=7)), [decoy], TOPOLOGY, series_days=2000)["false_alarms"]["per_1000_series_days"] == 0.5
    )


def test_factor_and_cause_accuracy_and_mix_not_assessed():
    candidates = json.dumps([{"dimension": "nccl", "value": "2.22.3", "did_effect": -0.1}])
    found = frame(row(cause_candidates=candidates, top_cause_dimension="nccl", top_cause_value="2.22.3"))
    report = evaluate(found, [label()], TOPOLOGY)
    assert report["factor_accuracy"]["value"] == 1.0 and report["cause_accuracy"]["value"] == 1.0
    wrong = evaluate(found, [label(cause={"dimension": "image", "value": "x"}, factor="allocation")], TOPOLOGY)
    assert wrong["factor_accuracy"]["value"] == 0.0 and wrong["cause_accuracy"]["value"] == 0.0
    mix = label(
        kind="workload_mix_shift", grain="fleet", attribution="mix", cause={"dimension": "sku", "value": "A100"}
    )
    mixed = evaluate(frame(row("fleet", grain="fleet")), [mix], TOPOLOGY)
    assert mixed["mix_attribution"]["value"] is None and not mixed["mix_attribution"]["items"][0]["assessed"]
    assert mixed["cause_accuracy"]["n"] == 0 and mixed["cause_accuracy"]["not_assessed"]


def test_mix_is_scored_on_the_labels_mix_basis_and_factor_on_the_labels_factor():
    mix = label(
        kind="workload_mix_shift",
        grain="fleet",
        clusters=("a100", "h100"),
        attribution="mix",
        mix_basis="allocated_gs",
        factor="allocation",
        cause={"dimension": "sku", "value": "A100"},
    )
    split = {"segment_type": "cluster", "top_factor": "allocation"}
    in_basis = row("fleet", grain="fleet", attribution="mix", mix_basis="allocated_gs", **split)
    in_basis |= {"mix_effect": -0.08, "rate_effect": -0.01, "occupancy_effect": 0.01}
    report = evaluate(frame(in_basis), [mix], TOPOLOGY)
    assert report["mix_attribution"]["value"] == 1.0 and report["factor_accuracy"]["value"] == 1.0
    assert "allocated_gs" in report["mix_attribution"]["items"][0]["reason"]
    # the same change read as occupancy in the label's basis: assessed, not mix
    occupancy = in_basis | {"attribution": "occupancy", "mix_effect": 0.01, "occupancy_effect": -0.1}
    assert evaluate(frame(occupancy), [mix], TOPOLOGY)["mix_attribution"]["value"] == 0.0
    # a split on another basis (own-peak peak-FLOP-seconds) does not answer the label: not assessed, with why
    other = in_basis | {"mix_basis": "allocated_pfs"}
    item = evaluate(frame(other), [mix], TOPOLOGY)["mix_attribution"]["items"][0]
    assert item["assessed"] is False and "allocated_gs" in item["reason"]
    # a label without mix_basis keeps the old reading: any fleet split
    assert evaluate(frame(other), [mix | {"mix_basis": None}], TOPOLOGY)["mix_attribution"]["value"] == 1.0
    # the factor is the label's: a group whose factor is program_goodput is wrong for this label
    wrong = in_basis | {"top_factor": "program_goodput"}
    assert evaluate(frame(wrong), [mix], TOPOLOGY)["factor_accuracy"]["value"] == 0.0


def test_the_receiving_side_of_a_mix_shift_is_neither_a_match_nor_a_false_alarm():
    mix = label(kind="workload_mix_shift", grain="fleet", clusters=("a100", "h100"), attribution="mix")
    mix |= {"factor": "allocation", "cause": {"dimension": "sku", "value": "A100"}}
    sending = row("h100", metric="allocation", effect=-0.3)
    # levels unknown: grouping cannot weigh the two sides (incident_joins.mix_shift_sides), so they are two groups
    arriving = row("a100", metric="allocation", kind="improvement", effect=0.4, before_level=None, after_level=None)
    report = evaluate(frame(sending, arriving), [mix], TOPOLOGY)
    assert report["overall"]["precision"]["value"] == 1.0 and report["false_alarms"]["count"] == 0
    assert [g["receiving_side_of"] for g in report["receiving_groups"]] == ["inc"]
    # with its levels (0.40 -> 0.56 of 4 GPUs against 0.40 -> 0.28 of 4): one incident, both sides, one match
    balanced = evaluate(
        frame(sending, row("a100", metric="allocation", kind="improvement", effect=0.4)), [mix], TOPOLOGY
    )
    assert balanced["groups"] == 1 and balanced["receiving_groups"] == [] and balanced["false_alarms"]["count"] == 0
    assert balanced["matches"][0]["incident_id"] == "inc" and balanced["matches"][0]["rows"] == 2
    # a fleet row that joined the arriving group (the largest effect in its direction and factor) does not change that
    fleet = row("fleet", grain="fleet", metric="allocation", day=12, kind="improvement", effect=0.05)
    report = evaluate(frame(sending, arriving, fleet | {"top_factor": "allocation"}), [mix], TOPOLOGY)
    assert report["false_alarms"]["count"] == 0 and len(report["receiving_groups"]) == 1
    # a fleet row of another factor is not the work arriving: a group of its own, here a false alarm
    other_factor = fleet | {"metric": "program_goodput", "regression_id": "fleet program goodput"}
    report = evaluate(frame(sending, arriving, other_factor), [mix], TOPOLOGY)
    assert report["false_alarms"]["count"] == 1 and len(report["receiving_groups"]) == 1
    # the same direction as the label, another cluster than the receiving one, or days later: a false alarm
    for other in (
        row("a100", metric="allocation", day=17, kind="improvement", effect=0.4),
        row("a100-n1", grain="node", metric="allocation", kind="regression", effect=-0.3) | {"job_peer_nodes": None},
    ):
        report = evaluate(frame(sending, other), [mix], TOPOLOGY)
        assert report["receiving_groups"] == [] and report["false_alarms"]["count"] == 1, other
    rate = label(clusters=("a100", "h100"), grain="cluster")  # a rate label has no receiving side
    assert evaluate(frame(row("h100", metric="program_goodput"), arriving), [rate], TOPOLOGY)["receiving_groups"] == []


def test_the_receiving_sides_end_is_neither_a_match_nor_a_false_alarm():
    """fleet-1k: a100-west took h100-west's work from 10-20 to 10-26; its allocation fell back on 10-26/27 (a
    regression, the label's own direction, on the receiving cluster): the shift's end, scored like a recovery."""
    mix = label(kind="workload_mix_shift", grain="fleet", clusters=("a100", "h100"), attribution="mix", end_day=16)
    mix |= {"factor": "allocation", "cause": {"dimension": "sku", "value": "A100"}}
    sending = row("h100", metric="allocation", effect=-0.3)
    back = row("a100", metric="allocation", day=17, effect=-0.3, before_level=None, after_level=None)
    report = evaluate(frame(sending, back), [mix], TOPOLOGY)
    assert report["false_alarms"]["count"] == 0 and [g["receiving_side_of"] for g in report["receiving_groups"]] == [
        "inc"
    ]
    # days after the end, another cluster (the sending one falling again), or no end: a false alarm
    for other, shift in (
        (back | {"change_date": START + timedelta(days=19)}, mix),
        (back | {"entity_id": "h100", "regression_id": "other"}, mix),
        (back, mix | {"end": None}),
    ):
        report = evaluate(frame(sending, other), [shift], TOPOLOGY)
        assert report["receiving_groups"] == [] and report["false_alarms"]["count"] == 1, other


# --------------------------------------------------------------------------- cause ranking


def node_software(changes: dict[str, dict[str, str]], day: int = 10) -> pd.DataFrame:
    """Every node on the same stack from START; `changes` node -> {component: new value} on `day`."""
    base = {
        "driver": "550",
        "cuda": "12.4",
        "nccl": "2.21.5",
        "torch": "2.5.1",
        "image": "img:1",
        "firmware": "fw1",
        "power_limit_w": 700.0,
    }
    rows = []
    for node in TOPOLOGY.nodes:
        rows.append({"node": node, "valid_from_at": datetime(2026, 10, 1, tzinfo=timezone.utc)} | base)
        if node in changes:
            at = datetime.combine(START + timedelta(days=day), datetime.min.time(), tzinfo=timezone.utc)
            rows.append({"node": node, "valid_from_at": at + timedelta(hours=6)} | base | changes[node])
    return pd.DataFrame(rows)


def node_tree(slow: dict[str, float], day: int = 10, days: int = 20, metric: str = "program_goodput") -> pd.DataFrame:
    """Node-grain metric tree rows: node value 0.4 (× noise), × factor from `day` for the nodes in `slow`."""
    rng = np.random.default_rng(3)
    rows = []
    for node in TOPOLOGY.nodes:
        for d in range(days):
            value = 0.4 * (1 + rng.normal(0, 0.004)) * (slow.get(node, 1.0) if d >= day else 1.0)
            rows.append(
                {
                    "grain": "node",
                    "entity_id": node,
                    "metric_date": START + timedelta(days=d),
                    "node_id": metric,
                    "numerator": value * 1e6,
                    "denominator": 1e6,
                }
            )
    return pd.DataFrame(rows)


def test_a_change_with_an_nccl_rollout_on_the_affected_nodes_only_ranks_nccl_first():
    software = node_software(
        {
            "h100-n1": {"nccl": "2.22.3"},
            "h100-n2": {"nccl": "2.22.3"},
            "h100-n3": {"firmware": "fw2"},  # a change on an unaffected node of the same cluster
        }
    )
    tree = node_tree({"h100-n1": 0.85, "h100-n2": 0.85})
    regression = row("h100", metric="program_goodput", effect=-0.07)
    candidates = cause_candidates(regression, dimension_changes(software), TOPOLOGY, tree)
    assert [(c["dimension"], c["value"]) for c in candidates] == [("nccl", "2.22.3"), ("firmware", "fw2")]
    top = candidates[0]
    assert top["nodes"] == ["h100-n1", "h100-n2"] and top["did_units"] == "node"
    assert top["did_effect"] == pytest.approx(-0.15, abs=0.01)
    assert top["did_ci"][0] < top["did_effect"] < top["did_ci"][1] < 0
    # firmware's node did not slow down; its peers include the slowed nccl nodes, so its estimate is not negative
    assert candidates[1]["did_effect"] > -0.01

    ranked = rank_causes(frame(regression), dimension_changes(software), TOPOLOGY, tree)
    assert ranked.iloc[0]["top_cause_dimension"] == "nccl" and ranked.iloc[0]["top_cause_value"] == "2.22.3"


def test_dimensions_that_changed_together_tie_and_rank_the_most_specific_first():
    # a driver rollout reports its new CUDA version with it; an image ships a new NCCL: the estimate cannot
    # separate the pairs (same nodes, same days), so each says what it is tied with and the specific one leads
    software = node_software(
        {
            "h100-n1": {"driver": "560.35.03", "cuda": "12.6"},
            "h100-n2": {"driver": "560.35.03", "cuda": "12.6"},
            "a100-n1": {"nccl": "2.22.3", "image": "trainer:2026.11.1"},
        }
    )
    tree = node_tree({"h100-n1": 0.85, "h100-n2": 0.85, "a100-n1": 0.85})
    drivers = cause_candidates(row("h100", metric="program_goodput"), dimension_changes(software), TOPOLOGY, tree)
    assert [(c["dimension"], c["value"]) for c in drivers] == [("driver", "560.35.03"), ("cuda", "12.6")]
    assert drivers[0]["did_effect"] == drivers[1]["did_effect"] < -0.1
    assert drivers[0]["tied_with"] == ["cuda=12.6"] and drivers[1]["tied_with"] == ["driver=560.35.03"]
    image = cause_candidates(row("a100", metric="program_goodput"), dimension_changes(software), TOPOLOGY, tree)
    assert [c["dimension"] for c in image] == ["nccl", "image"]  # by name, the image would lead
    assert image[0]["tied_with"] == ["image=trainer:2026.11.1"]


def test_a_cluster_change_one_node_carries_has_that_node_as_a_candidate():
    """`incidents` seeds 1 and 2: h200's HBM probe fell 3.4 %, all of it h200-n04's decay, on the day a firmware
    rollout reached every node of the cluster; the only candidate was the firmware."""
    everywhere = {node: {"firmware": "fw2"} for node in TOPOLOGY.nodes_of("cluster", "h100")}
    tree = node_tree({"h100-n2": 0.85}, metric="probe_hbm_bw_ratio")
    segments = [
        {"segment": "h100-n2", "rate_effect": -0.036, "mix_effect": 0.0},
        {"segment": "h100-n1", "rate_effect": -0.001, "mix_effect": 0.0},
    ]
    regression = row("h100", metric="probe_hbm_bw_ratio", effect=-0.037)
    regression |= {"segment_type": "node", "segments": json.dumps(segments)}
    candidates = cause_candidates(regression, dimension_changes(node_software(everywhere)), TOPOLOGY, tree)
    assert [(c["dimension"], c["value"]) for c in candidates] == [("node", "h100-n2"), ("firmware", "fw2")]
    assert candidates[0]["peer_units"] == 3 and candidates[0]["did_effect"] == pytest.approx(-0.15, abs=0.01)
    # spread over the nodes (no node carries half the change): no node candidate
    spread = [{"segment": f"h100-n{i}", "rate_effect": -0.009, "mix_effect": 0.0} for i in range(1, 5)]
    regression["segments"] = json.dumps(spread)
    candidates = cause_candidates(regression, dimension_changes(node_software(everywhere)), TOPOLOGY, tree)
    assert [c["dimension"] for c in candidates] == ["firmware"]


def test_a_fleet_wide_change_present_on_peers_too_is_not_a_candidate():
    everywhere = {node: {"driver": "560"} for node in TOPOLOGY.nodes}
    software = node_software(everywhere | {"h100-n1": {"driver": "560", "nccl": "2.22.3"}})
    tree = node_tree({"h100-n1": 0.85})
    candidates = cause_candidates(row("h100", metric="program_goodput"), dimension_changes(software), TOPOLOGY, tree)
    assert [c["dimension"] for c in candidates] == ["nccl"]
    # at the fleet grain too: every node changed the driver, so no node is left as the counterfactual
    fleet = cause_candidates(
        row("fleet", grain="fleet", metric="program_goodput"), dimension_changes(software), TOPOLOGY, tree
    )
    assert [c["dimension"] for c in fleet] == ["nccl"]


def test_without_node_series_the_estimate_compares_clusters_and_says_so():
    software = node_software({"h100-n1": {"nccl": "2.22.3"}, "h100-n2": {"nccl": "2.22.3"}})
    tree = node_tree({"h100-n1": 0.85, "h100-n2": 0.85})
    tree = tree.assign(grain="cluster", entity_id=tree["entity_id"].map(TOPOLOGY.node_cluster))
    (candidate,) = cause_candidates(row("h100", metric="program_goodput"), dimension_changes(software), TOPOLOGY, tree)
    assert candidate["did_units"] == "cluster" and candidate["peer_units"] == 1
    assert candidate["did_effect"] == pytest.approx(-0.075, abs=0.01)  # half the cluster slowed by 15 %
    empty = cause_candidates(row("h100", metric="a_companion"), dimension_changes(software), TOPOLOGY, tree)
    assert empty[0]["did_effect"] is None and "no a_companion series" in empty[0]["reason"]


# --------------------------------------------------------------------------- grouping and alerts


def test_a_cluster_change_and_its_nodes_changes_are_one_group_rooted_at_the_cluster():
    rows = frame(
        row("h100", day=10),
        row("h100", metric="program_goodput", day=10),
        row("h100-n1", grain="node", day=9, metric="tensor_active"),  # a companion metric
        row("h100-n2", grain="node", day=11),
        row("GPU-h100-1", grain="gpu", day=10, metric="sm_clock"),
        row("fleet", grain="fleet", day=10, effect=-0.04),
    )
    groups = group_regressions(rows, TOPOLOGY)
    assert groups["group_id"].nunique() == 1
    root = rows.loc[groups["is_root"]].iloc[0]
    assert (root["grain"], root["entity_id"], root["metric"]) == ("cluster", "h100", "goodput")
    assert len(groups.iloc[0]["children"]) == 5

    (incident,) = build_incidents(rows, TOPOLOGY)
    assert (incident["grain"], incident["entity_id"], incident["metric_group"]) == ("cluster", "h100", "goodput")
    assert set(incident["metrics"]) == {"goodput", "program_goodput"}
    assert {(c["grain"], c["entity_id"]) for c in incident["children"]} == {
        ("node", "h100-n1"),
        ("node", "h100-n2"),
        ("gpu", "GPU-h100-1"),
        ("fleet", "fleet"),
    }


def test_independent_changes_are_separate_groups():
    rows = frame(
        row("h100", day=10),
        row("a100", day=10),
        row("fleet", grain="fleet", day=10, effect=-0.03),
        row("h100-n1", grain="node", day=20),  # too late
        row("h100", day=11, kind="improvement", effect=0.05),  # other direction
        row("a100-n1", grain="node", day=10),  # nested in a100
    )
    groups = group_regressions(rows, TOPOLOGY)
    assert groups["group_id"].nunique() == 4
    same = groups["group_id"]
    assert same[1] == same[5] and same[0] != same[1]
    assert same[2] == same[0]  # the fleet joins the group with the largest effect (h100's -0.1, a tie broken by id)
    # the fleet alone heads its own group; with a mix flag the root moves to the most specific entity
    alone = group_regressions(frame(row("fleet", grain="fleet")), TOPOLOGY)
    assert bool(alone.iloc[0]["is_root"])
    mixed = frame(row("h100", day=10, attribution="mix"), row("h100-n1", grain="node", day=10))
    assert mixed.loc[group_regressions(mixed, TOPOLOGY)["is_root"], "entity_id"].tolist() == ["h100-n1"]


def test_cluster_only_rows_give_the_former_incidents():
    rows = frame(row("h100", day=10), row("h100", metric="program_goodput", day=9), row("a100", day=10))
    incidents = build_incidents(rows)  # no topology
    assert [(i["entity_id"], sorted(i["metrics"]), i["children"]) for i in incidents] == [
        ("a100", ["goodput"], []),
        ("h100", ["goodput", "program_goodput"], []),
    ]


def test_the_threshold_check_fails_below_the_scenarios_floor_and_skips_other_scenarios():
    from perf_assets.defs.evaluation.assets import DEFAULT_THRESHOLDS, threshold_check

    assert threshold_check({"scenario": "demo", "recall": 1.0, "precision": 1.0}, DEFAULT_THRESHOLDS).passed
    failed = threshold_check({"scenario": "demo", "recall": 0.5, "precision": None}, DEFAULT_THRESHOLDS)
    assert not failed.passed and "recall 0.5 < 0.75" in failed.metadata["failures"].value
    assert "precision None" in failed.metadata["failures"].value  # unknown is not a pass
    skipped = threshold_check({"scenario": "incidents", "recall": 0.1}, DEFAULT_THRESHOLDS)
    assert skipped.passed and skipped.metadata["checked"].value is False


def test_a_change_back_at_an_incidents_end_is_its_recovery_not_a_false_alarm():
    label = {
        "incident_id": "thermal",
        "kind": "thermal_throttle",
        "cluster": "h100",
        "scope": {"clusters": ["h100"]},
        "start": "2026-10-11T00:00:00Z",
        "end": "2026-10-16T00:00:00Z",
        "direction": "regression",
        "factor": "program_goodput",
        "decoy": False,
    }
    down = {
        "regression_id": "down",
        "grain": "cluster",
        "entity_id": "h100",
        "metric": "program_goodput",
        "change_kind": "regression",
        "change_date": "2026-10-11",
        "p_value": 0.001,
        "relative_effect": -0.1,
    }
    back = down | {"regression_id": "back", "change_kind": "improvement", "change_date": "2026-10-17"}
    late = down | {"regression_id": "late", "change_kind": "improvement", "change_date": "2026-10-20"}

    report = evaluate(pd.DataFrame([down, back]), [label])
    assert report["false_alarms"]["count"] == 0 and report["precision"] == 1.0
    assert [group["recovery_of"] for group in report["recovery_groups"]] == ["thermal"]

    report = evaluate(pd.DataFrame([down, late]), [label])  # 4 days after the end: not its recovery
    assert report["false_alarms"]["count"] == 1 and report["recovery_groups"] == []


def _unit_series_per_unit(metric_tree: pd.DataFrame, metric: str, dates: list) -> tuple:
    """The rule UnitSeries replaced: the tree filtered and grouped again for every change, unit by unit."""
    rows = metric_tree[metric_tree["node_id"] == metric]
    for grain in ("node", "cluster"):
        frame = rows[rows["grain"] == grain]
        if frame.empty:
            continue
        frame = frame.assign(metric_date=pd.to_datetime(frame["metric_date"]).dt.date)
        series = {}
        for unit, part in frame.groupby("entity_id"):
            by_day = part.groupby("metric_date")[["numerator", "denominator"]].sum().reindex(dates)
            series[str(unit)] = (by_day["numerator"].to_numpy(float), by_day["denominator"].to_numpy(float))
        return grain, series
    return None, {}


def test_unit_series_grouped_once_equal_the_per_change_grouping():
    """Units' days as the per-unit groupby gives them: a day with unknown values sums to 0, a day without rows (or
    outside the tree's days) is NaN, two rows of one day add up; node units first, else clusters."""
    from perf_assets.lib.causes import UnitSeries

    day = date(2026, 11, 1)
    rows = [
        ("node", "n1", "program_goodput", day, 1.0, 2.0),
        ("node", "n1", "program_goodput", day, 0.1, 0.3),  # a second row of the same day
        ("node", "n1", "program_goodput", day + timedelta(days=1), None, 2.0),  # unknown numerator
        ("node", "n2", "program_goodput", day + timedelta(days=2), 0.7, 1.0),
        ("cluster", "c1", "program_goodput", day, 5.0, 9.0),
        ("cluster", "c1", "availability", day, 0.9, 1.0),
        ("cluster", "c2", "availability", day + timedelta(days=1), 0.8, 1.0),
    ]
    tree = pd.DataFrame(rows, columns=["grain", "entity_id", "node_id", "metric_date", "numerator", "denominator"])
    units = UnitSeries(tree)
    for metric in ("program_goodput", "availability", "absent"):
        for dates in ([day - timedelta(days=1) + timedelta(days=i) for i in range(5)], [day + timedelta(days=1)]):
            grain, series = units.on(metric, dates)
            want_grain, want = _unit_series_per_unit(tree, metric, dates)
            assert grain == want_grain and series.keys() == want.keys()
            for unit, (numerator, denominator) in want.items():
                np.testing.assert_array_equal(series[unit][0], numerator)
                np.testing.assert_array_equal(series[unit][1], denominator)
    grain, series = units.on("program_goodput", [day, day + timedelta(days=1), day + timedelta(days=3)])
    assert grain == "node" and series["n1"][0].tolist()[:2] == [1.1, 0.0] and np.isnan(series["n1"][0][2])


def test_a_change_the_other_way_does_not_detect_a_label_it_is_the_recovery_of_another():
    """fleet-1k seed 1: h100-east-n12's throttle ended on 10-08 (thermal_ok back up, an improvement) a day after the
    cluster's fragmentation began (10-07, a regression); the recovery matched the fragmentation label, a detection
    that was none (and a wrong factor). The matching row must move the label's way."""
    throttle = label("throttle", kind="thermal_throttle", day=4, nodes=("h100-n2",), end_day=7)
    fragmentation = label("fragmentation", kind="scheduler_fragmentation", day=6, grain="cluster", end_day=8)
    down = row("h100-n2", grain="node", metric="thermal_ok", day=4, effect=-0.5)
    back = row("h100-n2", grain="node", metric="thermal_ok", day=7, kind="improvement", effect=1.0)
    report = evaluate(frame(down, back), [throttle, fragmentation], TOPOLOGY)
    assert [m["incident_id"] for m in report["matches"]] == ["throttle"]
    assert [m["incident_id"] for m in report["missed"]] == ["fragmentation"]
    assert [g["recovery_of"] for g in report["recovery_groups"]] == ["throttle"] and report["false_alarms"][
        "count"
    ] == 0


def test_at_the_same_distance_the_best_fitting_scope_wins_not_the_group_id():
    """fleet-1k seed 2: rack a100-west-r7's excess fault rate split a day after the cluster's checkpoint slowdown
    began and a day before the bad batch on r7's nodes did; the torch upgrade's day held a 30-row cluster group and a
    2-row node group. Ties went to the earlier label and the smaller group id."""
    ckpt = label("ckpt", kind="checkpoint_slowdown", day=9, grain="cluster", nodes=TOPOLOGY.nodes_of("cluster", "h100"))
    batch = label("batch", kind="bad_hardware_batch", day=11, nodes=("h100-n1", "h100-n2"))
    rack = row("h100-r1", grain="rack", metric="xid_node_faults", day=10)  # TOPOLOGY: r1 holds n1 and n2
    report = evaluate(frame(rack), [ckpt, batch], TOPOLOGY)
    assert [m["incident_id"] for m in report["matches"]] == ["batch"]
    upgrade = label("upgrade", grain="cluster", nodes=sorted(TOPOLOGY.nodes_of("cluster", "h100")))
    cluster = row("h100", metric="program_goodput") | {"regression_id": "zz-cluster"}
    node = row("h100-n3", grain="node", metric="goodput", top_factor="allocation") | {"regression_id": "aa-node"}
    for order in ((cluster, node), (node, cluster)):
        (match,) = evaluate(frame(*order), [upgrade], TOPOLOGY)["matches"]
        assert match["root"] == "cluster/h100/program_goodput"


def test_at_the_same_distance_the_label_of_the_groups_factor_wins_before_the_scope_fit():
    """fleet-1k seed 119: the cluster's availability group of the bad batch (four nodes) also held a node's fault rate
    of 10-21, the cluster-wide driver rollout's day; both labels at distance 0, the rollout's scope fit the cluster
    group best, so the rollout took it (factor wrong), the batch was missed and the rollout's own 48-row program
    goodput group counted as a false alarm."""
    rollout = label("rollout", day=10, grain="cluster", nodes=tuple(sorted(TOPOLOGY.nodes_of("cluster", "h100"))))
    batch = label("batch", kind="bad_hardware_batch", day=10, nodes=("h100-n1", "h100-n2"), factor="availability")
    availability = row("h100", metric="availability", day=10, top_factor="availability")
    pace = row("h100", metric="program_goodput", day=11, regression_id="pace")
    report = evaluate(frame(availability, pace), [rollout, batch], TOPOLOGY)
    assert {m["incident_id"]: m["root"] for m in report["matches"]} == {
        "batch": "cluster/h100/availability",
        "rollout": "cluster/h100/program_goodput",
    }
    assert report["factor_accuracy"]["value"] == 1.0 and report["false_alarms"]["count"] == 0


def test_at_the_same_delay_and_fit_the_group_whose_root_fits_the_label_matches():
    """fleet-1k seed 110: a100-west-n05's thermal throttle of 10-26 headed a group with the cluster's power draw in it,
    and the cluster's allocation fell that day as the mix shift ended, a group of one row. Both groups touch every
    node of the cluster, so their fit tied and the group ids decided: the allocation group took the throttle's label
    (factor and cause wrong) and the throttle's own group was left over."""
    throttle = label("thermal", kind="thermal_throttle", nodes=("h100-n1",), grain="gpu")
    throttle |= {"cause": {"dimension": "node", "value": "h100-n1"}}
    for suffix in ("a", "b", "c", "d"):  # whatever the ids, and so the group ids, are
        node = row("h100-n1", grain="node", metric="program_goodput", regression_id=f"node {suffix}")
        thermal = row("h100-n1", grain="node", metric="thermal_ok", effect=-0.11, regression_id=f"thermal {suffix}")
        power = row("h100", metric="power_ratio", effect=-0.03, regression_id=f"power {suffix}")
        allocation = row("h100", metric="allocation", top_factor="allocation", regression_id=f"allocation {suffix}")
        report = evaluate(frame(allocation, node, thermal, power), [throttle], TOPOLOGY)
        assert [m["root"] for m in report["matches"]] == ["node/h100-n1/program_goodput"]
        assert report["factor_accuracy"]["value"] == 1.0
