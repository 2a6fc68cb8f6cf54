"""What every probe shares: the run it belongs to, timing loops, and result rows (measured, skipped, error).

A probe module measures; this module turns samples into ``ProbeResult`` rows with the same contract
(value = median, IQR, bootstrap CI of the median, fraction of the physical limit when one is known).
"""

from __future__ import annotations

import contextlib
import time
from dataclasses import dataclass
from datetime import datetime
from typing import Any, Callable, Sequence

from probes.backends import Backend, hostname, import_torch, select_backend
from probes.context import base_context
from probes.records import ProbeResult, make_run_id, utc_now
from probes.stats import extras, summarize
from probes.throttle import UNKNOWN, ReasonSampler

NO_GPU = "no CUDA device: GPU-only probe"


@dataclass(frozen=True)
class RunInfo:
    """One probe run: every row of a suite shares its run id, node and start."""

    run_id: str
    node: str
    started_at: datetime
    backend: Backend


def new_run(
    backend: Backend | None = None,
    node: str | None = None,
    started_at: datetime | None = None,
    run_id: str | None = None,
) -> RunInfo:
    started_at = started_at or utc_now()
    node = node or hostname()
    return RunInfo(run_id or make_run_id(node, started_at), node, started_at, backend or select_backend())


def is_gpu(info: RunInfo) -> bool:
    return info.backend.device_kind == "cuda" and info.backend.backend == "torch"


def probe_context(info: RunInfo, **extra: Any) -> dict[str, Any]:
    if info.backend.backend == "torch":
        import_torch()  # so that the context records its versions
    context = base_context(info.backend)
    context.update(extra)
    return context


def sampler_for(info: RunInfo) -> ReasonSampler | None:
    """The NVML sampler for a GPU run; None on the CPU."""
    return ReasonSampler(info.backend.gpu_uuid) if is_gpu(info) else None


def sampler_context(sampler: ReasonSampler | None, info: RunInfo) -> dict[str, Any]:
    if sampler is not None:
        return sampler.summary()
    return {"nvml_available": False, "nvml_error": "no GPU" if info.backend.device_kind == "cpu" else "not sampled"}


def open_sampler(sampler: ReasonSampler | None) -> contextlib.AbstractContextManager[Any]:
    return sampler if sampler is not None else contextlib.nullcontext()


def timed_window(sampler: ReasonSampler | None) -> contextlib.AbstractContextManager[Any]:
    return sampler.timed() if sampler is not None else contextlib.nullcontext()


def warm_up(step: Callable[[], Any], seconds: float, sync: Callable[[], Any] = lambda: None) -> int:
    """Run ``step`` for ``seconds`` (at least once), synchronising each time; how many times it ran."""
    start, count = time.perf_counter(), 0
    while True:
        step()
        sync()
        count += 1
        if time.perf_counter() - start >= seconds:
            return count


def cuda_event_seconds(
    torch: Any, step: Callable[[], Any], iterations: int, repeat: int = 1, before: Callable[[], Any] | None = None
) -> list[float]:
    """Seconds per ``step`` from a pair of CUDA events on the current stream around ``repeat`` steps,
    synchronised each iteration (``before`` runs outside the events). Raises on an asynchronous CUDA error."""
    pairs = [(torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)) for _ in range(iterations)]
    for start, end in pairs:
        if before is not None:
            before()
        start.record()
        for _ in range(repeat):
            step()
        end.record()
        end.synchronize()
    torch.cuda.synchronize()
    return [start.elapsed_time(end) / 1e3 / repeat for start, end in pairs]


def host_seconds(
    step: Callable[[], Any], iterations: int, repeat: int = 1, sync: Callable[[], Any] = lambda: None
) -> list[float]:
    """Seconds per ``step`` by ``perf_counter_ns`` around ``repeat`` steps and one ``sync``."""
    seconds = []
    for _ in range(iterations):
        begin = time.perf_counter_ns()
        for _ in range(repeat):
            step()
        sync()
        seconds.append((time.perf_counter_ns() - begin) / 1e9 / repeat)
    return seconds


def _fields(info: RunInfo, probe: str, metric: str, unit: str, peak: float | None) -> dict[str, Any]:
    backend = info.backend
    return dict(
        run_id=info.run_id,
        node=info.node,
        gpu_uuid=backend.gpu_uuid,
        gpu_index=backend.gpu_index,
        sku=backend.sku,
        device_kind=backend.device_kind,
        probe=probe,
        metric=metric,
        unit=unit,
        peak=peak,
        started_at=info.started_at,
    )


def measured(
    info: RunInfo,
    probe: str,
    metric: str,
    unit: str,
    samples: Sequence[float],
    context: dict[str, Any],
    *,
    peak: float | None = None,
    throttle_class: str | None = UNKNOWN,
    status: str = "pass",
    reason: str | None = None,
) -> ProbeResult:
    """A row from per-iteration samples: value = median, its IQR and 95% bootstrap CI;
    ``fraction_of_peak`` only when ``peak`` is known. The caller judges (``status``, ``reason``)."""
    summary = summarize(samples)
    row_context = dict(context)
    row_context["stats"] = extras(samples)
    return ProbeResult(
        **_fields(info, probe, metric, unit, peak),
        value=summary.median,
        median=summary.median,
        iqr=summary.iqr,
        ci_low=summary.ci_low,
        ci_high=summary.ci_high,
        n=summary.n,
        throttle_class=throttle_class,
        fraction_of_peak=summary.median / peak if peak else None,
        status=status,
        reason=reason,
        context=row_context,
    )


def single(
    info: RunInfo,
    probe: str,
    metric: str,
    unit: str,
    value: float | None,
    context: dict[str, Any],
    *,
    n: int | None = None,
    throttle_class: str | None = UNKNOWN,
    status: str = "pass",
    reason: str | None = None,
) -> ProbeResult:
    """A row holding one observed value (a count, a ratio): no spread, so IQR and CI are NULL."""
    return ProbeResult(
        **_fields(info, probe, metric, unit, None),
        value=value,
        median=value,
        iqr=None,
        ci_low=None,
        ci_high=None,
        n=n,
        throttle_class=throttle_class,
        fraction_of_peak=None,
        status=status,
        reason=reason,
        context=dict(context),
    )


def unmeasured(
    info: RunInfo,
    probe: str,
    metric: str,
    unit: str,
    status: str,
    reason: str,
    context: dict[str, Any],
    peak: float | None = None,
) -> ProbeResult:
    """A row with no value: ``skipped`` (a GPU-only probe on a CPU) or ``error`` (the probe raised)."""
    return ProbeResult(
        **_fields(info, probe, metric, unit, peak),
        value=None,
        median=None,
        iqr=None,
        ci_low=None,
        ci_high=None,
        n=None,
        throttle_class=UNKNOWN,
        fraction_of_peak=None,
        status=status,
        reason=reason[:1000],
        context=dict(context),
    )


def error_text(error: BaseException) -> str:
    return f"{type(error).__name__}: {error}"


def floor_verdict(info: RunInfo, fraction: float | None, floor: float | None) -> tuple[str, str | None]:
    """pass/fail of a throughput against ``floor`` of its physical limit (GPU only; CPU says not judged)."""
    if info.backend.device_kind == "cpu":
        return "pass", "cpu fallback: no physical limit to judge against"
    if floor is None:
        return "pass", None
    if fraction is None:
        return "pass", f"no physical limit known for sku {info.backend.sku!r}; not judged"
    if fraction < floor:
        return "fail", f"fraction_of_peak {fraction:.3f} < floor {floor:.2f}"
    return "pass", None
