"""Rollout canaries (perf_assets/lib/rollout_canary.py): every configuration change to part of a cluster tested
against the cluster's untouched nodes, on literal node-day series."""

from __future__ import annotations

import json
from datetime import date, datetime, timedelta, timezone

import numpy as np
import pandas as pd
import pytest

from perf_assets.lib.causes import dimension_changes
from perf_assets.lib.changepoint import DetectorConfig
from perf_assets.lib.detection import detect_regressions
from perf_assets.lib.evaluation import evaluate, overlaps
from perf_assets.lib.grouping import group_regressions
from perf_assets.lib.rollout_canary import (
    CANARY_COLUMNS,
    canary_calls,
    canary_markdown,
    canary_tests,
    cluster_rollouts,
    cohort_entity,
)
from perf_assets.lib.topology import Topology

START = date(2026, 10, 1)
DAYS = 28
CHANGE_DAY = 12  # the cohort's first day on the new image
NODES = [f"h200-east-n{index:02d}" for index in range(1, 25)]
COHORT = NODES[:4]
CLUSTER_NODES = {"h200-east": NODES}
CONFIG = DetectorConfig(n_permutations=999)


def at(day: int, hour: int = 0) -> datetime:
    return datetime.combine(START + timedelta(days=day), datetime.min.time(), tzinfo=timezone.utc) + timedelta(
        hours=hour
    )


def node_software(changes: dict[str, list[tuple[int, dict]]]) -> pd.DataFrame:
    """node_software versions: every node starts on the base stack; ``changes``: node -> [(day, {dimension: value})]."""
    base = {
        "driver": "550.54.15",
        "cuda": "12.4",
        "nccl": "2.21.5",
        "torch": "2.5.1",
        "image": "trainer:2026.10.1",
        "firmware": "96.00.89.00.01",
        "power_limit_w": 700.0,
    }
    rows = []
    for node in NODES:
        current = dict(base)
        rows.append({"node": node, "valid_from_at": at(0)} | current)
        for day, change in changes.get(node, []):
            current = current | change
            rows.append({"node": node, "valid_from_at": at(day)} | current)
    return pd.DataFrame(rows)


def node_tree(cohort_step: float, common_step: float = 0.0, noise: float = 0.03, seed: int = 7) -> pd.DataFrame:
    """Node-day program goodput (and the other spine factors, flat) of 24 nodes: each node's daily level has
    ``noise`` of its own; from CHANGE_DAY the cohort's is ``cohort_step`` lower and every node's ``common_step``."""
    rng = np.random.default_rng(seed)
    rows = []
    for node in NODES:
        for day in range(DAYS):
            program = 0.4 * (1 + rng.normal(0, noise))
            if day >= CHANGE_DAY:
                program *= 1 + common_step
                if node in COHORT:
                    program *= 1 + cohort_step
            productive = 86400 * 8 * 0.9
            for metric, (numerator, denominator) in {
                "availability": (0.99, 1.0),
                "runtime_goodput": (0.97, 1.0),
                "program_goodput": (productive * program, productive),
            }.items():
                rows.append(
                    {
                        "grain": "node",
                        "entity_id": node,
                        "metric_date": START + timedelta(days=day),
                        "node_id": metric,
                        "numerator": numerator,
                        "denominator": denominator,
                        "direction": 1,
                    }
                )
    return pd.DataFrame(rows)


IMAGE = {"image": "trainer:2026.11.0"}


def run(tree: pd.DataFrame, software: pd.DataFrame) -> list[dict]:
    changes = dimension_changes(software)
    node_cluster = {node: "h200-east" for node in NODES}
    rollouts = cluster_rollouts(changes, node_cluster)
    series = {}
    for metric, rows in tree.groupby("node_id"):
        grid = rows.pivot(index="entity_id", columns="metric_date", values=["numerator", "denominator"])
        series[metric] = {
            node: (grid.loc[node, "numerator"].to_numpy(float), grid.loc[node, "denominator"].to_numpy(float))
            for node in grid.index
        }
    dates = [START + timedelta(days=day) for day in range(DAYS)]
    results = canary_tests(rollouts, dates, series, CLUSTER_NODES, changes, seed=0, node_software=software)
    return canary_calls(results, {}, 0.01, 0.05, lambda metric: 0.02)


def program(results: list[dict], changes: str = "image") -> dict:
    (found,) = [r for r in results if r["metric"] == "program_goodput" and r["changes"].startswith(changes)]
    return found


def test_four_nodes_slower_than_their_untouched_peers_are_a_regression_of_the_rollout():
    software = node_software({node: [(CHANGE_DAY, IMAGE)] for node in COHORT})
    result = program(run(node_tree(cohort_step=-0.04), software))
    assert result["verdict"] == "regression"
    assert result["changes"] == "image trainer:2026.10.1 -> trainer:2026.11.0"
    assert (result["n_nodes"], result["n_peers"]) == (4, 20)
    assert result["ci_low"] < result["did_effect"] < result["ci_high"] < 0
    assert result["did_effect"] == pytest.approx(-0.04, abs=0.012)
    assert result["p_value"] <= 0.01 and result["q_value"] <= 0.05
    assert result["did_effect"] == pytest.approx((1 + result["cohort_change"]) / (1 + result["peer_change"]) - 1)
    assert result["cohort_before_level"] == pytest.approx(
        result["cohort_before_numerator"] / result["cohort_before_denominator"]
    )
    # each node alone: a 4 % step under 3 % daily noise, which a per-node scan with a 3 % minimum could not call
    assert result["before_start_date"] == START + timedelta(days=CHANGE_DAY - 7)
    assert result["after_start_date"] == START + timedelta(days=CHANGE_DAY)


def test_a_rollout_that_did_nothing_shows_no_effect_with_its_interval():
    software = node_software({node: [(CHANGE_DAY, IMAGE)] for node in COHORT})
    result = program(run(node_tree(cohort_step=0.0), software))
    assert result["verdict"] == "no effect shown"
    assert result["ci_low"] < 0 < result["ci_high"]
    assert result["p_value"] > 0.01
    assert "against the minimum 2%" in result["reason"]


def test_a_change_every_node_shared_is_not_the_rollouts():
    """The whole cluster slowed by 6 % on the rollout's day (another cause): the peers are the counterfactual."""
    software = node_software({node: [(CHANGE_DAY, IMAGE)] for node in COHORT})
    result = program(run(node_tree(cohort_step=0.0, common_step=-0.06), software))
    assert result["cohort_change"] < -0.04
    assert result["verdict"] == "no effect shown"


def test_the_whole_cluster_or_too_few_peers_is_not_testable_and_says_why():
    whole = program(run(node_tree(-0.04), node_software({node: [(CHANGE_DAY, IMAGE)] for node in NODES})))
    assert whole["verdict"] == "not testable" and "whole cluster" in whole["reason"]
    # 21 nodes took it, 3 are left
    most = program(run(node_tree(-0.04), node_software({node: [(CHANGE_DAY, IMAGE)] for node in NODES[:21]})))
    assert most["verdict"] == "not testable" and "3 untouched peers" in most["reason"]
    single = program(run(node_tree(-0.04), node_software({NODES[0]: [(CHANGE_DAY, IMAGE)]})))
    assert single["verdict"] == "not testable" and "single node" in single["reason"]


def test_a_node_that_took_another_change_in_the_windows_is_no_peer():
    changes = {node: [(CHANGE_DAY, IMAGE)] for node in COHORT}
    changes |= {node: [(CHANGE_DAY + 3, {"power_limit_w": 600.0})] for node in NODES[20:]}
    result = program(run(node_tree(-0.04), node_software(changes)))
    assert result["n_peers"] == 16


def test_peers_ran_the_cohorts_configuration_before_the_change():
    """Half the cluster took a driver on day 1; the image goes to four of those on day 12: the other driver nodes are
    the peers, not the nodes still on the old driver (another trend)."""
    driver = {"driver": "560.35.03", "cuda": "12.6"}
    changes = {node: [(1, driver)] + ([(CHANGE_DAY, IMAGE)] if node in COHORT else []) for node in NODES[:12]}
    result = program(run(node_tree(-0.04), node_software(changes)))
    assert result["n_peers"] == 8  # NODES[4:12]
    assert result["verdict"] == "regression"


def test_the_windows_stop_at_the_cohorts_next_change():
    changes = {node: [(CHANGE_DAY, IMAGE), (CHANGE_DAY + 4, {"nccl": "2.22.3"})] for node in COHORT}
    results = run(node_tree(-0.04), node_software(changes))
    assert program(results)["after_end_date"] == START + timedelta(days=CHANGE_DAY + 3)
    nccl = program(results, "nccl")
    assert nccl["before_start_date"] == START + timedelta(days=CHANGE_DAY)


def test_rollouts_are_per_cluster_value_and_wave_with_dimensions_that_moved_together_as_one():
    driver = {"driver": "560.35.03", "cuda": "12.6"}
    changes = {node: [(CHANGE_DAY, driver)] for node in NODES[:8]}
    changes |= {node: [(CHANGE_DAY, IMAGE)] for node in NODES[8:10]}
    changes |= {node: [(CHANGE_DAY + 10, IMAGE)] for node in NODES[10:12]}  # the same image, a second wave
    changes[NODES[20]] = [(CHANGE_DAY, driver | {"image": "x"})]  # not the same set of dimensions
    software = node_software(changes)
    software.loc[software["node"] == NODES[3], "valid_from_at"] = software.loc[
        software["node"] == NODES[3], "valid_from_at"
    ].where(software.loc[software["node"] == NODES[3], "valid_from_at"] == at(0), at(CHANGE_DAY, 20))
    rollouts = cluster_rollouts(dimension_changes(software), {node: "h200-east" for node in NODES})
    labels = [(rollout.label, len(rollout.nodes), rollout.first_at.date()) for rollout in rollouts]
    assert ("cuda 12.4 -> 12.6; driver 550.54.15 -> 560.35.03", 9, START + timedelta(days=CHANGE_DAY)) in labels
    assert ("image trainer:2026.10.1 -> trainer:2026.11.0", 2, START + timedelta(days=CHANGE_DAY)) in labels
    assert ("image trainer:2026.10.1 -> trainer:2026.11.0", 2, START + timedelta(days=CHANGE_DAY + 10)) in labels
    assert ("image trainer:2026.10.1 -> x", 1, START + timedelta(days=CHANGE_DAY)) in labels
    # n04 changed at 20:00, within a day of the others: one wave, whose after window starts the next whole day
    (wave,) = [rollout for rollout in rollouts if rollout.label.startswith("cuda")]
    assert wave.last_at == pd.Timestamp(at(CHANGE_DAY, 20))


def test_the_cohort_is_a_scope_of_its_nodes_for_grouping_and_evaluation():
    entity = cohort_entity(COHORT)
    topology = Topology.from_cluster_nodes(CLUSTER_NODES)
    assert topology.nodes_of("cohort", entity) == set(COHORT)
    assert topology.cluster_of("cohort", entity) == "h200-east"
    assert topology.contains(("cluster", "h200-east"), ("cohort", entity))
    assert topology.contains(("cohort", entity), ("node", COHORT[0]))
    assert not topology.contains(("cohort", entity), ("node", NODES[10]))
    label = {"cluster": "h200-east", "scope": {"clusters": ["h200-east"], "nodes": COHORT[2:]}}
    assert overlaps("cohort", entity, label, topology)
    assert not overlaps("cohort", entity, label | {"scope": {"nodes": NODES[10:12]}}, topology)
    with pytest.raises(ValueError, match="separator"):
        cohort_entity(["a+b", "c"])


def test_detection_reports_the_cohort_as_one_incident_with_the_rollout_as_its_cause():
    software = node_software({node: [(CHANGE_DAY, IMAGE)] for node in COHORT})
    tree = node_tree(cohort_step=-0.04)
    found = detect_regressions(tree, software, CLUSTER_NODES, CONFIG)
    canaries = found.attrs["canaries"]
    assert list(canaries.columns) == CANARY_COLUMNS
    assert set(canaries["verdict"]) <= {"regression", "no effect shown"}
    cohort = found[found["grain"] == "cohort"]
    assert len(cohort) == 1
    row = cohort.iloc[0]
    assert row["entity_id"] == cohort_entity(COHORT) and row["metric"] == "program_goodput"
    assert row["change_kind"] == "regression" and row["change_date"] == START + timedelta(days=CHANGE_DAY)
    assert row["test"].startswith("rollout canary: 4 nodes that took image")
    assert (row["top_cause_dimension"], row["top_cause_value"]) == ("image", "trainer:2026.11.0")
    assert json.loads(row["coinciding_changes"])[0]["nodes"] == 4
    # the cohort's nodes whose own scan found the step are the cohort's children: one incident, not one per node
    nodes = found[found["grain"] == "node"]
    assert set(nodes["entity_id"]) <= set(COHORT)
    groups = group_regressions(found, Topology.from_cluster_nodes(CLUSTER_NODES))
    assert groups.loc[cohort.index[0], "is_root"] and groups["group_id"].nunique() == 1
    label = {
        "incident_id": "stall",
        "kind": "image_dataloader_stall",
        "start": (START + timedelta(days=CHANGE_DAY)).isoformat(),
        "cluster": "h200-east",
        "scope": {"clusters": ["h200-east"], "nodes": COHORT},
        "factor": "program_goodput",
        "cause": {"dimension": "image", "value": "trainer:2026.11.0"},
        "direction": "regression",
    }
    report = evaluate(found, [label], Topology.from_cluster_nodes(CLUSTER_NODES))
    assert report["recall"] == 1.0 and report["precision"] == 1.0
    assert "| h200-east | image trainer:2026.10.1 -> trainer:2026.11.0 | 4 vs 20 | program_goodput |" in (
        canary_markdown(canaries)
    )
