"""Which parser reads which landed file: by source folder, then by name and first bytes."""

from __future__ import annotations

from dataclasses import dataclass
from functools import partial
from typing import Callable

import pyarrow as pa

from perf_assets.lib.ingest.formats.json_records import SPECS, parse_json_records
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
        1,
        lambda landed, head: landed.path.suffix == ".json" or b'"resultType"' in head,
        parse_prometheus_range,
    ),
]

SIDECAR_NAMES = {SIDECAR}


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
