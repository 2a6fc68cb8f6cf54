"""burn_soak: sustained GEMM plus a bitwise compare of every result with the first (gpu-burn's method in
torch; probes.md section 2.1): silent data corruption shows as ``mismatched_elements`` > 0, which fails.

Fixed seeded A and B; C_0 = A·B, then C_i = A·B for ``seconds`` (GPU default 30 s bf16 8192³; CPU 2 s
fp32 256³), each product timed (CUDA events / ``perf_counter_ns``) and compared with C_0 for **exact**
equality (the same kernel on the same inputs and device is bit-reproducible; cuBLAS needs a fixed
algorithm, which one process and one shape give in practice; ``CUBLAS_WORKSPACE_CONFIG`` is recorded).
Rows: ``sustained_tflops`` (median over all products, CI), ``sustained_ratio`` (median of the last fifth
over the first fifth; < 0.90 is droop, judged by the rules), ``mismatched_elements`` (count, summed over
products), ``sustained_eff_clock`` (the sustained figure over the SM clock it ran at, probes/efficiency.py).
``inject_fault_at`` flips one element of that product, for tests of the compare path. The loop runs at least
``MIN_PRODUCTS`` products whatever the deadline: a sustained figure needs a median and an interval, and on a loaded
CPU one 256³ product can outlast a short (0.3 s, ``--quick``) soak (CI: one product of 0.33 s, n = 1).
"""

from __future__ import annotations

import os
import time
from typing import Any

import numpy as np

from probes.common import (
    RunInfo,
    error_text,
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
from probes.efficiency import eff_clock_row
from probes.records import ProbeResult
from probes.specs import peak_tflops

PROBE = "burn_soak"
MIN_PRODUCTS = 5  # products timed and compared however short the soak: a median and its interval need several
METRICS = (("sustained_tflops", "TFLOP/s"), ("sustained_ratio", "ratio"), ("mismatched_elements", "elements"))


def _loop_torch(info: RunInfo, dtype: str, size: int, seconds: float, inject_fault_at: int | None, window: Any):
    import torch  # noqa: PLC0415 - optional dependency

    gpu = is_gpu(info)
    device = torch.device(info.backend.torch_device)
    torch_dtype = {"bf16": torch.bfloat16, "fp16": torch.float16, "fp32": torch.float32, "fp64": torch.float64}[dtype]
    generator = torch.Generator(device=device).manual_seed(1234)
    a = torch.randn(size, size, generator=generator, device=device).to(torch_dtype)
    b = torch.randn(size, size, generator=generator, device=device).to(torch_dtype)
    c = torch.empty(size, size, device=device, dtype=torch_dtype)
    first = torch.mm(a, b)
    warm_up(lambda: torch.mm(a, b, out=c), 1.0 if gpu else 0.1, torch.cuda.synchronize if gpu else (lambda: None))
    mismatches = torch.zeros((), dtype=torch.int64, device=device)
    times: list[Any] = []
    deadline = time.perf_counter() + seconds
    with window():
        i = 0
        while True:
            if gpu:
                start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
                start.record()
                torch.mm(a, b, out=c)
                end.record()
                times.append((start, end))
            else:
                begin = time.perf_counter_ns()
                torch.mm(a, b, out=c)
                times.append((time.perf_counter_ns() - begin) / 1e9)
            if inject_fault_at == i:
                c.view(-1)[0] += 1
            mismatches += (c != first).sum()
            i += 1
            if gpu and i % 20 == 0:
                torch.cuda.synchronize()  # bound the queue so the deadline means device time
            if time.perf_counter() >= deadline and i >= MIN_PRODUCTS:
                break
        if gpu:
            torch.cuda.synchronize()
    secs = [s.elapsed_time(e) / 1e3 for s, e in times] if gpu else times
    return secs, int(mismatches.item())


def _loop_numpy(size: int, seconds: float, inject_fault_at: int | None, window: Any):
    rng = np.random.default_rng(1234)
    a = rng.standard_normal((size, size), dtype=np.float32)
    b = rng.standard_normal((size, size), dtype=np.float32)
    c = np.empty_like(a)
    first = a @ b
    warm_up(lambda: np.matmul(a, b, out=c), 0.1)
    mismatches, secs, i = 0, [], 0
    deadline = time.perf_counter() + seconds
    with window():
        while True:
            begin = time.perf_counter_ns()
            np.matmul(a, b, out=c)
            secs.append((time.perf_counter_ns() - begin) / 1e9)
            if inject_fault_at == i:
                c.reshape(-1)[0] += 1
            mismatches += int(np.count_nonzero(c != first))
            i += 1
            if time.perf_counter() >= deadline and i >= MIN_PRODUCTS:
                break
    return secs, mismatches


def run_burn_soak(
    info: RunInfo,
    seconds: float | None = None,
    size: int | None = None,
    dtype: str | None = None,
    inject_fault_at: int | None = None,
) -> list[ProbeResult]:
    gpu = is_gpu(info)
    seconds = float(seconds if seconds is not None else (30.0 if gpu else 2.0))
    size = int(size or (8192 if gpu else 256))
    dtype = dtype or ("bf16" if gpu else "fp32")
    if info.backend.backend == "numpy":
        dtype = "fp32"
    context = probe_context(
        info, seconds=seconds, size=size, dtype=dtype, compare="exact", inject_fault_at=inject_fault_at,
        cublas_workspace_config=os.environ.get("CUBLAS_WORKSPACE_CONFIG"),
    )  # fmt: skip
    sampler = sampler_for(info)
    try:
        with open_sampler(sampler):
            window = lambda: timed_window(sampler)  # noqa: E731
            if info.backend.backend == "numpy":
                secs, mismatches = _loop_numpy(size, seconds, inject_fault_at, window)
            else:
                secs, mismatches = _loop_torch(info, dtype, size, seconds, inject_fault_at, window)
    except Exception as error:
        return [unmeasured(info, PROBE, metric, unit, "error", error_text(error), context) for metric, unit in METRICS]
    context.update(sampler_context(sampler, info))
    throttle = sampler.throttle_class if sampler is not None else "unknown"
    rates = [2 * size**3 / s / 1e12 for s in secs]
    peak = peak_tflops(info.backend.sku, dtype) if gpu else None
    fifth = max(1, len(rates) // 5)
    ratio = float(np.median(rates[-fifth:]) / np.median(rates[:fifth])) if len(rates) >= 2 else None
    sustained = measured(info, PROBE, "sustained_tflops", "TFLOP/s", rates, context, peak=peak, throttle_class=throttle)
    rows = [
        sustained,
        eff_clock_row(sustained, "sustained_eff_clock", dtype),
        single(info, PROBE, "sustained_ratio", "ratio", ratio, context, n=len(rates), throttle_class=throttle),
    ]
    sdc = mismatches > 0
    reason = f"{mismatches} element(s) differ from the first product over {len(rates)} products" if sdc else None
    rows.append(
        single(
            info,
            PROBE,
            "mismatched_elements",
            "elements",
            float(mismatches),
            context,
            n=len(rates),
            throttle_class=throttle,
            status="fail" if sdc else "pass",
            reason=reason,
        )  # fmt: skip
    )
    return rows
