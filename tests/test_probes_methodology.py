"""Probe methodology without a GPU (reference probes.md sections 2, 3, 5 and 7): the GPU's NUMA node and CPU set
read through a scripted NVML (found by UUID) or a sysfs tree, the real CPU binding of this process and its
restoration, the bidirectional copy timing through a scripted CUDA timeline, and the clock-normalised
efficiency from scripted NVML clocks and the SKU seed. The GPU paths themselves have not run on a GPU here."""

from __future__ import annotations

import contextlib
import json
import os
import sys
import types
from dataclasses import replace
from datetime import datetime, timezone
from pathlib import Path

import pytest

from probes import topology
from probes.backends import Backend, cpu_backend
from probes.common import measured, new_run
from probes.efficiency import eff_clock, eff_clock_row, eff_mem_clock, eff_mem_clock_row, flop_per_clock_per_sm
from probes.host_device_copy import bidirectional_seconds, run_host_device_copy
from probes.records import landing_path, write_jsonl
from probes.throttle import SW_POWER_CAP, ReasonSampler
from probes.topology import bound_to, cpu_list, cpus_from_mask, parse_cpu_list, topology_context

STARTED = datetime(2026, 11, 3, 4, 5, 6, tzinfo=timezone.utc)
UUID = "GPU-aaaaaaaa-bbbb-cccc-dddd-eeeeeeeeeeee"
OTHER_UUID = "GPU-99999999-bbbb-cccc-dddd-eeeeeeeeeeee"


class NotSupported(Exception):
    pass


class TopologyNvml:
    """Scripted NVML for two GPUs on two sockets; the probed GPU is the second in PCI order (index 1)."""

    def __init__(self, numa_supported: bool = True):
        self.numa_supported = numa_supported
        self.devices = {
            OTHER_UUID: {"bus": b"00000000:18:00.0", "numa": 0, "mask": [0x0000FFFF, 0]},
            UUID: {"bus": b"00000000:9A:00.0", "numa": 1, "mask": [0xFFFF0000, 0x1]},  # CPUs 16-31 and 64
        }

    def nvmlInit(self):
        pass

    def nvmlShutdown(self):
        pass

    def nvmlDeviceGetHandleByUUID(self, uuid):
        if uuid not in self.devices:
            raise NotSupported(uuid)
        return uuid

    def nvmlDeviceGetPciInfo(self, handle):
        return types.SimpleNamespace(busId=self.devices[handle]["bus"])

    def nvmlDeviceGetNumaNodeId(self, handle):
        if not self.numa_supported:
            raise NotSupported()
        return self.devices[handle]["numa"]

    def nvmlDeviceGetCpuAffinity(self, handle, words):
        assert words >= 1
        return self.devices[handle]["mask"]


class NoLibraryNvml:
    def nvmlInit(self):
        raise NotSupported("NVMLError_LibraryNotFound")


def _sysfs(tmp_path: Path, bus: str, numa: str, cpus: str) -> Path:
    device = tmp_path / "bus/pci/devices" / bus
    device.mkdir(parents=True)
    (device / "numa_node").write_text(numa + "\n")
    (device / "local_cpulist").write_text(cpus + "\n")
    return tmp_path


def test_cpu_lists_and_nvml_masks():
    assert cpu_list({5, 0, 1, 2, 7, 8}) == "0-2,5,7-8" and parse_cpu_list("0-2,5,7-8") == {0, 1, 2, 5, 7, 8}
    assert cpus_from_mask([0x3, 0x3]) == {0, 1, 64, 65}  # NVML's example: CPUs 0, 1, 32, 33 with 32-bit words
    assert cpus_from_mask([0x3, 0x3], bits_per_word=32) == {0, 1, 32, 33}
    assert topology.sysfs_bus_id("00000000:9A:00.0") == "0000:9a:00.0"


def test_the_gpu_numa_node_and_cpu_set_come_from_nvml_by_uuid(tmp_path):
    topo = topology_context(UUID, nvml=TopologyNvml(), sysfs=tmp_path)
    assert topo["gpu_uuid"] == UUID and topo["pci_bus_id"] == "0000:9a:00.0"
    assert (topo["gpu_numa_node"], topo["gpu_numa_node_source"]) == (1, "nvml")  # not the first GPU's node 0
    assert (topo["gpu_cpu_set"], topo["gpu_cpu_set_source"]) == ("16-31,64", "nvml")
    assert topo["process_cpu_set"] == cpu_list(os.sched_getaffinity(0))
    assert topo["process_within_gpu_cpu_set"] == (os.sched_getaffinity(0) <= parse_cpu_list("16-31,64"))


def test_without_nvml_numa_the_pci_devices_sysfs_node_is_used_and_minus_one_is_unknown(tmp_path):
    sysfs = _sysfs(tmp_path / "a", "0000:9a:00.0", "1", "16-31")
    topo = topology_context(UUID, nvml=TopologyNvml(numa_supported=False), sysfs=sysfs)
    assert (topo["gpu_numa_node"], topo["gpu_numa_node_source"]) == (1, "sysfs")
    assert topo["errors"]["numa_node_nvml"] == "NotSupported" and topo["gpu_cpu_set_source"] == "nvml"
    # no NVML at all: the bus id from torch's properties, the CPU set from local_cpulist; -1 is unknown, not 0
    sysfs = _sysfs(tmp_path / "b", "0000:9a:00.0", "-1", "0-1")
    broken = NoLibraryNvml()
    topo = topology_context("GPU-no-nvml", torch_bus_id="0000:9a:00.0", nvml=broken, sysfs=sysfs)
    assert topo["gpu_numa_node"] is None and "reports no NUMA node" in topo["errors"]["numa_node_sysfs"]
    assert (topo["gpu_cpu_set"], topo["gpu_cpu_set_source"]) == ("0-1", "sysfs") and topo["errors"]["nvml"]


def test_every_cpu_row_says_the_gpu_topology_is_not_applicable_and_records_the_process_cpu_set(tmp_path):
    info = new_run(cpu_backend("numpy"), node="node01", started_at=STARTED)
    rows = run_host_device_copy(info)
    metrics = {r.metric for r in rows}
    assert {"h2d_bidir_pinned_gbps", "d2h_bidir_pinned_gbps", "bidir_total_pinned_gbps"} <= metrics
    for r in rows:
        assert r.status == "skipped" and r.value is None
        topo = r.context["topology"]
        assert topo["gpu_numa_node"] is None and topo["errors"] == {"gpu": topology.NO_GPU}
        assert topo["process_cpu_set"] == cpu_list(os.sched_getaffinity(0))
        assert r.context["numa_bound"] is None and r.context["numa_bind_reason"] == topology.NO_GPU  # not a fake value
    # through the landing file and ingestion: the context (and so the topology) reaches raw_probe_results
    from perf_assets.lib.ingest import ingest
    from perf_assets.lib.paths import data_home

    home = data_home(tmp_path)
    write_jsonl(rows, landing_path(home.landing, "local", info.node, info.started_at))
    assert [(o.status, o.rows) for o in ingest(home)] == [("ok", len(rows))]
    import pyarrow.parquet as pq

    (parquet,) = (home.lake_raw / "raw_probe_results").glob("event_date=*/*.parquet")
    landed = {row["metric"]: json.loads(row["context_json"]) for row in pq.read_table(parquet).to_pylist()}
    assert landed["bidir_total_pinned_gbps"]["topology"]["process_cpu_set"] == cpu_list(os.sched_getaffinity(0))


def test_binding_pins_the_thread_to_the_gpu_cpus_and_restores_its_set():
    before = os.sched_getaffinity(0)
    target = {min(before)}
    with bound_to(target) as binding:
        assert os.sched_getaffinity(0) == target
        assert binding == {"numa_bound": True, "cpu_set": cpu_list(target), "numa_bind_reason": None}
    assert os.sched_getaffinity(0) == before
    with bound_to(None) as unknown:
        assert os.sched_getaffinity(0) == before
    assert unknown["numa_bound"] is False and "unknown" in unknown["numa_bind_reason"]
    assert unknown["cpu_set"] == cpu_list(before)
    with bound_to({4095}) as refused:  # no such CPU here: the call fails, nothing changes, the row says why
        assert os.sched_getaffinity(0) == before
    assert refused["numa_bound"] is False and "failed" in refused["numa_bind_reason"]


class Timeline:
    """A scripted CUDA: each stream has a clock (ms) and work queued on it starts no earlier than the host's
    clock (``host``, moved forward by ``synchronize``); an event records when its stream reaches it; a copy
    advances the current stream by its duration; wait_event holds a stream until the event; _sleep takes 1 ms
    of the current stream. Events recorded on the wrong stream would time the wrong thing."""

    def __init__(self):
        self.clocks: dict[object, float] = {}
        self.default = object()
        self.current = self.default
        self.clocks[self.default] = 0.0
        self.host = 0.0
        timeline = self

        class Event:
            def __init__(self, enable_timing: bool = False):
                self.t: float | None = None

            def record(self, stream=None):
                self.t = timeline.advance(stream or timeline.current, 0.0)

            def synchronize(self):
                timeline.host = max(timeline.host, self.t)

            def elapsed_time(self, other):
                return other.t - self.t

        class Stream:
            def __init__(self):
                timeline.clocks[self] = 0.0

            def wait_event(self, event):
                timeline.clocks[self] = max(timeline.clocks[self], event.t)

        @contextlib.contextmanager
        def stream(s):
            saved, timeline.current = timeline.current, s
            try:
                yield
            finally:
                timeline.current = saved

        def sleep(cycles):
            timeline.advance(timeline.current, 1.0)

        self.torch = types.SimpleNamespace(
            cuda=types.SimpleNamespace(
                Event=Event, Stream=Stream, stream=stream, _sleep=sleep, synchronize=lambda *a: None
            )
        )

    def advance(self, stream: object, ms: float) -> float:
        self.clocks[stream] = max(self.clocks[stream], self.host) + ms
        return self.clocks[stream]

    def copy(self, ms: float):
        return lambda: self.advance(self.current, ms)


def test_bidirectional_copies_are_timed_each_on_its_own_stream_from_a_common_start():
    timeline = Timeline()
    seconds = bidirectional_seconds(timeline.torch, timeline.copy(5.0), timeline.copy(6.0), iterations=3)
    assert seconds["h2d_bidir_pinned"] == pytest.approx([0.005] * 3)
    assert seconds["d2h_bidir_pinned"] == pytest.approx([0.006] * 3)
    assert seconds["bidir_total_pinned"] == pytest.approx([0.006] * 3)  # both held behind the sleep: they overlap


def test_eff_clock_uses_the_seed_flop_per_clock_and_the_clock_the_window_ran_at():
    assert flop_per_clock_per_sm("H200-SXM", "bf16") == pytest.approx(4096, rel=1e-3)
    assert flop_per_clock_per_sm("H200-SXM", "fp32") == pytest.approx(256, rel=1e-3)
    assert flop_per_clock_per_sm("A100-SXM4-80GB", "bf16") == pytest.approx(2048, rel=1e-3)
    # the device check on one H200 (docs/probes.md): 652.7 TF bf16 at a power-capped 1560 MHz
    value, reason, inputs = eff_clock(652.7, "H200-SXM", "bf16", 1560.0, 132)
    assert value == pytest.approx(652.7e12 / (132 * 4096 * 1.56e9), rel=1e-3) and reason is None
    assert 0.77 < value < 0.78 and value > 652.7 / 989.4  # the clock explains part of the gap to the peak
    assert (
        inputs["flop_per_clock_per_sm"] == pytest.approx(4096, rel=1e-3) and inputs["sm_clock_mhz_mean_timed"] == 1560
    )
    assert "SM clock" in eff_clock(652.7, "H200-SXM", "bf16", None, 132)[1]
    assert eff_clock(652.7, None, "bf16", 1560.0, 132)[0] is None  # unknown SKU: NULL, never a guess
    value, reason, _ = eff_mem_clock(4301.0, "H200-SXM", 3201.0)
    assert value == pytest.approx(4301 / 4800) and reason is None
    assert eff_mem_clock(4301.0, "H200-SXM", 1600.5)[0] == pytest.approx(2 * 4301 / 4800)  # half the clock
    assert "memory clock" in eff_mem_clock(4301.0, "H200-SXM", None)[1]


class ClockNvml(types.ModuleType):
    """A scripted pynvml module: SwPowerCap throughout; 1980 MHz until ``timed`` is set, then 1560 MHz."""

    NVML_CLOCK_SM, NVML_CLOCK_MEM, NVML_TEMPERATURE_GPU = 1, 2, 0

    class NVMLError(Exception):
        pass

    def __init__(self):
        super().__init__("pynvml")
        self.timed = False

    def nvmlInit(self):
        pass

    def nvmlShutdown(self):
        pass

    def nvmlDeviceGetHandleByUUID(self, uuid):
        return uuid

    def nvmlSystemGetDriverVersion(self):
        return "580.0"

    def nvmlDeviceGetCurrentClocksEventReasons(self, handle):
        return SW_POWER_CAP

    def nvmlDeviceGetClockInfo(self, handle, which):
        if which == self.NVML_CLOCK_MEM:
            return 3201
        return 1560 if self.timed else 1980

    def nvmlDeviceGetPowerUsage(self, handle):
        return 700_000

    def nvmlDeviceGetTemperature(self, handle, which):
        return 60

    def nvmlDeviceGetTotalEnergyConsumption(self, handle):
        raise NotSupported()

    def nvmlDeviceGetFieldValues(self, handle, fields):
        raise NotSupported()


def test_the_sampler_means_the_timed_window_only_and_the_gemm_row_gets_its_eff_clock(monkeypatch):
    nvml = ClockNvml()
    monkeypatch.setitem(sys.modules, "pynvml", nvml)
    sampler = ReasonSampler(UUID, interval_s=0.01)
    with sampler:
        while len(sampler.masks) < 5:  # warm-up at 1980 MHz
            pass
        nvml.timed = True
        with sampler.timed():
            while len(sampler.masks) < 12:
                pass
        nvml.timed = False
        while len(sampler.masks) < 16:  # after the window, back at 1980 MHz
            pass
    summary = sampler.summary()
    assert summary["sm_clock_mhz_mean_timed"] == 1560 and summary["mem_clock_mhz_mean_timed"] == 3201
    assert summary["sm_clock_mhz_median"] == 1980  # the whole run's median would overstate the window's clock
    gpu = Backend("cuda", "torch", "NVIDIA H200", 0, UUID, "H200-SXM")
    info = new_run(gpu, node="node01", started_at=STARTED)
    gemm = measured(info, "gemm", "bf16_8192_tflops", "TFLOP/s", [650.0, 652.7, 655.0], {**summary, "sm_count": 132})
    row = eff_clock_row(gemm, "bf16_8192_eff_clock", "bf16")
    assert row.metric == "bf16_8192_eff_clock" and row.unit == "ratio" and row.status == "pass"
    assert row.value == pytest.approx(652.7e12 / (132 * 4096 * 1.56e9), rel=1e-3) and row.ci_low is None
    assert row.context["efficiency_inputs"]["sm_clock_mhz_mean_timed"] == 1560
    unknown = eff_clock_row(replace(gemm, context={"sm_count": 132}), "bf16_8192_eff_clock", "bf16")
    assert unknown.value is None and "SM clock" in unknown.reason  # no NVML: NULL with the reason
    hbm = measured(info, "hbm_stream", "triad_gbps", "GB/s", [4301.0], summary)
    assert eff_mem_clock_row(hbm, "triad_eff_mem_clock").value == pytest.approx(4301 / 4800)


def test_roofline_intensity_and_bound_follow_the_formula():
    from probes.roofline import intensity, roofline_bound_tflops

    assert intensity(16384, 1, 2) == pytest.approx(2 * 16384**2 / ((16384**2 + 2 * 16384) * 2))  # ~1 FLOP/B: GEMV
    assert intensity(16384, 256, 2) == pytest.approx(256, rel=0.04)  # ≈ w for bf16 while w ≪ n
    assert roofline_bound_tflops(989.4, 4800.0, 1.0) == pytest.approx(4.8)  # memory-bound: I x bandwidth
    assert roofline_bound_tflops(989.4, 4800.0, 1000.0) == 989.4  # compute-bound: the peak
    assert roofline_bound_tflops(None, 4800.0, 1.0) is None


def test_the_roofline_sweep_is_optional_and_its_ceilings_come_from_its_points():
    from probes.suite import DEFAULT, SuiteOptions, run_all

    assert "roofline_sweep" not in DEFAULT and "roofline_sweep" not in SuiteOptions().probes
    info = new_run(cpu_backend("numpy"), node="node01", started_at=STARTED)
    rows = run_all(info, SuiteOptions(probes=("roofline_sweep",), quick=True))
    sweep = {r.metric: r for r in rows if r.probe == "roofline_sweep"}
    points = [sweep[f"w{w}_tflops"] for w in (1, 16, 256)]
    assert [p.context["intensity_flop_per_byte"] for p in points] == sorted(
        p.context["intensity_flop_per_byte"] for p in points
    )
    for p in points:
        assert p.status == "pass" and p.value > 0 and p.ci_low <= p.value <= p.ci_high and p.peak is None
        assert p.context["gbps"] == pytest.approx(p.value * 1e3 / p.context["intensity_flop_per_byte"])
    compute, bandwidth = sweep["compute_ceiling_tflops"], sweep["bandwidth_ceiling_gbps"]
    assert compute.value == max(p.value for p in points)
    assert bandwidth.value == max(p.context["gbps"] for p in points)
    assert sweep["ridge_flop_per_byte"].value == pytest.approx(compute.value * 1e3 / bandwidth.value)
    assert compute.peak is None and compute.fraction_of_peak is None  # a CPU has no physical limit here
