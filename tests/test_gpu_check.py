"""probes/gpu_check.py, the device check of probes.md section 11: standard library, torch and pynvml only; its
statistics and throttle classes on literal inputs; its whole path on the CPU (--allow-cpu --quick)."""

from __future__ import annotations

import ast
import json
import sys
from pathlib import Path

import pytest

from probes import gpu_check

SOURCE = Path(gpu_check.__file__)


def test_it_imports_only_the_standard_library_torch_and_pynvml():
    modules = set()
    for node in ast.walk(ast.parse(SOURCE.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            modules |= {alias.name.split(".")[0] for alias in node.names}
        elif isinstance(node, ast.ImportFrom) and node.level == 0:
            modules.add((node.module or "").split(".")[0])
    assert modules - set(sys.stdlib_module_names) == {"torch", "pynvml"}


def test_describe_gives_the_median_quartiles_and_a_ci_around_the_median():
    stats = gpu_check.describe([1.0, 2.0, 3.0, 4.0, 100.0])
    assert stats["median"] == 3.0 and stats["q1"] == 2.0 and stats["q3"] == 4.0 and stats["n"] == 5
    assert stats["ci_low"] <= 3.0 <= stats["ci_high"] and stats["ci_high"] <= 100.0
    assert gpu_check.describe([1.0, 2.0, 3.0, 4.0, 100.0]) == stats  # fixed seed


def test_throttle_classes_follow_the_dcgm_failure_mask():
    assert gpu_check.throttle_class(0x4, [0x4, 0x4]) == "power_capped"
    assert gpu_check.throttle_class(0x4 | 0x40, [0x4, 0x40]) == "thermal"
    assert gpu_check.throttle_class(0x80, [0x80]) == "hw_slowdown"
    assert gpu_check.throttle_class(0x1, [0x0, 0x1, 0x0]) == "idle_in_window"
    assert gpu_check.throttle_class(0x1, [0x1, 0x0]) == "clean"  # idle at the edges only


def test_limits_come_from_the_seed_and_a_cpu_has_none():
    h200 = gpu_check.limits_for(gpu_check.sku_of("NVIDIA H200"))
    assert h200["bf16"] == 989.4e12 and h200["hbm"] == 4.8e12 and h200["pcie"] == 64e9 and h200["sm_count"] == 132
    assert gpu_check.sku_of("NVIDIA H100 PCIe") is None and gpu_check.limits_for(None) == {}


def test_the_cpu_smoke_path_runs_every_step_and_writes_the_summary(tmp_path, capsys):
    pytest.importorskip("torch")
    assert gpu_check.main(["--allow-cpu", "--quick", "--out", str(tmp_path)]) == 0
    summary = json.loads((tmp_path / "gpu_check.json").read_text())
    rows = {(r["step"], r["metric"]): r for r in summary["rows"]}
    assert {step for step, _ in rows} == {"hbm_stream", "gemm", "launch_latency", "pcie", "burn_soak"}
    triad = rows[("hbm_stream", "triad_gbps")]
    assert triad["value"] > 0 and triad["ci_low"] <= triad["median"] <= triad["ci_high"] and triad["limit"] is None
    assert rows[("hbm_stream", "triad_verified")]["value"] == 1.0
    assert rows[("burn_soak", "mismatched_elements")]["value"] == 0.0
    assert (
        rows[("gemm", "fp8_256_tflops")]["verdict"] == "skipped" and rows[("pcie", "h2d_pinned_gbps")]["value"] is None
    )
    assert rows[("gemm", "bf16_rel_error_vs_fp64")]["value"] < 5e-2
    assert summary["context"]["nvml_error"] == "no CUDA device" and summary["failed"] == []
    assert "done in" in capsys.readouterr().out


def test_without_a_gpu_and_without_allow_cpu_it_says_so(tmp_path, capsys):
    torch = pytest.importorskip("torch")
    if torch.cuda.is_available():
        pytest.skip("a GPU is present")
    assert gpu_check.main(["--out", str(tmp_path)]) == 3
    assert "no CUDA device" in capsys.readouterr().err
