"""Issue 7: the node grain of the metric tree, the companion series per GPU and node, and detection on them."""

from __future__ import annotations

import json

import pytest

SPINE = ("availability", "allocation", "runtime_goodput", "program_goodput")


def test_node_grain_has_the_capacity_lens_and_its_identities(demo_snapshot):
    tree = demo_snapshot(
        "select entity_id, metric_date, node_id, numerator, denominator, value, coverage "
        "from metric_tree_daily where grain = 'node' and lens = 'capacity' and kind <> 'companion'"
    )
    nodes = set(
        demo_snapshot("select node_id from metric_tree_nodes where lens = 'capacity' and kind <> 'companion'")[
            "node_id"
        ]
    )
    assert set(tree["node_id"]) == nodes
    assert tree["entity_id"].nunique() == 8  # 4 alpha + 4 beta nodes
    wide = tree.pivot_table(index=["entity_id", "metric_date"], columns="node_id", values="value")
    known = wide.dropna(subset=["goodput", *SPINE])
    assert len(known) > 100
    product = known[list(SPINE)].prod(axis=1)
    assert list(product) == pytest.approx(list(known["goodput"]), rel=1e-9)
    # leaf closure: runtime_goodput + badput_share = 1
    closure = wide.dropna(subset=["runtime_goodput", "badput_share"])
    assert list(closure["runtime_goodput"] + closure["badput_share"]) == pytest.approx([1.0] * len(closure), rel=1e-9)


def test_node_days_roll_up_to_cluster_days_sigma_over_sigma(demo_snapshot):
    rolled = demo_snapshot(
        "select c.entity_id as cluster, c.metric_date, c.node_id, c.numerator, c.denominator, c.value, "
        "sum(n.numerator) as node_numerator, sum(n.denominator) as node_denominator, avg(n.value) as mean_of_ratios "
        "from metric_tree_daily c "
        "join (select distinct node, cluster from fct_node_day) i on i.cluster = c.entity_id "
        "join metric_tree_daily n on n.grain = 'node' and n.entity_id = i.node "
        "  and n.metric_date = c.metric_date and n.node_id = c.node_id "
        "where c.grain = 'cluster' and c.node_id in ('goodput', 'availability', 'allocation', 'runtime_goodput', "
        "'program_goodput') group by all"
    )
    assert len(rolled) == 2 * 14 * 5
    assert list(rolled["node_numerator"]) == pytest.approx(list(rolled["numerator"]), rel=1e-9)
    assert list(rolled["node_denominator"]) == pytest.approx(list(rolled["denominator"]), rel=1e-9)
    # the cluster value is Σ/Σ of its nodes, not the mean of their ratios
    assert any(abs(a - b) > 1e-4 for a, b in zip(rolled["value"], rolled["mean_of_ratios"]) if a == a and b == b)


def test_companions_per_gpu_roll_up_and_unknown_is_null(demo_snapshot):
    gpu = demo_snapshot(
        "select entity_id, metric_date, node_id, numerator, denominator, coverage, kind "
        "from metric_tree_daily where grain = 'gpu'"
    )
    assert set(gpu["kind"]) == {"companion"}
    assert gpu["entity_id"].nunique() == 64
    power = gpu[gpu["node_id"] == "power_ratio"]
    # a GPU-day with no busy sample has no power_ratio: unknown (NULL, coverage 0), never 0
    assert (power["numerator"].notna() == (power["coverage"] == 1)).all()
    assert (power["coverage"] == 1).mean() > 0.8
    values = (power["numerator"] / power["denominator"]).dropna()
    assert values.between(0.05, 1.0).all()
    # the demo exports no SM clock and no thermal counter: unknown (NULL, coverage 0), never 0
    for missing in ("clock_ratio", "thermal_ok", "probe_hbm_bw_ratio"):
        rows = gpu[gpu["node_id"] == missing]
        assert len(rows) == len(power) and rows["numerator"].isna().all() and (rows["coverage"] == 0).all()
    gemm = gpu[gpu["node_id"] == "probe_gemm_ratio"].dropna(subset=["numerator"])
    assert len(gemm) > 0 and (gemm["numerator"] / gemm["denominator"]).between(0.3, 1.0).all()
    node = demo_snapshot(
        "select n.entity_id, n.metric_date, n.numerator, n.denominator, sum(g.numerator) as gn, sum(g.denominator) as gd "
        "from metric_tree_daily n "
        "join (select distinct gpu_uuid, node from intermediate.int_companion_gpu_days) i on i.node = n.entity_id "
        "join metric_tree_daily g on g.grain = 'gpu' and g.entity_id = i.gpu_uuid and g.metric_date = n.metric_date "
        "  and g.node_id = n.node_id "
        "where n.grain = 'node' and n.node_id = 'power_ratio' group by all"
    )
    assert list(node["gn"]) == pytest.approx(list(node["numerator"]), rel=1e-9, nan_ok=True)
    assert list(node["gd"]) == pytest.approx(list(node["denominator"]), rel=1e-9, nan_ok=True)


def test_detection_runs_on_node_and_gpu_grains_and_keeps_the_cluster_result(demo_snapshot):
    found = demo_snapshot("select * from regressions")
    assert {"node"} <= set(found["grain"])
    cluster = found[(found["grain"] == "cluster") & (found["metric"] == "program_goodput")]
    assert list(cluster["entity_id"]) == ["alpha"]
    # the NCCL rollout slowed every alpha node: node-grain program_goodput regressions on alpha's nodes
    nodes = found[(found["grain"] == "node") & (found["metric"] == "program_goodput")]
    nodes = nodes[nodes["change_kind"] == "regression"]
    assert set(nodes["entity_id"]) <= {f"alpha-n0{i}" for i in range(1, 5)} and len(nodes) >= 2
    assert all(str(day) in ("2026-11-07", "2026-11-08", "2026-11-09") for day in nodes["change_date"])
    row = nodes.iloc[0]
    assert row["relative_effect"] < -0.05
    assert json.loads(row["coinciding_changes"])[0]["component"] in ("nccl", "image")


def test_h100_equivalent_goodput_values_older_skus_at_the_h100_peak(demo_snapshot):
    frame = demo_snapshot(
        """
        select cluster, skus, sum(useful_flop) as useful, sum(installed_pfs) as installed_pfs,
               sum(installed_gs) as installed_gs, sum(installed_h100_pfs) as installed_h100_pfs,
               sum(useful_flop) / sum(installed_pfs) as goodput,
               sum(useful_flop) / sum(installed_h100_pfs) as goodput_h100_equivalent
        from fct_cluster_day group by all order by cluster
        """
    )
    rows = {row["cluster"]: row for row in frame.to_dict("records")}
    for row in rows.values():  # goodput_ref = capability_ratio x G, capability_ratio = installed_pfs / (gs x H100 peak)
        capability = row["installed_pfs"] / (row["installed_gs"] * 989.4e12)
        assert row["goodput_h100_equivalent"] == pytest.approx(capability * row["goodput"], rel=1e-9)
    assert rows["alpha"]["goodput_h100_equivalent"] == pytest.approx(rows["alpha"]["goodput"], rel=1e-9)  # H100
    a100 = rows["beta"]  # A100: 312 / 989.4 of the H100 peak
    assert a100["goodput_h100_equivalent"] == pytest.approx(a100["goodput"] * 312e12 / 989.4e12, rel=1e-9)
    daily = demo_snapshot("select count(*) as n from fct_cluster_day where goodput_h100_equivalent is null")
    assert daily["n"][0] == 0
