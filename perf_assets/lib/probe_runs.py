"""Run a probe on this host and land its result where ingestion reads it (landing/probe_results/)."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from perf_assets.lib.paths import DataHome
from probes.backends import hostname, select_backend
from probes.gemm import run_gemm
from probes.records import ProbeResult, landing_path, utc_now, write_jsonl


@dataclass(frozen=True)
class LandedProbe:
    path: Path
    result: ProbeResult


def run_local_gemm(
    home: DataHome,
    cluster: str = "local",
    node: str | None = None,
    dtype: str = "bf16",
    size: int | None = None,
    iterations: int | None = None,
    backend: str = "auto",
) -> LandedProbe:
    """GEMM on this host's first device (a GPU when there is one, else the CPU, and the row says so)."""
    node = node or hostname()
    started_at = utc_now()
    target = landing_path(home.landing, cluster, node, started_at)
    result = run_gemm(
        dtype=dtype, size=size, iterations=iterations, backend=select_backend(backend), node=node, started_at=started_at
    )
    write_jsonl([result], target)
    return LandedProbe(target, result)


def run_local_all(
    home: DataHome,
    cluster: str = "local",
    node: str | None = None,
    backend: str = "auto",
    gemm_size: int | None = None,
    burn_seconds: float | None = None,
    quick: bool = False,
) -> tuple[Path, list[ProbeResult]]:
    """The whole probe catalogue on this host's first device, landed as one JSON-lines file."""
    from probes.common import new_run
    from probes.suite import SuiteOptions, run_all

    node = node or hostname()
    started_at = utc_now()
    target = landing_path(home.landing, cluster, node, started_at)
    info = new_run(select_backend(backend), node=node, started_at=started_at)
    results = run_all(info, SuiteOptions(gemm_size=gemm_size, burn_seconds=burn_seconds, quick=quick))
    write_jsonl(results, target)
    return target, results
