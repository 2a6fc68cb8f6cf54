"""nvidia_gpu_exporter capture bundles: raw nvidia-smi outputs between `#`-framed section headers.

    ################################################################################
    # load :: query-gpu (csv, what the exporter parses)
    # $ nvidia-smi --query-gpu=timestamp,...,hostname --format=csv
    ################################################################################
    timestamp, driver_version, ...

Read: every section whose command is `nvidia-smi --query-gpu=...` (rows as nvidia_smi.py) and
every `nvidia-smi dmon` section (fields `dmon.<column>`). Other sections (help, -q, topo, pmon,
per-process queries) are not GPU telemetry samples and are not read. `section` is
`<phase> :: query-gpu` / `<phase> :: dmon` (phase `idle`, `load`). dmon prints no times: line k of a
GPU is stamped with the latest query-gpu timestamp of the same phase (else the bundle's
`collected_at`, else the capture time of the file name) + k x the `-d` delay (dmon's default 1 s).
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from datetime import datetime, timedelta

import pyarrow as pa

from perf_assets.lib.ingest.formats.decompress import sniff
from perf_assets.lib.ingest.formats.errors import QuarantineError
from perf_assets.lib.ingest.formats.nvidia_smi import (
    SmiRows,
    field_list,
    local_zone,
    read_dmon_block,
    read_query_block,
)
from perf_assets.lib.ingest.formats.prometheus_text import read_text_file
from perf_assets.lib.ingest.formats.timeparse import parse_utc
from perf_assets.lib.ingest.landing import LandedFile

_FRAME = re.compile(r"^#{20,}\s*$")
_COLLECTED_AT = re.compile(r"^collected_at:\s*(\S+)", re.MULTILINE)
_DMON_DELAY = re.compile(r"\s-d\s+(\d+)")


@dataclass
class Section:
    title: str  # "load :: query-gpu (csv, what the exporter parses)"
    command: str | None  # "nvidia-smi --query-gpu=... --format=csv"
    body: list[tuple[int, str]] = field(default_factory=list)  # (line number, text), blank lines left out

    @property
    def phase(self) -> str:
        return self.title.split("::", 1)[0].strip() if "::" in self.title else self.title


def looks_like_bundle(head: bytes) -> bool:
    head = sniff(head)  # a gzip export: its decompressed start
    return b"nvidia_gpu_exporter GPU capture" in head or bool(re.search(rb"^# [\w-]+ :: ", head, re.MULTILINE))


def split_sections(lines: list[str]) -> list[Section]:
    """Sections in file order; a header is a frame, `# ...` lines, a frame."""
    sections: list[Section] = []
    index = 0
    while index < len(lines):
        if _FRAME.match(lines[index]):
            end = index + 1
            while end < len(lines) and lines[end].startswith("#") and not _FRAME.match(lines[end]):
                end += 1
            header = [line.lstrip("#").strip() for line in lines[index + 1 : end]]
            if header and end < len(lines) and _FRAME.match(lines[end]):
                command = next((line[2:].strip() for line in header[1:] if line.startswith("$ ")), None)
                sections.append(Section(header[0], command))
                index = end + 1
                continue
        if sections and lines[index].strip():
            sections[-1].body.append((index + 1, lines[index]))
        index += 1
    return sections


def _query_names(command: str) -> list[str]:
    return field_list(command.split("--query-gpu=", 1)[1].split()[0])


def parse_capture_bundle(landed: LandedFile) -> pa.Table:
    text = read_text_file(landed.path)
    sections = split_sections(text.splitlines())
    queries = [s for s in sections if s.command and s.command.startswith("nvidia-smi --query-gpu=")]
    dmons = [s for s in sections if s.command and s.command.startswith("nvidia-smi dmon")]
    if not queries and not dmons:
        raise QuarantineError("no '$ nvidia-smi --query-gpu=' or '$ nvidia-smi dmon' section: not a capture bundle")
    collected = _COLLECTED_AT.search(text)
    try:
        collected_at = parse_utc(collected.group(1)) if collected else None
    except ValueError:
        line = text.count("\n", 0, collected.start()) + 1
        raise QuarantineError(f"line {line}: collected_at is not a timestamp: {collected.group(1)[:64]!r}") from None
    zone = local_zone(landed)
    rows = SmiRows()
    gpus, latest = {}, {}
    for section in queries:
        if not section.body:
            raise QuarantineError(f"section {section.title!r} is empty (truncated bundle?)")
        read = read_query_block(
            section.body, _query_names(section.command), landed, zone, f"{section.phase} :: query-gpu", rows
        )
        gpus.update(read.gpus)
        if read.latest is not None:
            latest[section.phase] = read.latest
    host = next(iter(gpus.values())).host if gpus else landed.host
    for section in dmons:
        start: datetime | None = latest.get(section.phase) or collected_at or landed.captured_at
        if start is None or host is None:
            raise QuarantineError(
                f"section {section.title!r}: dmon rows have no time or host; name the file <host>__-__-__<utc-ts>.txt"
            )
        delay = _DMON_DELAY.search(f" {section.command}")
        step = timedelta(seconds=int(delay.group(1)) if delay else 1)
        read_dmon_block(section.body, gpus, host, start, step, f"{section.phase} :: dmon", rows)
    return rows.table(landed)
