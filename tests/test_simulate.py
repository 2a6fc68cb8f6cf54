"""The fleet simulator: deterministic, real formats, a consistent ledger, and the injected regression.

The demo is simulated once per module (a second time for determinism, and once with another seed);
every check below reads the landed files, not the simulator's internals.
"""

from __future__ import annotations

import hashlib
import json
import re
import time
from collections import defaultdict
from datetime import datetime, timezone
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from perf_assets.lib.contracts import NODE_STATES, STEP_EVENTS
from perf_assets.lib.paths import DataHome
from perf_assets.lib.simulate import simulate
from perf_assets.lib.simulate.slurm import compress_nodelist

SOURCES = {
    "inventory",
    "node_software",
    "node_events",
    "step_events",
    "job_meta",
    "pending_queue",
    "sacct",
    "dcgm",
    "probe_results",
    "nccl_tests",
    "kineto",
}
FIELDS = {  # docs/contracts.md, plus "version"
    "inventory": {"gpu_uuid", "node", "rack", "cluster", "sku", "valid_from", "valid_to"},
    "node_software": {"node", "valid_from", "driver", "cuda", "nccl", "torch", "image", "firmware", "power_limit_w"},
    "node_events": {"node", "state", "reason", "start", "end"},
    "step_events": {"job_id", "attempt", "rank", "event", "step", "ts", "name"},
    "job_meta": {"job_id", "model_flops_per_step", "dtype", "dp", "tp", "pp", "cp", "workload", "owner"},
    "pending_queue": {"ts", "cluster", "job_id", "requested_gpus", "eligible_since"},
    "probe_results": {
        "run_id", "node", "gpu_uuid", "gpu_index", "sku", "device_kind", "probe", "metric", "value", "unit",
        "median", "iqr", "ci_low", "ci_high", "n", "throttle_class", "peak", "fraction_of_peak", "status",
        "reason", "started_at", "context",
    },
}  # fmt: skip
SACCT_HEADER = "JobID|JobName|User|Partition|State|ExitCode|Submit|Eligible|Start|End|NNodes|NodeList|AllocTRES"
NAME = re.compile(
    r"^(?P<host>[^_]+)__(?P<job>[^_]+)__(?P<rank>[^_]+)__(?P<ts>\d{8}T\d{6}Z)\.(?P<ext>jsonl|json|txt|log|json\.gz)$"
)
RFC3339 = re.compile(r"^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}(\.\d{3})?Z$")
T0 = datetime(2026, 11, 1, tzinfo=timezone.utc)
T1 = datetime(2026, 11, 15, tzinfo=timezone.utc)
ROLLOUT = datetime(2026, 11, 8, tzinfo=timezone.utc)
PEAK = {"alpha": 989e12, "beta": 312e12}
ALPHA = ["alpha-n01", "alpha-n02", "alpha-n03", "alpha-n04"]


# --------------------------------------------------------------------------- fixtures


@pytest.fixture(scope="module")
def demo(tmp_path_factory):
    home = DataHome(tmp_path_factory.mktemp("demo7"))
    began = time.perf_counter()
    result = simulate(home, scenario="demo", seed=7)
    return home, result, time.perf_counter() - began


@pytest.fixture(scope="module")
def landing(demo) -> Path:
    return demo[0].landing


def hashes(landing: Path) -> dict[str, str]:
    return {
        path.relative_to(landing).as_posix(): hashlib.sha256(path.read_bytes()).hexdigest()
        for path in sorted(landing.rglob("*"))
        if path.is_file()
    }


def files_of(landing: Path, source: str, pattern: str = "*.*") -> list[Path]:
    return sorted((landing / source).rglob(pattern))


def jsonl(path: Path) -> list[dict]:
    return [json.loads(line) for line in path.read_text().splitlines()]


def utc(text: str) -> datetime:
    return datetime.fromisoformat(text.replace("Z", "+00:00"))


def slurm_utc(text: str) -> datetime | None:
    return None if text == "Unknown" else datetime.fromisoformat(text).replace(tzinfo=timezone.utc)


@pytest.fixture(scope="module")
def sacct(landing) -> pd.DataFrame:
    rows = []
    for path in files_of(landing, "sacct"):
        lines = path.read_text().splitlines()
        header = lines[0].split("|")
        rows += [dict(zip(header, line.split("|")), cluster=path.parts[-3], file=path) for line in lines[1:]]
    return pd.DataFrame(rows)


@pytest.fixture(scope="module")
def jobs(sacct) -> pd.DataFrame:
    """Job rows (not steps) with parsed times and expanded node lists."""
    frame = sacct[~sacct.JobID.str.contains(r"\.")].copy()
    frame["start"] = frame.Start.map(slurm_utc)
    frame["end"] = frame.End.map(lambda text: slurm_utc(text) or T1)
    frame["submit"] = frame.Submit.map(slurm_utc)
    frame["eligible"] = frame.Eligible.map(slurm_utc)
    from perf_assets.lib.ingest.formats.sacct import expand_nodelist

    frame["nodes"] = frame.NodeList.map(expand_nodelist)
    return frame


@pytest.fixture(scope="module")
def node_events(landing) -> pd.DataFrame:
    rows = [row for path in files_of(landing, "node_events") for row in jsonl(path)]
    frame = pd.DataFrame(rows)
    frame["start_at"] = frame.start.map(utc)
    frame["end_at"] = frame.end.map(lambda text: utc(text) if text else T1)
    return frame


@pytest.fixture(scope="module")
def steps(landing) -> pd.DataFrame:
    rows = [row for path in files_of(landing, "step_events") for row in jsonl(path)]
    frame = pd.DataFrame(rows)
    frame["t"] = pd.to_datetime(frame.ts, utc=True)
    frame["cluster"] = frame.job_id.str.split("-").str[0]
    return frame.sort_values(["job_id", "attempt", "t"], kind="stable").reset_index(drop=True)


@pytest.fixture(scope="module")
def step_times(steps) -> pd.DataFrame:
    """Per (job, attempt, step): its time per the contract (gap to the next step_start or job_end,
    minus the blocking ckpt_save and custom intervals inside it), and when it started."""
    out = []
    for (job_id, attempt), events in steps.groupby(["job_id", "attempt"], sort=False):
        seconds = events.t.astype("int64").to_numpy() / 1e9
        kind = events.event.to_numpy()
        step = events.step.to_numpy()
        is_start = kind == "step_start"
        starts, numbers = seconds[is_start], step[is_start].astype(int)
        ends = np.append(starts[1:], seconds[kind == "job_end"][:1])  # the last step needs job_end
        blocking = defaultdict(float)
        for begin, finish in (("ckpt_save_start", "ckpt_save_end"), ("custom_start", "custom_end")):
            for s, a, b in zip(step[kind == begin], seconds[kind == begin], seconds[kind == finish]):
                blocking[int(s)] += b - a
        n = len(ends)
        durations = ends - starts[:n] - np.asarray([blocking[int(s)] for s in numbers[:n]])
        out.append(
            pd.DataFrame(
                {"job_id": job_id, "attempt": attempt, "step": numbers[:n], "start": starts[:n], "duration": durations}
            )
        )
    frame = pd.concat(out, ignore_index=True)
    frame["cluster"] = frame.job_id.str.split("-").str[0]
    return frame


# --------------------------------------------------------------------------- determinism, volume


def test_same_seed_gives_identical_bytes(demo, tmp_path):
    again = DataHome(tmp_path / "again")
    simulate(again, scenario="demo", seed=7)
    assert hashes(again.landing) == hashes(demo[0].landing)


def test_another_seed_differs(demo, tmp_path):
    other = DataHome(tmp_path / "other")
    simulate(other, scenario="demo", seed=8)
    mine, theirs = hashes(demo[0].landing), hashes(other.landing)
    common = set(mine) & set(theirs)
    assert sum(mine[name] != theirs[name] for name in common) > 0.9 * len(common)


def test_rewrite_is_a_no_op_but_never_changes_a_landed_file(demo, tmp_path):
    home = DataHome(tmp_path / "twice")
    simulate(home, seed=3, days=2)
    before = hashes(home.landing)
    simulate(home, seed=3, days=2)  # same bytes: fine
    assert hashes(home.landing) == before
    with pytest.raises(FileExistsError):
        simulate(home, seed=4, days=2)


def test_volume_and_speed(demo):
    home, result, seconds = demo
    total = sum(path.stat().st_size for path in home.landing.rglob("*") if path.is_file())
    assert total == result.size_bytes
    assert total <= 45e6, f"{total / 1e6:.1f} MB"  # 36.8 MB before exporter scrapes, nccl-tests logs, traces
    assert seconds < 20


def test_result_lists_what_was_written(demo):
    home, result, _ = demo
    on_disk = sorted(path for path in home.landing.rglob("*") if path.is_file())
    assert sorted(result.files) == on_disk
    assert result.files[-1] == home.labels_file
    assert set(result.counts) == SOURCES | {"labels"}

    def lines(source: str) -> int:
        return sum(len(path.read_text().splitlines()) for path in files_of(home.landing, source))

    assert result.counts["sacct"] == lines("sacct") - result.file_counts["sacct"]  # less the headers
    assert result.counts["step_events"] == lines("step_events")
    range_files = files_of(home.landing, "dcgm", "*.json")
    assert len(range_files) == 2 * 4 * 14  # one per node-day
    scrapes = files_of(home.landing, "dcgm", "*.txt")  # two per node-day (none while a node is out all day)
    assert 2 * 4 * 14 * 2 - 8 <= len(scrapes) <= 2 * 4 * 14 * 2
    assert result.file_counts["dcgm"] == len(range_files) + len(scrapes)
    assert result.file_counts["nccl_tests"] == 1  # beta-n03's maintenance
    assert result.file_counts["kineto"] == 2 * 2  # two traced jobs x two ranks
    assert [incident["incident_id"] for incident in result.incidents] == ["demo-nccl-rollout-alpha"]
    assert any(fault.forced and fault.job_id for fault in result.faults)


# --------------------------------------------------------------------------- formats


def test_landing_layout(landing):
    assert {path.name for path in landing.iterdir()} == SOURCES | {"labels.json"}
    for path in landing.rglob("*"):
        if not path.is_file() or path == landing / "labels.json":
            continue
        source, cluster, day, name = path.relative_to(landing).parts
        assert source in SOURCES and cluster in ("alpha", "beta")
        assert T0.date() <= datetime.strptime(day, "%Y-%m-%d").date() < T1.date()
        match = NAME.match(name)
        assert match, name
        assert match["ts"][:8] == day.replace("-", ""), name  # the file's time is in its day folder
        if source in ("dcgm", "probe_results", "nccl_tests"):
            assert match["host"].startswith(f"{cluster}-n") and match["job"] == "-" and match["rank"] == "-"
        elif source == "kineto":
            assert match["host"].startswith(f"{cluster}-n") and match["job"].startswith(f"{cluster}-")
            assert match["rank"].isdigit() and match["ext"] == "json.gz"
        elif source == "step_events":
            assert match["host"] == "-" and match["job"].startswith(f"{cluster}-") and match["rank"] == "0"
        elif source == "job_meta":
            assert match["job"].startswith(f"{cluster}-") and match["rank"] == "-"
        else:
            assert (match["host"], match["job"], match["rank"]) == ("-", "-", "-")
        assert not name.startswith(".")


@pytest.mark.parametrize("source", sorted(FIELDS))
def test_own_formats_are_json_lines_with_version_1(landing, source):
    paths = files_of(landing, source)
    assert paths
    for path in paths:
        text = path.read_text()
        assert text.endswith("\n") and text.strip()
        records = jsonl(path)
        if source == "job_meta":
            assert len(records) == 1
        for record in records:
            assert record.pop("version") == 1
            assert set(record) == FIELDS[source], path
            for key, value in record.items():
                if key in ("ts", "start", "end", "valid_from", "valid_to", "eligible_since", "started_at") and value:
                    assert RFC3339.match(value), (path, key, value)


def test_dcgm_is_prometheus_range_json(landing):
    paths = files_of(landing, "dcgm", "*.json")
    for path in paths[:: max(1, len(paths) // 10)] + [paths[-1]]:
        document = json.loads(path.read_text())
        assert document["status"] == "success" and document["data"]["resultType"] == "matrix"
        series = document["data"]["result"]
        assert len(series) == 8 * 4
        day = datetime.strptime(path.parts[-2], "%Y-%m-%d").replace(tzinfo=timezone.utc).timestamp()
        host = path.name.split("__")[0]
        for one in series:
            labels = one["metric"]
            assert labels["Hostname"] == host and labels["UUID"].startswith("GPU-")
            assert labels["__name__"].startswith("DCGM_FI_") and labels["gpu"] in [str(i) for i in range(8)]
            assert labels["modelName"] in ("NVIDIA H100 80GB HBM3", "NVIDIA A100-SXM4-80GB")
            times = [t for t, _ in one["values"]]
            assert times == [int(day) + 300 * k for k in range(288)]
            assert all(isinstance(v, str) for _, v in one["values"])
            numbers = np.asarray([float(v) for _, v in one["values"]])
            ok = numbers[~np.isnan(numbers)]
            if labels["__name__"] == "DCGM_FI_DEV_GPU_UTIL":
                assert ((ok >= 0) & (ok <= 100)).all()
            elif labels["__name__"] != "DCGM_FI_DEV_POWER_USAGE":
                assert ((ok >= 0) & (ok <= 1)).all()


def test_sacct_is_parsable2_with_header(landing):
    for path in files_of(landing, "sacct"):
        lines = path.read_text().splitlines()
        assert lines[0] == SACCT_HEADER
        rows = [line.split("|") for line in lines[1:]]
        assert rows and len(rows) % 2 == 0
        for job, batch in zip(rows[::2], rows[1::2]):
            assert all(len(row) == 13 for row in (job, batch))
            assert batch[0] == f"{job[0]}.batch" and batch[1] == "batch" and batch[4] == job[4]
            assert job[4] in ("COMPLETED", "NODE_FAIL", "CANCELLED", "RUNNING")
            assert re.fullmatch(r"billing=\d+,cpu=\d+,gres/gpu=\d+,mem=\d+G,node=\d+", job[12])
            assert f"gres/gpu={8 * int(job[10])}" in job[12]
            for value in job[6:10]:
                assert value == "Unknown" or re.fullmatch(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d", value)
            end = slurm_utc(job[9])
            day = path.parts[-2]
            assert (end.date().isoformat() if end else "2026-11-14") == day  # listed the day it ends


def test_every_file_ingests_without_quarantine(landing):
    from perf_assets.lib.ingest.landing import describe
    from perf_assets.lib.ingest.registry import find_format
    from perf_assets.lib.ingest.run import landed_files

    rows = defaultdict(int)
    for path in landed_files(landing):
        landed = describe(landing, path)
        fmt = find_format(landed)
        assert fmt is not None, path
        parsed = fmt.parse(landed)  # raises QuarantineError on bad input
        tables = parsed.values() if isinstance(parsed, dict) else [parsed]  # a trace gives several tables
        rows[landed.source] += sum(table.num_rows for table in tables)
    assert set(rows) == SOURCES
    assert all(count > 0 for count in rows.values())


def test_nodelist_compression():
    assert compress_nodelist(["alpha-n03"]) == "alpha-n03"
    assert compress_nodelist(["alpha-n01", "alpha-n02"]) == "alpha-n[01-02]"
    assert compress_nodelist(["alpha-n01", "alpha-n02", "alpha-n04"]) == "alpha-n[01-02,04]"
    assert compress_nodelist(["b-n1", "b-n3", "b-n5"]) == "b-n[1,3,5]"


# --------------------------------------------------------------------------- labels, inventory


def test_labels_match_the_contract(demo):
    home = demo[0]
    assert json.loads(home.labels_file.read_text()) == {
        "version": 1,
        "scenario": "demo",
        "seed": 7,
        "start": "2026-11-01",
        "days": 14,
        "incidents": [
            {
                "incident_id": "demo-nccl-rollout-alpha",
                "kind": "software_rollout_slowdown",
                "decoy": False,
                "direction": "regression",
                "cluster": "alpha",
                "nodes": ALPHA,
                "start": "2026-11-08T00:00:00Z",
                "end": None,
                "grain": "cluster",
                "scope": {
                    "clusters": ["alpha"],
                    "nodes": ALPHA,
                    "gpus": [],
                    "jobs": [f"alpha-{number:06d}" for number in range(12, 23)],
                    "versions": {
                        "nccl": {"from": "2.21.5", "to": "2.22.3"},
                        "image": {"from": "trainer:2026.10.1", "to": "trainer:2026.11.1"},
                    },
                },
                "magnitude": {"step_time_factor": 1.15},
                "factor": "program_goodput",
                "moves": ["goodput", "program_goodput"],
                "expected_relative_change": -0.1304,
                "attribution": "rate",
                "mix_basis": None,
                "cause": {
                    "dimension": "nccl",
                    "value": "2.22.3",
                    "component": "nccl",
                    "from": "2.21.5",
                    "to": "2.22.3",
                },
            }
        ],
    }


def test_inventory_and_software(landing):
    inventory = [row for path in files_of(landing, "inventory") for row in jsonl(path)]
    assert len(inventory) == 64 and len({row["gpu_uuid"] for row in inventory}) == 64
    assert all(re.fullmatch(r"GPU-[0-9a-f]{8}(-[0-9a-f]{4}){3}-[0-9a-f]{12}", row["gpu_uuid"]) for row in inventory)
    assert {row["sku"] for row in inventory if row["cluster"] == "alpha"} == {"H100-SXM"}
    assert {row["sku"] for row in inventory if row["cluster"] == "beta"} == {"A100-SXM4-80GB"}
    assert {row["rack"] for row in inventory if row["cluster"] == "alpha"} == {"alpha-r1", "alpha-r2"}
    software = pd.DataFrame([row for path in files_of(landing, "node_software") for row in jsonl(path)])
    first = software[software.valid_from == "2026-11-01T00:00:00Z"]
    assert len(first) == 8 and set(first.nccl) == {"2.21.5"} and set(first.driver) == {"550.54.15"}
    assert set(first[first.node.str.startswith("alpha")].power_limit_w) == {700}
    assert set(first[first.node.str.startswith("beta")].power_limit_w) == {400}
    rollout = software[software.valid_from != "2026-11-01T00:00:00Z"]
    assert sorted(rollout.node) == ALPHA and set(rollout.valid_from) == {"2026-11-08T00:00:00Z"}
    assert set(rollout.nccl) == {"2.22.3"} and set(rollout.image) == {"trainer:2026.11.1"}
    assert set(rollout.driver) == {"550.54.15"}  # only nccl and the image change
    dcgm_uuids = {
        series["metric"]["UUID"]
        for path in files_of(landing, "dcgm", "*.json")[::14]
        for series in json.loads(path.read_text())["data"]["result"]
    }
    assert dcgm_uuids <= {row["gpu_uuid"] for row in inventory}


def test_job_meta(landing, jobs):
    metas = {row["job_id"]: row for path in files_of(landing, "job_meta") for row in jsonl(path)}
    assert set(metas) == set(jobs.JobName)  # every job that ran, once
    for job_id, meta in metas.items():
        n_gpus = int(jobs[jobs.JobName == job_id].NNodes.iloc[0]) * 8
        assert meta["dp"] * meta["tp"] * meta["pp"] * meta["cp"] == n_gpus
        assert meta["dtype"] == "bf16" and meta["workload"] in ("pretrain", "finetune")
        assert meta["owner"].startswith("team-") and meta["model_flops_per_step"] > 1e15


# --------------------------------------------------------------------------- the ledger


def test_a_node_runs_one_job_at_a_time(jobs):
    by_node = defaultdict(list)
    for row in jobs.itertuples():
        for node in row.nodes:
            by_node[node].append((row.start, row.end, row.JobID))
    assert len(by_node) == 8
    for node, spans in by_node.items():
        spans.sort()
        for (_, end, a), (start, _, b) in zip(spans, spans[1:]):
            assert end <= start, f"{node}: {a} and {b} overlap"


def test_slurm_job_ids_follow_submission_and_names_carry_the_job_id(jobs):
    for _, mine in jobs.groupby("cluster"):
        ordered = mine.assign(number=mine.JobID.astype(int)).sort_values("number")
        assert ordered.submit.is_monotonic_increasing and ordered.number.is_unique
        assert ordered.JobName.str.fullmatch(rf"{mine.cluster.iloc[0]}-\d{{6}}").all()
    attempts = jobs.groupby("JobName").size()
    assert attempts.max() >= 2  # a requeued job: one Slurm allocation per attempt, same name


def test_no_allocation_overlaps_an_outage(jobs, node_events):
    assert set(node_events.state) <= set(NODE_STATES) - {"in_service"}
    for outage in node_events.itertuples():
        for row in jobs[jobs.nodes.map(lambda nodes, n=outage.node: n in nodes)].itertuples():
            assert row.end <= outage.start_at or row.start >= outage.end_at, (outage, row.JobID)


def test_faults_maintenance_and_requeue(jobs, node_events):
    down = node_events[node_events.state == "down"]
    assert len(down) >= 1 and down.reason.str.fullmatch(r"xid \d+").all()
    for outage in down.itertuples():  # each down is followed by a repair, then the node is back
        repair = node_events[(node_events.node == outage.node) & (node_events.state == "repair")]
        assert (repair.start_at == outage.end_at).any()
    failed = jobs[jobs.State == "NODE_FAIL"]
    assert len(failed) >= 1
    for row in failed.itertuples():
        # the node went down when the scheduler noticed, as the allocation ended; the job was requeued
        assert ((down.start_at == row.end) & down.node.isin(row.nodes)).any()
        later = jobs[(jobs.JobName == row.JobName) & (jobs.start > row.end)]
        if row.end < T1 - pd.Timedelta(hours=6):
            assert len(later) >= 1 and (later.submit == row.end).all() and (later.eligible > later.submit).all()
    maintenance = node_events[node_events.state == "maintenance"]
    assert len(maintenance) == 1 and maintenance.node.iloc[0].startswith("beta-")
    assert (maintenance.end_at - maintenance.start_at).iloc[0] == pd.Timedelta(hours=6)


def test_step_events_match_the_allocations(jobs, steps):
    for job_id, events in steps.groupby("job_id"):
        allocations = jobs[jobs.JobName == job_id].sort_values("start")
        assert sorted(events.attempt.unique()) == list(range(1, len(allocations) + 1))
        for attempt, row in zip(range(1, len(allocations) + 1), allocations.itertuples()):
            mine = events[events.attempt == attempt]
            assert mine.event.iloc[0] == "job_start"
            assert row.start <= mine.t.min() and mine.t.max() <= row.end
            assert set(mine.event) <= set(STEP_EVENTS) and (mine["rank"] == 0).all()
            assert mine.t.is_monotonic_increasing and mine.t.is_unique
            if row.State == "COMPLETED":
                assert mine.event.iloc[-1] == "job_end" and (mine.event == "job_end").sum() == 1
            elif row.State == "NODE_FAIL":  # events stop at the fault; ~300 s of hang until NODE_FAIL
                assert "job_end" not in set(mine.event)
                assert (row.end - mine.t.max()).total_seconds() >= 270
            elif row.State == "CANCELLED":
                assert "job_end" not in set(mine.event)
            if attempt > 1:
                assert "ckpt_restore_start" in set(mine.event)
            custom = mine[mine.event.str.startswith("custom")]
            assert (custom.name == "eval").all() and mine[~mine.event.str.startswith("custom")].name.isna().all()


def test_step_starts_strictly_increase_and_progress_is_wasted(steps):
    starts = steps[steps.event == "step_start"]
    for _, group in starts.groupby(["job_id", "attempt"]):
        assert (np.diff(group.t.astype("int64").to_numpy()) > 0).all()
        assert (np.diff(group.step.to_numpy()) == 1).all()
    repeated = 0
    for job_id, group in starts.groupby("job_id"):
        seen = group.groupby("step").attempt.nunique()
        repeated += int((seen > 1).sum())
        if group.attempt.max() > 1:  # a later attempt resumes after its restored checkpoint
            for attempt in range(2, group.attempt.max() + 1):
                restore = steps[
                    (steps.job_id == job_id) & (steps.attempt == attempt) & (steps.event == "ckpt_restore_end")
                ].step.iloc[0]
                first = group[group.attempt == attempt].step.min()
                assert first == restore + 1
    assert repeated > 0  # some step numbers were recorded by two attempts: wasted progress


# --------------------------------------------------------------------------- the injected regression


def test_alpha_steps_are_15_percent_slower_after_the_rollout(step_times):
    rollout = ROLLOUT.timestamp()
    ratios = {}
    for cluster in ("alpha", "beta"):
        for job_id, frame in step_times[step_times.cluster == cluster].groupby("job_id"):
            before = frame[frame.start < rollout].duration
            after = frame[frame.start >= rollout].duration
            if len(before) > 50 and len(after) > 50:
                ratios[(cluster, job_id)] = after.median() / before.median()
    alpha = [ratio for (cluster, _), ratio in ratios.items() if cluster == "alpha"]
    beta = [ratio for (cluster, _), ratio in ratios.items() if cluster == "beta"]
    assert alpha, "no alpha job runs across the rollout"
    assert all(abs(ratio - 1.15) <= 0.02 for ratio in alpha), alpha
    assert all(abs(ratio - 1.0) <= 0.02 for ratio in beta), beta


def test_program_goodput_levels(step_times, landing, jobs):
    """P = useful FLOPs / (GPUs x peak x productive step time): in range per SKU, -13 % on alpha."""
    metas = {row["job_id"]: row for path in files_of(landing, "job_meta") for row in jsonl(path)}
    gpus = {row.JobName: int(row.NNodes) * 8 for row in jobs.itertuples()}
    frame = step_times.copy()
    frame["flops"] = frame.job_id.map(lambda j: metas[j]["model_flops_per_step"])
    frame["pfs"] = frame.duration * frame.job_id.map(gpus) * frame.cluster.map(PEAK)
    after = frame.start >= ROLLOUT.timestamp()
    level = {}
    for cluster in ("alpha", "beta"):
        for name, mask in (("before", ~after), ("after", after)):
            part = frame[(frame.cluster == cluster) & mask]
            level[cluster, name] = part.flops.sum() / part.pfs.sum()
    assert 0.35 <= level["alpha", "before"] <= 0.45
    assert 0.45 <= level["beta", "before"] <= 0.50 and 0.45 <= level["beta", "after"] <= 0.50
    change = level["alpha", "after"] / level["alpha", "before"] - 1
    assert abs(change - (1 / 1.15 - 1)) <= 0.04, change
    per_step = frame.flops / frame.pfs  # every job's MFU stays in its SKU's band (before any rollout)
    assert per_step[(frame.cluster == "alpha") & ~after].between(0.3, 0.5).all()


def test_dcgm_follows_the_ledger(landing, node_events, jobs):
    """NaN while a node is down; tensor activity on alpha falls with the rollout, GPU util does not."""
    outage = node_events[node_events.state == "down"].iloc[0]
    cluster = outage.node.split("-")[0]
    day = outage.start_at.date().isoformat()
    path = landing / "dcgm" / cluster / day / f"{outage.node}__-__-__{day.replace('-', '')}T000000Z.json"
    series = json.loads(path.read_text())["data"]["result"][0]
    inside = [v for t, v in series["values"] if outage.start_at.timestamp() <= t < outage.end_at.timestamp()]
    assert inside and all(v == "NaN" for v in inside)

    # a job running across the rollout: while it computes, tensor activity drops by 1/1.15
    spanning = jobs[(jobs.cluster == "alpha") & (jobs.start < ROLLOUT) & (jobs.end > ROLLOUT + pd.Timedelta(hours=3))]
    assert len(spanning) >= 1
    row = spanning.iloc[0]
    samples = defaultdict(list)  # (before|after) -> [(tensor, util)]
    for node in row.nodes:
        for day in sorted({row.start.date(), ROLLOUT.date() - pd.Timedelta(days=1), ROLLOUT.date(), row.end.date()}):
            path = landing / "dcgm" / "alpha" / day.isoformat() / f"{node}__-__-__{day:%Y%m%d}T000000Z.json"
            if not path.exists():
                continue
            by_field = {}
            for one in json.loads(path.read_text())["data"]["result"]:
                by_field.setdefault(one["metric"]["__name__"], []).append(one["values"])
            for gpu in range(8):
                for (t, util), (_, sm), (_, tensor) in zip(
                    by_field["DCGM_FI_DEV_GPU_UTIL"][gpu],
                    by_field["DCGM_FI_PROF_SM_ACTIVE"][gpu],
                    by_field["DCGM_FI_PROF_PIPE_TENSOR_ACTIVE"][gpu],
                ):
                    when = datetime.fromtimestamp(t, tz=timezone.utc)
                    if row.start <= when < row.end and float(sm) > 0.8:  # computing, not eval or overhead
                        samples["after" if when >= ROLLOUT else "before"].append((float(tensor), float(util)))
    before, after = np.asarray(samples["before"]), np.asarray(samples["after"])
    assert len(before) > 100 and len(after) > 100
    assert abs(np.median(after[:, 0]) / np.median(before[:, 0]) - 1 / 1.15) < 0.03
    assert np.median(after[:, 1]) >= 98 and np.median(before[:, 1]) >= 98  # nvidia-smi util does not see it


def test_probes_are_daily_and_near_peak(landing):
    rows = pd.DataFrame([row for path in files_of(landing, "probe_results") for row in jsonl(path)])
    assert (rows.probe == "gemm").all() and (rows.status == "pass").all() and (rows.device_kind == "cuda").all()
    assert rows.fraction_of_peak.between(0.77, 0.81).all()
    assert set(rows.peak) == {989.0, 312.0}
    assert (rows.groupby("run_id").gpu_uuid.nunique() == 8).all()
    assert (rows.ci_low <= rows["median"]).all() and (rows["median"] <= rows.ci_high).all()
    assert (rows["median"] == rows.value).all() and (rows.n == 50).all()
    assert rows.context.map(lambda c: c == {"simulated": True}).all()


def test_pending_queue_lists_jobs_waiting(landing, jobs):
    rows = pd.DataFrame([row for path in files_of(landing, "pending_queue") for row in jsonl(path)])
    assert len(rows) > 0
    rows["at"] = rows.ts.map(utc)
    assert (rows["at"].map(lambda t: t.minute == 0 and t.second == 0)).all()
    for row in rows.itertuples():
        waiting = jobs[(jobs.JobName == row.job_id) & (jobs.submit <= row.at) & (jobs.start > row.at)]
        pending_at_end = jobs[jobs.JobName == row.job_id].empty
        assert len(waiting) == 1 or pending_at_end, row
        assert row.requested_gpus in (8, 16, 32)


def test_allocation_is_high_but_not_full(jobs, node_events):
    window = (T1 - T0).total_seconds()
    for cluster in ("alpha", "beta"):
        mine = jobs[jobs.cluster == cluster]
        allocated = sum((row.end - row.start).total_seconds() * len(row.nodes) for row in mine.itertuples())
        outages = node_events[node_events.node.str.startswith(cluster)]
        unavailable = sum((row.end_at - row.start_at).total_seconds() for row in outages.itertuples())
        allocation = allocated / (4 * window - unavailable)
        assert 0.75 <= allocation <= 0.95, (cluster, allocation)
        waits = (mine.start - mine.submit).dt.total_seconds()
        assert waits.median() < 3600 and (waits > 0).all()
