"""Benchmark formats: nccl-tests logs and MLPerf :::MLLOG result logs, parsers on the real samples, bad
input, and the dbt models built on a small home (docs/formats/benchmarks.md)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import duckdb
import pytest

from perf_assets.lib.ingest import ingest
from perf_assets.lib.ingest.formats.errors import QuarantineError
from perf_assets.lib.ingest.formats.mlperf_mllog import parse_mlperf_mllog
from perf_assets.lib.ingest.formats.nccl_tests import parse_nccl_tests
from perf_assets.lib.ingest.formats.nccl_tests_ops import TableRow, bus_factor, infer_op, nccl_version
from perf_assets.lib.ingest.landing import describe
from perf_assets.lib.ingest.manifest import read_manifest
from perf_assets.lib.paths import DBT_PROJECT_DIR, data_home

DAY = "2026-01-29"


def land(home, source: str, name: str, content: str | bytes, cluster: str = "lab") -> Path:
    path = home.landing / source / cluster / DAY / name
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(content.encode() if isinstance(content, str) else content)
    return path


def parse_nccl(home, name: str, content: str | bytes) -> list[dict]:
    return parse_nccl_tests(describe(home.landing, land(home, "nccl_tests", name, content))).to_pylist()


def parse_mlperf(home, name: str, content: str | bytes) -> list[dict]:
    return parse_mlperf_mllog(describe(home.landing, land(home, "mlperf", name, content)))["mlperf_events"].to_pylist()


def runs_of(rows: list[dict]) -> list[dict]:
    """The first row of each run, in file order."""
    return list({row["run_id"]: row for row in reversed(rows)}.values())[::-1]


@pytest.fixture
def home(tmp_path):
    return data_home(tmp_path / "home").ensure()


# --------------------------------------------------------------------------- nccl-tests: real samples

NCCL_SAMPLES = {
    "xxrjun_h100_N1_G8_single_node.log": {
        "ops": ["all_reduce", "all_gather", "reduce_scatter", "alltoall", "sendrecv"],
        "rows": 100,
        "status": ["ok"] * 5,
        "n_ranks": 8,
        "hosts": ["cnode3-002"],
        "nccl_version": "2.29.2",
        "sizes": 10,
        "largest": 17179869184,
        "busbw_largest": (482.27, 482.12),
        "avg_busbw": 437.957,
    },
    "xxrjun_h100_N10_G1_multinode.log": {
        "ops": ["all_reduce", "all_gather", "reduce_scatter", "alltoall", "sendrecv"],
        "rows": 100,
        "status": ["ok"] * 5,
        "n_ranks": 10,
        "hosts": [f"cnode3-{n:03d}" for n in range(2, 12)],
        "nccl_version": "2.29.2",
        "sizes": 10,
        "largest": 17179869184,
        "busbw_largest": (48.89, 48.89),
        "avg_busbw": 47.8165,
    },
    "xxrjun_h100_N2_G8_FAILED.log": {
        "ops": ["alltoall", "sendrecv"],
        "rows": 2,
        "status": ["failed", "failed"],
        "n_ranks": 16,
        "hosts": ["cnode2-007", "cnode2-016"],
        "nccl_version": "2.28.7",
        "sizes": 0,
        "largest": None,
        "busbw_largest": None,
        "avg_busbw": None,
    },
    "alcf_polaris_a100_n2g4_all_reduce.dat": {
        "ops": ["all_reduce"],
        "rows": 58,
        "status": ["ok"],
        "n_ranks": 8,
        "hosts": ["x3006c0s1b1n0", "x3006c0s25b0n0"],
        "nccl_version": None,
        "sizes": 29,
        "largest": 1073741824,
        "busbw_largest": (9.45, 9.45),
        "avg_busbw": 2.96746,
    },
}


@pytest.mark.parametrize("name", sorted(NCCL_SAMPLES))
def test_nccl_tests_sample(samples, home, name):
    expected = NCCL_SAMPLES[name]
    rows = parse_nccl(home, name, (samples / "nccl_tests" / name).read_bytes())
    runs = runs_of(rows)

    assert len(rows) == expected["rows"]
    assert [run["op"] for run in runs] == expected["ops"]
    assert [run["status"] for run in runs] == expected["status"]
    assert [run["run_index"] for run in runs] == list(range(len(runs)))
    first = runs[0]
    assert first["n_ranks"] == expected["n_ranks"] and first["hosts"] == expected["hosts"]
    assert first["n_hosts"] == len(expected["hosts"])
    assert first["nccl_version"] == expected["nccl_version"]
    assert first["avg_bus_bandwidth_gbps"] == expected["avg_busbw"]
    assert first["captured_at"] is None and str(first["event_date"]) == DAY  # no time in the format: the day folder
    first_rows = [row for row in rows if row["run_id"] == first["run_id"] and row["size_bytes"] is not None]
    assert len({row["size_bytes"] for row in first_rows}) == expected["sizes"]
    if expected["largest"] is not None:
        largest = max(row["size_bytes"] for row in first_rows)
        at_largest = {row["placement"]: row["busbw_gbps"] for row in first_rows if row["size_bytes"] == largest}
        assert largest == expected["largest"]
        assert (at_largest["out_of_place"], at_largest["in_place"]) == expected["busbw_largest"]
    rank_map = json.loads(first["rank_map_json"])
    assert [rank["rank"] for rank in rank_map] == list(range(expected["n_ranks"]))
    assert sorted({rank["host"] for rank in rank_map}) == expected["hosts"]


def test_nccl_single_node_details(samples, home):
    name = "xxrjun_h100_N1_G8_single_node.log"
    rows = parse_nccl(home, name, (samples / "nccl_tests" / name).read_bytes())
    all_reduce = [row for row in rows if row["op"] == "all_reduce"]
    run = all_reduce[0]
    assert run["test_name"] == "all_reduce_perf" and run["op_source"] == "header"
    assert run["nccl_tests_version"] == "2.17.8" and run["gpu_name"] == "NVIDIA H100 80GB HBM3"
    assert (run["n_threads"], run["n_gpus"], run["min_bytes"], run["max_bytes"]) == (1, 1, 33554432, 68719476736)
    assert run["max_bytes_reduced_to"] == 26549638485
    assert (run["step"], run["warmup_iters"], run["iters"], run["agg_iters"]) == ("2(factor)", 5, 20, 1)
    assert (run["validation"], run["graph"], run["out_of_bounds_values"]) == (1, 0, 0)
    smallest = next(r for r in all_reduce if r["size_bytes"] == 33554432 and r["placement"] == "out_of_place")
    assert (smallest["count_elements"], smallest["data_type"], smallest["redop"], smallest["root"]) == (
        4194304,
        "double",
        "sum",
        -1,
    )
    assert (smallest["time_us"], smallest["algbw_gbps"], smallest["busbw_gbps"], smallest["wrong"]) == (
        182.87,
        183.49,
        321.10,
        0,
    )
    rank_7 = json.loads(run["rank_map_json"])[7]
    assert rank_7 == {
        "rank": 7,
        "group": 0,
        "pid": 4180135,
        "host": "cnode3-002",
        "device": 7,
        "bus": "0000:df:00",
        "bus_id": "0000:df:00.0",
        "gpu": "NVIDIA H100 80GB HBM3",
    }
    alltoall = [row for row in rows if row["op"] == "alltoall"]
    assert {row["wrong"] for row in alltoall if row["placement"] == "in_place"} == {None}  # N/A: unknown, not 0
    assert {row["wrong"] for row in alltoall if row["placement"] == "out_of_place"} == {0}
    assert len({row["run_id"] for row in rows}) == 5


def test_nccl_multinode_rounded_sizes_and_integer_times(samples, home):
    name = "xxrjun_h100_N10_G1_multinode.log"
    rows = parse_nccl(home, name, (samples / "nccl_tests" / name).read_bytes())
    all_gather_sizes = sorted({row["size_bytes"] for row in rows if row["op"] == "all_gather"})
    assert all_gather_sizes[0] == 33554400 and all_gather_sizes[-1] == 17179869120  # multiples of ranks x type
    at_4g = next(
        row
        for row in rows
        if row["op"] == "all_reduce" and row["size_bytes"] == 4294967296 and row["placement"] == "out_of_place"
    )
    assert at_4g["time_us"] == 158724.0  # printed without decimals


def test_nccl_failed_run_is_kept_with_its_error_text(samples, home):
    name = "xxrjun_h100_N2_G8_FAILED.log"
    rows = parse_nccl(home, name, (samples / "nccl_tests" / name).read_bytes())
    assert len(rows) == 2
    for row, test in zip(rows, ["alltoall_perf", "sendrecv_perf"]):
        assert row["test_name"] == test and row["status"] == "failed"
        assert row["placement"] is None and row["busbw_gbps"] is None and row["avg_bus_bandwidth_gbps"] is None
        assert (
            "Test NCCL failure common.cu:1279 'remote process exited or there was a network error" in row["error_text"]
        )
        assert "(x8)" in row["error_text"] and "Test failure common.cu:1100" in row["error_text"]
    assert rows[0]["nccl_tests_version"] == "2.17.6"


def test_nccl_polaris_older_build_without_test_name(samples, home):
    name = "alcf_polaris_a100_n2g4_all_reduce.dat"
    rows = parse_nccl(home, name, (samples / "nccl_tests" / name).read_bytes())
    run = rows[0]
    assert run["test_name"] is None and run["nccl_tests_version"] is None and run["nccl_version"] is None
    assert run["op"] == "all_reduce" and run["op_source"] == "inferred"  # float sum, count x 4 = size, busbw/algbw 1.75
    assert run["gpu_name"] == "NVIDIA A100-SXM4-40GB"
    rank_4 = json.loads(run["rank_map_json"])[4]
    assert (rank_4["host"], rank_4["device"], rank_4["bus"], rank_4["bus_id"]) == ("x3006c0s25b0n0", 0, "0x07", None)
    smallest = [row for row in rows if row["size_bytes"] == 4]
    assert {row["data_type"] for row in smallest} == {"float"} and {row["busbw_gbps"] for row in smallest} == {0.0}
    largest = next(row for row in rows if row["size_bytes"] == 1073741824 and row["placement"] == "in_place")
    assert (largest["time_us"], largest["algbw_gbps"], largest["busbw_gbps"]) == (198926.0, 5.40, 9.45)


def test_nccl_summary_csv_is_skipped_not_parsed(samples, home):
    land(home, "nccl_tests", "summary.csv", (samples / "nccl_tests" / "xxrjun_summary_multinode.csv").read_bytes())
    [outcome] = ingest(home)
    assert outcome.status == "skipped" and outcome.format is None and "summary.csv" in outcome.reason


# --------------------------------------------------------------------------- nccl-tests: variants and bad input

HEADER = """\
# nThread 1 nGpus 1 minBytes 8 maxBytes 16 step: 2(factor) warmup iters: 5 iters: 20 agg iters: 1 validation: 1 graph: 0
#
# Using devices
#  Rank  0 Group  0 Pid   1001 on node-a device  0 [0000:1b:00] NVIDIA H100 80GB HBM3
#  Rank  1 Group  0 Pid   1002 on node-a device  1 [0000:43:00] NVIDIA H100 80GB HBM3
#  Rank  2 Group  0 Pid   2001 on node-b device  0 [0000:1b:00] NVIDIA H100 80GB HBM3
#
#                                                              out-of-place                       in-place
#       size         count      type   redop    root     time   algbw   busbw  #wrong     time   algbw   busbw  #wrong
#        (B)    (elements)                               (us)  (GB/s)  (GB/s)             (us)  (GB/s)  (GB/s)
"""
ROW_8 = "           8             2     float     sum      -1    10.50    0.00    0.00       0    10.40    0.00    0.00     N/A\n"
ROW_16 = "          16             4     float     sum      -1    11.00    0.00    0.00       0    11.10    0.00    0.00     N/A\n"
TRAILER = "# Out of bounds values : 0 OK\n# Avg bus bandwidth    : 0.00123\n#\n"


def test_nccl_debug_lines_srun_labels_and_n_a(home):
    info = "node-a:1001:1001 [0] NCCL INFO Channel 00/02 : 0 1 2\n"
    warn = "node-b:2001:2001 [0] NCCL WARN NET/IB : Got async event : port error\n"
    labelled = "".join(f"0: {line}" for line in HEADER.splitlines(keepends=True))
    rows = parse_nccl(home, "debug.log", labelled + info + ROW_8 + info + warn + ROW_16 + TRAILER)
    assert len(rows) == 4 and {row["status"] for row in rows} == {"ok"}
    assert rows[0]["nccl_debug_lines"] == 3 and rows[0]["error_text"] is None  # a WARN in an ok run is no failure
    assert rows[0]["n_ranks"] == 3 and rows[0]["hosts"] == ["node-a", "node-b"]
    assert [row["wrong"] for row in rows] == [0, None, 0, None]
    assert rows[0]["op"] is None and rows[0]["op_source"] is None  # tiny sizes prove nothing: unknown, not a guess


def test_nccl_run_without_trailer_is_failed_and_out_of_bounds_fails(home):
    [cut_short, *_] = parse_nccl(home, "short.log", HEADER + ROW_8)
    assert cut_short["status"] == "failed" and "ended early" in cut_short["error_text"]
    assert cut_short["busbw_gbps"] == 0.0  # its measured rows are kept
    bad_values = HEADER + ROW_8 + "# Out of bounds values : 12 FAILED\n# Avg bus bandwidth    : 0.00123\n"
    rows = parse_nccl(home, "oob.log", bad_values)
    assert {row["status"] for row in rows} == {"failed"} and rows[0]["out_of_bounds_values"] == 12
    assert "Out of bounds values : 12 FAILED" in rows[0]["error_text"]


def test_nccl_launcher_errors_after_the_last_test_are_a_failed_launch(home):
    launcher = "srun: error: node-b: task 2: Exited with exit code 1\n"
    rows = parse_nccl(home, "two.log", HEADER + ROW_8 + TRAILER + launcher)
    runs = runs_of(rows)
    assert [run["status"] for run in runs] == ["ok", "failed"]
    assert runs[1]["run_index"] == 1 and runs[1]["placement"] is None and launcher.strip() in runs[1]["error_text"]


def test_nccl_launcher_only_file_is_a_failed_run_when_it_names_nccl_tests(home):
    text = (
        "+ srun -N 2 ./build/all_reduce_perf -b 8 -e 8G -f 2\n"
        "launch failed on x3006c0s1b1n0: Couldn't forward RPC launch(...) PMI server\n"
        "CXI alloc failed\n"
    )
    [row] = parse_nccl(home, "launch.log", text)
    assert row["status"] == "failed" and row["test_name"] == "all_reduce_perf" and row["op"] == "all_reduce"
    assert "launch failed" in row["error_text"] and "CXI alloc failed" in row["error_text"]
    assert row["n_ranks"] is None and row["busbw_gbps"] is None


@pytest.mark.parametrize(
    ("content", "reason"),
    [
        (b"", "empty file"),
        (b"\n \n", "empty file"),
        (b"launch failed on node-a: PMI server unreachable\n", "not recognisably an nccl-tests launch"),
        (b"# nThread 1 nGpus 1 minBytes 8 \xff\n", "line 1: not UTF-8"),
        (
            HEADER + ROW_8 + "          16             4     float     sum      -1    11.0",
            "line 12: results row has 6 fields",
        ),
        (ROW_8 + TRAILER, "line 1: results row before any test header"),
        (HEADER.replace("#wrong     time", "#wrong  extra   time"), "unknown results table header"),
    ],
    ids=["empty", "blank", "launcher-only-unnamed", "not-utf8", "cut-mid-row", "cut-at-start", "unknown-header"],
)
def test_nccl_bad_input_is_quarantined_with_a_reason(home, content, reason):
    with pytest.raises(QuarantineError, match=reason):
        parse_nccl(home, "bad.log", content)


def test_nccl_ops_facts():
    assert nccl_version(22902) == "2.29.2" and nccl_version(2708) == "2.7.8" and nccl_version(None) is None
    assert bus_factor("all_reduce", 8) == 1.75 and bus_factor("alltoall", 10) == 0.9 and bus_factor("x", 8) is None
    row = TableRow(1 << 30, 1 << 28, "float", "sum", -1, 5.40, 9.45)
    assert infer_op([row], 8) == "all_reduce"
    assert infer_op([TableRow(1 << 30, 1 << 25, "float", "sum", -1, 5.40, 4.725)], 8) == "reduce_scatter"
    assert infer_op([TableRow(1 << 30, 1 << 25, "float", "none", -1, 5.40, 4.725)], 8) is None  # gather or alltoall
    assert infer_op([row], 2) is None  # all_reduce and sendrecv look alike at 2 ranks


# --------------------------------------------------------------------------- MLPerf: real samples

MLPERF_SAMPLES = {
    "v4.0_nvidia_eos_1xdgxh100_llama2_70b_lora_result_0.txt": {
        "benchmark": "llama2_70b_lora",
        "events": 52,
        "records": 52,
        "other_lines": 0,
        "sysjson_lines": 2,
        "run_start_ms": 1714897740668,
        "run_stop_ms": 1714899369711,
        "time_to_train_s": 1629.043,
        "duplicated": {},
    },
    "v4.0_nvidia_eos_n64_gpt3_result_0.txt": {
        "benchmark": "gpt3",
        "events": 151,
        "records": 725,
        "other_lines": 0,
        "sysjson_lines": 2,
        "run_start_ms": 1715043829220,
        "run_stop_ms": 1715046977115,
        "time_to_train_s": 3147.895,
        "duplicated": {"init_start": 512, "cache_clear": 64},
    },
    "v1.0_nvidia_dgxa100_rnnt_result_1.txt": {
        "benchmark": "rnnt",
        "events": 520,
        "records": 527,
        "other_lines": 390,
        "sysjson_lines": 0,
        "run_start_ms": 1621204787362,
        "run_stop_ms": 1621207003000,
        "time_to_train_s": 2215.638,
        "duplicated": {"init_start": 8},
    },
}


@pytest.mark.parametrize("name", sorted(MLPERF_SAMPLES))
def test_mlperf_sample(samples, home, name):
    expected = MLPERF_SAMPLES[name]
    rows = parse_mlperf(home, name, (samples / "mlperf_mllog" / name).read_bytes())
    by_key = {}
    for row in rows:
        by_key.setdefault(row["key"], row)

    assert len(rows) == expected["events"] and len({row["event_id"] for row in rows}) == len(rows)
    assert len({row["run_id"] for row in rows}) == 1
    assert {(row["mllog_records"], row["other_lines"], row["sysjson_lines"]) for row in rows} == {
        (expected["records"], expected["other_lines"], expected["sysjson_lines"])
    }
    assert json.loads(by_key["submission_benchmark"]["value_json"]) == expected["benchmark"]
    start, stop = by_key["run_start"], by_key["run_stop"]
    assert (start["time_ms"], stop["time_ms"]) == (expected["run_start_ms"], expected["run_stop_ms"])
    assert (stop["time_ms"] - start["time_ms"]) / 1000 == expected["time_to_train_s"]
    assert stop["status"] == "success" and stop["event_type"] == "INTERVAL_END"
    assert {row["key"]: row["duplicate_count"] for row in rows if row["duplicate_count"] > 1} == expected["duplicated"]
    assert sum(row["duplicate_count"] for row in rows) == expected["records"]
    assert str(start["event_date"]) == start["ts"].date().isoformat()  # the log's own time, not the folder's


def test_mlperf_gpt3_per_rank_copies_collapse_to_one_event(samples, home):
    name = "v4.0_nvidia_eos_n64_gpt3_result_0.txt"
    rows = parse_mlperf(home, name, (samples / "mlperf_mllog" / name).read_bytes())
    [init_start] = [row for row in rows if row["key"] == "init_start"]
    assert init_start["duplicate_count"] == 512 and init_start["line_number"] == 67
    assert init_start["time_ms"] == 1715043538598  # the earliest copy
    assert (init_start["ts_last"] - init_start["ts"]).total_seconds() == 1.053  # rank skew, kept visible
    system = json.loads(init_start["system_json"])
    assert (system["system_name"], system["number_of_nodes"], system["accelerators_per_node"]) == ("Eos_n64", "64", "8")
    evals = [row for row in rows if row["key"] == "eval_accuracy"]
    assert len(evals) == 24 and evals[-1]["epoch_num"] == 1245708288.0


def test_mlperf_llama_values_and_metadata(samples, home):
    name = "v4.0_nvidia_eos_1xdgxh100_llama2_70b_lora_result_0.txt"
    rows = parse_mlperf(home, name, (samples / "mlperf_mllog" / name).read_bytes())
    tracked = [row for row in rows if row["key"] == "tracked_stats"]
    assert len(tracked) == 5 and tracked[-1]["step"] == 3072 and tracked[-1]["value_num"] is None
    assert json.loads(tracked[-1]["value_json"]) == {"throughput": 2.1552190596720857}
    stop = next(row for row in rows if row["key"] == "run_stop")
    assert stop["samples_count"] == 3072 and stop["value_num"] == 0.9233128428459167
    assert next(row for row in rows if row["key"] == "seed")["value_num"] == 31105.0
    assert next(row for row in rows if row["key"] == "cache_clear")["value_json"] == "true"
    assert next(row for row in rows if row["key"] == "cache_clear")["value_num"] is None  # a bool is not a number


# --------------------------------------------------------------------------- MLPerf: variants and bad input

EVENT = ':::MLLOG {{"namespace": "", "time_ms": {ms}, "event_type": "{kind}", "key": "{key}", "value": {value}, "metadata": {{"file": "t.py", "lineno": {lineno}}}}}\n'


def event(ms: int, key: str, kind: str = "POINT_IN_TIME", value: str = "null", lineno: int = 1) -> str:
    return EVENT.format(ms=ms, key=key, kind=kind, value=value, lineno=lineno)


def test_mlperf_srun_labels_are_stripped_and_copies_collapse(home):
    text = (
        "".join(f"{rank}: {event(1000 + rank, 'init_start', 'INTERVAL_START', lineno=5)}" for rank in range(4))
        + "0: "
        + event(2000, "run_start", "INTERVAL_START")
        + "srun: error: node-b: task 3: Killed\n"
    )
    rows = parse_mlperf(home, "labelled.txt", text)
    assert [(row["key"], row["duplicate_count"]) for row in rows] == [("init_start", 4), ("run_start", 1)]
    assert rows[0]["prefixed_lines"] == 5 and rows[0]["other_lines"] == 1
    assert rows[0]["time_ms"] == 1000 and rows[0]["ts_last"].timestamp() == 1.003


@pytest.mark.parametrize(
    ("content", "reason"),
    [
        (b"", "empty file"),
        (b"+ echo hello\nhello\n", "no :::MLLOG record in 2 lines"),
        (
            event(1, "init_start") + ':::MLLOG {"namespace": "", "time_ms": 2, "key": "run_st',
            "line 2: :::MLLOG record is not valid JSON",
        ),
        (":::MLLOG [1, 2]\n", "line 1: :::MLLOG record is not an object"),
        (event(1, "run_start", lineno=1) + event(2, "run_start", lineno=2), "more than one run in the file"),
        (event(1, "run_start") + event(3_600_000, "run_start"), "more than one run in the file"),
        (':::MLLOG {"key": "x", "time_ms": "soon"}\n', "line 1: time_ms 'soon' is not a number"),
    ],
    ids=[
        "empty",
        "no-mllog",
        "truncated-json",
        "not-an-object",
        "two-run-starts",
        "run-start-an-hour-apart",
        "bad-time",
    ],
)
def test_mlperf_bad_input_is_quarantined_with_a_reason(home, content, reason):
    with pytest.raises(QuarantineError, match=reason):
        parse_mlperf(home, "bad.txt", content)


# --------------------------------------------------------------------------- ingestion of a batch


@pytest.fixture(scope="module")
def benchmark_home(tmp_path_factory, samples):
    """Every nccl-tests and MLPerf sample landed, plus an MLPerf run without run_stop, a copy of a log under
    another name, and bad files; ingested once."""
    home = data_home(tmp_path_factory.mktemp("benchmarks")).ensure()
    for folder, source in (("nccl_tests", "nccl_tests"), ("mlperf_mllog", "mlperf")):
        for sample in sorted((samples / folder).iterdir()):
            if sample.name != "SOURCES.md":
                land(home, source, sample.name, sample.read_bytes())
    single = (samples / "nccl_tests" / "xxrjun_h100_N1_G8_single_node.log").read_bytes()
    land(home, "nccl_tests", "copy_of_single_node.log", single)
    llama = (samples / "mlperf_mllog" / "v4.0_nvidia_eos_1xdgxh100_llama2_70b_lora_result_0.txt").read_text()
    died = "".join(line + "\n" for line in llama.splitlines()[:40] if '"run_stop"' not in line)
    land(home, "mlperf", "died.txt", died.replace("1714897", "1714997"), cluster="eos")  # another run that died
    land(home, "nccl_tests", "cut.log", single[: single.index(b"  4000.82") + 3])
    land(home, "mlperf", "empty.txt", b"")
    return home, ingest(home)


def test_bad_files_are_quarantined_while_the_batch_ingests(benchmark_home):
    home, outcomes = benchmark_home
    status = {Path(outcome.path).name: (outcome.status, outcome.reason) for outcome in outcomes}
    assert status["cut.log"][0] == "quarantined" and "line 25: results row has 6 fields" in status["cut.log"][1]
    assert status["empty.txt"] == ("quarantined", "empty file: a writer delivers no file rather than an empty one")
    assert status["xxrjun_summary_multinode.csv"][0] == "skipped"
    ok = {name for name, (state, _) in status.items() if state == "ok"}
    assert len(ok) == 9 and "xxrjun_h100_N2_G8_FAILED.log" in ok  # a failed run is data, not bad input
    note = status["v4.0_nvidia_eos_n64_gpt3_result_0.txt"][1]
    assert note == "725 MLLOG records -> 151 events (574 per-rank copies collapsed); 0 non-MLLOG lines ignored"


def test_reingest_changes_nothing(benchmark_home):
    home, _ = benchmark_home
    manifest_rows = read_manifest(home.manifest_dir).num_rows
    counts = {table: raw_rows(home, table) for table in ("raw_nccl_tests", "raw_mlperf_events")}
    assert counts == {"raw_nccl_tests": 360, "raw_mlperf_events": 723 + 38}

    again = ingest(home)

    assert {outcome.status for outcome in again} == {"already_ingested"}
    assert read_manifest(home.manifest_dir).num_rows == manifest_rows
    assert {table: raw_rows(home, table) for table in counts} == counts


def raw_rows(home, table: str) -> int:
    glob = home.lake_raw / table / "**" / "*.parquet"
    return duckdb.sql(f"select count(*) from read_parquet('{glob}', union_by_name = true)").fetchone()[0]


# --------------------------------------------------------------------------- dbt on the small home


@pytest.fixture(scope="module")
def benchmark_warehouse(benchmark_home, tmp_path_factory):
    """dbt build of the benchmark models (and their seed and tests) on the small home: about 6 s."""
    home, _ = benchmark_home
    target = tmp_path_factory.mktemp("dbt_target")
    dbt = Path(sys.executable).parent / "dbt"
    command = [str(dbt) if dbt.exists() else "dbt", "build", "--select", "+fct_nccl_test_runs", "+fct_mlperf_runs"]
    command += ["--project-dir", str(DBT_PROJECT_DIR), "--profiles-dir", str(DBT_PROJECT_DIR)]
    command += ["--target-path", str(target), "--log-path", str(target)]
    done = subprocess.run(
        command, env=os.environ | {"PERFWH_HOME": str(home.root)}, capture_output=True, text=True, timeout=300
    )
    assert done.returncode == 0, done.stdout[-4000:]
    connection = duckdb.connect(str(home.warehouse_db), read_only=True)
    yield lambda sql: connection.sql(sql).fetchall()
    connection.close()


@pytest.mark.slow
def test_fct_nccl_test_runs(benchmark_warehouse):
    query = benchmark_warehouse
    assert query("select count(*), count(distinct run_id) from fct_nccl_test_runs") == [(13, 13)]  # the copy adds none
    single = query(
        "select op, busbw_gbps, round(busbw_ratio, 4), limit_busbw_gbps, scope, sku from fct_nccl_test_runs "
        "where n_hosts = 1 order by run_index"
    )
    assert single[0] == ("all_reduce", 482.27, 1.0717, 450.0, "intra_node", "H100-SXM")  # NVLS: above the wire
    assert [row[0] for row in single] == ["all_reduce", "all_gather", "reduce_scatter", "alltoall", "sendrecv"]
    multi = query(
        "select busbw_gbps, round(busbw_ratio, 4), scope from fct_nccl_test_runs "
        "where n_ranks = 10 and op = 'all_reduce'"
    )
    assert multi == [(48.89, 0.9778, "inter_node")]
    polaris = query(
        "select op, sku, n_sizes, largest_size_bytes, busbw_gbps, limit_busbw_gbps, busbw_ratio "
        "from fct_nccl_test_runs where sku like 'A100%'"
    )
    assert polaris == [("all_reduce", "A100-SXM4-40GB", 29, 1073741824, 9.45, None, None)]  # limit unknown: NULL
    failed = query(
        "select op, busbw_gbps, busbw_ratio, error_text like '%network error%' from fct_nccl_test_runs where status = 'failed'"
    )
    assert sorted(failed) == [("alltoall", None, None, True), ("sendrecv", None, None, True)]


@pytest.mark.slow
def test_fct_mlperf_runs(benchmark_warehouse):
    rows = benchmark_warehouse(
        "select benchmark, status, is_complete, time_to_train_s, run_duration_s, round(throughput_mean, 4), "
        "throughput_samples, n_accelerators, sku, duplicate_copies, other_lines from fct_mlperf_runs "
        "order by run_start_at"
    )
    assert rows == [
        ("rnnt", "success", True, 2215.638, 2215.638, 7523.4147, 59, None, None, 7, 390),
        ("llama2_70b_lora", "success", True, 1629.043, 1629.043, 2.1522, 5, 8, "H100-SXM", 0, 0),
        ("llama2_70b_lora", "incomplete", False, None, None, 2.1503, 3, 8, "H100-SXM", 0, 0),  # no run_stop
        ("gpt3", "success", True, 3147.895, 3147.895, None, 0, 512, "H100-SXM", 574, 0),
    ]
