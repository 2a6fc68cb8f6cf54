"""Which parser reads which landed file: by source folder, then by name and first bytes."""

from __future__ import annotations

from dataclasses import dataclass
from functools import partial
from typing import Callable

import pyarrow as pa

from perf_assets.lib.ingest.formats.dcgm_exporter_text import looks_like_exporter_text, parse_dcgm_exporter_text
from perf_assets.lib.ingest.formats.dcgmi_dmon import COMMAND_SIDECAR, looks_like_dmon, parse_dcgmi_dmon
from perf_assets.lib.ingest.formats.decompress import sniff
from perf_assets.lib.ingest.formats.json_records import SPECS, parse_json_records
from perf_assets.lib.ingest.formats.kineto_trace import GZIP_MAGIC, parse_kineto_trace
from perf_assets.lib.ingest.formats.mlperf_mllog import parse_mlperf_mllog
from perf_assets.lib.ingest.formats.nccl_tests import accepts as accepts_nccl_tests
from perf_assets.lib.ingest.formats.nccl_tests import parse_nccl_tests
from perf_assets.lib.ingest.formats.nsys_sqlite import SQLITE_MAGIC, parse_nsys_sqlite
from perf_assets.lib.ingest.formats.nvidia_gpu_exporter_text import (
    looks_like_exporter_text as looks_like_nvidia_exporter_text,
)
from perf_assets.lib.ingest.formats.nvidia_gpu_exporter_text import parse_nvidia_gpu_exporter_text
from perf_assets.lib.ingest.formats.nvidia_smi import FORMAT_SIDECAR, TIMEZONE_SIDECAR, parse_nvidia_smi_csv
from perf_assets.lib.ingest.formats.nvidia_smi_bundle import looks_like_bundle, parse_capture_bundle
from perf_assets.lib.ingest.formats.prometheus_range import parse_prometheus_range
from perf_assets.lib.ingest.formats.sacct import SIDECAR, parse_sacct
from perf_assets.lib.ingest.landing import LandedFile


@dataclass(frozen=True)
class Format:
    name: str
    source: str
    parser_version: int  # bump when the parser's output changes: `perfwh reingest` re-reads
    accepts: Callable[[LandedFile, bytes], bool]
    parse: Callable[[LandedFile], pa.Table]


def _json_like(landed: LandedFile, head: bytes) -> bool:
    return landed.path.suffix in (".jsonl", ".json", ".ndjson") or head.lstrip()[:1] in (b"{", b"[")


FORMATS: list[Format] = [
    *[
        Format(f"{source}_jsonl", source, 1, _json_like, partial(parse_json_records, spec))
        for source, spec in SPECS.items()
    ],
    Format(
        "sacct_parsable2",
        "sacct",
        1,
        lambda landed, head: landed.path.name != SIDECAR,
        parse_sacct,
    ),
    Format(
        "prometheus_range_json",
        "dcgm",
        3,  # v2: gpu_instance, pci_bus_id, normalised UUIDs; v3: out-of-range values NULL and counted
        lambda landed, head: landed.path.suffix == ".json" or b'"resultType"' in sniff(head),
        parse_prometheus_range,
    ),
    # GPU telemetry (docs/formats/telemetry.md); dcgm counter catalogues (.csv) match none: skipped.
    Format("dcgmi_dmon_text", "dcgm", 2, lambda landed, head: looks_like_dmon(head), parse_dcgmi_dmon),
    Format("dcgm_exporter_text", "dcgm", 2, looks_like_exporter_text, parse_dcgm_exporter_text),
    Format(
        "nvidia_smi_capture_bundle", "nvidia_smi", 1, lambda landed, head: looks_like_bundle(head), parse_capture_bundle
    ),
    Format(
        "nvidia_gpu_exporter_text", "nvidia_smi", 1, looks_like_nvidia_exporter_text, parse_nvidia_gpu_exporter_text
    ),
    Format("nvidia_smi_query_gpu_csv", "nvidia_smi", 1, lambda landed, head: True, parse_nvidia_smi_csv),
    # Traces return several tables (a dict keyed by RAW_TABLES key): docs/formats/traces.md.
    Format(
        "kineto_trace_json",
        "kineto",
        2,  # 2: args_json is the trace's args text without whitespace (keys in the trace's order)
        lambda landed, head: head.startswith(GZIP_MAGIC) or head.lstrip()[:1] in (b"{", b""),  # empty: quarantined
        parse_kineto_trace,
    ),
    Format("nsys_sqlite", "nsys", 1, lambda landed, head: head.startswith(SQLITE_MAGIC), parse_nsys_sqlite),
    # Benchmarks (docs/formats/benchmarks.md); the derived nccl-tests summary .csv matches none: skipped.
    Format("nccl_tests_text", "nccl_tests", 1, accepts_nccl_tests, parse_nccl_tests),
    Format("mlperf_mllog", "mlperf", 1, lambda landed, head: True, parse_mlperf_mllog),  # -> raw_mlperf_events
]

SIDECAR_NAMES = {SIDECAR, COMMAND_SIDECAR, FORMAT_SIDECAR, TIMEZONE_SIDECAR}


def find_format(landed: LandedFile) -> Format | None:
    with open(landed.path, "rb") as handle:
        head = handle.read(4096)
    for candidate in FORMATS:
        if candidate.source == landed.source and candidate.accepts(landed, head):
            return candidate
    return None


def format_named(name: str) -> Format:
    for candidate in FORMATS:
        if candidate.name == name:
            return candidate
    raise KeyError(f"unknown format {name!r}; known: {', '.join(f.name for f in FORMATS)}")
