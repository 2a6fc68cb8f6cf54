"""hbm_stream: device-memory bandwidth, STREAM/BabelStream style (probes.md sections 2.1 and 9.5).

Kernels on three fp32 arrays of N elements (GPU default 2^28 = 1 GiB each, >= 4x L2, so no flush):
copy ``b = a``, scale ``b = s*c``, add ``c = a + b``, triad ``a = b + s*c`` (one fused kernel), dot
``sum(a*b)``. Bytes counted as STREAM does (no write-allocate): 2·N·4 for copy, scale and dot,
3·N·4 for add and triad; GB/s is decimal. Each iteration is timed by CUDA events (GPU) or
``perf_counter_ns`` (CPU). The value is the median rate; the best rate (STREAM's convention) is in
the context as ``stats.max``. Triad is verified once against ``b + s*c``. Peak: the SKU's HBM
bandwidth (``gpu_sku_specs.csv``); copy and triad below 80% of it fail. On the CPU the same kernels
run on DRAM (numpy's triad is two passes, so it moves more bytes than it is credited with). Each kernel also
has a ``<kernel>_eff_mem_clock`` row (probes/efficiency.py; ``skipped`` on a CPU).
"""

from __future__ import annotations

from typing import Any, Callable

from probes.common import (
    RunInfo,
    cuda_event_seconds,
    error_text,
    floor_verdict,
    host_seconds,
    is_gpu,
    measured,
    open_sampler,
    probe_context,
    sampler_context,
    sampler_for,
    timed_window,
    unmeasured,
    warm_up,
)
from probes.efficiency import eff_mem_clock_row
from probes.records import ProbeResult
from probes.specs import sku_value

PROBE = "hbm_stream"
UNIT = "GB/s"
KERNELS = ("copy", "scale", "add", "triad", "dot")
ARRAYS_TOUCHED = {"copy": 2, "scale": 2, "add": 3, "triad": 3, "dot": 2}
FLOOR = 0.80
JUDGED = ("copy", "triad")
SCALAR = 0.4
GPU_ELEMENTS = 1 << 28
CPU_ELEMENTS = 1 << 25


def metric_name(kernel: str) -> str:
    return f"{kernel}_gbps"


def _kernels_torch(torch: Any, n: int, device: str) -> tuple[dict[str, Callable[[], Any]], Callable[[], bool]]:
    generator = torch.Generator(device=device).manual_seed(0)
    a = torch.rand(n, generator=generator, device=device)
    b = torch.rand(n, generator=generator, device=device)
    c = torch.rand(n, generator=generator, device=device)
    kernels = {
        "copy": lambda: b.copy_(a),
        "scale": lambda: torch.mul(c, SCALAR, out=b),
        "add": lambda: torch.add(a, b, out=c),
        "triad": lambda: torch.add(b, c, alpha=SCALAR, out=a),
        "dot": lambda: torch.dot(a, b),
    }

    def check() -> bool:
        torch.add(b, c, alpha=SCALAR, out=a)
        m = min(n, 1 << 20)
        return bool(torch.allclose(a[:m], b[:m] + SCALAR * c[:m]))

    return kernels, check


def _kernels_numpy(n: int) -> tuple[dict[str, Callable[[], Any]], Callable[[], bool]]:
    import numpy as np

    rng = np.random.default_rng(0)
    a, b, c = (rng.random(n, dtype=np.float32) for _ in range(3))

    def triad() -> None:
        np.multiply(c, SCALAR, out=a)
        np.add(a, b, out=a)

    kernels = {
        "copy": lambda: np.copyto(b, a),
        "scale": lambda: np.multiply(c, SCALAR, out=b),
        "add": lambda: np.add(a, b, out=c),
        "triad": triad,
        "dot": lambda: np.dot(a, b),
    }

    def check() -> bool:
        triad()
        m = min(n, 1 << 20)
        return bool(np.allclose(a[:m], b[:m] + np.float32(SCALAR) * c[:m]))

    return kernels, check


def run_hbm_stream(
    info: RunInfo, elements: int | None = None, iterations: int | None = None, warmup_s: float = 0.5
) -> list[ProbeResult]:
    """One row per kernel: ``<kernel>_gbps`` with the SKU's HBM bandwidth as the peak."""
    gpu = is_gpu(info)
    n = int(elements or (GPU_ELEMENTS if gpu else CPU_ELEMENTS))
    iterations = iterations or (50 if gpu else 10)
    peak_bps = sku_value(info.backend.sku, "hbm_bandwidth_bytes_per_s") if gpu else None
    peak = peak_bps / 1e9 if peak_bps else None
    context = probe_context(
        info, elements=n, dtype="fp32", bytes_per_array=4 * n, iterations=iterations, warmup_s=warmup_s, floor=FLOOR
    )
    sampler = sampler_for(info)
    seconds: dict[str, list[float]] = {}
    try:
        with open_sampler(sampler):
            if info.backend.backend == "torch":
                import torch  # noqa: PLC0415 - optional dependency

                kernels, check = _kernels_torch(torch, n, info.backend.torch_device)
                sync = torch.cuda.synchronize if gpu else (lambda: None)
            else:
                kernels, check = _kernels_numpy(n)
                sync = lambda: None  # noqa: E731
            for step in kernels.values():
                warm_up(step, warmup_s / len(kernels), sync)
            with timed_window(sampler):
                for kernel, step in kernels.items():
                    if gpu:
                        seconds[kernel] = cuda_event_seconds(torch, step, iterations)
                    else:
                        seconds[kernel] = host_seconds(step, iterations)
            context["triad_verified"] = check()
    except Exception as error:
        return [
            unmeasured(info, PROBE, metric_name(k), UNIT, "error", error_text(error), context, peak) for k in KERNELS
        ]
    context.update(sampler_context(sampler, info))
    throttle = sampler.throttle_class if sampler is not None else "unknown"
    rows = []
    for kernel in KERNELS:
        work = ARRAYS_TOUCHED[kernel] * n * 4
        rates = [work / s / 1e9 for s in seconds[kernel]]
        row = measured(info, PROBE, metric_name(kernel), UNIT, rates, context, peak=peak, throttle_class=throttle)
        status, reason = floor_verdict(info, row.fraction_of_peak, FLOOR if kernel in JUDGED else None)
        if kernel == "triad" and not context["triad_verified"]:
            status, reason = "fail", "triad result check failed"
        rows.append(
            measured(
                info,
                PROBE,
                metric_name(kernel),
                UNIT,
                rates,
                dict(context, bytes_per_iteration=work),
                peak=peak,
                throttle_class=throttle,
                status=status,
                reason=reason,
            )  # fmt: skip
        )
    # the HBM analogue of eff_clock: each bandwidth over the SKU's, scaled to the memory clock it ran at
    rows.extend(eff_mem_clock_row(row, f"{row.metric[: -len('_gbps')]}_eff_mem_clock") for row in list(rows))
    return rows
