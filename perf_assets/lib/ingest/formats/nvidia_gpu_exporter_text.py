"""nvidia_gpu_exporter (utkuozdemir) `/metrics` text -> raw_nvidia_smi, read with the Prometheus text reader.

`field` is the metric name (`nvidia_smi_power_draw_watts`); the exporter has already converted
units, which its names end with (`_watts` W, `_bytes` B, `_hz` Hz, `_ratio` 0..1, `_seconds` s).
GPU identity: the `uuid` label (written without `GPU-`; a masked all-zero UUID is NULL) and, for
index, bus id and model, the `nvidia_smi_gpu_info` series of the same uuid, which is kept as a row
with its labels as JSON in text_value. Labels other than `uuid` (per-process series: `pid`,
`process_name`) are part of the series, so they are written into the field
(`nvidia_smi_compute_app_used_memory_bytes{pid="11327",process_name="..."}`). Series without a uuid
are the exporter's own health (`nvidia_smi_failed_scrapes_total`, ...): counted, not ingested.
Times: a sample's own timestamp, else the capture time of the file name.
"""

from __future__ import annotations

import json
import math
from pathlib import Path

import pyarrow as pa

from perf_assets.lib.ingest.formats.dcgm_rows import capture_time
from perf_assets.lib.ingest.formats.decompress import sniff
from perf_assets.lib.ingest.formats.errors import QuarantineError
from perf_assets.lib.ingest.formats.gpu_identity import (
    int_or_none,
    normalise_bus_id,
    normalise_model_name,
    normalise_uuid,
)
from perf_assets.lib.ingest.formats.nvidia_smi import SmiGpu, SmiRows
from perf_assets.lib.ingest.formats.prometheus_text import Sample, read_exposition, read_text_file
from perf_assets.lib.ingest.landing import LandedFile

INFO_METRIC = "nvidia_smi_gpu_info"
UNIT_SUFFIXES = {"_watts": "W", "_bytes": "B", "_hz": "Hz", "_ratio": "ratio", "_seconds": "s", "_celsius": "C"}


def looks_like_exporter_text(landed: LandedFile, head: bytes) -> bool:
    suffix = Path(landed.path.stem).suffix if landed.path.suffix == ".gz" else landed.path.suffix
    return suffix in (".metrics", ".prom") or b" nvidia_smi_" in sniff(head)


def unit_of(metric: str) -> str | None:
    return next((unit for suffix, unit in UNIT_SUFFIXES.items() if metric.endswith(suffix)), None)


def _number(text: str) -> float | None:
    """The exporter writes plain floats (no DCGM sentinels); NaN and +-Inf are unknown."""
    value = float(text)
    return None if math.isnan(value) or math.isinf(value) else value


def _field(sample: Sample) -> str:
    extra = {name: value for name, value in sample.labels.items() if name != "uuid"}
    if sample.name == INFO_METRIC or not extra:
        return sample.name
    selector = ",".join(f"{name}={json.dumps(value)}" for name, value in sorted(extra.items()))
    return f"{sample.name}{{{selector}}}"


def _gpus(samples: list[Sample], host: str | None) -> dict[str, SmiGpu]:
    """uuid label -> the GPU, with index, bus id and model from nvidia_smi_gpu_info when present."""
    info = {s.labels["uuid"]: s.labels for s in samples if s.name == INFO_METRIC and "uuid" in s.labels}
    gpus = {}
    for uuid_label in {s.labels["uuid"] for s in samples if "uuid" in s.labels}:
        labels = info.get(uuid_label, {})
        gpus[uuid_label] = SmiGpu(
            host=host,
            gpu_uuid=normalise_uuid(uuid_label),
            gpu_index=int_or_none(labels.get("index")),
            pci_bus_id=normalise_bus_id(labels.get("pci_bus_id")),
            model_name=normalise_model_name(labels.get("name")),
        )
    return gpus


def parse_nvidia_gpu_exporter_text(landed: LandedFile) -> pa.Table:
    exposition = read_exposition(read_text_file(landed.path))
    untimed = any(sample.timestamp_ms is None for sample in exposition.samples)
    scraped_at = capture_time(landed, "nvidia_gpu_exporter text") if untimed else None
    if landed.host is None:
        raise QuarantineError(
            "no host: the exporter text carries none, so name the file <host>__-__-__<utc-ts>.metrics"
        )
    gpus = _gpus(exposition.samples, landed.host)
    rows = SmiRows()
    for sample in exposition.samples:
        gpu = gpus.get(sample.labels.get("uuid", ""))
        if gpu is None or (gpu.gpu_uuid is None and gpu.gpu_index is None):
            rows.unattributed += 1
            continue
        ts = sample.sampled_at(scraped_at)
        text_value = None
        if sample.name == INFO_METRIC:
            text_value = json.dumps({k: v for k, v in sample.labels.items() if k != "uuid"}, sort_keys=True)
        cell = (_number(sample.value), unit_of(sample.name), text_value)
        rows.add(gpu, _field(sample), ts, cell, "exporter")
    return rows.table(landed)
