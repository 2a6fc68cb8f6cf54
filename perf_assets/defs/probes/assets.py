"""Probes: run the GEMM probe on this host and land its result for the next ingestion.

On a fleet, probes run on every GPU host (the `probes` extra, no Dagster there) and their JSON
lines land under landing/probe_results/; this asset is the same probe on the host running Dagster.
It is not part of the build job: it has its own schedule, so builds stay reproducible.
"""

import dagster as dg

from perf_assets.defs.resources import PerfwhHome
from perf_assets.lib.contracts import OWNER
from perf_assets.lib.probe_runs import run_local_gemm


class LocalProbeConfig(dg.Config):
    cluster: str = "local"
    dtype: str = "bf16"
    backend: str = "auto"  # auto: CUDA, else torch on the CPU, else numpy


@dg.asset(
    key="local_gemm_probe",
    group_name="probes",
    owners=[OWNER],
    kinds={"python", "pytorch"},
    description=(
        "GEMM throughput of this host's first device with a 95% CI, throttle class and verdict against "
        "the SKU's dense peak (CPU fallback says so); lands JSON lines under landing/probe_results/."
    ),
)
def local_gemm_probe(
    context: dg.AssetExecutionContext, config: LocalProbeConfig, perfwh: PerfwhHome
) -> dg.MaterializeResult:
    landed = run_local_gemm(perfwh.home(), cluster=config.cluster, dtype=config.dtype, backend=config.backend)
    result = landed.result
    context.log.info(
        f"{result.metric} = {result.value} {result.unit} on {result.device_kind}: {result.status} {result.reason or ''}"
    )
    metadata = {
        "landed_file": dg.MetadataValue.path(str(landed.path)),
        "metric": dg.MetadataValue.text(result.metric),
        "device_kind": dg.MetadataValue.text(result.device_kind),
        "status": dg.MetadataValue.text(result.status),
    }
    for name in ("value", "ci_low", "ci_high", "fraction_of_peak"):
        value = getattr(result, name)
        if value is not None:  # unknown is left out, never written as 0
            metadata[name] = dg.MetadataValue.float(float(value))
    return dg.MaterializeResult(metadata=metadata)
