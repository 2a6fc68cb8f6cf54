"""Multi-device probes and the suite's confirmation re-run on the CPU: all_reduce over gloo across 2 processes
(the labelled fallback), p2p skipped with its reason, the fp8 GEMM path (torch._scaled_mm runs on the CPU
too, so its operand layout and check are exercised here; the suite itself skips fp8 off CUDA), and a probe
that fails its own verdict re-run once as a second attempt."""

from __future__ import annotations

from dataclasses import replace
from datetime import datetime, timezone

import pytest

from probes.backends import cpu_backend
from probes.collectives import bus_factor, run_allreduce, run_p2p_copy
from probes.common import new_run, single
from probes.gemm import TOLERANCE, time_torch, unsupported
from probes.suite import SuiteOptions, needs_confirmation, run_all

STARTED = datetime(2026, 11, 2, 1, 2, 3, tzinfo=timezone.utc)


def test_bus_factor_is_nccl_tests_allreduce_factor():
    assert bus_factor(2) == 1.0 and bus_factor(8) == pytest.approx(1.75)


def test_allreduce_runs_over_gloo_on_two_cpu_processes_and_says_so():
    pytest.importorskip("torch")
    info = new_run(cpu_backend("torch"), node="n1", started_at=STARTED)
    rows = {r.metric: r for r in run_allreduce(info, sizes=(1 << 16,), iterations=3)}
    busbw, algbw = rows["allreduce_65536_busbw_gbps"], rows["allreduce_65536_algbw_gbps"]
    for row in (busbw, algbw):
        assert row.status == "pass" and row.device_kind == "cpu" and row.n == 3, row.reason
        assert row.value > 0 and row.ci_low <= row.median <= row.ci_high and row.peak is None
    assert busbw.context["sum_check"] is True and busbw.context["backend_collective"] == "gloo"
    assert busbw.context["world_size"] == 2 and "not a GPU interconnect" in busbw.context["fallback"]
    assert busbw.value == pytest.approx(algbw.value * bus_factor(2))


def test_collectives_without_torch_or_a_second_gpu_write_skipped_rows_with_the_reason():
    info = new_run(cpu_backend("numpy"), node="n1", started_at=STARTED)
    (p2p,) = run_p2p_copy(info)
    assert p2p.status == "skipped" and "needs >= 2 CUDA devices; 0 visible" in p2p.reason and p2p.value is None
    (allreduce,) = run_allreduce(info)
    assert allreduce.status == "skipped" and "needs torch" in allreduce.reason


def test_fp8_gemm_path_quantizes_multiplies_column_major_and_checks_against_fp64():
    pytest.importorskip("torch")
    timing = time_torch(cpu_backend("torch"), "fp8", 64, 3, 0.0, seed=0)
    assert len(timing.seconds) == 3 and timing.context["fp8_format"] == "e4m3fn"
    assert 0 < timing.rel_error < TOLERANCE["fp8"]  # bf16 output rounding, against the quantized inputs in fp64
    assert "not run on the CPU" in unsupported(cpu_backend("torch"), "fp8")
    assert unsupported(cpu_backend("torch"), "bf16") is None
    with pytest.raises(ValueError, match="multiple of 16"):
        time_torch(cpu_backend("torch"), "fp8", 40, 1, 0.0, seed=0)


def test_a_probe_failing_its_own_verdict_runs_again_as_a_later_attempt(monkeypatch):
    import probes.suite as suite

    calls = []

    def failing_stream(info, **_):
        calls.append(info)
        return [single(info, "hbm_stream", "copy_gbps", "GB/s", 1.0, {}, status="fail", reason="below the floor")]

    monkeypatch.setattr(suite, "run_hbm_stream", failing_stream)
    info = new_run(cpu_backend("numpy"), node="n1", started_at=STARTED)
    options = SuiteOptions(probes=("hbm_stream", "burn_soak"), quick=True)
    rows = run_all(info, options)
    first, again = calls
    assert first.run_id == info.run_id and again.run_id == f"{info.run_id}-r1" and again.started_at > info.started_at
    copies = [r for r in rows if r.metric == "copy_gbps"]
    assert [r.run_id for r in copies] == [info.run_id, again.run_id]
    assert copies[1].context["rerun_of"] == info.run_id and copies[1].context["attempt"] == 2
    assert not [r for r in rows if r.probe == "burn_soak" and r.run_id != info.run_id]  # it passed: no re-run
    assert len(run_all(info, replace(options, confirm=False))) == len(rows) - 1


def test_hard_failures_are_not_re_run():
    info = new_run(cpu_backend("numpy"), node="n1", started_at=STARTED)
    sdc = single(info, "burn_soak", "mismatched_elements", "elements", 3.0, {}, status="fail", reason="sdc")
    slow = single(info, "gemm", "fp32_256_tflops", "TFLOP/s", 1.0, {}, status="fail", reason="floor")
    skipped = replace(sdc, status="skipped", value=None)
    assert not needs_confirmation([sdc]) and needs_confirmation([sdc, slow]) and not needs_confirmation([skipped])
