"""The probes package: records contract, statistics, CPU GEMM, verdicts, CLI, and its import rules.

Everything runs in seconds on a CPU-only machine, with or without torch: the GEMM runs here are forced
onto numpy. Tests may import perf_assets (to round-trip through ingestion); probes/ may not.
"""

from __future__ import annotations

import ast
import json
import re
import subprocess
import sys
from datetime import datetime, timezone
from pathlib import Path

import pyarrow.parquet as pq
import pytest

from probes.backends import Backend, cpu_backend, select_backend, sku_of
from probes.gemm import metric_name, run_gemm
from probes.records import ProbeResult, landing_path, make_run_id, write_jsonl
from probes.specs import SPECS_PATH, peak_tflops
from probes.stats import summarize
from probes.verdict import CPU_REASON, GEMM_FLOORS, judge

REPO = Path(__file__).resolve().parents[1]
PROBES_DIR = REPO / "probes"
FAST = {"size": 256, "iterations": 8, "warmup_s": 0.05}
STARTED = datetime(2026, 11, 1, 3, 4, 5, tzinfo=timezone.utc)
IMPORT_LINE = re.compile(r"^\s*(import|from)\s+(dagster|perf_assets)\b", re.MULTILINE)


def fake_gpu(sku: str | None = "H100-SXM", backend: str = "numpy", gpu_index: int = 0) -> Backend:
    """Labelled as a CUDA device, computed by `backend` (numpy: on this CPU, so far below any GPU peak)."""
    return Backend(
        device_kind="cuda",
        backend=backend,
        device_name="NVIDIA H100 80GB HBM3 (fake)",
        gpu_index=gpu_index,
        gpu_uuid="GPU-00000000-0000-0000-0000-000000000000",
        sku=sku,
    )


@pytest.fixture(scope="module")
def cpu_result() -> ProbeResult:
    return run_gemm(dtype="bf16", backend=cpu_backend("numpy"), node="node01", started_at=STARTED, **FAST)


# --------------------------------------------------------------------------- GEMM on the CPU


def test_numpy_gemm_measures_a_positive_rate_with_a_ci_around_the_median(cpu_result):
    r = cpu_result
    assert r.status == "pass" and r.reason == CPU_REASON
    assert r.value > 0 and r.value == r.median
    assert r.ci_low <= r.median <= r.ci_high
    assert r.iqr >= 0 and r.n == FAST["iterations"]
    assert r.unit == "TFLOP/s" and r.probe == "gemm"


def test_cpu_result_says_it_ran_on_the_cpu_with_no_peak(cpu_result):
    r = cpu_result
    assert r.device_kind == "cpu" and r.gpu_index is None and r.sku is None
    assert r.gpu_uuid.startswith("cpu-")
    assert r.peak is None and r.fraction_of_peak is None  # unknown, never zero
    assert r.throttle_class == "unknown"
    assert r.context["backend"] == "numpy" and r.context["device_name"]
    assert r.context["timing"] == "perf_counter" and r.context["nvml_available"] is False


def test_numpy_runs_bf16_as_fp32_and_the_metric_and_context_say_so(cpu_result):
    assert cpu_result.metric == "fp32_256_tflops" == metric_name("fp32", 256)
    assert cpu_result.context["requested_dtype"] == "bf16" and cpu_result.context["dtype"] == "fp32"
    assert "fp32" in cpu_result.context["dtype_note"]
    assert cpu_result.context["rel_error"] < 1e-4


def test_run_id_is_deterministic_from_node_and_start(cpu_result):
    assert cpu_result.run_id == make_run_id("node01", STARTED)
    assert len(cpu_result.run_id) == 16
    assert make_run_id("node02", STARTED) != cpu_result.run_id


def test_torch_cpu_gemm_when_torch_is_installed():
    pytest.importorskip("torch")
    r = run_gemm(dtype="bf16", backend=select_backend("torch-cpu"), node="node01", **FAST)
    assert r.status == "pass" and r.device_kind == "cpu" and r.metric == "bf16_256_tflops"
    assert r.ci_low <= r.value <= r.ci_high and r.context["torch"] and r.context["backend"] == "torch"
    assert r.context["rel_error"] < 5e-2


# --------------------------------------------------------------------------- verdicts


def test_a_gpu_below_the_floor_fails_with_the_fraction_and_the_threshold():
    r = run_gemm(dtype="fp32", backend=fake_gpu(), node="node01", **FAST)
    assert r.peak == pytest.approx(66.9)  # H100-SXM fp32, from gpu_sku_specs.csv, in TFLOP/s
    assert r.fraction_of_peak == pytest.approx(r.value / r.peak) and r.fraction_of_peak < 0.55
    assert r.status == "fail" and r.context["fraction_floor"] == GEMM_FLOORS["fp32"] == 0.55  # the dtype's floor
    assert "fraction_of_peak" in r.reason and "< floor 0.55" in r.reason


def test_judge_thresholds():
    assert judge("cuda", 0.59) == ("fail", "fraction_of_peak 0.590 < floor 0.60")
    assert judge("cuda", 0.78) == ("pass", None)
    assert judge("cpu", None) == ("pass", CPU_REASON)
    status, reason = judge("cuda", None, label="sku None and dtype bf16")
    assert status == "pass" and "no physical limit" in reason


def test_a_run_that_raises_is_an_error_row_with_the_exception_text():
    # a CUDA device that exists nowhere: torch raises (no CUDA, or no device 99), or torch does not import
    r = run_gemm(dtype="bf16", backend=fake_gpu(backend="torch", gpu_index=99), node="node01", **FAST)
    assert r.status == "error" and r.reason
    assert r.value is None and r.fraction_of_peak is None and r.throttle_class == "unknown"
    assert json.loads(r.to_json_line())["status"] == "error"


# --------------------------------------------------------------------------- specs and backends


def test_peaks_come_from_the_dbt_seed():
    assert SPECS_PATH == REPO / "dbt_project" / "seeds" / "gpu_sku_specs.csv"
    assert peak_tflops("H200-SXM", "bf16") == pytest.approx(989.4)
    assert peak_tflops("A100-SXM4-80GB", "bf16") == pytest.approx(312)
    assert peak_tflops("H100-SXM", "fp4") is None and peak_tflops(None, "bf16") is None


@pytest.mark.parametrize(
    ("name", "sku"),
    [
        ("NVIDIA H100 80GB HBM3", "H100-SXM"),
        ("NVIDIA H200", "H200-SXM"),
        ("NVIDIA A100-SXM4-80GB", "A100-SXM4-80GB"),
        ("NVIDIA H100 PCIe", None),
        ("NVIDIA H200 NVL", None),
        ("NVIDIA GeForce RTX 4090", None),
    ],
)
def test_sku_from_device_name(name, sku):
    assert sku_of(name) == sku


def test_without_torch_the_backend_is_numpy_on_the_cpu(monkeypatch):
    monkeypatch.setitem(sys.modules, "torch", None)  # `import torch` raises ImportError
    backend = select_backend()
    assert (backend.device_kind, backend.backend, backend.sku, backend.gpu_index) == ("cpu", "numpy", None, None)
    assert backend.gpu_uuid.startswith("cpu-") and "torch not importable" in backend.note
    with pytest.raises(RuntimeError):
        select_backend("cuda")


# --------------------------------------------------------------------------- statistics


def test_summarize_known_samples():
    s = summarize(range(1, 10))
    assert s.median == 5 and s.iqr == 4 and s.n == 9
    assert s.ci_low <= 5 <= s.ci_high and 1 <= s.ci_low and s.ci_high <= 9
    assert summarize(range(1, 10)) == s  # seeded bootstrap: deterministic


def test_summarize_edge_cases():
    one = summarize([2.5])
    assert (one.median, one.iqr, one.ci_low, one.ci_high, one.n) == (2.5, 0.0, 2.5, 2.5, 1)
    with pytest.raises(ValueError):
        summarize([])
    with pytest.raises(ValueError):
        summarize([1.0, float("nan")])


# --------------------------------------------------------------------------- records and landing


def test_json_line_has_the_contract_fields_version_and_z_timestamps(cpu_result):
    record = json.loads(cpu_result.to_json_line())
    from perf_assets.lib.contracts import RAW_TABLES

    contract = [name for name in RAW_TABLES["probe_results"].schema.names if name != "context_json"] + ["context"]
    assert list(record) == ["version", *contract]
    assert record["version"] == 1
    assert record["started_at"] == "2026-11-01T03:04:05Z"
    assert isinstance(record["context"], dict)


def test_landing_path_layout():
    path = landing_path(Path("/l"), "c1", "node01", STARTED)
    assert path == Path("/l/probe_results/c1/2026-11-01/node01__-__-__20261101T030405Z.jsonl")
    with pytest.raises(ValueError):
        landing_path(Path("/l"), "c1", "node01.example.com", STARTED)  # ingestion cuts names at the first '.'


def test_write_jsonl_is_atomic_and_never_changes_a_landed_file(cpu_result, tmp_path):
    target = tmp_path / "a" / "b.jsonl"
    write_jsonl([cpu_result], target)
    assert target.read_text().count("\n") == 1 and not list(target.parent.glob(".*"))
    write_jsonl([cpu_result], target)  # same bytes: no-op
    other = run_gemm(dtype="fp32", backend=cpu_backend("numpy"), node="node02", started_at=STARTED, **FAST)
    with pytest.raises(FileExistsError):
        write_jsonl([other], target)
    with pytest.raises(ValueError):
        write_jsonl([], tmp_path / "empty.jsonl")


def test_the_line_round_trips_through_ingestion(cpu_result, tmp_path):
    from perf_assets.lib.ingest import ingest
    from perf_assets.lib.paths import data_home

    home = data_home(tmp_path)
    written = write_jsonl([cpu_result], landing_path(home.landing, "local", cpu_result.node, cpu_result.started_at))

    outcomes = ingest(home)

    assert [(o.status, o.rows, o.reason) for o in outcomes] == [("ok", 1, None)]
    assert outcomes[0].path == written.relative_to(home.landing).as_posix()
    (parquet,) = (home.lake_raw / "raw_probe_results").glob("event_date=*/*.parquet")
    (row,) = pq.read_table(parquet).to_pylist()
    assert row["run_id"] == cpu_result.run_id and row["device_kind"] == "cpu"
    assert row["value"] == pytest.approx(cpu_result.value) and row["peak"] is None
    assert row["started_at"] == STARTED and str(row["event_date"]) == "2026-11-01"
    assert json.loads(row["context_json"])["backend"] == "numpy"


# --------------------------------------------------------------------------- CLI and import rules


def _run_cli(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "probes", *args], cwd=REPO, capture_output=True, text=True, timeout=120
    )


def test_cli_help_exits_zero():
    done = _run_cli("gemm", "--help")
    assert done.returncode == 0, done.stderr
    assert "--out-dir" in done.stdout and "--cluster" in done.stdout


def test_cli_writes_the_landing_file_and_prints_the_result(tmp_path):
    done = _run_cli(
        "gemm", "--out-dir", str(tmp_path), "--cluster", "local", "--node", "n1",
        "--backend", "numpy", "--size", "128", "--iterations", "5", "--warmup-s", "0",
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    path_line, result_line = done.stdout.strip().splitlines()
    path = Path(path_line)
    assert path.is_file() and path.relative_to(tmp_path).parts[:2] == ("probe_results", "local")
    assert path.name.startswith("n1__-__-__") and path.name.endswith("Z.jsonl")
    assert "fp32_128_tflops" in result_line and "TFLOP/s" in result_line and "cpu" in result_line
    (record,) = [json.loads(line) for line in path.read_text().splitlines()]
    assert record["node"] == "n1" and record["status"] == "pass" and record["version"] == 1


def test_probes_never_import_dagster_or_perf_assets():
    banned = ("dagster", "perf_assets")
    sources = sorted(PROBES_DIR.rglob("*.py"))
    assert sources
    for source in sources:
        text = source.read_text(encoding="utf-8")
        # the grep: an import statement or a dynamic import naming either package (docstrings may name them)
        assert not IMPORT_LINE.search(text), f"{source}: {IMPORT_LINE.search(text).group(0)}"
        assert not re.search(r"import_module\(\s*['\"](dagster|perf_assets)", text), source
        for node in ast.walk(ast.parse(text)):
            names = [alias.name for alias in node.names] if isinstance(node, ast.Import) else []
            if isinstance(node, ast.ImportFrom):
                names = [node.module or ""]
            assert not [n for n in names if n.split(".")[0] in banned], f"{source}: imports {names}"
