"""host_device_copy: host<->device copy bandwidth over PCIe (probes.md ``pcie_h2d_d2h``, section 2.1).

GPU only. A 256 MiB buffer, pinned (``pin_memory=True``, ``copy_(non_blocking=True)``) and pageable,
copied H2D and D2H, each iteration timed by a CUDA event pair on the current stream; GB/s decimal.
The limit is the SKU's PCIe bandwidth per direction (``gpu_sku_specs.csv``); pinned copies below 70% of
it fail (pageable copies are reported, not judged). While a batch of pinned copies is in flight the
link's current generation and width are read from NVML and compared with their maxima
(``link_gen_minus_max_under_load``, ``link_width_minus_max_under_load``: below 0 is a downtrained link;
NULL without NVML). On a CPU every row is ``skipped`` with the reason. The process is not bound to
the GPU's NUMA node yet: the context records the CPU affinity.
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

PROBE = "host_device_copy"
UNIT = "GB/s"
FLOOR = 0.70
BYTES = 256 * 1024 * 1024
COPIES = ("h2d_pinned", "d2h_pinned", "h2d_pageable", "d2h_pageable")
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


def _measure(info: RunInfo, nbytes: int, iterations: int, warmup_s: float, sampler: Any) -> tuple[dict, dict]:
    import torch  # noqa: PLC0415 - optional dependency

    device = info.backend.torch_device
    dev = torch.empty(nbytes, dtype=torch.uint8, device=device)
    pinned = torch.empty(nbytes, dtype=torch.uint8, pin_memory=True)
    pageable = torch.empty(nbytes, dtype=torch.uint8)
    dev.random_(0, 256)
    pinned.random_(0, 256)
    pageable.random_(0, 256)
    steps = {
        "h2d_pinned": lambda: dev.copy_(pinned, non_blocking=True),
        "d2h_pinned": lambda: pinned.copy_(dev, non_blocking=True),
        "h2d_pageable": lambda: dev.copy_(pageable),
        "d2h_pageable": lambda: pageable.copy_(dev),
    }
    for step in steps.values():
        warm_up(step, warmup_s / len(steps), torch.cuda.synchronize)
    seconds = {}
    with timed_window(sampler):
        for name, step in steps.items():
            seconds[name] = cuda_event_seconds(torch, step, iterations)
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
    if not is_gpu(info):
        rows = [unmeasured(info, PROBE, metric_name(c), UNIT, "skipped", NO_GPU, context) for c in COPIES]
        return rows + [unmeasured(info, PROBE, m, "count", "skipped", NO_GPU, context) for m in LINK_METRICS]
    sampler = sampler_for(info)
    try:
        with open_sampler(sampler):
            seconds, link = _measure(info, nbytes, iterations, warmup_s, sampler)
    except Exception as error:
        rows = [
            unmeasured(info, PROBE, metric_name(c), UNIT, "error", error_text(error), context, peak) for c in COPIES
        ]
        return rows + [unmeasured(info, PROBE, m, "count", "error", error_text(error), context) for m in LINK_METRICS]
    context.update(sampler_context(sampler, info))
    context["pcie_link_under_load"] = link
    throttle = sampler.throttle_class if sampler is not None else "unknown"
    rows = []
    for copy in COPIES:
        rates = [nbytes / s / 1e9 for s in seconds[copy]]
        row = measured(info, PROBE, metric_name(copy), UNIT, rates, context, peak=peak, throttle_class=throttle)
        status, reason = floor_verdict(info, row.fraction_of_peak, FLOOR if copy.endswith("pinned") else None)
        rows.append(
            measured(
                info,
                PROBE,
                metric_name(copy),
                UNIT,
                rates,
                context,
                peak=peak,
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
