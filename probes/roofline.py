"""roofline_sweep (optional; reference probes.md sections 2 and 9.6): an empirical roofline, throughput against
operational intensity, locating the memory ceiling, the compute ceiling and the ridge between them.

mixbench varies the compute per loaded element inside one kernel template; torch has no such kernel without a
compiler, so this sweep varies the **width** w of a product ``C[n, w] = A[n, n] @ B[n, w]`` instead. A is read
once (n² elements, ≥ 4x L2 on a GPU: n = 16384 bf16 is 512 MiB), so with s bytes per element the intensity is

    I(w) = 2·n·n·w / ((n·n + n·w + n·w)·s)  FLOP/byte   (≈ 2w/s for w ≪ n: ≈ w for bf16)

and w = 1 … n sweeps from a matrix-vector product (memory-bound) to a square product (compute-bound). cuBLAS
picks a different kernel per shape (GEMV at w = 1), so the curve is the library's attainable roofline, not
one kernel's; bytes are the minimum traffic (operands read once, the output written once).

Rows (GPU bf16, events per product; CPU fp32, ``perf_counter_ns``):

- ``w<w>_tflops`` per point (median and CI of the products), its ``intensity_flop_per_byte`` and ``gbps`` in
  the context, and as ``peak`` the roofline bound min(dense peak, I x HBM bandwidth), so ``fraction_of_peak``
  is the fraction of what the roofline allows at that intensity (NULL on a CPU: no physical limit);
- ``compute_ceiling_tflops``: the best point's TFLOP/s (peak: the dense peak);
- ``bandwidth_ceiling_gbps``: the best point's bytes/s (peak: the HBM bandwidth);
- ``ridge_flop_per_byte``: compute ceiling / bandwidth ceiling (peak: the datasheet ridge, 206 on an H200).

Reported, not judged: no floor; the spec's "shape change vs cohort" is left to warehouse rules. On a CPU
(n = 4096 fp32, w up to 256) the figures test the pipeline, not the hardware: a shared VM's caches and
neighbours dominate them.
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any, Callable

from probes.common import (
    RunInfo,
    cuda_event_seconds,
    error_text,
    host_seconds,
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
from probes.specs import peak_flops, sku_value

PROBE = "roofline_sweep"
GPU_SIZE = 16384
CPU_SIZE = 4096  # A is 64 MiB of fp32: beyond a 32 MiB L3, small enough for seconds on a shared CPU
GPU_WIDTHS = (1, 2, 4, 8, 16, 32, 64, 128, 256, 512, 1024, 2048, 4096, 16384)
CPU_WIDTHS = (1, 4, 16, 64, 256)
QUICK_WIDTHS = (1, 16, 256)
SUMMARY = (("compute_ceiling_tflops", "TFLOP/s"), ("bandwidth_ceiling_gbps", "GB/s"), ("ridge_flop_per_byte", "FLOP/B"))


def point_metric(width: int) -> str:
    return f"w{width}_tflops"


def intensity(n: int, width: int, element_bytes: int) -> float:
    """FLOP per byte of the minimum traffic of ``A[n, n] @ B[n, width]``."""
    return 2 * n * n * width / ((n * n + 2 * n * width) * element_bytes)


def roofline_bound_tflops(
    peak_tflops: float | None, bandwidth_gbps: float | None, flop_per_byte: float
) -> float | None:
    """min(compute peak, intensity x bandwidth) in TFLOP/s; None unless both limits are known."""
    if not peak_tflops or not bandwidth_gbps:
        return None
    return min(peak_tflops, flop_per_byte * bandwidth_gbps / 1e3)


def _products(info: RunInfo, n: int, widths: tuple[int, ...]) -> tuple[dict[int, Callable[[], Any]], str, int]:
    """One product step per width on seeded random operands; the dtype's name and its element size."""
    if info.backend.backend == "numpy":
        import numpy as np

        rng = np.random.default_rng(0)
        a = rng.standard_normal((n, n), dtype=np.float32)
        steps = {}
        for w in widths:
            b, c = rng.standard_normal((n, w), dtype=np.float32), np.empty((n, w), dtype=np.float32)
            steps[w] = lambda a=a, b=b, c=c: np.matmul(a, b, out=c)
        return steps, "fp32", 4
    import torch  # noqa: PLC0415 - optional dependency

    gpu = is_gpu(info)
    dtype, name, size = (torch.bfloat16, "bf16", 2) if gpu else (torch.float32, "fp32", 4)
    device = info.backend.torch_device
    generator = torch.Generator(device=device).manual_seed(0)
    a = torch.randn(n, n, generator=generator, device=device).to(dtype)
    steps = {}
    for w in widths:
        b = torch.randn(n, w, generator=generator, device=device).to(dtype)
        c = torch.empty(n, w, device=device, dtype=dtype)
        steps[w] = lambda b=b, c=c: torch.mm(a, b, out=c)
    return steps, name, size


def run_roofline_sweep(
    info: RunInfo,
    size: int | None = None,
    widths: tuple[int, ...] | None = None,
    iterations: int | None = None,
    warmup_s: float | None = None,
) -> list[ProbeResult]:
    gpu = is_gpu(info)
    n = int(size or (GPU_SIZE if gpu else CPU_SIZE))
    widths = tuple(w for w in (widths or (GPU_WIDTHS if gpu else CPU_WIDTHS)) if 1 <= w <= n)
    iterations = iterations or (20 if gpu else 5)
    warmup_s = (0.5 if gpu else 0.1) if warmup_s is None else warmup_s
    context = probe_context(info, size=n, widths=list(widths), iterations=iterations, warmup_s=warmup_s)
    sampler = sampler_for(info)
    seconds: dict[int, list[float]] = {}
    try:
        with open_sampler(sampler):
            steps, dtype, element_bytes = _products(info, n, widths)
            context.update(dtype=dtype, element_bytes=element_bytes)
            sync, timer = (lambda: None), host_seconds
            if gpu:
                import torch  # noqa: PLC0415 - optional dependency

                sync = torch.cuda.synchronize
                timer = lambda step, k: cuda_event_seconds(torch, step, k)  # noqa: E731
            for step in steps.values():
                warm_up(step, warmup_s / len(steps), sync)
            with timed_window(sampler):
                for w, step in steps.items():
                    seconds[w] = timer(step, iterations)
    except Exception as error:
        why = error_text(error)
        rows = [unmeasured(info, PROBE, point_metric(w), "TFLOP/s", "error", why, context) for w in widths]
        return rows + [unmeasured(info, PROBE, metric, unit, "error", why, context) for metric, unit in SUMMARY]
    context.update(sampler_context(sampler, info))
    throttle = sampler.throttle_class if sampler is not None else "unknown"
    peak = peak_flops(info.backend.sku, dtype) if gpu else None
    peak_tflops = peak / 1e12 if peak else None
    bandwidth = sku_value(info.backend.sku, "hbm_bandwidth_bytes_per_s") if gpu else None
    bandwidth_gbps = bandwidth / 1e9 if bandwidth else None
    rows, best_tflops, best_gbps = [], 0.0, 0.0
    for w in widths:
        flop = 2 * n * n * w
        moved = (n * n + 2 * n * w) * element_bytes
        rates = [flop / s / 1e12 for s in seconds[w]]
        oi = intensity(n, w, element_bytes)
        row = measured(
            info, PROBE, point_metric(w), "TFLOP/s", rates,
            dict(context, width=w, flop=flop, bytes=moved, intensity_flop_per_byte=oi),
            peak=roofline_bound_tflops(peak_tflops, bandwidth_gbps, oi), throttle_class=throttle,
        )  # fmt: skip
        gbps = row.value * 1e3 / oi
        rows.append(replace(row, context={**row.context, "gbps": gbps}))
        best_tflops, best_gbps = max(best_tflops, row.value), max(best_gbps, gbps)
    summary = dict(context, points=len(widths))
    ridge_peak = peak / bandwidth if peak and bandwidth else None
    for metric, unit, value, limit in (
        ("compute_ceiling_tflops", "TFLOP/s", best_tflops, peak_tflops),
        ("bandwidth_ceiling_gbps", "GB/s", best_gbps, bandwidth_gbps),
        ("ridge_flop_per_byte", "FLOP/B", best_tflops * 1e3 / best_gbps if best_gbps else None, ridge_peak),
    ):
        row = single(info, PROBE, metric, unit, value, summary, n=len(widths), throttle_class=throttle)
        rows.append(replace(row, peak=limit, fraction_of_peak=value / limit if value and limit else None))
    return rows
