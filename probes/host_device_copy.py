"""host_device_copy: host<->device copy bandwidth over PCIe (probes.md ``pcie_h2d_d2h``, section 2.1).

GPU only. A 256 MiB buffer, pinned (``pin_memory=True``, ``copy_(non_blocking=True)``) and pageable,
copied H2D and D2H, each iteration timed by a CUDA event pair on the current stream; GB/s decimal.
The limit is the SKU's PCIe bandwidth per direction (``gpu_sku_specs.csv``); pinned copies below 70% of
it fail (pageable copies are reported, not judged). While a batch of pinned copies is in flight the
link's current generation and width are read from NVML and compared with their maxima
(``link_gen_minus_max_under_load``, ``link_width_minus_max_under_load``: below 0 is a downtrained link;
NULL without NVML). On a CPU every row is ``skipped`` with the reason.

**NUMA binding** (section 2.1): before its buffers are allocated the calling thread is bound to the GPU's
CPU set (``nvmlDeviceGetCpuAffinity``, else sysfs ``local_cpulist``; probes/topology.py) with
``os.sched_setaffinity``, so the pinned pages are first touched on the GPU's node; its CPU set is restored
afterwards. Every row's context records ``numa_bound``, ``cpu_set`` (the set in force while measuring) and
``numa_bind_reason`` (why not bound, e.g. the GPU's CPUs unknown); on a CPU they say "not applicable".

**Bidirectional** (nvbandwidth's method): an H2D and a D2H pinned copy on two streams, both held behind a
short ``torch.cuda._sleep`` on the current stream until the host has queued them, each timed by events on
its own stream: ``h2d_bidir_pinned_gbps`` and ``d2h_bidir_pinned_gbps`` (each direction while the other
runs; peak per direction) and ``bidir_total_pinned_gbps`` (both buffers over the span from the first start
to the last end; peak twice per direction). Reported, not judged by a floor.
"""

from __future__ import annotations

from typing import Any

from probes.common import (
    NO_GPU,
    RunInfo,
    cuda_event_seconds,
    error_text,
    floor_verdict,
    is_gpu,
    measured,
    open_sampler,
    probe_context,
    sampler_context,
    sampler_for,
    single,
    timed_window,
    unmeasured,
    warm_up,
)
from probes.records import ProbeResult
from probes.specs import sku_value
from probes.topology import NO_GPU as NOT_APPLICABLE
from probes.topology import bound_to, parse_cpu_list

PROBE = "host_device_copy"
UNIT = "GB/s"
FLOOR = 0.70
BYTES = 256 * 1024 * 1024
COPIES = ("h2d_pinned", "d2h_pinned", "h2d_pageable", "d2h_pageable")
BIDIRECTIONAL = ("h2d_bidir_pinned", "d2h_bidir_pinned", "bidir_total_pinned")
GATE_CYCLES = 2_000_000  # torch.cuda._sleep before a bidirectional pair: ~1 ms at 2 GHz, longer than queueing both
LINK_METRICS = ("link_gen_minus_max_under_load", "link_width_minus_max_under_load")


def metric_name(copy: str) -> str:
    return f"{copy}_gbps"


def link_under_load(gpu_uuid: str) -> dict[str, Any]:
    """Current and max PCIe generation and width now (call it while copies are in flight)."""
    try:
        import pynvml  # noqa: PLC0415 - optional

        pynvml.nvmlInit()
    except Exception as error:
        return {"nvml_error": type(error).__name__}
    try:
        handle = pynvml.nvmlDeviceGetHandleByUUID(gpu_uuid)
        return {
            "gen": int(pynvml.nvmlDeviceGetCurrPcieLinkGeneration(handle)),
            "gen_max": int(pynvml.nvmlDeviceGetMaxPcieLinkGeneration(handle)),
            "width": int(pynvml.nvmlDeviceGetCurrPcieLinkWidth(handle)),
            "width_max": int(pynvml.nvmlDeviceGetMaxPcieLinkWidth(handle)),
        }
    except Exception as error:
        return {"nvml_error": type(error).__name__}
    finally:
        try:
            pynvml.nvmlShutdown()
        except Exception:
            pass


def bidirectional_seconds(torch: Any, h2d: Any, d2h: Any, iterations: int) -> dict[str, list[float]]:
    """Seconds per iteration of an H2D and a D2H copy running at once on two streams, each timed by an event
    pair on its own stream, and the span from the first start to the last end. Both streams wait on an
    event behind a ``torch.cuda._sleep`` so that neither starts before the host has queued the other."""
    streams = (torch.cuda.Stream(), torch.cuda.Stream())
    sleep = getattr(torch.cuda, "_sleep", None)
    out: dict[str, list[float]] = {name: [] for name in BIDIRECTIONAL}
    for _ in range(iterations):
        events = [(torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)) for _ in streams]
        if sleep is not None:
            sleep(GATE_CYCLES)
        gate = torch.cuda.Event()
        gate.record()
        for stream, step, (start, end) in zip(streams, (h2d, d2h), events):
            stream.wait_event(gate)
            with torch.cuda.stream(stream):
                start.record()
                step()
                end.record()
        for _, end in events:
            end.synchronize()
        (h_start, h_end), (d_start, d_end) = events
        out["h2d_bidir_pinned"].append(h_start.elapsed_time(h_end) / 1e3)
        out["d2h_bidir_pinned"].append(d_start.elapsed_time(d_end) / 1e3)
        first = min(0.0, h_start.elapsed_time(d_start))  # ms relative to the H2D start
        last = max(h_start.elapsed_time(h_end), h_start.elapsed_time(d_end))
        out["bidir_total_pinned"].append((last - first) / 1e3)
    torch.cuda.synchronize()  # raises on an asynchronous CUDA error
    return out


def _measure(info: RunInfo, nbytes: int, iterations: int, warmup_s: float, sampler: Any) -> tuple[dict, dict]:
    import torch  # noqa: PLC0415 - optional dependency

    device = info.backend.torch_device
    dev = torch.empty(nbytes, dtype=torch.uint8, device=device)
    pinned = torch.empty(nbytes, dtype=torch.uint8, pin_memory=True)
    pageable = torch.empty(nbytes, dtype=torch.uint8)
    dev_back = torch.empty(nbytes, dtype=torch.uint8, device=device)  # the D2H side of the bidirectional pair
    pinned_back = torch.empty(nbytes, dtype=torch.uint8, pin_memory=True)
    for buffer in (dev, pinned, pageable, dev_back, pinned_back):
        buffer.random_(0, 256)
    steps = {
        "h2d_pinned": lambda: dev.copy_(pinned, non_blocking=True),
        "d2h_pinned": lambda: pinned.copy_(dev, non_blocking=True),
        "h2d_pageable": lambda: dev.copy_(pageable),
        "d2h_pageable": lambda: pageable.copy_(dev),
    }
    back = lambda: pinned_back.copy_(dev_back, non_blocking=True)  # noqa: E731
    for step in (*steps.values(), back):
        warm_up(step, warmup_s / (len(steps) + 1), torch.cuda.synchronize)
    seconds = {}
    with timed_window(sampler):
        for name, step in steps.items():
            seconds[name] = cuda_event_seconds(torch, step, iterations)
        seconds.update(bidirectional_seconds(torch, steps["h2d_pinned"], back, iterations))
        for _ in range(8):  # keep the link busy while it is read
            steps["h2d_pinned"]()
        link = link_under_load(info.backend.gpu_uuid)
        torch.cuda.synchronize()
    return seconds, link


def run_host_device_copy(
    info: RunInfo, nbytes: int = BYTES, iterations: int = 20, warmup_s: float = 0.5
) -> list[ProbeResult]:
    peak_bps = sku_value(info.backend.sku, "pcie_bandwidth_bytes_per_s")
    peak = peak_bps / 1e9 if peak_bps and is_gpu(info) else None
    context = probe_context(info, bytes=nbytes, iterations=iterations, warmup_s=warmup_s, floor=FLOOR)
    copies = (*COPIES, *BIDIRECTIONAL)
    if not is_gpu(info):
        context.update(numa_bound=None, cpu_set=None, numa_bind_reason=NOT_APPLICABLE)
        rows = [unmeasured(info, PROBE, metric_name(c), UNIT, "skipped", NO_GPU, context) for c in copies]
        return rows + [unmeasured(info, PROBE, m, "count", "skipped", NO_GPU, context) for m in LINK_METRICS]
    gpu_cpu_set = context["topology"].get("gpu_cpu_set")
    sampler = sampler_for(info)
    binding: dict[str, Any] = {}
    try:
        with open_sampler(sampler), bound_to(parse_cpu_list(gpu_cpu_set) if gpu_cpu_set else None) as binding:
            seconds, link = _measure(info, nbytes, iterations, warmup_s, sampler)
    except Exception as error:
        context.update(binding)
        rows = [
            unmeasured(info, PROBE, metric_name(c), UNIT, "error", error_text(error), context, peak) for c in copies
        ]
        return rows + [unmeasured(info, PROBE, m, "count", "error", error_text(error), context) for m in LINK_METRICS]
    context.update(binding)
    context.update(sampler_context(sampler, info))
    context["pcie_link_under_load"] = link
    throttle = sampler.throttle_class if sampler is not None else "unknown"
    rows = []
    for copy in copies:
        copy_bytes = 2 * nbytes if copy == "bidir_total_pinned" else nbytes
        copy_peak = 2 * peak if peak and copy == "bidir_total_pinned" else peak
        rates = [copy_bytes / s / 1e9 for s in seconds[copy]]
        row = measured(info, PROBE, metric_name(copy), UNIT, rates, context, peak=copy_peak, throttle_class=throttle)
        judged = copy in ("h2d_pinned", "d2h_pinned")
        status, reason = floor_verdict(info, row.fraction_of_peak, FLOOR if judged else None)
        rows.append(
            measured(
                info,
                PROBE,
                metric_name(copy),
                UNIT,
                rates,
                dict(context, bytes_per_iteration=copy_bytes),
                peak=copy_peak,
                throttle_class=throttle,
                status=status,
                reason=reason,
            )  # fmt: skip
        )
    for metric, key in zip(LINK_METRICS, ("gen", "width")):
        if key in link:
            delta = link[key] - link[f"{key}_max"]
            status = "fail" if delta < 0 else "pass"
            reason = f"link {key} {link[key]} below max {link[f'{key}_max']} under load" if delta < 0 else None
            rows.append(single(info, PROBE, metric, "count", float(delta), context, n=1, status=status, reason=reason))
        else:
            why = f"NVML unavailable: {link.get('nvml_error')}; unknown"
            rows.append(single(info, PROBE, metric, "count", None, context, reason=why))
    return rows
