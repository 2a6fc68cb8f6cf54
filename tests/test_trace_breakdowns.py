"""Idle-time, kernel-type and per-step busy breakdowns of traces (issue 3), and their agreement with HTA."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from functools import lru_cache
from pathlib import Path

import duckdb
import pytest

from perf_assets.lib.ingest import ingest
from perf_assets.lib.ingest.formats.kineto_trace import parse_kineto_trace
from perf_assets.lib.ingest.formats.nsys_sqlite import parse_nsys_sqlite
from perf_assets.lib.ingest.landing import describe
from perf_assets.lib.paths import DBT_PROJECT_DIR, data_home
from perf_assets.lib.traces.idle_time import KERNEL_WAIT_THRESHOLD_NS, idle_breakdown, stream_idle
from perf_assets.lib.traces.kernel_types import (
    hta_kernel_type,
    hta_label,
    kernel_type_breakdown,
    top_kernels,
    type_partition,
)
from perf_assets.lib.traces.rank_tables import launch_starts
from perf_assets.lib.traces.steps import profiler_steps, step_busy

HTA_REFERENCE = json.loads((Path(__file__).resolve().parent.parent / "bench" / "hta_reference.json").read_text())


@lru_cache(maxsize=None)
def _tables(path: str) -> dict:
    parse = parse_nsys_sqlite if path.endswith(".sqlite") else parse_kineto_trace
    return {key: table.to_pylist() for key, table in parse(describe(Path(path).parent.parent, Path(path))).items()}


def tables(samples: Path, name: str) -> dict:
    return _tables(str(samples / ("nsys_sqlite" if name.endswith(".sqlite") else "kineto") / name))


def hta_us(ns: int, end: bool = False) -> int:
    """HTA's integer µs: ceil for a start, floor for an end (trace_parser.py); exact on integer-µs traces."""
    return ns // 1000 if end else -(-ns // 1000)


# --- pure functions -----------------------------------------------------------------------------------


def test_idle_gaps_are_host_wait_kernel_wait_or_other():
    # launch after the previous end -> host wait; short gap -> kernel wait; long gap -> other; overlap -> 0
    kernels = [(0, 100, None), (150, 200, 120), (210, 300, 100), (40_000, 40_100, 0), (40_050, 40_200, 0)]
    result = stream_idle(7, kernels)
    assert (result.host_wait_ns, result.kernel_wait_ns, result.other_ns) == (50, 10, 39_700)
    assert (result.activity_count, result.gap_count, result.launch_unknown_count) == (5, 4, 1)
    assert result.share(result.other_ns) == pytest.approx(39_700 / 39_760)
    assert stream_idle(7, [(0, 5, 0)]).share(0) is None  # never idle: unknown share, not 0
    assert KERNEL_WAIT_THRESHOLD_NS == 30_000  # HTA's consecutive_kernel_delay=30 in its µs units
    assert [s.stream for s in idle_breakdown([(9, 0, 1, None), (None, 0, 1, None), (3, 0, 1, None)])] == [3, 9]


def test_kernel_types_split_union_into_exclusive_and_overlap():
    acts = [(0, 100, "compute"), (50, 150, "communication"), (140, 160, "memory"), (200, 210, "compute")]
    by_type = {t.kernel_type: t for t in kernel_type_breakdown(acts)}
    assert (by_type["compute"].time_ns, by_type["compute"].union_ns, by_type["compute"].exclusive_ns) == (110, 110, 60)
    assert (by_type["communication"].union_ns, by_type["communication"].exclusive_ns) == (100, 40)
    assert by_type["memory"].exclusive_ns == 10
    partition = {hta_label(k): v for k, v in type_partition(acts).items()}
    assert partition == {
        "COMPUTATION": 60,
        "COMPUTATION overlapping COMMUNICATION": 50,
        "COMMUNICATION": 40,
        "COMMUNICATION overlapping MEMORY": 10,
        "MEMORY": 10,
    }
    assert (
        hta_kernel_type("ncclKernel_AllReduce_RING") == "communication"
        and hta_kernel_type("Memset (Device)") == "memory"
    )
    assert hta_kernel_type("Stream Sync") is None and hta_kernel_type("gemm") == "compute"
    assert top_kernels([("a", 5), ("b", 7), ("a", 4)], limit=1) == [("a", 2, 9)]


def test_step_busy_clips_activities_to_the_step_window():
    steps = profiler_steps([("ProfilerStep#2", 100, 200), ("ProfilerStep#1", 0, 100), ("forward", 0, 300)])
    assert steps == [(1, 0, 100), (2, 100, 200)]
    rows = step_busy(steps, [(10, 30), (20, 40), (90, 120), (150, 160), (250, 260)])
    assert [(r.step, r.busy_ns, r.span_ns, r.activity_count) for r in rows] == [(1, 40, 100, 3), (2, 30, 100, 1)]


# --- per sample: concrete values ----------------------------------------------------------------------

# file -> {stream: (host_wait_ns, kernel_wait_ns, other_ns)} for some streams
IDLE = {
    "hta_sampled_rank-0.json.gz": {7: (213_825_000, 1_985_000, 261_740_000), 203: (0, 0, 0)},
    "hta_nccl_data_a100_rank0of2.json.gz": {7: (355_484_559, 1_414_168, 0), 40: (381_488_451, 0, 0)},
    "hta_mi250_rocm6.2.json.gz": {0: (8_762_842, 0, 0)},
    "extrap_win_gtx1060_concurrent_s1.sqlite": {14: (0, 34_752, 887_865), 26: (0, 12_928, 0)},
    "extrap_a100x2_exgpu_s10.sqlite": {7: (3_051_443, 0, 0)},
}
# file -> {kernel_type: (count, Σ duration ns, exclusive ns)}
KERNEL_TYPES = {
    "hta_a100_rank0of16.json.gz": {
        "compute": (4240, 143_860_000, 138_794_000),
        "memory": (1200, 36_097_000, 32_246_000),
    },
    "hta_nccl_data_a100_rank0of2.json.gz": {"communication": (14, 24_289_045, 20_479_019)},
    "tracelens_h100_bert_small.json.gz": {"compute": (60, 307_197, 307_197), "memory": (1, 2240, 2240)},
    "extrap_win_gtx1060_concurrent_s1.sqlite": {
        "compute": (12, 48_000_028, 26_772_631),
        "memory": (47, 12_129_590, 5_167_028),
    },
}
# file -> [(step, busy_ns, span_ns, last_step)]
STEPS = {
    "hta_sampled_rank-0.json.gz": [(551, 278_680_000, 607_312_000, False), (552, 268_976_000, 622_928_000, True)],
    "hta_sampled_rank-1.json.gz": [(551, 272_003_000, 607_904_000, False), (552, 308_047_000, 630_639_000, True)],
    "hta_nccl_data_a100_rank0of2.json.gz": [(4, 49_438_908, 222_442_192, False), (5, 49_728_946, 219_726_906, False), (6, 58_332_202, 224_936_243, True)],
    "hta_mi250_rocm6.2.json.gz": [(1, 149_045, 9_288_291, False), (2, 0, 49_074, True)],
    "hta_alexnet_a100_cuda_sync.json.gz": [],  # no ProfilerStep annotations: no rows
}  # fmt: skip


@pytest.mark.parametrize("name", sorted(IDLE))
def test_idle_breakdown_per_sample(samples, name):
    rows = {row["stream"]: row for row in tables(samples, name)["trace_idle_breakdowns"]}
    for stream, expected in IDLE[name].items():
        row = rows[stream]
        assert (row["host_wait_ns"], row["kernel_wait_ns"], row["other_ns"]) == expected
        assert row["idle_ns"] == sum(expected)
        shares = [row["host_wait_share"], row["kernel_wait_share"], row["other_share"]]
        assert shares == [None] * 3 if row["idle_ns"] == 0 else sum(shares) == pytest.approx(1.0)


@pytest.mark.parametrize("name", sorted(KERNEL_TYPES))
def test_kernel_types_per_sample(samples, name):
    rows = {row["kernel_type"]: row for row in tables(samples, name)["trace_kernel_types"]}
    for kernel_type, expected in KERNEL_TYPES[name].items():
        row = rows[kernel_type]
        assert (row["activity_count"], row["time_ns"], row["exclusive_ns"]) == expected
        assert row["exclusive_ns"] <= row["union_ns"] <= row["time_ns"]
    assert sum(row["time_share"] for row in rows.values()) == pytest.approx(1.0)


@pytest.mark.parametrize("name", sorted(STEPS))
def test_step_busy_per_sample(samples, name):
    rows = tables(samples, name)["trace_step_busy"]
    assert [(r["step"], r["busy_ns"], r["span_ns"], r["last_step"]) for r in rows] == STEPS[name]
    assert all(0 <= r["busy_ns"] <= r["span_ns"] for r in rows)


def test_traces_without_gpu_activity_get_no_derived_rows(samples):
    result = tables(samples, "hta_cupti_profiler_counters.json.gz")  # range profiler: no kernels
    assert [len(result[k]) for k in ("trace_idle_breakdowns", "trace_kernel_types", "trace_step_busy")] == [0, 0, 0]


def test_straggler_ratio_across_two_ranks_of_one_job(samples):
    """max/mean of busy per step across ranks: the input a straggler model uses (metric_tree.md 2.2)."""
    busy = {
        (row["step"], row["rank"]): row["busy_ns"]
        for name in ("hta_sampled_rank-0.json.gz", "hta_sampled_rank-1.json.gz")
        for row in tables(samples, name)["trace_step_busy"]
    }
    step_551 = [busy[(551, 0)], busy[(551, 1)]]
    assert max(step_551) / (sum(step_551) / 2) == pytest.approx(1.0121, abs=1e-4)


# --- agreement with HTA 0.5.0 (bench/hta_reference.json; HTA need not be installed) -----------------


def _hta_view(samples: Path, name: str) -> tuple[list[dict], dict[int, int]]:
    events = tables(samples, name)["trace_events"]
    counted = [e for e in events if e["category"] in ("kernel", "memcpy", "memset") and e["in_breakdown"]]
    return counted, launch_starts(events)


ANALYSED = sorted(name for name, figures in HTA_REFERENCE["traces"].items() if "error" not in figures)


def test_reference_covers_the_samples_hta_can_analyse():
    assert HTA_REFERENCE["hta_version"] == "0.5.0" and len(ANALYSED) == 8


@pytest.mark.parametrize("name", ANALYSED)
def test_idle_breakdown_agrees_with_hta(samples, name):
    """In HTA's units (integer µs after its ceil/floor rounding): within 0.5 % (and HTA's 0.01 µs rounding)."""
    counted, launches = _hta_view(samples, name)
    launch = {c: hta_us(start) for c, start in launches.items()}
    ours = {
        str(s.stream): {"host_wait": s.host_wait_ns, "kernel_wait": s.kernel_wait_ns, "other": s.other_ns}
        for s in idle_breakdown(
            (
                (e["stream"], hta_us(e["start_ns"]), hta_us(e["end_ns"], end=True), launch.get(e["correlation_id"]))
                for e in counted
            ),
            KERNEL_WAIT_THRESHOLD_NS // 1000,  # the same 30 µs, in these µs units
        )
    }
    hta = HTA_REFERENCE["traces"][name]["idle_by_stream_us"]
    assert set(ours) == set(hta)
    for stream, categories in hta.items():
        for category, value in categories.items():
            assert ours[stream][category] == pytest.approx(value, rel=0.005, abs=0.01), (stream, category)


@pytest.mark.parametrize("name", ANALYSED)
def test_kernel_type_breakdown_agrees_with_hta(samples, name):
    """HTA's partition of kernel time by the set of kernel types running, with its name-only classifier."""
    counted, _ = _hta_view(samples, name)
    typed = [(hta_us(e["start_ns"]), hta_us(e["end_ns"], end=True), hta_kernel_type(e["name"])) for e in counted]
    ours = {hta_label(types): ns for types, ns in type_partition([a for a in typed if a[2]]).items()}
    hta = HTA_REFERENCE["traces"][name]["kernel_type_us"]
    assert set(ours) == set(hta)
    for label, value in hta.items():
        assert ours[label] == pytest.approx(value, rel=0.005), label


def test_top_kernel_time_agrees_with_hta(samples):
    events = tables(samples, "hta_sampled_rank-0.json.gz")["trace_events"]
    kernels = [(e["name"], e["dur_ns"]) for e in events if e["category"] == "kernel" and e["in_breakdown"]]
    (name, count, total), *_ = top_kernels(kernels)
    assert name.startswith("ncclKernel_SendRecv") and count == 5
    assert total / 1000 == HTA_REFERENCE["traces"]["hta_sampled_rank-0.json.gz"]["top_kernels_us"][name[:200]]


# --- dbt: staging and intermediate trace models on a small home -------------------------------------


@pytest.mark.slow
def test_dbt_trace_models_on_samples(samples, tmp_path):
    home = data_home(tmp_path / "home").ensure()
    landed = [("kineto", "hta_sampled_rank-0.json.gz", 0), ("kineto", "hta_sampled_rank-1.json.gz", 1)]
    landed += [
        ("kineto", "hta_nccl_data_a100_rank0of2.json.gz", 0),
        ("nsys", "extrap_win_gtx1060_concurrent_s1.sqlite", 0),
    ]
    for index, (source, name, rank) in enumerate(landed):
        job = "job7" if index < 2 else f"job{index}"
        suffix = ".sqlite" if source == "nsys" else ".json.gz"
        target = home.landing / source / "c1" / "2026-11-01" / f"node{index}__{job}__{rank}__20261101T000000Z{suffix}"
        target.parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(samples / ("nsys_sqlite" if source == "nsys" else "kineto") / name, target)
    assert {o.status for o in ingest(home)} == {"ok"}
    dbt = Path(sys.executable).parent / "dbt"
    command = [str(dbt) if dbt.exists() else "dbt", "build", "--select", "+int_traces__step_stragglers"]
    command += ["+int_traces__rank_idle", "+int_traces__top_kernels", "stg_traces__kernel_types"]
    command += ["--project-dir", str(DBT_PROJECT_DIR), "--profiles-dir", str(DBT_PROJECT_DIR)]
    command += ["--target-path", str(tmp_path / "target"), "--log-path", str(tmp_path / "target")]
    done = subprocess.run(
        command, env=os.environ | {"PERFWH_HOME": str(home.root)}, capture_output=True, text=True, timeout=300
    )
    assert done.returncode == 0, done.stdout[-4000:]
    with duckdb.connect(str(home.warehouse_db), read_only=True) as connection:
        query = lambda sql: connection.sql(sql).fetchall()  # noqa: E731
        stragglers = query(
            "select job_id, step, rank_count, busiest_rank, round(straggler_ratio, 4) from intermediate.int_traces__step_stragglers "
            "order by job_id, step"
        )
        assert stragglers == [("job2", 4, 1, 0, None), ("job2", 5, 1, 0, None), ("job7", 551, 2, 0, 1.0121)]
        idle = query(
            "select job_id, rank, stream_count, host_wait_ns from intermediate.int_traces__rank_idle order by job_id, rank"
        )
        assert idle[:2] == [("job2", 0, 2, 736_973_010), ("job3", 0, 15, 0)]
        top = query(
            "select kernel_type, kernel_count, time_ns from intermediate.int_traces__top_kernels "
            "where job_id = 'job7' and rank = 0 and time_rank = 1"
        )
        assert top == [("communication", 5, 195_327_000)]
