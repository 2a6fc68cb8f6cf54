"""The GEMM probe: dense square matrix-multiply throughput (reference probes.md sections 2 and 3).

Method: seeded ``randn`` inputs (never zeros: data values change the result), a preallocated output,
a warm-up by time (cuBLAS heuristics, lazy loading, clock ramp), then a timed loop of one product
per sample. On CUDA each product is timed with a pair of ``torch.cuda.Event(enable_timing=True)``
on the current stream, synchronised every iteration, and shapes that fit in L2 (size <= 4096) get a
256 MiB L2 flush before each iteration, outside the events. On the CPU (torch or numpy) products are
synchronous and timed with ``time.perf_counter_ns``. A sample is 2·n³ FLOP over its time in
TFLOP/s; the value is their median. Once per run, the first 256 rows of the last product are checked
against an fp64 product of the same inputs: a NaN or an error above the dtype's tolerance fails.
"""

from __future__ import annotations

import contextlib
import time
from dataclasses import dataclass, field, replace
from datetime import datetime
from typing import Any, Callable, ContextManager

import numpy as np

from probes.backends import Backend, hostname, import_torch, select_backend
from probes.common import RunInfo, error_text, measured, unmeasured
from probes.context import CpuLoad, base_context
from probes.records import ProbeResult, make_run_id, utc_now
from probes.specs import peak_tflops
from probes.throttle import UNKNOWN, ReasonSampler
from probes.verdict import FRACTION_FLOOR, GEMM_FLOORS, judge

PROBE = "gemm"
UNIT = "TFLOP/s"
DTYPES = ("bf16", "fp16", "tf32", "fp32", "fp8", "fp64")
FP8_MIN_CAPABILITY = (8, 9)  # e4m3 tensor cores: Ada and Hopper onwards
NUMPY_DTYPES = {"fp32": np.float32, "fp64": np.float64}
# fp8: its inputs are quantized first and the fp64 reference uses the quantized inputs; the output is bf16
TOLERANCE = {"fp64": 1e-10, "fp32": 1e-4, "tf32": 1e-2, "fp16": 5e-2, "bf16": 5e-2, "fp8": 5e-2}  # ‖out−ref‖/‖ref‖
CHECK_ROWS = 256
L2_FLUSH_BYTES = 256 * 1024 * 1024
L2_FLUSH_MAX_SIZE = 4096

# (size, iterations, warm-up seconds) when the caller gives none
GPU_DEFAULTS = (8192, 50, 2.0)
CPU_DEFAULTS = (1024, 20, 0.5)


def metric_name(dtype: str, size: int) -> str:
    return f"{dtype}_{size}_tflops"


def flops_per_product(size: int) -> int:
    return 2 * size**3


def unsupported(backend: Backend, dtype: str, torch: Any = None) -> str | None:
    """Why ``dtype`` cannot run on this backend (the row is then ``skipped``), or None.

    fp8 (e4m3 via ``torch._scaled_mm``) runs only on CUDA devices of compute capability >= 8.9 with a
    torch that has ``float8_e4m3fn`` and ``_scaled_mm``; a CPU emulation would say nothing about tensor cores.
    """
    if dtype != "fp8":
        return None
    if backend.device_kind != "cuda":
        return "fp8 needs a CUDA device with compute capability >= 8.9: not run on the CPU"
    if torch is None or not hasattr(torch, "float8_e4m3fn") or not hasattr(torch, "_scaled_mm"):
        return "fp8 needs torch.float8_e4m3fn and torch._scaled_mm: not in this torch"
    major, minor = torch.cuda.get_device_capability(backend.gpu_index)
    if (major, minor) < FP8_MIN_CAPABILITY:
        return f"fp8 needs compute capability >= 8.9; this device is {major}.{minor}"
    return None


def effective_dtype(backend: Backend, dtype: str) -> tuple[str, str | None]:
    """The dtype that actually runs on this backend, and a note when it is not the one asked for."""
    if dtype == "fp8":  # never emulated: it runs as fp8 or is skipped (``unsupported``)
        return dtype, None
    if backend.backend == "numpy" and dtype not in NUMPY_DTYPES:
        return "fp32", f"numpy has no fast {dtype} matmul: ran fp32 instead of {dtype}"
    if backend.backend == "torch" and backend.device_kind == "cpu" and dtype == "tf32":
        return "fp32", "tf32 exists only on CUDA: ran fp32 instead"
    return dtype, None


@dataclass
class Timing:
    seconds: list[float]
    rel_error: float
    context: dict[str, Any] = field(default_factory=dict)


def _relative_error(out: np.ndarray, ref: np.ndarray) -> float:
    norm = float(np.linalg.norm(ref))
    return float(np.linalg.norm(out - ref) / norm) if norm else float("nan")


def time_numpy(dtype: str, size: int, iterations: int, warmup_s: float, seed: int) -> Timing:
    """numpy on the CPU: ``np.matmul(a, b, out=c)`` timed with perf_counter_ns."""
    np_dtype = NUMPY_DTYPES[dtype]
    rng = np.random.default_rng(seed)
    a = rng.standard_normal((size, size), dtype=np_dtype)
    b = rng.standard_normal((size, size), dtype=np_dtype)
    c = np.empty((size, size), dtype=np_dtype)
    warm = _warm_up(lambda: np.matmul(a, b, out=c), warmup_s)
    seconds = []
    for _ in range(iterations):
        start = time.perf_counter_ns()
        np.matmul(a, b, out=c)
        seconds.append((time.perf_counter_ns() - start) / 1e9)
    rows = min(CHECK_ROWS, size)
    ref = a[:rows].astype(np.float64) @ b.astype(np.float64)
    return Timing(
        seconds,
        _relative_error(c[:rows].astype(np.float64), ref),
        {"timing": "perf_counter", "warmup_iterations": warm},
    )


def _warm_up(step: Callable[[], Any], warmup_s: float, sync: Callable[[], Any] = lambda: None) -> int:
    """Run the workload for ``warmup_s`` seconds (at least once); the number of products run."""
    start, count = time.perf_counter(), 0
    while True:
        step()
        sync()
        count += 1
        if time.perf_counter() - start >= warmup_s:
            return count


@contextlib.contextmanager
def _precision(torch: Any, dtype: str, cuda: bool):
    """Set TF32 explicitly for fp32/tf32 on CUDA (on for tf32, off for fp32) and restore it after;
    yield the effective flags for the context."""
    matmul = torch.backends.cuda.matmul
    saved: dict[str, Any] = {}
    if cuda and dtype in ("tf32", "fp32"):
        want_tf32 = dtype == "tf32"
        if hasattr(matmul, "fp32_precision"):  # torch >= 2.9
            saved["fp32_precision"] = matmul.fp32_precision
            matmul.fp32_precision = "tf32" if want_tf32 else "ieee"
        else:
            saved["allow_tf32"] = matmul.allow_tf32
            matmul.allow_tf32 = want_tf32
    flags: dict[str, Any] = {}
    for name in (
        "fp32_precision",
        "allow_tf32",
        "allow_bf16_reduced_precision_reduction",
        "allow_fp16_reduced_precision_reduction",
    ):
        with contextlib.suppress(Exception):
            flags[name] = getattr(matmul, name)
    with contextlib.suppress(Exception):
        flags["float32_matmul_precision"] = torch.get_float32_matmul_precision()
    try:
        yield flags
    finally:
        for name, value in saved.items():
            setattr(matmul, name, value)


def time_torch(
    backend: Backend,
    dtype: str,
    size: int,
    iterations: int,
    warmup_s: float,
    seed: int,
    window: Callable[[], ContextManager[Any]] = contextlib.nullcontext,
) -> Timing:
    """torch on CUDA (events per iteration) or on the CPU (perf_counter_ns). ``window`` wraps the
    timed loop only (the NVML sampler)."""
    import torch  # noqa: PLC0415 - optional dependency

    torch_dtype = {
        "bf16": torch.bfloat16,
        "fp16": torch.float16,
        "tf32": torch.float32,
        "fp32": torch.float32,
        "fp8": getattr(torch, "float8_e4m3fn", None),
        "fp64": torch.float64,
    }[dtype]
    cuda = backend.device_kind == "cuda"
    device = torch.device(backend.torch_device)
    if cuda:
        torch.cuda.set_device(device)
    generator = torch.Generator(device=device).manual_seed(seed)
    a = torch.randn(size, size, generator=generator, device=device, dtype=torch.float32).to(torch_dtype)
    b = torch.randn(size, size, generator=generator, device=device, dtype=torch.float32).to(torch_dtype)
    sync = (lambda: torch.cuda.synchronize(device)) if cuda else (lambda: None)
    context: dict[str, Any] = {"timing": "cuda_events" if cuda else "perf_counter"}
    if dtype == "fp8":
        # _scaled_mm wants B column-major (b.t() of a row-major b) and dims that are multiples of 16
        if size % 16:
            raise ValueError(f"fp8 GEMM needs a size that is a multiple of 16, not {size}")
        b_cols = b.t()
        scale = torch.tensor(1.0, device=device)
        c = torch.empty(size, size, device=device, dtype=torch.bfloat16)
        context.update(fp8_format="e4m3fn", fp8_out_dtype="bf16", fp8_scales=1.0)

        def step() -> None:
            torch._scaled_mm(a, b_cols, scale_a=scale, scale_b=scale, out_dtype=torch.bfloat16, out=c)

        reference_b = b_cols
    else:
        c = torch.empty(size, size, device=device, dtype=torch_dtype)
        reference_b = b

        def step() -> None:
            torch.mm(a, b, out=c)

    with _precision(torch, dtype, cuda) as flags:
        context["precision"] = flags
        context["warmup_iterations"] = _warm_up(step, warmup_s, sync)
        flush = None
        if cuda and size <= L2_FLUSH_MAX_SIZE:
            flush = torch.empty(L2_FLUSH_BYTES // 4, dtype=torch.float32, device=device)
        context["l2_flush_bytes"] = L2_FLUSH_BYTES if flush is not None else 0
        seconds: list[float] = []
        with window():
            if cuda:
                pairs = [
                    (torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True))
                    for _ in range(iterations)
                ]
                for start, end in pairs:
                    if flush is not None:
                        flush.zero_()
                    start.record()
                    step()
                    end.record()
                    end.synchronize()
                torch.cuda.synchronize(device)  # raises on an asynchronous CUDA error
                seconds = [start.elapsed_time(end) / 1e3 for start, end in pairs]
            else:
                for _ in range(iterations):
                    begin = time.perf_counter_ns()
                    step()
                    seconds.append((time.perf_counter_ns() - begin) / 1e9)
        rows = min(CHECK_ROWS, size)
        ref = (a[:rows].double() @ reference_b.double()).cpu().numpy()
        out = c[:rows].double().cpu().numpy()
    return Timing(seconds, _relative_error(out, ref), context)


def run_gemm(
    dtype: str = "bf16",
    size: int | None = None,
    iterations: int | None = None,
    warmup_s: float | None = None,
    seed: int = 0,
    backend: Backend | None = None,
    *,
    node: str | None = None,
    run_id: str | None = None,
    started_at: datetime | None = None,
    floor: float | None = None,
) -> ProbeResult:
    """Run the GEMM probe once and return its result row (never raises for a failed run: status "error").

    ``size``, ``iterations`` and ``warmup_s`` default to 8192, 50 and 2.0 s on a GPU and to 1024, 20
    and 0.5 s on the CPU. ``floor`` defaults to the dtype's (``verdict.GEMM_FLOORS``). ``backend``
    defaults to ``select_backend()``. On numpy, bf16/fp16/tf32 run as fp32 (the metric then names
    fp32 and the context keeps ``requested_dtype``). ``run_id`` defaults to
    ``make_run_id(node, started_at)``; ``node`` to the short host name.
    """
    if dtype not in DTYPES:
        raise ValueError(f"dtype {dtype!r} is not one of {', '.join(DTYPES)}")
    started_at = started_at or utc_now()
    backend = backend or select_backend()
    node = node or hostname()
    run_id = run_id or make_run_id(node, started_at)
    default_size, default_iterations, default_warmup = GPU_DEFAULTS if backend.device_kind == "cuda" else CPU_DEFAULTS
    size = default_size if size is None else int(size)
    iterations = default_iterations if iterations is None else int(iterations)
    warmup_s = default_warmup if warmup_s is None else float(warmup_s)
    if size < 1 or iterations < 1 or warmup_s < 0:
        raise ValueError("size and iterations must be >= 1 and warmup_s >= 0")
    ran_dtype, dtype_note = effective_dtype(backend, dtype)
    peak = peak_tflops(backend.sku, ran_dtype)
    floor = GEMM_FLOORS.get(ran_dtype, FRACTION_FLOOR) if floor is None else floor

    if backend.backend == "torch":
        import_torch()  # so that the context records its versions
    context = base_context(backend)
    context.update(
        {
            "requested_dtype": dtype,
            "dtype": ran_dtype,
            "dtype_note": dtype_note,
            "size": size,
            "iterations": iterations,
            "warmup_s": warmup_s,
            "seed": seed,
            "flops_per_iteration": flops_per_product(size),
            "fraction_floor": floor,
        }
    )
    info = RunInfo(run_id=run_id, node=node, started_at=started_at, backend=backend)
    metric = metric_name(ran_dtype, size)
    why_not = unsupported(backend, ran_dtype, import_torch()[0] if backend.backend == "torch" else None)
    if why_not is not None:
        return unmeasured(info, PROBE, metric, UNIT, "skipped", why_not, context, peak=peak)
    sampler = ReasonSampler(backend.gpu_uuid) if backend.device_kind == "cuda" and backend.backend == "torch" else None
    try:
        load = CpuLoad()
        with load, sampler or contextlib.nullcontext():  # the sampler runs through the warm-up too
            if backend.backend == "numpy":
                timing = time_numpy(ran_dtype, size, iterations, warmup_s, seed)
            else:
                timing = time_torch(
                    backend,
                    ran_dtype,
                    size,
                    iterations,
                    warmup_s,
                    seed,
                    window=sampler.timed if sampler else contextlib.nullcontext,
                )
        context.update(timing.context)
        context.update(load.summary())
        if sampler is not None:
            context.update(sampler.summary())
        else:
            context.update(
                {"nvml_available": False, "nvml_error": "no GPU" if backend.device_kind == "cpu" else "not sampled"}
            )
        samples = [flops_per_product(size) / s / 1e12 for s in timing.seconds]
        context["rel_error"] = timing.rel_error
        context["rel_error_tolerance"] = TOLERANCE[ran_dtype]
    except Exception as error:  # the run raised: an "error" row, so a probe that did not measure never passes
        return unmeasured(info, PROBE, metric, UNIT, "error", error_text(error), context, peak=peak)
    throttle_class = sampler.throttle_class if sampler is not None else UNKNOWN
    row = measured(info, PROBE, metric, UNIT, samples, context, peak=peak, throttle_class=throttle_class)
    status, reason = judge(
        backend.device_kind, row.fraction_of_peak, floor=floor, label=f"sku {backend.sku!r} and dtype {ran_dtype}"
    )
    if not np.isfinite(timing.rel_error) or timing.rel_error > TOLERANCE[ran_dtype]:
        check = (
            f"result check failed: relative error {timing.rel_error:.3g} vs fp64 (tolerance {TOLERANCE[ran_dtype]:g})"
        )
        status, reason = "fail", f"{check}; {reason}" if reason else check
    return replace(row, status=status, reason=reason)
