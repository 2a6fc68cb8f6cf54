"""The catalogue in order on one device: health before, launch_latency, hbm_stream, host_device_copy,
gemm (every dtype), p2p_copy, allreduce, burn_soak, health after; ``roofline_sweep`` (optional) only when
selected, after burn_soak. Every row of one attempt shares its run
id; a probe that raises becomes its ``error`` rows and the suite goes on. ``probes`` selects a subset
(health always brackets the run); ``quick`` shrinks every probe (CPU tests, smoke runs).

**Confirmation re-run** (probes.md section 4): a probe whose own verdict is ``fail`` or ``error`` runs once
more right away, as a second attempt with its own run id (``<run_id>-r1``), a later ``started_at`` and
``context.rerun_of``. Both attempts land; the warehouse's rules with ``confirm_rerun`` call a GPU defective
only when the attempt before also broke the rule, so one noisy run never drains a node. Hard failures
(a burn mismatch, uncorrectable ECC, a critical XID) are not re-run: their rules fail at once.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from datetime import timedelta
from typing import Any, Callable, Sequence

from probes.burn_soak import run_burn_soak
from probes.collectives import run_allreduce, run_p2p_copy
from probes.common import RunInfo, error_text, probe_context, unmeasured
from probes.context import CpuLoad
from probes.efficiency import eff_clock_row
from probes.gemm import DTYPES, effective_dtype, metric_name, run_gemm
from probes.gemm import PROBE as GEMM
from probes.gemm import UNIT as GEMM_UNIT
from probes.hbm_stream import run_hbm_stream
from probes.health import HealthWatch
from probes.host_device_copy import run_host_device_copy
from probes.launch_latency import run_launch_latency
from probes.records import ProbeResult, utc_now
from probes.roofline import QUICK_WIDTHS, run_roofline_sweep

CATALOGUE = (
    "health",
    "launch_latency",
    "hbm_stream",
    "host_device_copy",
    "gemm",
    "p2p_copy",
    "allreduce",
    "burn_soak",
)
OPTIONAL = ("roofline_sweep",)  # run only when selected (--probe roofline_sweep), after the catalogue
DEFAULT = CATALOGUE[1:]  # health brackets every run
SELECTABLE = DEFAULT + OPTIONAL
GPU_GEMM_SIZES = {"bf16": 8192, "fp16": 8192, "fp8": 8192, "tf32": 4096, "fp32": 4096, "fp64": 4096}
# torch on a CPU without fp16 matrix units runs fp16 GEMM about 100x slower than fp32 (6.5 s per 1024^3
# product measured here): a smaller product keeps `perfwh probe` on a CPU to a minute or so
CPU_GEMM_SIZES = {"fp16": 256}
HARD_FAILURES = {("burn_soak", "mismatched_elements")}  # failed at once by their rules; no re-run
Progress = Callable[[int, int, str], None]


@dataclass(frozen=True)
class SuiteOptions:
    gemm_dtypes: tuple[str, ...] = DTYPES
    gemm_size: int | None = None
    burn_seconds: float | None = None
    quick: bool = False
    probes: tuple[str, ...] = DEFAULT
    confirm: bool = True  # re-run a probe once when its own verdict fails

    def __post_init__(self) -> None:
        unknown = [p for p in self.probes if p not in SELECTABLE]
        if unknown:
            raise ValueError(f"unknown probe(s) {', '.join(unknown)}; choose from {', '.join(SELECTABLE)}")
        bad = [d for d in self.gemm_dtypes if d not in DTYPES]
        if bad:
            raise ValueError(f"unknown gemm dtype(s) {', '.join(bad)}; choose from {', '.join(DTYPES)}")


def _gemm_rows(info: RunInfo, options: SuiteOptions) -> list[ProbeResult]:
    """One row per dtype. A dtype this backend would run as another (numpy bf16 -> fp32) is ``skipped``
    with the reason, so a metric never names a dtype that did not run and no metric appears twice."""
    rows = []
    gpu = info.backend.device_kind == "cuda"
    for dtype in options.gemm_dtypes:
        default = GPU_GEMM_SIZES[dtype] if gpu else CPU_GEMM_SIZES.get(dtype)
        size = options.gemm_size or (256 if options.quick else default)
        ran, note = effective_dtype(info.backend, dtype)
        if ran != dtype:
            context = probe_context(info, requested_dtype=dtype, size=size)
            rows.append(
                unmeasured(info, GEMM, metric_name(dtype, size or 1024), GEMM_UNIT, "skipped", note or "", context)
            )
            continue
        kwargs: dict[str, Any] = {"size": size}
        if options.quick:
            kwargs.update(iterations=8, warmup_s=0.05)
        row = run_gemm(
            dtype=dtype, backend=info.backend, node=info.node, run_id=info.run_id, started_at=info.started_at, **kwargs
        )
        rows.append(row)
        if row.value is not None:  # the clock-normalised efficiency of a measured product (probes/efficiency.py)
            rows.append(eff_clock_row(row, row.metric.replace("_tflops", "_eff_clock"), row.context["dtype"]))
    return rows


def _steps(info: RunInfo, options: SuiteOptions) -> dict[str, Callable[[], list[ProbeResult]]]:
    quick = options.quick
    burn = options.burn_seconds if options.burn_seconds is not None else (0.3 if quick else None)
    return {
        "launch_latency": lambda: run_launch_latency(
            info, iterations=20 if quick else None, warmup_s=0.05 if quick else 0.5
        ),
        "hbm_stream": lambda: run_hbm_stream(
            info,
            elements=(1 << 20) if quick else None,
            iterations=5 if quick else None,
            warmup_s=0.05 if quick else 0.5,
        ),
        "host_device_copy": lambda: run_host_device_copy(info, iterations=5 if quick else 20),
        "gemm": lambda: _gemm_rows(info, options),
        "p2p_copy": lambda: run_p2p_copy(info, iterations=5 if quick else 20),
        "allreduce": lambda: run_allreduce(info, sizes=(1 << 20,) if quick else None, iterations=5 if quick else None),
        "burn_soak": lambda: run_burn_soak(info, seconds=burn),
        "roofline_sweep": lambda: run_roofline_sweep(
            info,
            size=256 if quick else None,
            widths=QUICK_WIDTHS if quick else None,
            iterations=3 if quick else None,
            warmup_s=0.05 if quick else None,
        ),
    }


def _run_probe(name: str, step: Callable[[], list[ProbeResult]], info: RunInfo) -> list[ProbeResult]:
    """The probe's rows, each with the contention indicators of its window (load, CPU share, steal)."""
    load = CpuLoad()
    try:
        with load:
            rows = step()
    except Exception as error:  # a probe should never raise; if one does, its absence must not pass
        rows = [unmeasured(info, name, "run", "none", "error", error_text(error), probe_context(info))]
    contention = {"contention": load.summary()}
    return [replace(r, context={**r.context, **contention}) for r in rows]


def needs_confirmation(rows: Sequence[ProbeResult]) -> bool:
    """A probe whose own verdict failed (or errored) on something other than a hard failure."""
    return any(r.status in ("fail", "error") and (r.probe, r.metric) not in HARD_FAILURES for r in rows)


def rerun_info(info: RunInfo) -> RunInfo:
    """The confirming attempt: its own run id and a start strictly after the first attempt's."""
    started = max(utc_now(), info.started_at + timedelta(seconds=1))
    return RunInfo(f"{info.run_id}-r1", info.node, started, info.backend)


def run_all(
    info: RunInfo,
    options: SuiteOptions = SuiteOptions(),
    nvml: Any = None,
    log: Callable[[str], None] = lambda _: None,
    progress: Progress | None = None,
) -> list[ProbeResult]:
    """The selected probes on ``info.backend``, health rows last (their deltas span the run), then the
    confirming attempts of the probes that failed their own verdict."""
    watch = HealthWatch(info, nvml=nvml).start()
    run_load = CpuLoad().__enter__()  # the health rows' window is the whole run
    steps = _steps(info, options)
    selected = [name for name in SELECTABLE if name in options.probes]
    total = len(selected) + 1
    rows: list[ProbeResult] = []
    failed: list[str] = []
    for done, name in enumerate(selected):
        log(f"running {name}")
        if progress:
            progress(done, total, name)
        probe_rows = _run_probe(name, steps[name], info)
        rows.extend(probe_rows)
        if needs_confirmation(probe_rows):
            failed.append(name)
    if progress:
        progress(len(selected), total, "health")
    watch.stop()
    run_load.__exit__(None, None, None)
    rows.extend(replace(r, context={**r.context, "contention": run_load.summary()}) for r in watch.rows())
    if options.confirm and failed:
        again = rerun_info(info)
        rerun_steps = _steps(again, options)
        for name in failed:
            log(f"re-running {name} to confirm its failure")
            if progress:
                progress(total, total, f"{name} (confirming re-run)")
            rows.extend(
                replace(r, context={**r.context, "rerun_of": info.run_id, "attempt": 2})
                for r in _run_probe(name, rerun_steps[name], again)
            )
    if progress:
        progress(total, total, "done")
    return rows
