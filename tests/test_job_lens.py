"""The job lens on the demo warehouse (docs/metric_tree.md, "Job lens"): G = S x R x P per job and
job-day, Google's badput leaves for the forced node fault, the NCCL rollout in P, Σ/Σ roll-ups and
the reconciliation with the capacity lens."""

from __future__ import annotations

import pytest

LEAVES = [
    "job_startup",
    "device_init",
    "training_prep",
    "ckpt_restore",
    "data_loading_sync",
    "program_startup",
    "ckpt_save",
    "custom_blocking",
    "wasted_progress",
    "fault_detection",
    "badput_other",
]
ROLLOUT_DAY = "2026-11-08"  # demo.yaml: the NCCL rollout on alpha at offset 168 h (day 7 of 2026-11-01)


@pytest.mark.parametrize("table", ["fct_job", "fct_job_day"])
def test_every_job_goodput_is_the_product_of_its_factors(demo_snapshot, table):
    rows = demo_snapshot(f"select * from {table} where job_goodput is not null and runtime_goodput is not null")
    assert len(rows) > 0
    product = rows["scheduling_goodput"] * rows["runtime_goodput"] * rows["program_goodput"]
    assert list(product) == pytest.approx(list(rows["job_goodput"]), rel=1e-9)
    assert list(rows["scheduling_goodput"] * rows["runtime_goodput"]) == pytest.approx(
        list(rows["time_goodput"]), rel=1e-9
    )
    assert list(rows["useful_flop"] / rows["eligible_pfs"]) == pytest.approx(list(rows["job_goodput"]), rel=1e-9)
    for factor in ("scheduling_goodput", "runtime_goodput", "program_goodput", "job_goodput"):
        assert rows[factor].between(0, 1).all(), factor


def test_the_job_ledger_closes(demo_snapshot):
    jobs = demo_snapshot("select * from fct_job")
    leaves = sum(jobs[f"{leaf}_gs"] for leaf in LEAVES)
    assert list(jobs["productive_gs"] + leaves) == pytest.approx(list(jobs["allocated_gs"]), rel=1e-9)
    queues = jobs["queue_initial_gs"] + jobs["queue_requeue_gs"]
    assert list(queues + jobs["allocated_gs"]) == pytest.approx(list(jobs["eligible_gs"]), rel=1e-9)
    assert (jobs["badput_other_gs"] >= -1e-6).all()


def test_the_requeued_job_after_the_forced_node_fault_shows_restart_badput(demo_snapshot):
    requeued = demo_snapshot("select * from fct_job where cluster = 'beta' and restarts > 0")
    assert len(requeued) == 1, "the demo forces one node fault on beta, on a node that runs a job"
    job = requeued.iloc[0]
    assert job["final_state"] == "COMPLETED"
    assert job["wasted_progress_gs"] > 0  # steps after the last checkpoint, redone by attempt 2
    assert job["fault_detection_gs"] > 0  # the hang from the last step start until NODE_FAIL
    assert job["ckpt_restore_gs"] > 0
    assert job["queue_requeue_gs"] > 0
    # the simulator's hang (fault -> NODE_FAIL) is 270..330 s, plus the last step that never ended
    hang_s = job["fault_detection_gs"] / job["gpus"]
    assert 270 <= hang_s <= 400
    healthy = demo_snapshot(
        "select sum(wasted_progress_gs + fault_detection_gs) as gs from fct_job where cluster = 'beta' and restarts = 0"
    )
    assert healthy["gs"][0] == 0


def test_alpha_jobs_after_the_nccl_rollout_have_lower_program_goodput(demo_snapshot):
    pooled = demo_snapshot(
        f"""
        select cluster, first_start_at >= '{ROLLOUT_DAY}' as after,
               sum(useful_flop) / sum(productive_pfs) as program_goodput
        from fct_job
        where first_start_at >= '{ROLLOUT_DAY}' or last_end_at <= '{ROLLOUT_DAY}'
        group by all
        """
    ).set_index(["cluster", "after"])["program_goodput"]
    alpha_ratio = pooled[("alpha", True)] / pooled[("alpha", False)]
    beta_ratio = pooled[("beta", True)] / pooled[("beta", False)]
    assert alpha_ratio == pytest.approx(1 / 1.15, abs=0.03)  # every step 15 % slower
    assert beta_ratio == pytest.approx(1.0, abs=0.03)


def test_roll_ups_are_sums_not_a_mean_of_job_ratios(demo_snapshot):
    frame = demo_snapshot(
        """
        select cluster,
               sum(useful_flop) / sum(eligible_pfs) as pooled_goodput,
               avg(job_goodput) as mean_of_job_goodput,
               sum(allocated_pfs) / sum(eligible_pfs) as pooled_s,
               avg(scheduling_goodput) as mean_of_job_s
        from fct_job group by cluster order by cluster
        """
    )
    lens = demo_snapshot(
        """
        select cluster, sum(useful_flop) / sum(eligible_pfs) as goodput
        from fct_job_lens_cluster_day group by cluster order by cluster
        """
    )
    assert list(lens["goodput"]) == pytest.approx(list(frame["pooled_goodput"]), rel=1e-9)
    # a small job that queued for hours weighs as much as a big one in a mean of ratios
    assert any(abs(frame["pooled_goodput"] - frame["mean_of_job_goodput"]) > 1e-3)
    assert any(abs(frame["pooled_s"] - frame["mean_of_job_s"]) > 1e-3)


def test_the_job_lens_reconciles_with_the_capacity_lens(demo_snapshot):
    both = demo_snapshot(
        """
        select c.cluster, c.metric_date, c.productive_gs as capacity_productive_gs,
               j.productive_gs as job_productive_gs, j.program_startup_gs, c.allocated_gs as capacity_allocated_gs,
               j.allocated_gs as job_allocated_gs
        from fct_cluster_day as c
        join fct_job_lens_cluster_day as j using (cluster, metric_date)
        """
    )
    assert len(both) == len(demo_snapshot("select * from fct_cluster_day"))
    restored = both["job_productive_gs"] + both["program_startup_gs"]
    assert list(restored) == pytest.approx(list(both["capacity_productive_gs"]), rel=1e-9)
    # the only gap is the first-step excess, which only the job lens takes out of productive time
    gap = (both["capacity_productive_gs"] - both["job_productive_gs"]) / both["capacity_productive_gs"]
    assert gap.min() >= -1e-12 and gap.max() < 1e-3
    assert list(both["job_allocated_gs"]) == pytest.approx(list(both["capacity_allocated_gs"]), rel=1e-9)


def test_metric_tree_daily_carries_the_job_lens(demo_snapshot):
    nodes = demo_snapshot("select node_id from metric_tree_nodes where lens = 'job'")["node_id"]
    tree = demo_snapshot("select * from metric_tree_daily where grain = 'job' and entity_id = 'beta-000011'")
    assert set(tree["node_id"]) == set(nodes)
    leaves = tree[tree["parent_node_id"] == "job_runtime_goodput"].groupby("metric_date")["value"].sum()
    factor = tree[tree["node_id"] == "job_runtime_goodput"].set_index("metric_date")["value"]
    assert list((leaves + factor).dropna()) == pytest.approx([1.0] * len(factor.dropna()), rel=1e-9)


def test_the_requeue_day_is_attributed_to_scheduling(demo_snapshot):
    change = demo_snapshot(
        "select * from fct_job_day_lmdi where job_id = 'beta-000011' and metric_date = '2026-11-05'"
    ).set_index("node_id")
    factors = change.loc[["scheduling_goodput", "job_runtime_goodput", "job_program_goodput"]]
    assert factors["dln"].sum() == pytest.approx(change.loc["job_goodput", "dln"], rel=1e-9)
    assert factors["dg_additive"].sum() == pytest.approx(change.loc["job_goodput", "dg_additive"], rel=1e-9)
    assert factors["share_of_dln_g"].idxmax() == "scheduling_goodput"
    assert change.loc["queue_requeue_share", "dln"] < 0
