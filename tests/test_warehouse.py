"""The demo fleet through every layer: the metric tree's identities, detection, alerts (a build after a kill, with a
redelivered file: tests/test_faults_build.py)."""

from __future__ import annotations

import json
import math

import duckdb
import pytest

pytestmark = pytest.mark.slow

FACTORS = ("availability", "allocation", "runtime_goodput", "program_goodput")


@pytest.mark.parametrize("table", ["fct_cluster_day", "fct_fleet_day"])
def test_four_factors_multiply_to_goodput(demo_snapshot, table):
    rows = demo_snapshot(f"select * from {table}").to_dict("records")
    assert len(rows) >= 14
    for row in rows:
        product = math.prod(row[factor] for factor in FACTORS)
        assert product == pytest.approx(row["goodput"], rel=1e-9)
        # each factor is its own ratio of sums, and goodput is useful FLOPs over installed capacity
        assert row["goodput"] == pytest.approx(row["useful_flop"] / row["installed_pfs"], rel=1e-12)
        assert row["availability"] == pytest.approx(row["available_pfs"] / row["installed_pfs"], rel=1e-12)


def test_ledger_closes_and_every_state_is_non_negative(demo_snapshot):
    for row in demo_snapshot("select * from fct_cluster_day").to_dict("records"):
        parts = row["down_gs"] + row["idle_gs"] + row["badput_gs"] + row["productive_gs"]
        assert parts == pytest.approx(row["installed_gs"], rel=1e-9)
        assert row["installed_gs"] == pytest.approx(32 * 86400)  # 4 nodes x 8 GPUs, whole days
        for state in ("down_gs", "idle_gs", "badput_gs", "productive_gs", "wasted_progress_gs", "badput_other_gs"):
            assert row[state] >= -1e-6, (row["cluster"], row["metric_date"], state)


def test_fleet_is_the_sum_of_its_clusters_not_a_mean_of_ratios(demo_snapshot):
    fleet = demo_snapshot("select metric_date, goodput from fct_fleet_day order by 1")
    pooled = demo_snapshot(
        "select metric_date, sum(useful_flop) / sum(installed_pfs) as goodput, avg(goodput) as mean_of_ratios "
        "from fct_cluster_day group by 1 order by 1"
    )
    assert list(fleet["goodput"]) == pytest.approx(list(pooled["goodput"]), rel=1e-12)
    assert any(abs(a - b) > 1e-4 for a, b in zip(pooled["goodput"], pooled["mean_of_ratios"]))


def test_metric_tree_daily_is_generated_from_the_seed(demo_snapshot):
    nodes = set(demo_snapshot("select node_id from metric_tree_nodes")["node_id"])
    tree = demo_snapshot("select * from metric_tree_daily where grain = 'cluster' and entity_id = 'alpha'")
    assert set(tree["node_id"]) == nodes
    leaves = tree[tree["parent_node_id"] == "runtime_goodput"].merge(
        tree[tree["node_id"] == "runtime_goodput"], on="metric_date", suffixes=("_leaf", "_factor")
    )
    assert list(leaves["value_leaf"] + leaves["value_factor"]) == pytest.approx([1.0] * len(leaves), rel=1e-9)


def test_wasted_progress_after_a_node_fault_is_badput(demo_snapshot):
    wasted = demo_snapshot("select sum(wasted_progress_gs) as gs from fct_cluster_day")["gs"][0]
    assert wasted > 0


def test_the_injected_rollout_regression_is_found_with_its_evidence(demo_home, demo_snapshot):
    labels = json.loads(demo_home.labels_file.read_text())["incidents"]
    label = next(item for item in labels if item["factor"] == "program_goodput")
    found = demo_snapshot(
        f"select * from regressions where grain = 'cluster' and entity_id = '{label['cluster']}' "
        "and metric = 'program_goodput' and change_kind = 'regression'"
    )
    assert len(found) == 1
    row = found.iloc[0]
    assert str(row["change_date"]) == label["start"][:10]
    assert row["p_value"] <= 0.01
    assert row["ci_low"] < label["expected_relative_change"] < row["ci_high"] < 0
    assert row["relative_effect"] == pytest.approx(label["expected_relative_change"], abs=0.04)
    assert row["before_level"] == pytest.approx(row["before_numerator"] / row["before_denominator"], rel=1e-12)
    rollouts = json.loads(row["coinciding_changes"])
    assert any(
        r["component"] == "nccl" and r["to"] == label["cause"]["to"] and r["nodes"] == r["of_nodes"] for r in rollouts
    )
    assert row["top_factor"] == "program_goodput"
    assert row["did_relative_effect"] < row["relative_effect"] + 0.05  # peers did not drop alike


def test_evaluation_scores_the_labels(demo_home):
    score = json.loads((demo_home.reports_dir / "evaluation.json").read_text())
    assert score["labels"] >= 1
    assert score["recall"] == 1.0
    assert score["factor_correct"] == score["detected_labels"]
    assert score["rollout_correct"] == score["detected_labels"]


def test_published_snapshot_holds_tables_not_views(demo_home):
    connection = duckdb.connect(str(demo_home.published_db), read_only=True)
    try:
        views = connection.execute("select count(*) from duckdb_views() where not internal").fetchone()[0]
        tables = {row[0] for row in connection.execute("select table_name from duckdb_tables()").fetchall()}
    finally:
        connection.close()
    assert views == 0
    assert {"fct_cluster_day", "fct_fleet_day", "metric_tree_daily", "regressions", "ingest_manifest"} <= tables
