"""Slurm `sacct --parsable2` text: header line (or a sidecar sacct_format.txt), `|` separated."""

from __future__ import annotations

import json
import re

import pyarrow as pa

from perf_assets.lib.contracts import raw_table
from perf_assets.lib.ingest.formats.errors import QuarantineError
from perf_assets.lib.ingest.formats.timeparse import parse_utc
from perf_assets.lib.ingest.landing import LandedFile

SIDECAR = "sacct_format.txt"
_GPU_TRES = re.compile(r"gres/gpu(?::[^=,]+)?=(\d+)")
_RANGE = re.compile(r"^(\d+)(?:-(\d+))?$")


def expand_nodelist(node_list: str | None) -> list[str]:
    """`hero[4515-4516]`, `a-n[01-02,04],b-n7` -> node names (zero padding kept)."""
    if not node_list or node_list.strip() in ("", "None assigned", "(null)"):
        return []
    groups, depth, current = [], 0, ""
    for char in node_list.strip():
        depth += char == "["
        depth -= char == "]"
        if char == "," and depth == 0:
            groups.append(current)
            current = ""
        else:
            current += char
    groups.append(current)
    nodes: list[str] = []
    for group in groups:
        match = re.match(r"^(.*)\[([^\]]+)\](.*)$", group)
        if not match:
            nodes.append(group)
            continue
        prefix, ranges, suffix = match.groups()
        for piece in ranges.split(","):
            bounds = _RANGE.match(piece.strip())
            if not bounds:
                raise QuarantineError(f"cannot read node range {piece!r} in {node_list!r}")
            low, high = bounds.group(1), bounds.group(2) or bounds.group(1)
            width = len(low)
            nodes.extend(f"{prefix}{number:0{width}d}{suffix}" for number in range(int(low), int(high) + 1))
    return nodes


def gpus_in_tres(tres: str | None) -> int | None:
    if not tres:
        return None
    counts = [int(value) for value in _GPU_TRES.findall(tres)]
    return max(counts) if counts else 0


def _columns(lines: list[str], landed: LandedFile) -> tuple[list[str], list[str]]:
    first = lines[0].split("|")
    if "JobID" in first:
        return first, lines[1:]
    sidecar = landed.path.parent / SIDECAR
    if not sidecar.exists():
        raise QuarantineError(f"no header line and no {SIDECAR} beside the file: the columns are unknown")
    names = [name.strip() for name in sidecar.read_text().replace("\n", ",").split(",") if name.strip()]
    return names, lines


def parse_sacct(landed: LandedFile) -> pa.Table:
    try:
        text = landed.path.read_text(encoding="utf-8")
    except UnicodeDecodeError as error:
        raise QuarantineError(f"not UTF-8 text (byte {error.start})") from None
    lines = [line for line in text.splitlines() if line.strip()]
    if not lines:
        raise QuarantineError("empty file")
    names, body = _columns(lines, landed)
    if "JobID" not in names:
        raise QuarantineError("no JobID column")
    table = raw_table("sacct")
    rows: dict[str, list] = {name: [] for name in [*table.schema.names, "event_date"]}
    for line_number, line in enumerate(body, start=2 if body is not lines else 1):
        values = line.split("|")
        if len(values) != len(names):
            raise QuarantineError(f"line {line_number}: {len(values)} fields, header has {len(names)}")
        record = dict(zip(names, values))
        job_id, _, job_step = record["JobID"].partition(".")
        try:
            times = {key: parse_utc(record.get(key)) for key in ("Submit", "Eligible", "Start", "End")}
        except ValueError as error:
            raise QuarantineError(f"line {line_number}: {error}") from None
        try:
            n_nodes = int(record["NNodes"]) if record.get("NNodes") else None
        except ValueError:
            raise QuarantineError(f"line {line_number}: NNodes {record['NNodes']!r} is not a number") from None
        when = times["End"] or times["Start"] or times["Submit"]
        parsed = {
            "cluster": landed.cluster or record.get("Cluster") or None,
            "job_id": job_id,
            "job_step": job_step or None,
            "job_name": record.get("JobName") or None,
            "user_name": record.get("User") or None,
            "partition": record.get("Partition") or None,
            "state": (record.get("State") or "").split(" ")[0] or None,
            "exit_code": record.get("ExitCode") or None,
            "submit_at": times["Submit"],
            "eligible_at": times["Eligible"],
            "start_at": times["Start"],
            "end_at": times["End"],
            "n_nodes": n_nodes,
            "node_list": record.get("NodeList") or None,
            "nodes": expand_nodelist(record.get("NodeList")),
            "alloc_gpus": gpus_in_tres(record.get("AllocTRES")),
            "alloc_tres": record.get("AllocTRES") or None,
            "fields_json": json.dumps(record, sort_keys=True),
            "event_date": when.date() if when else landed.default_event_date,
        }
        for name, value in parsed.items():
            rows[name].append(value)
    if not rows["job_id"]:
        raise QuarantineError("header only, no rows")
    schema = pa.schema([*table.schema, pa.field("event_date", pa.date32())])
    return pa.Table.from_pydict(rows, schema=schema)
