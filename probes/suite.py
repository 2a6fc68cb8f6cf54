"""The catalogue in order on one device: health before, launch_latency, hbm_stream, host_device_copy,
gemm (bf16), burn_soak, health after. Every row shares one run id; a probe that raises becomes its
``error`` rows and the suite goes on. ``quick`` shrinks every probe (CPU tests, smoke runs)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable

from probes.burn_soak import run_burn_soak
from probes.common import RunInfo, error_text, unmeasured
from probes.gemm import run_gemm
from probes.hbm_stream import run_hbm_stream
from probes.health import HealthWatch
from probes.host_device_copy import run_host_device_copy
from probes.launch_latency import run_launch_latency
from probes.records import ProbeResult

CATALOGUE = ("health", "launch_latency", "hbm_stream", "host_device_copy", "gemm", "burn_soak")


@dataclass(frozen=True)
class SuiteOptions:
    gemm_dtype: str = "bf16"
    gemm_size: int | None = None
    burn_seconds: float | None = None
    quick: bool = False


def _steps(info: RunInfo, options: SuiteOptions) -> list[tuple[str, Callable[[], list[ProbeResult]]]]:
    quick = options.quick
    gemm_kwargs: dict[str, Any] = {"size": options.gemm_size}
    if quick:
        gemm_kwargs = {"size": options.gemm_size or 256, "iterations": 8, "warmup_s": 0.05}
    return [
        (
            "launch_latency",
            lambda: run_launch_latency(info, iterations=20 if quick else None, warmup_s=0.05 if quick else 0.5),
        ),
        (
            "hbm_stream",
            lambda: run_hbm_stream(
                info,
                elements=(1 << 20) if quick else None,
                iterations=5 if quick else None,
                warmup_s=0.05 if quick else 0.5,
            ),
        ),
        ("host_device_copy", lambda: run_host_device_copy(info, iterations=5 if quick else 20)),
        (
            "gemm",
            lambda: [
                run_gemm(
                    dtype=options.gemm_dtype,
                    backend=info.backend,
                    node=info.node,
                    run_id=info.run_id,
                    started_at=info.started_at,
                    **gemm_kwargs,
                )  # fmt: skip
            ],
        ),
        (
            "burn_soak",
            lambda: run_burn_soak(
                info, seconds=options.burn_seconds if options.burn_seconds is not None else (0.3 if quick else None)
            ),
        ),
    ]


def run_all(
    info: RunInfo, options: SuiteOptions = SuiteOptions(), nvml: Any = None, log: Callable[[str], None] = lambda _: None
) -> list[ProbeResult]:
    """Every probe of the catalogue on ``info.backend``; health rows last (their deltas span the run)."""
    watch = HealthWatch(info, nvml=nvml).start()
    rows: list[ProbeResult] = []
    for name, step in _steps(info, options):
        log(f"running {name}")
        try:
            rows.extend(step())
        except Exception as error:  # a probe should never raise; if one does, its absence must not pass
            rows.append(unmeasured(info, name, "run", "none", "error", error_text(error), {}))
    watch.stop()
    rows.extend(watch.rows())
    return rows
