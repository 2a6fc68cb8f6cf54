"""Trace formats (Kineto JSON, nsys SQLite) -> canonical trace tables, and HTA's temporal breakdown."""

from __future__ import annotations

import gzip
import json
import shutil
from functools import lru_cache
from pathlib import Path

import duckdb
import pytest

from perf_assets.lib.contracts import RAW_TABLES
from perf_assets.lib.ingest import ingest
from perf_assets.lib.ingest.formats.errors import QuarantineError
from perf_assets.lib.ingest.formats.kineto_trace import parse_kineto_trace
from perf_assets.lib.ingest.formats.nsys_sqlite import parse_nsys_sqlite
from perf_assets.lib.ingest.landing import describe
from perf_assets.lib.ingest.run import reingest
from perf_assets.lib.paths import data_home
from perf_assets.lib.traces.breakdown import classify_kernel, hta_rounded, temporal_breakdown

HTA_REFERENCE = Path(__file__).resolve().parent.parent / "bench" / "hta_reference.json"


@lru_cache(maxsize=None)
def _parse(path: str) -> dict:
    parse = parse_nsys_sqlite if path.endswith(".sqlite") else parse_kineto_trace
    tables = parse(describe(Path(path).parent.parent, Path(path)))
    return {"events": tables["trace_events"], "breakdowns": tables["trace_rank_breakdowns"].to_pylist()}


def parsed(samples: Path, name: str) -> dict:
    folder = "nsys_sqlite" if name.endswith(".sqlite") else "kineto"
    return _parse(str(samples / folder / name))


def note_of(result: dict) -> str:
    return (result["events"].schema.metadata or {}).get(b"ingest_note", b"").decode()


# file, rank, device index, device name, time base, kernels, Σ kernel time (ns), idle share, compute share,
# communication kernels (collective name when the trace has one, else kernel name prefix)
SAMPLES = [
    ("hta_a100_rank0of16.json.gz", 0, 0, "NVIDIA A100-SXM4-80GB", "kineto_unix_us", 6080, 401445000, 0.6944, 0.1415, {"ncclKernel_SendRecv"}),
    ("hta_alexnet_a100_cuda_sync.json.gz", 0, 0, "NVIDIA A100-PG509-200", "kineto_unix_us", 79, 10692000, 0.9949, 0.0008, set()),
    ("hta_edgecase_uint64_comms_id.json.gz", None, 0, None, "kineto_relative_us", 1, 50000, 0.0, 0.0, {"ncclKernel_AllReduce"}),
    ("hta_legacy_categories_inference_rank_1.json.gz", 1, 0, None, "kineto_unix_us", 4, 30000, 0.9816, 0.0184, set()),
    ("hta_mi250_rocm6.2.json.gz", None, 2, "AMD Radeon Graphics", "kineto_base_time_ns", 14, 110884, 0.9833, 0.0124, set()),
    ("hta_nccl_data_a100_rank0of2.json.gz", 0, 0, "NVIDIA A100-PG509-200", "kineto_base_time_ns", 2700, 162532311, 0.7723, 0.1766, {"allreduce", "broadcast"}),
    ("hta_sampled_rank-0.json.gz", 0, 0, None, "kineto_unix_us", 1154, 606519000, 0.5356, 0.1771, {"ncclKernel_SendRecv"}),
    ("hta_sampled_rank-1.json.gz", 1, 1, None, "kineto_unix_us", 1104, 651026000, 0.5472, 0.2257, {"ncclKernel_SendRecv"}),
    ("tracelens_h100_bert_small.json.gz", None, 0, "NVIDIA H100 80GB HBM3", "kineto_base_time_ns", 60, 307197, 0.9208, 0.0786, set()),
    ("extrap_a100x2_exgpu_s10.sqlite", None, 0, "A100-PCIE-40GB", "nsys_session_relative_ns", 6, 34113, 0.9889, 0.0111, set()),
    ("extrap_win_gtx1060_concurrent_s1.sqlite", None, 0, "GeForce GTX 1060 with Max-Q Design", "nsys_session_utc_ns", 12, 48000028, 0.4839, 0.4404, set()),
]  # fmt: skip


@pytest.mark.parametrize(
    "name, rank, device, device_name, base, kernels, kernel_ns, idle, compute, comm",
    SAMPLES,
    ids=[s[0] for s in SAMPLES],
)
def test_sample_parses_to_known_figures(
    samples, name, rank, device, device_name, base, kernels, kernel_ns, idle, compute, comm
):
    result = parsed(samples, name)
    (row,) = result["breakdowns"]
    assert (row["rank"], row["device_index"], row["device_name"], row["time_base"]) == (rank, device, device_name, base)
    assert (row["kernel_count"], row["kernel_time_ns"]) == (kernels, kernel_ns)
    events = result["events"].to_pylist()
    assert sum(e["category"] == "kernel" for e in events) == kernels
    assert sum(e["dur_ns"] for e in events if e["category"] == "kernel") == kernel_ns
    assert row["idle_share"] == pytest.approx(idle, abs=5e-5) and row["compute_share"] == pytest.approx(
        compute, abs=5e-5
    )
    assert row["idle_share"] + row["compute_share"] + row["non_compute_share"] == pytest.approx(1.0, abs=1e-12)
    assert row["idle_ns"] + row["compute_ns"] + row["non_compute_ns"] == row["span_ns"]
    found = {e["collective_name"] or e["name"] for e in events if e["kernel_type"] == "communication"}
    assert {next((c for c in comm if f.startswith(c)), f) for f in found} == comm
    assert row["communication_kernel_count"] == sum(e["kernel_type"] == "communication" for e in events)
    if comm and row["communication_ns"]:
        assert 0 <= row["comm_overlap_share"] <= 1
    else:
        assert row["comm_overlap_share"] is None  # no communication: unknown, not 0
    assert row["time_absolute"] == (base not in ("kineto_relative_us", "nsys_session_relative_ns"))


def test_nccl_kernels_carry_their_collective_args(samples):
    events = parsed(samples, "hta_nccl_data_a100_rank0of2.json.gz")["events"].to_pylist()
    allreduce = next(e for e in events if e["collective_name"] == "allreduce")
    assert (allreduce["group_size"], allreduce["msg_dtype"], allreduce["process_group_name"]) == (2, "Float", "0")
    assert allreduce["in_msg_nelems"] > 0 and allreduce["start_ns"] > 1_711_964_646_000_000_000  # base + relative


def test_integers_beyond_int64_are_kept_as_text(samples, tmp_path):
    result = parsed(samples, "hta_edgecase_uint64_comms_id.json.gz")  # the big id sits on a cpu_op: counted
    assert "cpu_op 1" in note_of(result) and result["events"].num_rows == 1
    trace = {
        "traceEvents": [
            {"ph": "X", "cat": "kernel", "name": "k", "pid": 0, "tid": 7, "ts": 100, "dur": 5,
             "args": {"correlation": 18446744073709551615, "Comms Id": 10159970886766084423}},
        ]
    }  # fmt: skip
    path = tmp_path / "kineto" / "c" / "2026-11-01" / "h__j__3__20261101T000000Z.json"
    path.parent.mkdir(parents=True)
    path.write_text(json.dumps(trace))
    (event,) = parse_kineto_trace(describe(tmp_path, path))["trace_events"].to_pylist()
    assert event["correlation_id"] is None  # does not fit BIGINT: NULL, the text stays in args_json
    assert json.loads(event["args_json"])["Comms Id"] == "10159970886766084423"
    assert event["rank"] == 3 and event["host"] == "h" and event["job_id"] == "j"  # from the file name


def test_range_profiler_trace_without_kernels_ingests_what_it_has(samples):
    result = parsed(samples, "hta_cupti_profiler_counters.json.gz")
    categories = result["events"].column("category").to_pylist()
    assert categories.count("range_profiler") == 77 and categories.count("kernel") == 0
    assert "CUPTI range-profiler trace (77 cuda_profiler_range events stored)" in note_of(result)
    (row,) = result["breakdowns"]
    assert row["span_ns"] is None and row["idle_share"] is None and row["kernel_count"] is None  # unknown, not 0
    assert "no GPU activity" in row["note"]


def test_legacy_capitalised_categories_are_read(samples):
    categories = parsed(samples, "hta_legacy_categories_inference_rank_1.json.gz")["events"].column("category")
    assert sorted(set(categories.to_pylist())) == ["kernel", "runtime"]
    assert categories.to_pylist().count("runtime") == 8


def test_nsys_non_utf8_text_is_replaced_and_noted(samples):
    result = parsed(samples, "extrap_win_gtx1060_concurrent_s1.sqlite")
    assert "non-UTF-8 text decoded with replacement (EXPORT_META_DATA 1" in note_of(result)
    counts = {c: result["events"].column("category").to_pylist().count(c) for c in ("kernel", "memcpy", "memset")}
    assert counts == {"kernel": 12, "memcpy": 30, "memset": 17}
    assert result["breakdowns"][0]["device_uuid"] == "GPU-cd91cda4-52e0-faf6-6639-ae3dd5a2e798"


def test_nsys_older_schema_reads_target_info_cuda_gpu(samples):
    result = parsed(samples, "extrap_a100x2_exgpu_s10.sqlite")
    assert "absent: CUPTI_ACTIVITY_KIND_MEMCPY" in note_of(result)
    assert "relative to the session start" in note_of(result)


def test_breakdown_counts_overlapped_communication_as_compute():
    activities = [(0, 100, "compute"), (50, 150, "communication"), (200, 250, "memory"), (300, 400, "compute")]
    result = temporal_breakdown(activities)
    assert (result.span_ns, result.idle_ns, result.compute_ns, result.non_compute_ns) == (400, 100, 200, 100)
    assert result.comm_overlap_share == 0.5
    assert temporal_breakdown([]) is None
    assert classify_kernel("ncclDevKernel_AllGather_RING_LL") == "communication"
    assert classify_kernel("rcclKernel") == "communication" and classify_kernel("hipLaunchKernel") == "compute"
    assert classify_kernel("anything", "memcpy") == "memory"


def test_breakdown_agrees_with_hta_reference(samples):
    """bench/hta_reference.json (HTA 0.5.0); HTA rounds float µs to integers, so we compare in its units."""
    reference = json.loads(HTA_REFERENCE.read_text())["traces"]
    compared = 0
    for name, figures in reference.items():
        if "error" in figures:
            continue
        events = parsed(samples, name)["events"].to_pylist()
        activities = [(e["start_ns"], e["end_ns"], e["kernel_type"]) for e in events if e["in_breakdown"]]
        ours = temporal_breakdown(hta_rounded(activities))
        for share in ("idle_share", "compute_share", "non_compute_share"):
            assert getattr(ours, share) == pytest.approx(figures[share], abs=0.005), (name, share)
        compared += 1
    assert compared == 8


def _land(samples: Path, home, names: list[str]) -> None:
    for rank, name in enumerate(names):
        source, suffix = ("nsys", ".sqlite") if name.endswith(".sqlite") else ("kineto", ".json.gz")
        folder = "nsys_sqlite" if source == "nsys" else "kineto"
        target = home.landing / source / "c1" / "2026-11-01" / f"node{rank}__job7__{rank}__20261101T000000Z{suffix}"
        target.parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(samples / folder / name, target)


def _count(home, key: str) -> int:
    glob = home.lake_raw / RAW_TABLES[key].name / "**" / "*.parquet"
    return duckdb.sql(f"select count(*) from read_parquet('{glob}', union_by_name = true)").fetchone()[0]


def test_batch_quarantines_truncated_gzip_and_reingest_changes_nothing(samples, tmp_path):
    home = data_home(tmp_path / "home").ensure()
    names = ["hta_sampled_rank-0.json.gz", "hta_sampled_rank-1.json.gz", "hta_cupti_profiler_counters.json.gz"]
    _land(samples, home, [*names, "extrap_win_gtx1060_concurrent_s1.sqlite"])
    truncated = home.landing / "kineto" / "c1" / "2026-11-01" / "node9__job7__9__20261101T000000Z.json.gz"
    data = (samples / "kineto" / "hta_mi250_rocm6.2.json.gz").read_bytes()
    truncated.write_bytes(data[: len(data) // 2])

    outcomes = {Path(o.path).name: o for o in ingest(home)}

    bad = outcomes.pop(truncated.name)
    assert bad.status == "quarantined" and "truncated or corrupt gzip" in bad.reason
    assert {o.status for o in outcomes.values()} == {"ok"} and len(outcomes) == 4
    assert "range-profiler" in outcomes["node2__job7__2__20261101T000000Z.json.gz"].reason
    counts = (_count(home, "trace_events"), _count(home, "trace_rank_breakdowns"))
    assert counts[1] == 4
    ranks = duckdb.sql(
        f"select rank, rank_source from read_parquet('{home.lake_raw}/raw_trace_rank_breakdowns/**/*.parquet') "
        "order by rank"
    ).fetchall()
    assert ranks == [(0, "trace"), (0, "trace"), (1, "trace"), (3, "path")]  # the cupti trace says rank 0

    assert {o.status for o in ingest(home)} == {"already_ingested"}
    reingest(home, "kineto_trace_json")
    reingest(home, "nsys_sqlite")
    assert (_count(home, "trace_events"), _count(home, "trace_rank_breakdowns")) == counts


def test_trace_above_the_memory_bound_is_quarantined(tmp_path, monkeypatch):
    """The reader holds the whole document (stdlib json): ~6.5x the decompressed size, measured (docs)."""
    monkeypatch.setenv("PERFWH_TRACE_MAX_JSON_BYTES", "100000")
    events = [
        {"ph": "X", "cat": "kernel", "name": f"k{i}", "pid": 0, "tid": 7, "ts": i * 10, "dur": 5} for i in range(3000)
    ]
    path = tmp_path / "kineto" / "c" / "2026-11-01" / "big.json.gz"
    path.parent.mkdir(parents=True)
    with gzip.open(path, "wt") as handle:
        json.dump({"traceEvents": events}, handle)
    assert path.stat().st_size < 100000  # the bound is on the decompressed JSON, not the file
    with pytest.raises(QuarantineError, match="over the reader's bound of 100000 bytes decompressed"):
        parse_kineto_trace(describe(tmp_path, path))
    monkeypatch.setenv("PERFWH_TRACE_MAX_JSON_BYTES", str(10**7))
    assert parse_kineto_trace(describe(tmp_path, path))["trace_events"].num_rows == 3000
