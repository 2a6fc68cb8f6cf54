"""Issue 6: the companions (XID, interruptions and MTTI, energy, DCGM profiling, H100-equivalent goodput),
expected runtime goodput (Young/Daly) and the job-lens mix/rate segments, on the demo warehouse."""

from __future__ import annotations

import math

import pytest

A100_OVER_H100 = 312e12 / 989.4e12  # dense BF16 peaks of the seed gpu_sku_specs


def _tree(demo_snapshot, node_ids: tuple[str, ...], where: str = "true"):
    names = ", ".join(f"'{name}'" for name in node_ids)
    return demo_snapshot(
        "select grain, entity_id, cast(metric_date as varchar) as day, node_id, numerator, denominator, value, coverage "
        f"from metric_tree_daily where node_id in ({names}) and {where}"
    )


def _one(frame, **match):
    rows = frame
    for column, value in match.items():
        rows = rows[rows[column] == value]
    assert len(rows) == 1, (match, len(rows))
    return rows.iloc[0]


def test_the_forced_xid_fault_counts_on_its_node_day_and_dcgm_xid_stays_unknown(demo_snapshot):
    tree = _tree(demo_snapshot, ("xid_node_faults", "xid_count"))
    faults = tree[tree["node_id"] == "xid_node_faults"]
    # beta-n04 went down with 'xid 79' on 2026-11-05 (the forced fault), alpha-n03 with 'xid 94' on 11-01
    beta = _one(faults, grain="node", entity_id="beta-n04", day="2026-11-05")
    assert beta["numerator"] == 1 and beta["denominator"] == pytest.approx(1.0)
    assert _one(faults, grain="cluster", entity_id="beta", day="2026-11-05")["numerator"] == 1
    assert _one(faults, grain="node", entity_id="alpha-n03", day="2026-11-01")["numerator"] == 1
    assert faults[faults["grain"] == "node"]["numerator"].sum() == 2
    assert faults[faults["grain"] == "fleet"]["numerator"].sum() == 2
    # the demo's DCGM exports have no XID_ERRORS field: xid_count is unknown (NULL, coverage 0), never 0
    xid = tree[tree["node_id"] == "xid_count"]
    assert set(xid["grain"]) == {"gpu", "node", "cluster", "fleet"}
    assert xid["numerator"].isna().all() and (xid["coverage"] == 0).all()


def test_interruptions_charge_the_fault_to_its_node_and_mtti_is_null_without_one(demo_snapshot):
    charged = demo_snapshot("select * from intermediate.int_job_interruptions order by interrupted_at")
    assert list(charged["job_id"]) == ["alpha-000002", "beta-000011"]
    beta = charged[charged["job_id"] == "beta-000011"].iloc[0]
    assert (beta["node"], beta["cause_reason"], beta["interruption_share"]) == ("beta-n04", "xid 79", 1.0)
    assert bool(beta["is_cause_identified"]) and beta["state"] == "NODE_FAIL"

    tree = _tree(demo_snapshot, ("interruptions", "mtti_h"))
    interruptions = tree[tree["node_id"] == "interruptions"]
    mtti = tree[tree["node_id"] == "mtti_h"]
    node_day = _one(interruptions, grain="node", entity_id="beta-n04", day="2026-11-05")
    cluster_day = _one(interruptions, grain="cluster", entity_id="beta", day="2026-11-05")
    assert node_day["numerator"] == 1 and cluster_day["numerator"] == 1
    # per allocated node-day: the cluster's allocated node-days are the sum of its nodes'
    beta_nodes = interruptions[
        (interruptions["grain"] == "node")
        & interruptions["entity_id"].str.startswith("beta-")
        & (interruptions["day"] == "2026-11-05")
    ]
    assert beta_nodes["denominator"].sum() == pytest.approx(cluster_day["denominator"], rel=1e-9)
    # MTTI = allocated node-hours / interruptions: finite on the fault's day, NULL (not 0, not infinite) without one
    fault_mtti = _one(mtti, grain="cluster", entity_id="beta", day="2026-11-05")
    assert math.isfinite(fault_mtti["value"]) and fault_mtti["value"] == pytest.approx(
        cluster_day["denominator"] * 24, rel=1e-9
    )
    quiet = mtti[(mtti["grain"] == "cluster") & (mtti["entity_id"] == "beta") & (mtti["day"] != "2026-11-05")]
    assert len(quiet) == 13 and quiet["value"].isna().all() and (quiet["numerator"] > 0).all()
    assert interruptions[interruptions["grain"] == "fleet"]["numerator"].sum() == 2


def test_h100_equivalent_goodput_is_the_a100_goodput_times_312_over_989(demo_snapshot):
    tree = _tree(demo_snapshot, ("goodput", "goodput_ref"), "grain in ('cluster', 'node', 'fleet')")
    wide = tree.pivot_table(index=["grain", "entity_id", "day"], columns="node_id", values="value").reset_index()
    beta = wide[(wide["grain"] == "cluster") & (wide["entity_id"] == "beta")]
    alpha = wide[(wide["grain"] == "cluster") & (wide["entity_id"] == "alpha")]
    assert len(beta) == 14 and len(alpha) == 14
    assert list(beta["goodput_ref"]) == pytest.approx(list(beta["goodput"] * A100_OVER_H100), rel=1e-9)
    assert list(alpha["goodput_ref"]) == pytest.approx(list(alpha["goodput"]), rel=1e-9)  # H100 is the reference
    beta_nodes = wide[(wide["grain"] == "node") & wide["entity_id"].str.startswith("beta-")]
    assert list(beta_nodes["goodput_ref"]) == pytest.approx(list(beta_nodes["goodput"] * A100_OVER_H100), rel=1e-9)
    fleet = wide[wide["grain"] == "fleet"]
    assert (fleet["goodput_ref"] < fleet["goodput"]).all()  # a quarter of the fleet's GPUs are A100s


def test_expected_runtime_goodput_sees_the_fault_as_worse_than_the_history(demo_snapshot):
    tree = _tree(
        demo_snapshot,
        ("runtime_goodput", "expected_runtime_goodput", "runtime_goodput_vs_expected"),
        "grain in ('cluster', 'fleet', 'node')",
    )
    assert set(tree[tree["node_id"] == "expected_runtime_goodput"]["grain"]) == {"cluster", "fleet"}
    residual = tree[(tree["node_id"] == "runtime_goodput_vs_expected") & (tree["grain"] == "cluster")]
    expected = tree[(tree["node_id"] == "expected_runtime_goodput") & (tree["grain"] == "cluster")]
    # the first day has no failure history: unknown, not a guess
    assert expected[expected["day"] == "2026-11-01"]["value"].isna().all()
    assert expected["value"].dropna().between(0.9, 1.0).all()
    beta = residual[residual["entity_id"] == "beta"].set_index("day")["value"].dropna()
    # beta-n04's fault (no interruption in beta's history before it) is the worst day against expectation
    assert beta.idxmin() == "2026-11-05" and beta.min() < -0.01
    assert (beta.drop("2026-11-05").abs() < 0.01).all()
    # the residual is R - expected R of the same job-days, and R of those job-days is the job lens's R there
    checks = demo_snapshot(
        "select e.runtime_goodput, e.expected_runtime_goodput, t.value, j.runtime_goodput as job_lens_r "
        "from intermediate.int_expected_runtime_goodput e "
        "join metric_tree_daily t on t.grain = e.grain and t.entity_id = e.entity_id and t.metric_date = e.metric_date "
        "  and t.node_id = 'runtime_goodput_vs_expected' "
        "join fct_job_lens_cluster_day j on j.cluster = e.entity_id and j.metric_date = e.metric_date "
        "where e.grain = 'cluster' and e.coverage_expected_runtime_goodput = 1"
    )
    assert len(checks) > 20
    assert list(checks["value"]) == pytest.approx(
        list(checks["runtime_goodput"] - checks["expected_runtime_goodput"]), abs=1e-12
    )
    assert list(checks["runtime_goodput"]) == pytest.approx(list(checks["job_lens_r"]), rel=1e-9)


def test_energy_per_useful_pflop_follows_the_skus_power_and_peak(demo_snapshot):
    pooled = demo_snapshot(
        "select entity_id, sum(numerator) / sum(denominator) as j_per_pflop, min(coverage) as coverage "
        "from metric_tree_daily where node_id = 'energy_per_useful_pflop' and grain = 'cluster' group by 1"
    ).set_index("entity_id")
    # physics: joules per useful PFLOP ≈ power / (peak × MFU): H100 ~700 W / (989 TFLOP/s × ~0.4) ≈ 1.8 kJ;
    # A100 400 W over 312 TFLOP/s does fewer FLOPs per joule
    assert 1000 < pooled.loc["alpha", "j_per_pflop"] < 3000
    assert pooled.loc["beta", "j_per_pflop"] > pooled.loc["alpha", "j_per_pflop"]
    assert (pooled["coverage"] > 0.5).all() and (pooled["coverage"] <= 1).all()
    gpu = demo_snapshot(
        "select count(*) as n from metric_tree_daily where node_id = 'energy_per_useful_pflop' and grain = 'gpu'"
    )
    assert gpu["n"][0] == 0  # no useful FLOPs per GPU: no gpu grain


def test_dcgm_profiling_companions_are_known_where_exported_and_null_where_not(demo_snapshot):
    tree = _tree(demo_snapshot, ("dcgm_sm_active", "dcgm_dram_active", "throttle_share"))
    sm = tree[tree["node_id"] == "dcgm_sm_active"]
    assert (sm["coverage"] == 1).all() and sm["value"].between(0, 1).all()
    fleet_sm = sm[sm["grain"] == "fleet"]["value"]
    assert fleet_sm.between(0.5, 0.9).all()
    # the demo exports neither DRAM_ACTIVE nor the violation counters: unknown (NULL, coverage 0), never 0
    for missing in ("dcgm_dram_active", "throttle_share"):
        rows = tree[tree["node_id"] == missing]
        assert len(rows) == len(sm) and rows["numerator"].isna().all() and (rows["coverage"] == 0).all()


@pytest.mark.parametrize("segment_type", ["job_size_class", "workload"])
def test_job_lens_mix_and_rate_close_per_segment_type(demo_snapshot, segment_type):
    frame = demo_snapshot(f"select * from fct_attribution_mix_rate where segment_type = '{segment_type}'")
    assert set(frame["metric"]) == {"running_goodput"} and set(frame["mix_basis"]) == {"allocated"}
    expected_segments = {"job_size_class": {"1-8", "9-64"}, "workload": {"pretrain", "finetune"}}[segment_type]
    assert set(frame["segment_id"]) == expected_segments
    dg = frame["fleet_dg"].iloc[0]
    assert frame["mix_contribution"].sum() + frame["rate_contribution"].sum() == pytest.approx(dg, rel=1e-9)
    assert frame["w0"].sum() == pytest.approx(1.0) and frame["w1"].sum() == pytest.approx(1.0)
    # every demo job has FLOPs metadata: the job lens's fleet running goodput is the capacity lens's
    cluster = demo_snapshot(
        "select fleet_g0, fleet_g1 from fct_attribution_mix_rate "
        "where segment_type = 'cluster' and metric = 'running_goodput' limit 1"
    )
    assert frame["fleet_g0"].iloc[0] == pytest.approx(cluster["fleet_g0"][0], rel=1e-9)
    assert frame["fleet_g1"].iloc[0] == pytest.approx(cluster["fleet_g1"][0], rel=1e-9)


def test_h100_equivalent_running_goodput_turns_the_shift_to_a100_into_mix(demo_snapshot):
    frame = demo_snapshot(
        "select segment_id, metric, w0, w1, g0, g1, fleet_mix, fleet_rate, fleet_dg from fct_attribution_mix_rate "
        "where segment_type = 'sku' and metric in ('running_goodput', 'running_goodput_ref')"
    )
    own = frame[frame["metric"] == "running_goodput"].set_index("segment_id")
    ref = frame[frame["metric"] == "running_goodput_ref"].set_index("segment_id")
    assert ref.loc["A100-SXM4-80GB", "g0"] == pytest.approx(own.loc["A100-SXM4-80GB", "g0"] * A100_OVER_H100, rel=1e-9)
    assert ref.loc["H100-SXM", "g1"] == pytest.approx(own.loc["H100-SXM", "g1"], rel=1e-9)
    # allocation moved towards beta's A100s in p1: own-peak mix is positive, H100-equivalent mix negative (§6)
    assert ref.loc["A100-SXM4-80GB", "w1"] > ref.loc["A100-SXM4-80GB", "w0"]
    assert own["fleet_mix"].iloc[0] > 0 > ref["fleet_mix"].iloc[0]
    assert ref["fleet_mix"].iloc[0] + ref["fleet_rate"].iloc[0] == pytest.approx(ref["fleet_dg"].iloc[0], rel=1e-9)


def test_nccl_busbw_ratio_is_the_run_busbw_over_the_link_limit_on_the_nodes_it_covered(demo_snapshot):
    runs = demo_snapshot(
        "select hosts, cast(run_date as varchar) as day, busbw_gbps, limit_busbw_gbps, busbw_ratio "
        "from fct_nccl_test_runs where status = 'ok'"
    )
    (run,) = runs.itertuples()  # the demo's one run: beta-n03 after its maintenance, all_reduce on 8 GPUs
    assert list(run.hosts) == ["beta-n03"] and run.limit_busbw_gbps == 300  # NVLink 3 per direction
    tree = _tree(demo_snapshot, ("probe_nccl_busbw_ratio",))
    assert set(tree["grain"]) == {"node", "cluster", "fleet"}  # no gpu grain: a run is per host
    for grain, entity in (("node", "beta-n03"), ("cluster", "beta"), ("fleet", "fleet")):
        row = _one(tree, grain=grain, entity_id=entity, day=run.day)
        assert row["numerator"] == pytest.approx(run.busbw_gbps)
        assert row["value"] == pytest.approx(run.busbw_ratio) and 0.5 < row["value"] < 1.0
    assert _one(tree, grain="node", entity_id="beta-n03", day=run.day)["coverage"] == pytest.approx(1.0)
    assert _one(tree, grain="cluster", entity_id="beta", day=run.day)["coverage"] == pytest.approx(0.25)  # 1 of 4
    others = tree[(tree["day"] != run.day) | (tree["entity_id"].isin(["alpha", "alpha-n01", "beta-n01"]))]
    assert others["numerator"].isna().all() and (others["coverage"] == 0).all()  # unknown, never 0
