"""The probe catalogue on the CPU (numpy, so it passes without torch), the NVML-dependent parts with a
scripted fake NVML, and the suite's CLI and landing."""

from __future__ import annotations

import json
import subprocess
import sys
from datetime import datetime, timezone
from pathlib import Path

import pytest

from probes.backends import Backend, cpu_backend
from probes.burn_soak import run_burn_soak
from probes.common import new_run
from probes.health import HealthWatch
from probes.records import ProbeResult
from probes.suite import CATALOGUE, SuiteOptions, run_all
from probes.throttle import GPU_IDLE, HW_THERMAL_SLOWDOWN, SW_POWER_CAP, classify

REPO = Path(__file__).resolve().parents[1]
STARTED = datetime(2026, 11, 2, 1, 2, 3, tzinfo=timezone.utc)


@pytest.fixture(scope="module")
def cpu_rows() -> list[ProbeResult]:
    info = new_run(cpu_backend("numpy"), node="node01", started_at=STARTED)
    return run_all(info, SuiteOptions(quick=True))


def test_the_suite_runs_every_probe_of_the_catalogue_in_one_run(cpu_rows):
    assert [p for p in dict.fromkeys(r.probe for r in cpu_rows)] == [*CATALOGUE[1:], "health"]
    assert {r.run_id for r in cpu_rows} == {cpu_rows[0].run_id} and {r.device_kind for r in cpu_rows} == {"cpu"}
    assert not [r for r in cpu_rows if r.status == "error"], [(r.metric, r.reason) for r in cpu_rows]


def test_measured_cpu_rows_carry_a_ci_and_no_physical_limit(cpu_rows):
    measured = [
        r
        for r in cpu_rows
        if r.status != "skipped"
        and (r.probe in ("launch_latency", "hbm_stream", "gemm") or r.metric == "sustained_tflops")
    ]
    assert {r.metric for r in measured} >= {"dispatch_us", "copy_gbps", "triad_gbps", "dot_gbps", "sustained_tflops"}
    for r in measured:
        assert r.value > 0 and r.ci_low <= r.median <= r.ci_high and r.n >= 5, r
        assert r.peak is None and r.fraction_of_peak is None  # unknown is NULL, never 0
    triad = next(r for r in cpu_rows if r.metric == "triad_gbps")
    assert triad.context["triad_verified"] is True and triad.context["bytes_per_iteration"] == 3 * 4 * (1 << 20)


def test_gpu_only_probes_write_skipped_rows_with_the_reason_on_a_cpu(cpu_rows):
    skipped = [r for r in cpu_rows if r.status == "skipped" and not r.metric.endswith(("_eff_clock", "_eff_mem_clock"))]
    assert {r.probe for r in skipped} == {"host_device_copy", "health", "gemm", "p2p_copy", "allreduce"}
    gemm = {r.metric: r.reason for r in skipped if r.probe == "gemm"}  # numpy has fp32 and fp64 only
    assert set(gemm) == {"bf16_256_tflops", "fp16_256_tflops", "tf32_256_tflops", "fp8_256_tflops"}
    assert "ran fp32 instead" in gemm["bf16_256_tflops"] and "compute capability" in gemm["fp8_256_tflops"]
    assert "2 CUDA devices" in next(r.reason for r in skipped if r.probe == "p2p_copy")
    assert {r.metric for r in skipped if r.probe == "host_device_copy"} >= {"h2d_pinned_gbps", "d2h_pageable_gbps"}
    assert {r.metric for r in skipped if r.probe == "health"} >= {"ecc_dbe_delta", "xid_critical_events"}
    for r in skipped:
        assert r.value is None and r.median is None and r.reason and r.device_kind == "cpu"


def test_burn_soak_compares_bitwise_and_an_injected_fault_is_silent_data_corruption():
    info = new_run(cpu_backend("numpy"), node="node01", started_at=STARTED)
    clean = {r.metric: r for r in run_burn_soak(info, seconds=0.2, size=64)}
    assert clean["mismatched_elements"].value == 0 and clean["mismatched_elements"].status == "pass"
    faulty = {r.metric: r for r in run_burn_soak(info, seconds=0.2, size=64, inject_fault_at=2)}
    sdc = faulty["mismatched_elements"]
    assert sdc.value == 1 and sdc.status == "fail" and "differ from the first product" in sdc.reason
    assert sdc.n == faulty["sustained_tflops"].n >= 3


def test_a_soak_shorter_than_one_product_still_times_and_compares_several():
    """CI on a loaded 2-core machine: one 256³ product took 0.33 s of a 0.3 s quick soak, and the sustained row had
    n = 1 (no interval). The loop runs MIN_PRODUCTS products whatever the deadline."""
    from probes.burn_soak import MIN_PRODUCTS

    info = new_run(cpu_backend("numpy"), node="node01", started_at=STARTED)
    rows = {r.metric: r for r in run_burn_soak(info, seconds=0.0, size=64)}
    sustained = rows["sustained_tflops"]
    assert sustained.n == rows["mismatched_elements"].n == MIN_PRODUCTS
    assert sustained.ci_low <= sustained.median <= sustained.ci_high


def test_warm_up_samples_count_for_defects_but_idle_only_inside_the_timed_window():
    warmup = [GPU_IDLE, GPU_IDLE, SW_POWER_CAP]
    timed = [SW_POWER_CAP, SW_POWER_CAP, SW_POWER_CAP]
    assert classify(warmup + timed, timed) == "power_capped"
    assert classify([HW_THERMAL_SLOWDOWN, *timed], timed) == "thermal"  # a defect seen only in the warm-up
    assert classify(warmup + timed, [SW_POWER_CAP, GPU_IDLE, SW_POWER_CAP]) == "idle_in_window"
    assert classify([]) == "unknown"


class FakeNvml:
    """Scripted NVML: each ECC read returns the next value; remapped rows and replays fixed."""

    NVML_VOLATILE_ECC, NVML_AGGREGATE_ECC = 0, 1
    NVML_MEMORY_ERROR_TYPE_CORRECTED, NVML_MEMORY_ERROR_TYPE_UNCORRECTED = 0, 1
    NVML_CLOCK_SM, NVML_TEMPERATURE_GPU = 1, 0

    class NotSupported(Exception):
        pass

    def __init__(self, dbe: list[int]):
        self.dbe = list(dbe)

    def nvmlInit(self):
        pass

    def nvmlShutdown(self):
        pass

    def nvmlDeviceGetHandleByUUID(self, uuid):
        return uuid

    def nvmlDeviceGetTotalEccErrors(self, handle, kind, counter):
        return self.dbe.pop(0) if kind == 1 and counter == 0 else 0

    def nvmlDeviceGetRemappedRows(self, handle):
        return (0, 0, 0, 0)

    def nvmlDeviceGetRetiredPagesPendingStatus(self, handle):
        raise FakeNvml.NotSupported()

    def nvmlDeviceGetPcieReplayCounter(self, handle):
        return 5

    def nvmlDeviceGetEnforcedPowerLimit(self, handle):
        return 700000

    def __getattr__(self, name):  # every other call (clocks, link, events): not supported
        def unsupported(*args):
            raise FakeNvml.NotSupported()

        return unsupported


def fake_gpu() -> Backend:
    return Backend("cuda", "torch", "NVIDIA H200", 0, "GPU-11111111-2222-3333-4444-555555555555", "H200-SXM")


def test_health_rows_fail_on_an_uncorrectable_ecc_delta_and_leave_unsupported_null():
    info = new_run(fake_gpu(), node="node01", started_at=STARTED)
    rows = {r.metric: r for r in HealthWatch(info, nvml=FakeNvml(dbe=[3, 4])).start().stop().rows()}
    assert rows["ecc_dbe_delta"].value == 1 and rows["ecc_dbe_delta"].status == "fail"
    assert rows["ecc_sbe_delta"].value == 0 and rows["pcie_replay_delta"].value == 0
    assert rows["power_limit_w"].value == 700
    pending = rows["retired_pages_pending"]
    assert pending.value is None and pending.status == "pass" and "NotSupported" in pending.reason
    assert rows["xid_critical_events"].value is None  # event registration unsupported: unknown, not 0
    clean = {r.metric: r for r in HealthWatch(info, nvml=FakeNvml(dbe=[3, 3])).start().stop().rows()}
    assert clean["ecc_dbe_delta"].value == 0 and clean["ecc_dbe_delta"].status == "pass"


def test_cli_run_all_lands_one_file_that_ingests_with_skipped_rows(tmp_path):
    from perf_assets.lib.ingest import ingest
    from perf_assets.lib.paths import data_home

    home = data_home(tmp_path)
    done = subprocess.run(
        [sys.executable, "-m", "probes", "run", "--all", "--out-dir", str(home.landing), "--cluster", "c1",
         "--node", "n1", "--backend", "numpy", "--quick"],
        cwd=REPO, capture_output=True, text=True, timeout=300,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    path = Path(done.stdout.splitlines()[0])
    records = [json.loads(line) for line in path.read_text().splitlines()]
    assert {r["probe"] for r in records} == set(CATALOGUE)
    assert "h2d_pinned_gbps" in done.stdout and "skipped" in done.stdout
    outcomes = ingest(home)
    assert [(o.status, o.rows) for o in outcomes] == [("ok", len(records))]


def test_every_row_carries_its_context_and_contention_and_every_measured_row_its_uncertainty(cpu_rows):
    for r in cpu_rows:
        context = r.context
        assert context["probe_version"] and context["hostname"] and context["mode"] == "isolated", r.metric
        assert context["device_kind"] == r.device_kind == "cpu" and "probe_git_sha" in context and context["cpu_model"]
        contention = context["contention"]
        assert set(contention) == {"loadavg_before", "loadavg_after", "process_cpu_utilisation", "cpu_steal_share"}
        assert contention["process_cpu_utilisation"] is None or 0 <= contention["process_cpu_utilisation"] <= 1.5
        if r.status != "skipped" and r.iqr is not None:  # measured from samples: the spread and the CI
            assert r.n >= 2 and r.ci_low <= r.median <= r.ci_high and "drift" in context["stats"], r.metric
        if r.status == "skipped":
            assert r.value is None and r.ci_low is None and r.reason


def test_cpu_rows_carry_skipped_clock_normalised_rows_and_the_process_cpu_set(cpu_rows):
    eff = {r.metric: r for r in cpu_rows if r.metric.endswith(("_eff_clock", "_eff_mem_clock"))}
    assert {"fp32_256_eff_clock", "fp64_256_eff_clock", "sustained_eff_clock", "triad_eff_mem_clock"} <= set(eff)
    for r in eff.values():  # measured on a CPU: no SM or memory clock to normalise by, NULL with the reason
        assert r.status == "skipped" and r.value is None and "no GPU" in r.reason and r.unit == "ratio"
    for r in cpu_rows:
        assert r.context["topology"]["gpu_numa_node"] is None and r.context["topology"]["process_cpu_set"]


def test_cpu_load_reports_unknown_utilisation_when_the_clocks_disagree(monkeypatch):
    """CPU time far above wall x CPUs (a VM paused or its clock slewed between readings) is unknown, not 12.6."""
    from probes import context

    clocks = {"wall": iter([100.0, 101.0]), "cpu": iter([5.0, 30.0])}  # 25 CPU s in 1 s of wall
    monkeypatch.setattr(context.time, "perf_counter", lambda: next(clocks["wall"]))
    monkeypatch.setattr(context.time, "process_time", lambda: next(clocks["cpu"]))
    monkeypatch.setattr(context, "_affinity", lambda: 2)
    with context.CpuLoad() as load:
        pass
    assert load.cpu_utilisation is None and load.summary()["process_cpu_utilisation"] is None

    clocks = {"wall": iter([100.0, 101.0]), "cpu": iter([5.0, 6.5])}  # 1.5 CPU s in 1 s on 2 CPUs
    with context.CpuLoad() as load:
        pass
    assert load.cpu_utilisation == 0.75
