"""The incident catalogue: the `incidents` scenario (seed 1) ingests without quarantine, is deterministic,
labels every kind, and each labelled incident is visible in the raw lake tables where a fleet shows it.

The session's `incidents_home` build (tests/conftest.py) is read, not simulated again; every check reads the
ingested raw Parquet, the ingest manifest (or, for determinism, the landed bytes), not the simulator's internals.
"""

from __future__ import annotations

import hashlib
import json
import math
import re
from collections import Counter
from datetime import datetime, timedelta, timezone
from pathlib import Path

import duckdb
import numpy as np
import pytest

from perf_assets.lib.ingest.manifest import read_manifest
from perf_assets.lib.paths import DataHome
from perf_assets.lib.simulate import simulate
from perf_assets.lib.simulate.scenario import get_scenario

LABEL_KEYS = {
    "incident_id", "kind", "decoy", "direction", "cluster", "nodes", "start", "end", "grain", "scope",
    "magnitude", "factor", "moves", "expected_relative_change", "attribution", "mix_basis", "cause",
}  # fmt: skip
TREE_NODES = {
    "goodput", "availability", "allocation", "runtime_goodput", "program_goodput", "down_share", "idle_share",
    "badput_share", "wasted_progress_share", "checkpoint_save_share", "custom_blocking_share", "badput_other_share",
}  # fmt: skip
KINDS = {
    "node_rollout_slowdown", "thermal_throttle", "image_dataloader_stall", "checkpoint_storage_slowdown",
    "scheduler_fragmentation", "bad_hardware_batch", "rack_power_cap", "hbm_bandwidth_decay", "workload_mix_shift",
    "framework_upgrade", "noise_burst", "diurnal_swing", "null_rollout", "maintenance_window",
}  # fmt: skip


@pytest.fixture(scope="module")
def home(incidents_home: DataHome) -> DataHome:
    """The session's `incidents` build (seed 1): its landing zone as simulated, its lake as ingested."""
    return incidents_home


@pytest.fixture(scope="module")
def outcomes(home: DataHome) -> list[dict]:
    """Each landed file's ingest outcome (path, status, reason, rows), from the manifest the build's ingest wrote."""
    return read_manifest(home.manifest_dir).select(["path", "status", "reason", "rows"]).to_pylist()


def line(outcome: dict) -> str:
    return f"{outcome['path']}: {outcome['status']} ({outcome['reason']})"


@pytest.fixture(scope="module")
def lake(home, outcomes):
    connection = duckdb.connect()
    tables = ("dcgm", "step_events", "sacct", "pending_queue", "probe_results", "node_software", "node_events")
    for table in (*tables, "trace_rank_breakdowns", "trace_kernel_types"):
        files = f"{home.lake_raw}/raw_{table}/event_date=*/*.parquet"
        connection.sql(f"create view {table} as select * from read_parquet('{files}', hive_partitioning=false)")
    return connection


@pytest.fixture(scope="module")
def labels(home) -> dict[str, dict]:
    document = json.loads(home.labels_file.read_text())
    return {label["kind"]: label for label in document["incidents"]}


def at(text: str) -> datetime:
    return datetime.fromisoformat(text.replace("Z", "+00:00"))


def hashes(root: Path) -> dict[str, str]:
    return {
        str(path.relative_to(root)): hashlib.sha256(path.read_bytes()).hexdigest()
        for path in sorted(root.rglob("*"))
        if path.is_file()
    }


# --------------------------------------------------------------------------- ingest, determinism, labels


def test_everything_ingests_without_quarantine(outcomes, home):
    assert len(outcomes) == len([path for path in home.landing.rglob("*") if path.is_file()]) - 1  # all but labels
    statuses = Counter(outcome["status"] for outcome in outcomes)
    assert statuses["quarantined"] == 0 and statuses["skipped"] == 0, [line(o) for o in outcomes if o["status"] != "ok"]
    assert statuses["ok"] > 1000
    # notes that only describe what was read: a trace's last profiler step left out of the breakdown
    # (HTA's rule), an nccl-tests log's run count with nothing failed or skipped
    informational = re.compile(
        r"^\d+ GPU activities of the last, incomplete profiler step not in the breakdown$"
        r"|^\d+ test runs \(0 failed\); 0 NCCL debug or unread lines skipped$"
    )
    notes = [line(o) for o in outcomes if o["reason"] and not informational.match(o["reason"])]
    assert not notes, "no value was set to NULL at ingest"


def test_same_seed_gives_identical_bytes(home, tmp_path):
    again = DataHome(tmp_path / "again")
    simulate(again, scenario="incidents", seed=1)
    assert hashes(again.landing) == hashes(home.landing)


def test_every_kind_is_labelled_once_with_the_schema(home, labels):
    document = json.loads(home.labels_file.read_text())
    assert (document["scenario"], document["seed"], document["days"]) == ("incidents", 1, 28)
    assert set(labels) == KINDS and len(document["incidents"]) == len(KINDS)
    scenario = get_scenario("incidents")
    nodes = {node for cluster in scenario.clusters for node in cluster.nodes}
    for label in document["incidents"]:
        assert set(label) == LABEL_KEYS, label["incident_id"]
        assert label["direction"] in ("regression", "improvement", "none")
        assert set(label["moves"]) <= TREE_NODES and set(label["nodes"]) <= nodes
        assert label["attribution"] in ("rate", "mix") and {"dimension", "value"} <= set(label["cause"])
        assert at(document["start"] + "T00:00:00Z") <= at(label["start"]) < at("2026-10-29T00:00:00Z")
        if label["decoy"]:
            assert label["direction"] == "none" and label["moves"] == [] and label["factor"] is None
        else:
            assert label["factor"] in label["moves"] and label["direction"] != "none"
    assert sum(label["decoy"] for label in document["incidents"]) == 4
    assert labels["framework_upgrade"]["direction"] == "improvement"
    assert labels["workload_mix_shift"]["attribution"] == "mix"
    assert labels["workload_mix_shift"]["grain"] == "fleet"
    assert {label["mix_basis"] for label in document["incidents"] if label["attribution"] == "rate"} == {None}


# --------------------------------------------------------------------------- visible where a fleet shows it


def busy_ratio(lake, field: str, host: str, start: datetime, end: datetime, gpu: int | None = None) -> float:
    """Median of `field` while the GPU computes (SM active > 0.8), over [start, end)."""
    gpu_filter = "" if gpu is None else f"and f.gpu_index = {gpu}"
    return lake.sql(
        f"""
        select median(f.value) from dcgm f join dcgm a
          on a.host = f.host and a.gpu_index = f.gpu_index and a.ts = f.ts and a.field = 'DCGM_FI_PROF_SM_ACTIVE'
        where f.field = '{field}' and f.host = '{host}' and a.value > 0.8 {gpu_filter}
          and f.ts >= '{start.isoformat()}' and f.ts < '{end.isoformat()}'
        """
    ).fetchone()[0]


def test_node_rollout_changes_some_nodes_and_slows_their_steps(lake, labels):
    label = labels["node_rollout_slowdown"]
    start = at(label["start"])
    rows = lake.sql(f"select node, nccl from node_software where valid_from = '{start.isoformat()}'").fetchall()
    assert sorted(rows) == [(node, "2.22.3") for node in label["nodes"]]  # only the subset
    for node in label["nodes"]:
        before = busy_ratio(lake, "DCGM_FI_PROF_PIPE_TENSOR_ACTIVE", node, start - timedelta(days=4), start)
        after = busy_ratio(lake, "DCGM_FI_PROF_PIPE_TENSOR_ACTIVE", node, start, start + timedelta(days=4))
        assert after / before == pytest.approx(1 / 1.15, abs=0.03), node


def test_thermal_throttle_lowers_one_gpus_clock(lake, labels):
    label = labels["thermal_throttle"]
    node, gpu = label["nodes"][0], label["cause"]["gpu_indices"][0]
    start, end = at(label["start"]), at(label["end"])
    clock = lake.sql(
        f"""
        select gpu_index = {gpu} as throttled, ts >= '{start.isoformat()}' and ts < '{end.isoformat()}' as inside,
               median(value) as mhz
        from dcgm where host = '{node}' and field = 'DCGM_FI_DEV_SM_CLOCK' and value > 1000
        group by all
        """
    ).fetchall()
    mhz = {(throttled, inside): value for throttled, inside, value in clock}
    assert mhz[True, True] / mhz[False, True] == pytest.approx(1 / 1.12, abs=0.02)  # lower than its peers
    assert mhz[True, False] / mhz[False, False] == pytest.approx(1.0, abs=0.01)  # but not before or after
    violation = lake.sql(
        f"""select gpu_index, max(value) from dcgm where host = '{node}' and field = 'DCGM_FI_DEV_THERMAL_VIOLATION'
            group by gpu_index order by gpu_index"""
    ).fetchall()
    assert all((value > 0) == (index == gpu) for index, value in violation)
    hot = busy_ratio(lake, "DCGM_FI_DEV_GPU_TEMP", node, start, end, gpu)
    cool = busy_ratio(lake, "DCGM_FI_DEV_GPU_TEMP", node, start, end, (gpu + 1) % 8)
    assert hot > cool + 10
    classes = lake.sql(
        f"""select distinct throttle_class from probe_results
            where node = '{node}' and gpu_index = {gpu} and probe = 'gemm'
              and started_at >= '{start.isoformat()}' and started_at < '{end.isoformat()}'"""
    ).fetchall()
    assert classes == [("thermal",)]


def test_thermal_throttle_makes_a_straggler_in_the_traces(lake, labels):
    """The job traced on the throttled node: its throttled GPU's rank computes longer, the others wait in NCCL."""
    label = labels["thermal_throttle"]
    node, gpu = label["nodes"][0], label["cause"]["gpu_indices"][0]
    ranks = lake.sql(
        f"""select b.rank, b.rank % 8 = {gpu} as throttled, b.compute_ns, k.time_ns as communication_ns
            from trace_rank_breakdowns b join trace_kernel_types k using (capture_id, rank, device_index)
            where b.host = '{node}' and k.kernel_type = 'communication' order by b.rank"""
    ).fetchall()
    assert len(ranks) == 4 and sum(throttled for _, throttled, _, _ in ranks) == 1
    straggler = next(row for row in ranks if row[1])
    for _, throttled, compute_ns, communication_ns in ranks:
        if not throttled:
            assert straggler[2] / compute_ns == pytest.approx(1.12, abs=0.02)  # its step_time_factor
            assert communication_ns > 1.5 * straggler[3]


def test_image_stall_shows_data_loading_gaps_on_its_nodes_only(lake, labels):
    label = labels["image_dataloader_stall"]
    start = at(label["start"])
    rows = lake.sql(f"select node, image from node_software where valid_from = '{start.isoformat()}'").fetchall()
    assert sorted(rows) == [(node, "trainer:2026.10.2") for node in label["nodes"]]
    stalls = lake.sql(
        """
        with loading as (
            select job_id, attempt, ts, step,
                   row_number() over (partition by job_id, attempt order by ts) as n
            from step_events where event = 'data_loading_start'
        )
        select job_id, min(ts) from loading where n > 1 group by job_id
        """
    ).fetchall()
    assert len(stalls) >= 3
    assert {job for job, _ in stalls} <= set(label["scope"]["jobs"])
    assert all(first >= start for _, first in stalls)


def test_checkpoint_saves_take_longer_after_the_slowdown(lake, labels):
    label = labels["checkpoint_storage_slowdown"]
    start = at(label["start"])
    rows = lake.sql(
        f"""
        with saves as (
            select job_id, attempt, event, ts, row_number() over (partition by job_id, attempt, event order by ts) as n
            from step_events where event in ('ckpt_save_start', 'ckpt_save_end')
        )
        select split_part(s.job_id, '-', 1) as cluster, s.ts >= '{start.isoformat()}' as after,
               median(epoch(e.ts - s.ts)) as seconds
        from saves s join saves e on s.job_id = e.job_id and s.attempt = e.attempt and s.n = e.n
        where s.event = 'ckpt_save_start' and e.event = 'ckpt_save_end'
        group by all
        """
    ).fetchall()
    seconds = {(cluster, after): value for cluster, after, value in rows}
    assert seconds["h100", True] / seconds["h100", False] == pytest.approx(6.0, rel=0.1)
    assert seconds["h200", True] / seconds["h200", False] == pytest.approx(1.0, rel=0.1)


def idle_nodes_while_pending(lake, cluster: str) -> dict[datetime, int]:
    """Per pending-queue snapshot of a cluster: in-service nodes with no allocation at that instant."""
    rows = lake.sql(
        f"""
        with snapshots as (select distinct ts from pending_queue where cluster = '{cluster}'),
        allocations as (
            select unnest(nodes) as node, start_at, coalesce(end_at, '2100-01-01') as end_at
            from sacct where cluster = '{cluster}' and job_step is null and start_at is not null
        ),
        nodes as (select distinct node from allocations),
        busy as (
            select s.ts, n.node,
                   exists (select 1 from allocations a where a.node = n.node and a.start_at <= s.ts and a.end_at > s.ts)
                   or exists (select 1 from node_events e where e.node = n.node and e.start_at <= s.ts
                              and coalesce(e.end_at, '2100-01-01') > s.ts) as used
            from snapshots s, nodes n
        )
        select ts, count(*) filter (where not used) from busy group by ts order by ts
        """
    ).fetchall()
    return dict(rows)


def test_fragmentation_leaves_nodes_idle_while_jobs_pend(lake, labels):
    label = labels["scheduler_fragmentation"]
    start, end = at(label["start"]), at(label["end"])
    idle = idle_nodes_while_pending(lake, "a100")
    inside = [count for ts, count in idle.items() if start <= ts < end]
    outside = [count for ts, count in idle.items() if not start <= ts < end]
    assert len(inside) >= 24  # hourly snapshots with a job pending during most of the window
    assert np.mean([count >= 1 for count in inside]) > 0.9  # while a node sits idle
    hours = (end - start).total_seconds() / 3600
    assert len(inside) / hours > 2 * len(outside) / (28 * 24 - hours)  # far more pending than usual


def test_bad_batch_fails_more_often(lake, labels):
    label = labels["bad_hardware_batch"]
    start = at(label["start"])
    downs = dict(
        lake.sql(
            f"select node, count(*) from node_events where state = 'down' and start_at >= '{start.isoformat()}' "
            "and node like 'a100-%' group by node"
        ).fetchall()
    )
    batch = [downs.get(node, 0) for node in label["nodes"]]
    others = [downs.get(node, 0) for node in ("a100-n03", "a100-n04")]
    assert min(batch) >= 2 and sum(batch) > 2 * sum(others) + 2


def test_power_cap_changes_node_software_and_lowers_power(lake, labels):
    label = labels["rack_power_cap"]
    start = at(label["start"])
    rows = lake.sql(
        f"select node, power_limit_w from node_software where valid_from = '{start.isoformat()}'"
    ).fetchall()
    assert sorted(rows) == [(node, 550.0) for node in label["nodes"]]
    for node in label["nodes"]:
        before = busy_ratio(lake, "DCGM_FI_DEV_POWER_USAGE", node, start - timedelta(days=3), start)
        after = busy_ratio(lake, "DCGM_FI_DEV_POWER_USAGE", node, start, start + timedelta(days=3))
        most = lake.sql(
            f"select max(value) from dcgm where host = '{node}' and field = 'DCGM_FI_DEV_POWER_USAGE' "
            f"and ts >= '{start.isoformat()}'"
        ).fetchone()[0]
        assert after < 0.85 * before and most <= 550.0


def test_hbm_probe_declines_on_the_decaying_node(lake, labels):
    label = labels["hbm_bandwidth_decay"]
    node, start = label["nodes"][0], at(label["start"])
    rows = lake.sql(
        f"""select node = '{node}' as decaying, cast(started_at as date) as day, median(value)
            from probe_results where probe = 'hbm_stream' and node like 'h200-%' group by all order by day"""
    ).fetchall()
    mine = {day: value for decaying, day, value in rows if decaying}
    peers = {day: value for decaying, day, value in rows if not decaying}
    relative = [mine[day] / peers[day] for day in sorted(mine) if day in peers]
    days = sorted(day for day in mine if day in peers)
    before = [r for r, day in zip(relative, days) if day < start.date()]
    ramp = [r for r, day in zip(relative, days) if start.date() <= day]
    assert np.ptp(before) < 0.02 and ramp[-1] < np.mean(before) * 0.88
    assert all(later <= earlier + 0.005 for earlier, later in zip(ramp, ramp[1:]))  # declining
    end = at(label["start"]) + timedelta(hours=label["magnitude"]["ramp_h"])
    slower = busy_ratio(lake, "DCGM_FI_PROF_PIPE_TENSOR_ACTIVE", node, end, end + timedelta(days=3))
    before = busy_ratio(lake, "DCGM_FI_PROF_PIPE_TENSOR_ACTIVE", node, start - timedelta(days=3), start)
    # its jobs slow down with it (x1.15 at the ramp's end; before, some of its jobs already straggled at
    # the x1.10 of the capped rack r1, so the ratio lies between 1/1.15 and 1.10/1.15)
    assert 1 / 1.15 - 0.02 < slower / before < 0.97


def allocated_seconds(lake, cluster: str, start: datetime, end: datetime) -> float:
    """Node-seconds allocated on a cluster within [start, end) (sacct job rows)."""
    return lake.sql(
        f"""select sum(epoch(least(coalesce(end_at, '{end.isoformat()}'), '{end.isoformat()}')
                           - greatest(start_at, '{start.isoformat()}')) * n_nodes)
            from sacct where cluster = '{cluster}' and job_step is null and start_at < '{end.isoformat()}'
              and coalesce(end_at, '{end.isoformat()}') > '{start.isoformat()}'"""
    ).fetchone()[0]


def test_mix_shift_moves_work_to_the_spare_a100_cluster(lake, labels):
    label = labels["workload_mix_shift"]
    start, end = at(label["start"]), datetime(2026, 10, 29, tzinfo=timezone.utc)
    base = (datetime(2026, 10, 1, tzinfo=timezone.utc), datetime(2026, 10, 5, tzinfo=timezone.utc))
    nodes = {"h100": 5, "h200": 4, "a100": 4, "a100b": 3}
    receiver = label["cluster"]
    assert receiver == "a100b"

    def share(cluster: str, window: tuple[datetime, datetime]) -> float:
        return allocated_seconds(lake, cluster, *window) / sum(allocated_seconds(lake, c, *window) for c in nodes)

    def allocation(cluster: str, window: tuple[datetime, datetime]) -> float:
        return allocated_seconds(lake, cluster, *window) / (nodes[cluster] * (window[1] - window[0]).total_seconds())

    assert allocation("h100", (start, end)) < allocation("h100", base) - 0.15  # the H100 cluster gets less work
    assert share(receiver, (start, end)) > share(receiver, base) + 0.05  # the fleet's work moves toward the A100s
    # a mix shift, not lost work: the receiving A100 cluster had spare capacity before, and the fleet's GPU-seconds (all
    # clusters have 8 GPUs per node) stay within 8 % over the label's ground-truth windows (-9 to -18 % before)
    truth = label["magnitude"]["ground_truth"]
    before = (start - timedelta(days=truth["window_days"]), start)
    after = (start, min(end, start + timedelta(days=truth["window_days"])))
    assert allocation(receiver, before) < 0.8 < allocation(receiver, after)
    total = {
        w: sum(allocated_seconds(lake, c, *w) for c in nodes) / (w[1] - w[0]).total_seconds() for w in (before, after)
    }
    assert abs(total[after] / total[before] - 1) < 0.08
    # the label's weights (shares of allocated GPU-seconds, from the simulator's jobs) are what sacct shows
    for cluster in nodes:
        assert truth["clusters"][cluster]["weight_before"] == pytest.approx(share(cluster, before), abs=0.01)
        assert truth["clusters"][cluster]["weight_after"] == pytest.approx(share(cluster, after), abs=0.01)


def test_mix_shift_label_follows_what_the_simulation_did():
    """The label derives from the simulated jobs: on a busy receiving cluster (spare_gap_h 0, the older shift)
    the same parameters lose allocation; with spare capacity the §6 change is mostly mix. ~2 s (two fleets)."""
    import dataclasses

    from perf_assets.lib.simulate.fleet import simulate_fleet
    from perf_assets.lib.simulate.labels import labels_document

    scenario = get_scenario("incidents")

    def mix_label(spare_gap_h: float) -> dict:
        shift = dataclasses.replace(scenario.incidents.mix_shifts[0], spare_gap_h=spare_gap_h)
        changed = dataclasses.replace(scenario, incidents=dataclasses.replace(scenario.incidents, mix_shifts=(shift,)))
        document = labels_document(simulate_fleet(changed, 1))
        return next(label for label in document["incidents"] if label["kind"] == "workload_mix_shift")

    label = mix_label(scenario.incidents.mix_shifts[0].spare_gap_h)
    truth = label["magnitude"]["ground_truth"]
    assert label["attribution"] == "mix" and label["mix_basis"] == "allocated_gs" == truth["mix_basis"]
    assert abs(truth["allocated_gpu_seconds_change"]) < 0.08  # the fleet's demand about constant
    assert truth["relative_change"] < 0 and label["direction"] == "regression"  # A100 GPU-hours are worth less
    assert abs(truth["mix_effect"]) > 3 * abs(truth["rate_effect"])
    assert truth["mix_effect"] + truth["rate_effect"] == pytest.approx(truth["relative_change"], abs=2e-4)
    parts = ("goodput_ref_mix_effect", "goodput_ref_rate_effect", "goodput_ref_occupancy_effect")
    weights_a100 = truth["clusters"][label["cluster"]]
    assert weights_a100["weight_after"] > weights_a100["weight_before"] + 0.05
    # in the capacity lens (own peak) the move is carried by allocation, and the label says so
    assert label["factor"] == "allocation" and label["factor"] in label["moves"]
    assert label["expected_relative_change"] == pytest.approx(math.expm1(truth["dln_occupancy_pfs"]), abs=1e-4)
    busy = mix_label(0.0)["magnitude"]["ground_truth"]
    assert busy["allocated_gpu_seconds_change"] < truth["allocated_gpu_seconds_change"] - 0.04  # work lost
    assert busy["goodput_ref_occupancy_effect"] < truth["goodput_ref_occupancy_effect"] - 0.04
    assert sum(truth[part] for part in parts) == pytest.approx(
        (1 + truth["relative_change"]) * (1 + truth["allocated_gpu_seconds_change"]) - 1, abs=5e-4
    )


def test_framework_upgrade_speeds_steps_up(lake, labels):
    label = labels["framework_upgrade"]
    start = at(label["start"])
    rows = lake.sql(f"select node, torch from node_software where valid_from = '{start.isoformat()}'").fetchall()
    assert sorted(rows) == [(node, "2.6.0") for node in label["nodes"]]
    node = "h200-n03"  # neither capped nor decaying
    before = busy_ratio(lake, "DCGM_FI_PROF_PIPE_TENSOR_ACTIVE", node, start - timedelta(days=5), start)
    after = busy_ratio(lake, "DCGM_FI_PROF_PIPE_TENSOR_ACTIVE", node, start, start + timedelta(days=5))
    assert after > before


def test_decoys_are_injected(lake, labels):
    maintenance = labels["maintenance_window"]
    rows = lake.sql(
        f"select node, start_at from node_events where state = 'maintenance' and node = '{maintenance['nodes'][0]}'"
    ).fetchall()
    assert [(node, start) for node, start in rows] == [(maintenance["nodes"][0], at(maintenance["start"]))]
    null = labels["null_rollout"]
    firmware = lake.sql(f"select distinct firmware from node_software where valid_from = '{null['start'][:19]}Z'")
    assert firmware.fetchall() == [("96.00.99.00.01",)]


# --------------------------------------------------------------------------- evaluation reads the new labels


def test_evaluation_ignores_decoys_as_targets_and_counts_alerts_on_them():
    import pandas as pd

    from perf_assets.lib.evaluation import evaluate

    def regression(day: str, entity: str) -> dict:
        return {
            "regression_id": f"r-{entity}-{day}",
            "grain": "cluster",
            "entity_id": entity,
            "metric": "program_goodput",
            "change_kind": "regression",
            "change_date": day,
            "p_value": 0.001,
            "relative_effect": -0.1,
            "top_factor": "program_goodput",
            "coinciding_changes": json.dumps([{"component": "nccl"}]),
        }

    real = {"incident_id": "x", "cluster": "h100", "start": "2026-10-06T00:00:00Z", "factor": "program_goodput"}
    real |= {"cause": {"dimension": "nccl", "value": "2.22.3", "component": "nccl"}, "decoy": False}
    decoy = {"incident_id": "d", "cluster": "a100", "start": "2026-10-15T00:00:00Z", "factor": None, "decoy": True}
    found = pd.DataFrame([regression("2026-10-06", "h100"), regression("2026-10-15", "a100")])
    score = evaluate(found, [real, decoy])
    assert (score["labels"], score["decoys"], score["detected_labels"], score["recall"]) == (1, 1, 1, 1.0)
    assert (score["groups"], score["true_positive_groups"], score["precision"]) == (2, 1, 0.5)
    assert [group["why"] for group in score["false_alarm_groups"]] == ["decoy"]


def test_evaluation_explains_a_regression_on_any_cluster_of_a_mix_shift():
    import pandas as pd

    from perf_assets.lib.evaluation import evaluate

    label = {"incident_id": "m", "cluster": "a100", "start": "2026-10-21T00:00:00Z", "factor": "program_goodput"}
    label |= {"scope": {"clusters": ["a100", "h100"]}, "cause": {"dimension": "sku", "value": "A100"}, "decoy": False}
    found = pd.DataFrame(
        [
            {
                "regression_id": "r",
                "grain": "cluster",
                "entity_id": "h100",
                "metric": "goodput",
                "change_kind": "regression",
                "change_date": "2026-10-21",
                "p_value": 0.01,
                "relative_effect": -0.3,
                "top_factor": "allocation",
                "coinciding_changes": "[]",
            }
        ]
    )
    assert evaluate(found, [label])["precision"] == 1.0
