"""dcgm-exporter scrapes: the Prometheus text a `curl host:9400/metrics` saves, a few per node-day.

A scrape is taken at an instant of the DCGM range-query grid (the node's 300 s samples) and carries
the very same formatted values as the range JSON at that instant, so the warehouse's natural-key dedup
(stg_dcgm__samples) sees each scrape sample as a second copy of a range sample, never a conflict, and
no figure moves. The exposition has no sample times (dcgm-exporter writes none): the ingestor takes the
capture time from the file name `<host>__-__-__<utc-ts>.txt`. Labels are those of the range export
(`gpu`, `UUID`, `device`, `modelName`, `Hostname`), in dcgm-exporter's order; `# HELP`/`# TYPE` lines
are the exporter's own (etc/default-counters.csv). A node out of service is not scraped.
"""

from __future__ import annotations

import numpy as np

from perf_assets.lib.simulate.ids import stream

# field -> (Prometheus type, HELP text), as dcgm-exporter's default and DCP counter lists write them
HELP = {
    "DCGM_FI_DEV_GPU_UTIL": ("gauge", "GPU utilization (in %)."),
    "DCGM_FI_PROF_SM_ACTIVE": ("gauge", "The ratio of cycles an SM has at least 1 warp assigned."),
    "DCGM_FI_PROF_PIPE_TENSOR_ACTIVE": ("gauge", "Ratio of cycles the tensor (HMMA) pipe is active."),
    "DCGM_FI_DEV_POWER_USAGE": ("gauge", "Power draw (in W)."),
    "DCGM_FI_DEV_SM_CLOCK": ("gauge", "SM clock frequency (in MHz)."),
    "DCGM_FI_DEV_GPU_TEMP": ("gauge", "GPU temperature (in C)."),
    "DCGM_FI_DEV_THERMAL_VIOLATION": ("counter", "Throttling duration due to thermal constraints (in ns)."),
}


def scrape_indices(seed: int, node: str, day_start: int, in_service: np.ndarray, count: int) -> list[int]:
    """Which grid instants of a node-day are scraped: `count` distinct ones (fewer if the node is out
    of service for most of the day), drawn from the node-day's own stream, in time order."""
    candidates = np.flatnonzero(in_service)
    if count <= 0 or candidates.size == 0:
        return []
    rng = stream(seed, "dcgm-exporter-scrape", node, str(day_start))
    chosen = rng.choice(candidates, size=min(count, candidates.size), replace=False)
    return sorted(int(i) for i in chosen)


def exposition(fields: tuple[str, ...], gpu_labels: list[dict], values: dict[str, list[list[str]]], at: int) -> str:
    """The text of one scrape: per field its HELP and TYPE, then one sample per GPU.

    `values[field][gpu]` are the formatted values of the node-day (as in the range JSON), `at` the
    grid index scraped."""
    lines = []
    for field in fields:
        kind, text = HELP[field]
        lines.append(f"# HELP {field} {text}")
        lines.append(f"# TYPE {field} {kind}")
        for gpu, labels in enumerate(gpu_labels):
            label_text = ",".join(f'{key}="{value}"' for key, value in labels.items())
            lines.append(f"{field}{{{label_text}}} {values[field][gpu][at]}")
    return "\n".join(lines) + "\n"
