"""The device check of probes.md section 11: one prepared script, about 2 minutes on one GPU, that prints every
figure against its physical limit and writes ``gpu_check.json``. Standard library, torch and pynvml only (no
numpy, nothing else of this repository), so it runs from a single copied file:

    python probes/gpu_check.py --out "$OUT"                 # on the GPU machine (GPU 0)
    python probes/gpu_check.py --allow-cpu --quick --out D  # the same code paths on a CPU, tiny sizes (tests)

Steps: context (NVML identity, clocks, power limit, clock-event reasons at idle); hbm_stream (3 x 1 GiB fp32,
copy/scale/add/triad/dot, 50 iterations); gemm bf16 8192^3 (2 s warm-up, 50 iterations), fp8 e4m3 8192^3 via
``torch._scaled_mm`` (compute capability >= 8.9), tf32 and IEEE fp32 4096^3; launch latency (event, wall,
throughput of 10k queued launches, per launch inside a CUDA graph, and event time behind a blocking
``torch.cuda._sleep`` so the host's dispatch is outside the events); pinned host<->device copies of 1 GiB
with the PCIe link read under load; a 30 s bf16 burn with every product compared bitwise with the first. An
NVML sampler runs at 20 Hz throughout; each step prints its throttle class, reasons, SM clock and power. The
context records the GPU's NUMA node and CPU set and the process's (probes/topology.py, copied); the PCIe step
binds to the GPU's CPUs and adds a bidirectional pair (two streams, each timed on its own); GEMM and burn figures
get ``eff_clock`` (over the seed's FLOP/clk/SM and the timed loop's mean SM clock) and hbm copy/triad
``eff_mem_clock`` (probes/efficiency.py).
Clocks, power limits and MIG are never changed. Exit status: 0 when every judged figure is within its limit,
1 when one is not, 3 when there is no CUDA device (and no --allow-cpu).
"""

from __future__ import annotations

import argparse
import contextlib
import csv
import json
import os
import platform
import random
import statistics
import sys
import threading
import time
from pathlib import Path
from typing import Any, Callable, Iterator

SPECS = Path(__file__).resolve().parents[1] / "dbt_project" / "seeds" / "gpu_sku_specs.csv"
# used when the seed is not beside this file (a lone copy on the device machine); same figures as the seed
HOPPER_CLOCKS = {
    "bf16_sm_clock_mhz": 1830.0,
    "fp16_sm_clock_mhz": 1830.0,
    "fp8_sm_clock_mhz": 1830.0,
    "tf32_sm_clock_mhz": 1830.0,
    "fp32_sm_clock_mhz": 1980.0,
}
BUILT_IN = {
    "H100-SXM": {"bf16": 989.4e12, "fp16": 989.4e12, "fp8": 1978.9e12, "tf32": 494.7e12, "fp32": 66.9e12,
                 "hbm": 3.35e12, "pcie": 64e9, "sm_count": 132, "mem_clock_mhz": 2619.0, **HOPPER_CLOCKS},
    "H200-SXM": {"bf16": 989.4e12, "fp16": 989.4e12, "fp8": 1978.9e12, "tf32": 494.7e12, "fp32": 66.9e12,
                 "hbm": 4.8e12, "pcie": 64e9, "sm_count": 132, "mem_clock_mhz": 3201.0, **HOPPER_CLOCKS},
}  # fmt: skip
FLOORS = {
    "bf16": 0.50,
    "fp8": 0.45,
    "tf32": 0.55,
    "fp32": 0.55,
    "hbm": 0.80,
    "pcie": 0.70,
}  # the probe_rules seed's floors
LAUNCH_CEILING_US = {"event_behind_sleep_us": 20.0, "event_us": 50.0, "wall_us": 50.0}  # the probe_rules seed's
BIDIR_GATE_CYCLES = 2_000_000  # torch.cuda._sleep holding both copies of a bidirectional pair until both are queued
REASONS = {0x1: "GpuIdle", 0x2: "ApplicationsClocksSetting", 0x4: "SwPowerCap", 0x8: "HwSlowdown",
           0x10: "SyncBoost", 0x20: "SwThermalSlowdown", 0x40: "HwThermalSlowdown", 0x80: "HwPowerBrakeSlowdown",
           0x100: "DisplayClockSetting"}  # fmt: skip


def sku_of(name: str) -> str | None:
    """probes.backends.sku_of, restricted to the parts the device check knows; copied on purpose: this file
    imports nothing of the repository, so it runs as one copied file on a GPU machine."""
    upper = name.upper()
    if "PCIE" in upper or " NVL" in upper:
        return None
    if "H200" in upper:
        return "H200-SXM"
    if "H100" in upper and "HBM3" in upper:
        return "H100-SXM"
    return None


def limits_for(sku: str | None) -> dict[str, float]:
    if sku is None:
        return {}
    if SPECS.exists():
        with open(SPECS, newline="", encoding="utf-8") as handle:
            rows = [row for row in csv.DictReader(handle) if row["sku"] == sku]
        if rows:
            out = {row["dtype"]: float(row["peak_flops_dense"]) for row in rows if row["peak_flops_dense"]}
            out.update({f"{row['dtype']}_sm_clock_mhz": float(row["peak_sm_clock_mhz"])
                        for row in rows if row.get("peak_sm_clock_mhz")})  # fmt: skip
            first = rows[0]
            out.update(hbm=float(first["hbm_bandwidth_bytes_per_s"]), pcie=float(first["pcie_bandwidth_bytes_per_s"]))
            out["sm_count"] = float(first["sm_count"])
            if first.get("peak_mem_clock_mhz"):
                out["mem_clock_mhz"] = float(first["peak_mem_clock_mhz"])
            return out
    return dict(BUILT_IN.get(sku, {}))


def flop_per_clock_per_sm(limits: dict[str, float], dtype: str) -> float | None:
    """The seed's dense peak over (SMs x the clock it is quoted at): 4096 for Hopper bf16 (probes/efficiency.py)."""
    peak, clock, sms = limits.get(dtype), limits.get(f"{dtype}_sm_clock_mhz"), limits.get("sm_count")
    return peak / (sms * clock * 1e6) if peak and clock and sms else None


# ---------------------------------------------------------------- host topology (probes/topology.py, copied)


def cpu_list(cpus: set[int]) -> str:
    """``{0, 1, 2, 5}`` -> ``"0-2,5"``."""
    out, ordered, i = [], sorted(cpus), 0
    while i < len(ordered):
        j = i
        while j + 1 < len(ordered) and ordered[j + 1] == ordered[j] + 1:
            j += 1
        out.append(str(ordered[i]) if i == j else f"{ordered[i]}-{ordered[j]}")
        i = j + 1
    return ",".join(out)


def topology(sampler: "Sampler", torch_bus_id: str | None) -> dict[str, Any]:
    """The GPU's NUMA node (NVML, else the PCI device's sysfs numa_node; -1 is unknown), its CPU set
    (nvmlDeviceGetCpuAffinity, else sysfs local_cpulist) and this process's CPU set."""
    out: dict[str, Any] = {"process_cpu_set": cpu_list(os.sched_getaffinity(0))}
    bus = None
    info = sampler.call("nvmlDeviceGetPciInfo")
    if info is not None:
        raw = info.busId.decode() if isinstance(info.busId, bytes) else str(info.busId)
        domain, _, rest = raw.partition(":")
        bus = f"{int(domain, 16):04x}:{rest.lower()}"
    bus = bus or torch_bus_id
    sysfs = Path("/sys/bus/pci/devices") / bus if bus else None
    node, source = sampler.call("nvmlDeviceGetNumaNodeId"), "nvml"
    if node is None or node < 0:
        node, source = None, None
        text = (sysfs / "numa_node").read_text().strip() if sysfs and (sysfs / "numa_node").exists() else None
        if text is not None and int(text) >= 0:
            node, source = int(text), "sysfs"
    words = sampler.call("nvmlDeviceGetCpuAffinity", max(1, -(-(os.cpu_count() or 1) // 64)))
    cpus = {i * 64 + b for i, w in enumerate(words or []) for b in range(64) if int(w) >> b & 1}
    cpus_source = "nvml" if cpus else None
    if not cpus and sysfs and (sysfs / "local_cpulist").exists():
        for part in (sysfs / "local_cpulist").read_text().strip().split(","):
            low, _, high = part.partition("-")
            cpus.update(range(int(low), int(high or low) + 1))
        cpus_source = "sysfs" if cpus else None
    out.update(pci_bus_id=bus, gpu_numa_node=node, gpu_numa_node_source=source,
               gpu_cpu_set=cpu_list(cpus) if cpus else None, gpu_cpu_set_source=cpus_source)  # fmt: skip
    return out


# ---------------------------------------------------------------- statistics (stdlib)


def describe(samples: list[float], seed: int = 20261101, resamples: int = 1000) -> dict[str, float]:
    """median, q1, q3, min, max, n and a 95% percentile-bootstrap CI of the median (fixed seed)."""
    ordered = sorted(samples)
    n = len(ordered)
    q = statistics.quantiles(ordered, n=4, method="inclusive") if n > 1 else [ordered[0]] * 3
    rng = random.Random(seed)
    medians = sorted(statistics.median(rng.choices(ordered, k=n)) for _ in range(resamples)) if n > 1 else ordered
    median = statistics.median(ordered)
    low, high = medians[int(0.025 * (len(medians) - 1))], medians[int(0.975 * (len(medians) - 1))]
    return {"median": median, "q1": q[0], "q3": q[2], "min": ordered[0], "max": ordered[-1], "n": n,
            "ci_low": min(low, median), "ci_high": max(high, median)}  # fmt: skip


# ---------------------------------------------------------------- NVML sampler


class Sampler:
    """20 Hz NVML samples of one GPU (by UUID), labelled with the current step; inert without NVML."""

    def __init__(self, uuid: str | None, interval_s: float = 0.05):
        self.samples: list[dict[str, Any]] = []
        self.label = "idle"
        self.error: str | None = None
        self.nvml: Any = None
        self.handle: Any = None
        self.interval_s = interval_s
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        if uuid is None:
            self.error = "no CUDA device"
            return
        try:
            import pynvml  # noqa: PLC0415 - optional

            pynvml.nvmlInit()
            self.nvml = pynvml
            self.handle = pynvml.nvmlDeviceGetHandleByUUID(uuid)
        except Exception as error:  # ImportError, NVMLError_LibraryNotFound, ...
            self.error = type(error).__name__
            self.nvml = None

    def call(self, name: str, *args: Any) -> Any:
        if self.nvml is None:
            return None
        try:
            value = getattr(self.nvml, name)(self.handle, *args)
        except Exception:
            return None
        return value.decode() if isinstance(value, bytes) else value

    def reasons(self) -> int | None:
        value = self.call("nvmlDeviceGetCurrentClocksEventReasons")
        return value if value is not None else self.call("nvmlDeviceGetCurrentClocksThrottleReasons")

    def sample(self) -> None:
        nvml = self.nvml
        power = self.call("nvmlDeviceGetPowerUsage")
        self.samples.append({
            "t": time.perf_counter(), "label": self.label, "reasons": self.reasons(),
            "sm_mhz": self.call("nvmlDeviceGetClockInfo", nvml.NVML_CLOCK_SM),
            "mem_mhz": self.call("nvmlDeviceGetClockInfo", nvml.NVML_CLOCK_MEM),
            "power_w": power / 1000.0 if power is not None else None,
            "temp_c": self.call("nvmlDeviceGetTemperature", nvml.NVML_TEMPERATURE_GPU),
        })  # fmt: skip

    def start(self) -> None:
        if self.nvml is None:
            return

        def loop() -> None:
            while not self._stop.wait(self.interval_s):
                self.sample()

        self._thread = threading.Thread(target=loop, daemon=True, name="gpu-check-sampler")
        self._thread.start()

    def stop(self) -> None:
        if self._thread is not None:
            self._stop.set()
            self._thread.join(timeout=5)
        if self.nvml is not None:
            try:
                self.nvml.nvmlShutdown()
            except Exception:
                pass

    def summary(self, label: str) -> dict[str, Any]:
        """The step's samples (warm-up and timed loop); ``*_mean_timed``: the timed loop's alone (``Check.timed``)."""
        mine = [s for s in self.samples if s["label"] in (label, f"{label}:timed")]
        timed = [s for s in mine if s["label"] == f"{label}:timed"]
        sm_timed = [s["sm_mhz"] for s in timed if s["sm_mhz"] is not None]
        mem_timed = [s["mem_mhz"] for s in timed if s.get("mem_mhz") is not None]
        if not mine:
            return {"throttle_class": "unknown", "nvml_error": self.error, "samples": 0}
        union = 0
        for s in mine:
            union |= s["reasons"] or 0
        clocks = [s["sm_mhz"] for s in mine if s["sm_mhz"] is not None]
        power = [s["power_w"] for s in mine if s["power_w"] is not None]
        temps = [s["temp_c"] for s in mine if s["temp_c"] is not None]
        return {
            "throttle_class": throttle_class(union, [s["reasons"] or 0 for s in mine]),
            "reasons_mask": union, "reasons": [name for bit, name in REASONS.items() if union & bit],
            "samples": len(mine),
            "sm_mhz_median": statistics.median(clocks) if clocks else None, "sm_mhz_min": min(clocks) if clocks else None,
            "power_w_mean": statistics.fmean(power) if power else None, "power_w_max": max(power) if power else None,
            "temp_c_max": max(temps) if temps else None,
            "sm_mhz_mean_timed": statistics.fmean(sm_timed) if sm_timed else None,
            "mem_mhz_mean_timed": statistics.fmean(mem_timed) if mem_timed else None,
        }  # fmt: skip


def throttle_class(union: int, masks: list[int]) -> str:
    """probes.md section 5: thermal / hw_slowdown (DCGM's failure mask) > idle_in_window > app_clocks >
    power_capped > clean."""
    if union & (0x20 | 0x40):
        return "thermal"
    if union & (0x8 | 0x80):
        return "hw_slowdown"
    if any(mask & 0x1 for mask in masks[1:-1]):
        return "idle_in_window"
    if union & 0x2:
        return "app_clocks"
    if union & 0x4:
        return "power_capped"
    return "clean"


# ---------------------------------------------------------------- timing


class Device:
    """Where the check runs: CUDA events on a GPU; perf_counter on the CPU (--allow-cpu)."""

    def __init__(self, torch: Any, cuda: bool, index: int):
        self.torch, self.cuda = torch, cuda
        self.name = f"cuda:{index}" if cuda else "cpu"

    def sync(self) -> None:
        if self.cuda:
            self.torch.cuda.synchronize()

    def seconds(self, step: Callable[[], Any], iterations: int, before: Callable[[], Any] | None = None) -> list[float]:
        out = []
        for _ in range(iterations):
            if before is not None:
                before()
            if self.cuda:
                start, end = (self.torch.cuda.Event(enable_timing=True) for _ in range(2))
                start.record()
                step()
                end.record()
                end.synchronize()
                out.append(start.elapsed_time(end) / 1e3)
            else:
                begin = time.perf_counter()
                step()
                out.append(time.perf_counter() - begin)
        self.sync()  # raises on an asynchronous CUDA error
        return out

    def warm(self, step: Callable[[], Any], seconds: float) -> None:
        start = time.perf_counter()
        while True:
            step()
            self.sync()
            if time.perf_counter() - start >= seconds:
                return


class Check:
    """Collects figures, prints each against its limit, and the verdict."""

    def __init__(self, sampler: Sampler):
        self.sampler = sampler
        self.rows: list[dict[str, Any]] = []

    def step(self, label: str) -> None:
        self.sampler.label = label

    @contextlib.contextmanager
    def timed(self, label: str) -> Iterator[None]:
        """Label the samples of a timed loop (an edge sample at each end, so a short loop has two)."""
        self.sampler.label = f"{label}:timed"
        if self.sampler.nvml is not None:
            self.sampler.sample()
        try:
            yield
        finally:
            if self.sampler.nvml is not None:
                self.sampler.sample()
            self.sampler.label = label

    def add(self, step: str, metric: str, unit: str, samples: list[float] | None, *, limit: float | None = None,
            floor: float | None = None, ceiling: float | None = None, minimum: float | None = None,
            value: float | None = None,
            note: str | None = None, **extra: Any) -> dict[str, Any]:  # fmt: skip
        stats = describe(samples) if samples else {}
        figure = stats.get("median", value)
        row = {"step": step, "metric": metric, "unit": unit, "value": figure, **stats, "limit": limit,
               "fraction_of_limit": figure / limit if figure is not None and limit else None, "floor": floor,
               "ceiling": ceiling, "note": note, **extra}  # fmt: skip
        verdict = "pass"
        if figure is None:
            verdict = "skipped"
        elif floor is not None and row["fraction_of_limit"] is not None and row["fraction_of_limit"] < floor:
            verdict = "fail"
        elif ceiling is not None and figure > ceiling:
            verdict = "fail"
        elif minimum is not None and figure < minimum:
            verdict = "fail"
        row["verdict"] = verdict
        self.rows.append(row)
        ci = f" [{stats['ci_low']:.4g}, {stats['ci_high']:.4g}]" if stats else ""
        frac = f" {row['fraction_of_limit']:.1%} of {limit:.4g}" if row["fraction_of_limit"] is not None else ""
        bound = (
            f" (floor {floor:.0%})" if floor is not None and limit else (f" (ceiling {ceiling:g})" if ceiling else "")
        )
        shown = f"{figure:.4g}" if figure is not None else "-"
        print(f"  {metric:<28} {shown:>10}{ci:<24} {unit:<8}{frac}{bound}  {verdict}" + (f"  ({note})" if note else ""))
        return row

    def telemetry(self, label: str) -> dict[str, Any]:
        summary = self.sampler.summary(label)
        if summary.get("samples"):
            print(f"  telemetry: {summary['throttle_class']} {summary['reasons']} SM {summary['sm_mhz_median']} MHz "
                  f"(min {summary['sm_mhz_min']}), power mean {summary['power_w_mean']} W max {summary['power_w_max']} W, "
                  f"temp max {summary['temp_c_max']} C")  # fmt: skip
        else:
            print(f"  telemetry: unknown ({summary.get('nvml_error')})")
        for row in self.rows:
            if row["step"] == label:
                row["telemetry"] = summary
        return summary


# ---------------------------------------------------------------- steps


def hbm_stream(check: Check, dev: Device, elements: int, iterations: int, limits: dict) -> None:
    torch = dev.torch
    check.step("hbm_stream")
    print(f"hbm_stream: 3 x {elements * 4 / 2**30:.3g} GiB fp32, {iterations} iterations")
    gen = torch.Generator(device=dev.name).manual_seed(0)
    a = torch.rand(elements, generator=gen, device=dev.name)
    b = torch.rand(elements, generator=gen, device=dev.name)
    c = torch.rand(elements, generator=gen, device=dev.name)
    kernels = {
        "copy": (lambda: b.copy_(a), 2), "scale": (lambda: torch.mul(c, 0.4, out=b), 2),
        "add": (lambda: torch.add(a, b, out=c), 3), "triad": (lambda: torch.add(b, c, alpha=0.4, out=a), 3),
        "dot": (lambda: torch.dot(a, b), 2),
    }  # fmt: skip
    limit = limits.get("hbm") / 1e9 if limits.get("hbm") else None
    figures = {}
    for name, (step, arrays) in kernels.items():
        dev.warm(step, 0.1)
        with check.timed("hbm_stream"):
            rates = [arrays * elements * 4 / s / 1e9 for s in dev.seconds(step, iterations)]
        judged = name in ("copy", "triad")
        row = check.add("hbm_stream", f"{name}_gbps", "GB/s", rates, limit=limit,
                        floor=FLOORS["hbm"] if judged else None)  # fmt: skip
        figures[name] = row["value"]
    torch.add(b, c, alpha=0.4, out=a)
    m = min(elements, 1 << 20)
    verified = bool(torch.allclose(a[:m], b[:m] + 0.4 * c[:m]))
    check.add("hbm_stream", "triad_verified", "bool", None, value=float(verified), minimum=1.0)
    summary = check.telemetry("hbm_stream")
    mem = summary.get("mem_mhz_mean_timed")
    for name in ("copy", "triad"):  # the HBM analogue of eff_clock: bandwidth over the spec at the clock it ran at
        if mem and limits.get("hbm") and limits.get("mem_clock_mhz"):
            eff = figures[name] * 1e9 / (limits["hbm"] * mem / limits["mem_clock_mhz"])
            check.add("hbm_stream", f"{name}_eff_mem_clock", "ratio", None, value=eff,
                      note=f"achieved / (HBM spec x {mem:.0f} / {limits['mem_clock_mhz']:.0f} MHz)")  # fmt: skip
        else:
            check.add("hbm_stream", f"{name}_eff_mem_clock", "ratio", None, note="memory clock or spec unknown")


def gemm(check: Check, dev: Device, dtype: str, size: int, iterations: int, warm_s: float, limits: dict) -> None:
    torch = dev.torch
    label = f"gemm_{dtype}"
    check.step(label)
    print(f"gemm {dtype} {size}^3: {warm_s:g} s warm-up, {iterations} iterations, seeded randn")
    limit = limits.get(dtype) / 1e12 if limits.get(dtype) else None
    if dtype == "fp8":
        cc = torch.cuda.get_device_capability() if dev.cuda else (0, 0)
        if not dev.cuda or cc < (8, 9) or not hasattr(torch, "_scaled_mm"):
            check.add("gemm", f"{dtype}_{size}_tflops", "TFLOP/s", None, note=f"skipped: fp8 needs cc >= 8.9 ({cc})")
            return
    gen = torch.Generator(device=dev.name).manual_seed(0)
    a32 = torch.randn(size, size, generator=gen, device=dev.name)
    b32 = torch.randn(size, size, generator=gen, device=dev.name)
    matmul = torch.backends.cuda.matmul
    saved = getattr(matmul, "fp32_precision", None)
    if dev.cuda and dtype in ("tf32", "fp32"):  # set explicitly; restored below
        if saved is not None:
            matmul.fp32_precision = "tf32" if dtype == "tf32" else "ieee"
        else:
            matmul.allow_tf32 = dtype == "tf32"
    if dtype == "fp8":
        a, b = a32.to(torch.float8_e4m3fn), b32.to(torch.float8_e4m3fn).t()
        one = torch.tensor(1.0, device=dev.name)
        out = torch.empty(size, size, device=dev.name, dtype=torch.bfloat16)

        def step() -> None:
            torch._scaled_mm(a, b, scale_a=one, scale_b=one, out_dtype=torch.bfloat16, out=out)
    else:
        cast = {"bf16": torch.bfloat16, "fp16": torch.float16, "tf32": torch.float32, "fp32": torch.float32}[dtype]
        a, b = a32.to(cast), b32.to(cast)
        out = torch.empty(size, size, device=dev.name, dtype=cast)

        def step() -> None:
            torch.mm(a, b, out=out)

    try:
        flush = torch.empty(64 * 2**20, device=dev.name) if dev.cuda and size <= 4096 else None  # 256 MiB L2 flush
        dev.warm(step, warm_s)
        with check.timed(label):
            secs = dev.seconds(step, iterations, before=flush.zero_ if flush is not None else None)
        rows = min(256, size)
        ref = a[:rows].double() @ b.double()
        rel = float((out[:rows].double() - ref).norm() / ref.norm())
    finally:
        if dev.cuda and dtype in ("tf32", "fp32"):
            if saved is not None:
                matmul.fp32_precision = saved
            else:
                matmul.allow_tf32 = False
    rates = [2 * size**3 / s / 1e12 for s in secs]
    note = "CPU: tf32 runs as fp32" if dtype == "tf32" and not dev.cuda else None
    row = check.add("gemm", f"{dtype}_{size}_tflops", "TFLOP/s", rates, limit=limit, floor=FLOORS.get(dtype),
                    rel_error=rel, note=note)  # fmt: skip
    summary = check.telemetry(label)
    clock, per_sm = summary.get("sm_mhz_mean_timed"), flop_per_clock_per_sm(limits, dtype)
    sms = (dev.torch.cuda.get_device_properties(0).multi_processor_count if dev.cuda else None) or limits.get(
        "sm_count"
    )
    if clock and per_sm and sms:
        eff = row["value"] * 1e12 / (sms * per_sm * clock * 1e6)
        check.add("gemm", f"{dtype}_eff_clock", "ratio", None, value=eff,
                  note=f"achieved / ({sms} SM x {per_sm:.0f} FLOP/clk x {clock:.0f} MHz timed mean)")  # fmt: skip
    else:
        check.add("gemm", f"{dtype}_eff_clock", "ratio", None, note="SM clock or FLOP/clk/SM unknown")
    check.add("gemm", f"{dtype}_rel_error_vs_fp64", "ratio", None, value=rel)


def launch_latency(check: Check, dev: Device, iterations: int) -> None:
    torch = dev.torch
    check.step("launch_latency")
    print(f"launch_latency: 1-element add_, {iterations} iterations")
    x = torch.zeros(1, device=dev.name)

    def op() -> None:
        x.add_(1)

    dev.warm(op, 0.2)
    check.add("launch_latency", "event_us", "us", [s * 1e6 for s in dev.seconds(op, iterations)],
              ceiling=LAUNCH_CEILING_US["event_us"] if dev.cuda else None)  # fmt: skip
    walls = []
    for _ in range(iterations):
        begin = time.perf_counter_ns()
        op()
        dev.sync()
        walls.append((time.perf_counter_ns() - begin) / 1e3)
    check.add("launch_latency", "wall_us", "us", walls, ceiling=LAUNCH_CEILING_US["wall_us"] if dev.cuda else None)
    batch, rounds = (10000, 5) if dev.cuda else (1000, 5)
    throughput = []
    for _ in range(rounds):
        begin = time.perf_counter_ns()
        for _ in range(batch):
            op()
        dev.sync()
        throughput.append((time.perf_counter_ns() - begin) / 1e3 / batch)
    check.add("launch_latency", "throughput_us", "us", throughput)
    if not dev.cuda:
        check.add("launch_latency", "graph_us", "us", None, note="skipped: CUDA graphs need a GPU")
        check.add("launch_latency", "event_behind_sleep_us", "us", None, note="skipped: needs a GPU")
        check.telemetry("launch_latency")
        return
    stream = torch.cuda.Stream()
    stream.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(stream):
        op()
    torch.cuda.current_stream().wait_stream(stream)
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        for _ in range(1000):
            op()
    graph.replay()
    check.add("launch_latency", "graph_us", "us", [s * 1e6 / 1000 for s in dev.seconds(graph.replay, 20)])
    behind = []  # nvbandwidth's trick: the GPU sleeps while the events and the op are queued
    for _ in range(min(iterations, 200)):
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        torch.cuda._sleep(2_000_000)
        start.record()
        op()
        end.record()
        end.synchronize()
        behind.append(start.elapsed_time(end) * 1e3)
    check.add("launch_latency", "event_behind_sleep_us", "us", behind, note="GPU-side time of one launch",
              ceiling=LAUNCH_CEILING_US["event_behind_sleep_us"])  # fmt: skip
    check.telemetry("launch_latency")


def pcie(
    check: Check, dev: Device, nbytes: int, iterations: int, limits: dict, sampler: Sampler, cpus: str | None
) -> None:
    torch = dev.torch
    check.step("pcie")
    if not dev.cuda:
        check.add("pcie", "h2d_pinned_gbps", "GB/s", None, note="skipped: no CUDA device")
        check.add("pcie", "h2d_bidir_pinned_gbps", "GB/s", None, note="skipped: no CUDA device; binding not applicable")
        return
    saved = os.sched_getaffinity(0)
    bound = None
    if cpus:  # bind to the GPU's CPUs before allocating, so the pinned pages are first touched on its node
        wanted = set()
        for part in cpus.split(","):
            low, _, high = part.partition("-")
            wanted.update(range(int(low), int(high or low) + 1))
        try:
            os.sched_setaffinity(0, wanted)
            bound = cpu_list(os.sched_getaffinity(0))
        except OSError as error:
            print(f"  could not bind to the GPU's CPUs {cpus}: {error}")
    print(f"pcie: pinned {nbytes / 2**30:.3g} GiB, {iterations} iterations per direction; bound to CPUs {bound}")
    try:
        host = torch.empty(nbytes, dtype=torch.uint8, pin_memory=True).random_(0, 256)
        devbuf = torch.empty(nbytes, dtype=torch.uint8, device=dev.name).random_(0, 256)
        host_back = torch.empty(nbytes, dtype=torch.uint8, pin_memory=True).random_(0, 256)
        dev_back = torch.empty(nbytes, dtype=torch.uint8, device=dev.name).random_(0, 256)
        limit = limits.get("pcie") / 1e9 if limits.get("pcie") else None
        steps = {"h2d": lambda: devbuf.copy_(host, non_blocking=True),
                 "d2h": lambda: host_back.copy_(dev_back, non_blocking=True)}  # fmt: skip
        for name, step in steps.items():
            dev.warm(step, 0.2)
            with check.timed("pcie"):
                rates = [nbytes / s / 1e9 for s in dev.seconds(step, iterations)]
            check.add("pcie", f"{name}_pinned_gbps", "GB/s", rates, limit=limit, floor=FLOORS["pcie"], numa_bound=bound)
        streams = {name: torch.cuda.Stream() for name in steps}
        both: dict[str, list[float]] = {name: [] for name in steps}
        with check.timed("pcie"):
            for _ in range(iterations):  # both directions at once, each timed on its own stream
                torch.cuda._sleep(BIDIR_GATE_CYCLES)
                gate = torch.cuda.Event()
                gate.record()
                events = {}
                for name, step in steps.items():
                    streams[name].wait_event(gate)
                    with torch.cuda.stream(streams[name]):
                        events[name] = (torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True))
                        events[name][0].record()
                        step()
                        events[name][1].record()
                for name, (start, end) in events.items():
                    end.synchronize()
                    both[name].append(start.elapsed_time(end) / 1e3)
            dev.sync()
        for name, secs in both.items():
            check.add("pcie", f"{name}_bidir_pinned_gbps", "GB/s", [nbytes / s / 1e9 for s in secs], limit=limit,
                      note="while the other direction runs", numa_bound=bound)  # fmt: skip
        for _ in range(8):
            devbuf.copy_(host, non_blocking=True)
        link = {k: sampler.call(f"nvmlDeviceGet{k}") for k in
                ("CurrPcieLinkGeneration", "MaxPcieLinkGeneration", "CurrPcieLinkWidth", "MaxPcieLinkWidth")}  # fmt: skip
        dev.sync()
    finally:
        os.sched_setaffinity(0, saved)
    print(f"  link under load: {link}")
    if None not in link.values():
        check.add("pcie", "link_gen_minus_max", "count", None,
                  value=float(link["CurrPcieLinkGeneration"] - link["MaxPcieLinkGeneration"]), minimum=0.0)  # fmt: skip
    check.telemetry("pcie")


def burn(check: Check, dev: Device, size: int, seconds: float, limits: dict) -> None:
    torch = dev.torch
    check.step("burn_soak")
    dtype = torch.bfloat16 if dev.cuda else torch.float32
    print(f"burn_soak: {'bf16' if dev.cuda else 'fp32'} {size}^3 for {seconds:g} s, every product compared bitwise")
    gen = torch.Generator(device=dev.name).manual_seed(1234)
    a = torch.randn(size, size, generator=gen, device=dev.name).to(dtype)
    b = torch.randn(size, size, generator=gen, device=dev.name).to(dtype)
    first = torch.mm(a, b)
    out = torch.empty_like(first)
    dev.warm(lambda: torch.mm(a, b, out=out), 1.0 if dev.cuda else 0.05)
    secs, mismatched = [], 0
    deadline = time.perf_counter() + seconds
    with check.timed("burn_soak"):
        while time.perf_counter() < deadline or len(secs) < 3:
            secs.extend(dev.seconds(lambda: torch.mm(a, b, out=out), 1))
            mismatched += int((out != first).sum())
    rates = [2 * size**3 / s / 1e12 for s in secs]
    limit = limits.get("bf16") / 1e12 if dev.cuda and limits.get("bf16") else None
    sustained = check.add("burn_soak", "sustained_tflops", "TFLOP/s", rates, limit=limit)
    fifth = max(1, len(rates) // 5)
    ratio = statistics.median(rates[-fifth:]) / statistics.median(rates[:fifth])
    check.add("burn_soak", "sustained_ratio", "ratio", None, value=ratio, note="last fifth / first fifth")
    check.add("burn_soak", "mismatched_elements", "elements", None, value=float(mismatched), ceiling=0.0,
              note=f"{len(rates)} products vs the first")  # fmt: skip
    clock = check.telemetry("burn_soak").get("sm_mhz_mean_timed")
    per_sm, sms = flop_per_clock_per_sm(limits, "bf16"), limits.get("sm_count")
    if dev.cuda and clock and per_sm and sms:
        eff = sustained["value"] * 1e12 / (sms * per_sm * clock * 1e6)
        check.add("burn_soak", "sustained_eff_clock", "ratio", None, value=eff,
                  note=f"sustained / ({sms:.0f} SM x {per_sm:.0f} FLOP/clk x {clock:.0f} MHz timed mean)")  # fmt: skip
    else:
        check.add("burn_soak", "sustained_eff_clock", "ratio", None, note="SM clock or FLOP/clk/SM unknown")


# ---------------------------------------------------------------- main


def context(torch: Any, dev: Device, sampler: Sampler) -> dict[str, Any]:
    info: dict[str, Any] = {"python": platform.python_version(), "torch": torch.__version__,
                            "torch_cuda": torch.version.cuda, "host": platform.node(), "device": dev.name}  # fmt: skip
    torch_bus_id = None
    if dev.cuda:
        props = torch.cuda.get_device_properties(0)
        with contextlib.suppress(AttributeError, TypeError, ValueError):
            torch_bus_id = (
                f"{int(props.pci_domain_id):04x}:{int(props.pci_bus_id):02x}:{int(props.pci_device_id):02x}.0"
            )
        info.update(name=props.name, uuid=f"GPU-{props.uuid}" if not str(props.uuid).startswith("GPU-") else str(props.uuid),
                    capability=list(torch.cuda.get_device_capability()), sm_count=props.multi_processor_count,
                    l2_bytes=getattr(props, "L2_cache_size", None), total_memory=props.total_memory)  # fmt: skip
    nvml = sampler.nvml
    if nvml is not None:
        driver = nvml.nvmlSystemGetDriverVersion()
        limit = sampler.call("nvmlDeviceGetEnforcedPowerLimit")
        info.update(
            driver=driver.decode() if isinstance(driver, bytes) else driver,
            nvml_name=sampler.call("nvmlDeviceGetName"), serial=sampler.call("nvmlDeviceGetSerial"),
            vbios=sampler.call("nvmlDeviceGetVbiosVersion"), power_limit_w=limit / 1000 if limit else None,
            sm_clock_mhz=sampler.call("nvmlDeviceGetClockInfo", nvml.NVML_CLOCK_SM),
            sm_clock_max_mhz=sampler.call("nvmlDeviceGetMaxClockInfo", nvml.NVML_CLOCK_SM),
            mem_clock_mhz=sampler.call("nvmlDeviceGetClockInfo", nvml.NVML_CLOCK_MEM),
            persistence_mode=sampler.call("nvmlDeviceGetPersistenceMode"),
            idle_reasons=[n for bit, n in REASONS.items() if (sampler.reasons() or 0) & bit],
        )  # fmt: skip
    else:
        info["nvml_error"] = sampler.error
    if dev.cuda:
        info["topology"] = topology(sampler, torch_bus_id)
    else:
        info["topology"] = {"process_cpu_set": cpu_list(os.sched_getaffinity(0)), "gpu": "not applicable: no GPU"}
    return info


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", default=os.environ.get("OUT", "/tmp/gpu_check"), help="folder for gpu_check.json")
    parser.add_argument("--quick", action="store_true", help="small sizes and few iterations (smoke runs)")
    parser.add_argument("--allow-cpu", action="store_true", help="run on the CPU when there is no GPU (tests)")
    parser.add_argument("--burn-seconds", type=float, default=None, help="default 30 (quick: 2)")
    args = parser.parse_args(argv)
    try:
        import torch  # noqa: PLC0415
    except ImportError as error:
        print(f"no torch: {error}", file=sys.stderr)
        return 3
    cuda = torch.cuda.is_available()
    if not cuda and not args.allow_cpu:
        print(
            "no CUDA device (torch.cuda.is_available() is False); --allow-cpu runs the CPU smoke path", file=sys.stderr
        )
        return 3
    began = time.perf_counter()
    dev = Device(torch, cuda, 0)
    uuid = None
    if cuda:
        raw = str(torch.cuda.get_device_properties(0).uuid)
        uuid = raw if raw.startswith("GPU-") else f"GPU-{raw}"  # NVML handle by UUID, never by index
    sampler = Sampler(uuid)
    info = context(torch, dev, sampler)
    sku = sku_of(info.get("name", "")) if cuda else None
    limits = limits_for(sku)
    info.update(sku=sku, limits=limits)
    print(json.dumps(info, default=str))
    check = Check(sampler)
    sampler.start()
    quick = args.quick or not cuda
    try:
        hbm_stream(check, dev, (1 << 22) if quick else (1 << 28), 5 if quick else 50, limits)
        gemm(check, dev, "bf16", 256 if quick else 8192, 5 if quick else 50, 0.05 if quick else 2.0, limits)
        gemm(check, dev, "fp8", 256 if quick else 8192, 5 if quick else 50, 0.05 if quick else 2.0, limits)
        gemm(check, dev, "tf32", 256 if quick else 4096, 5 if quick else 50, 0.05 if quick else 1.0, limits)
        gemm(check, dev, "fp32", 256 if quick else 4096, 5 if quick else 50, 0.05 if quick else 1.0, limits)
        launch_latency(check, dev, 50 if quick else 2000)
        cpus = info["topology"].get("gpu_cpu_set")
        pcie(check, dev, (64 << 20) if quick else (1 << 30), 5 if quick else 20, limits, sampler, cpus)
        burn(check, dev, 256 if quick else 8192, args.burn_seconds or (0.5 if quick else 30.0), limits)
    finally:
        sampler.stop()
    elapsed = time.perf_counter() - began
    failed = [f"{r['step']}/{r['metric']}" for r in check.rows if r["verdict"] == "fail"]
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    summary = {
        "context": info,
        "elapsed_s": elapsed,
        "failed": failed,
        "rows": check.rows,
        "telemetry": sampler.samples,
    }
    (out / "gpu_check.json").write_text(json.dumps(summary, indent=1, default=str))
    print(f"done in {elapsed:.1f} s; {len(check.rows)} figures; failed: {', '.join(failed) or 'none'}")
    print(f"wrote {out / 'gpu_check.json'}")
    return 1 if failed else 0


if __name__ == "__main__":
    raise SystemExit(main())
