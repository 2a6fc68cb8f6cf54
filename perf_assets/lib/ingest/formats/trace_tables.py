"""The canonical trace tables both trace parsers fill (docs/formats/traces.md).

A parser reads its format into `TraceContext` (identity, time base, devices, notes) and a list of
canonical event dicts; `build_trace_tables` adds identity and kernel types, marks the activities
that count, computes the per-rank breakdowns (perf_assets.lib.traces) and returns both raw tables.
"""

from __future__ import annotations

import hashlib
import json
from collections import Counter
from dataclasses import dataclass, field
from datetime import date, datetime, timezone

import pyarrow as pa

from perf_assets.lib.contracts import raw_table
from perf_assets.lib.ingest.landing import LandedFile
from perf_assets.lib.traces.breakdown import COMMUNICATION, classify_kernel, temporal_breakdown
from perf_assets.lib.traces.profiler_steps import in_traced_iterations, last_step_start
from perf_assets.lib.traces.rank_tables import by_device, idle_rows, kernel_type_rows, step_rows

EVENTS, BREAKDOWNS = "trace_events", "trace_rank_breakdowns"  # keys of RAW_TABLES
IDLE, KERNEL_TYPES, STEP_BUSY = "trace_idle_breakdowns", "trace_kernel_types", "trace_step_busy"
GPU_ACTIVITIES = ("kernel", "memcpy", "memset")  # what the breakdown counts (cuda_sync does not)
INT64_MAX = 2**63 - 1
NOTE_METADATA = b"ingest_note"  # schema metadata the ingest driver copies into the manifest reason


def as_int64(value: object) -> int | None:
    """An integer that fits BIGINT, else None (the original stays in args_json, as text when too large)."""
    if isinstance(value, bool):
        return None
    if isinstance(value, str) and value.lstrip("-").isdigit():
        value = int(value)
    if isinstance(value, int) and -INT64_MAX - 1 <= value <= INT64_MAX:
        return value
    return None


def int_or_text(token: str) -> int | str:
    """json `parse_int` hook: integers beyond int64 (HTA's `Comms Id` case) are kept as text."""
    value = int(token)
    return value if -INT64_MAX - 1 <= value <= INT64_MAX else token


def path_rank(landed: LandedFile) -> int | None:
    rank = landed.rank
    return int(rank) if rank is not None and rank.isdigit() else None


def capture_id_of(landed: LandedFile) -> str:
    """The same bytes captured at the same time are one capture (contracts: natural keys)."""
    when = landed.captured_at.isoformat() if landed.captured_at else ""
    return hashlib.sha256(f"{landed.sha256}\0{when}".encode()).hexdigest()[:16]


@dataclass
class TraceContext:
    trace_format: str  # kineto | nsys
    time_base: str  # how start_ns was derived (docs/formats/traces.md, time bases)
    time_absolute: bool
    host: str | None = None
    job_id: str | None = None
    rank: int | None = None
    rank_source: str | None = None  # trace | path
    world_size: int | None = None
    devices: dict[int, tuple[str | None, str | None]] = field(default_factory=dict)  # index -> (name, uuid)
    notes: list[str] = field(default_factory=list)
    kept: int = 0
    not_kept: Counter = field(default_factory=Counter)  # what the parser read but does not store, by kind

    def resolve_rank(self, landed: LandedFile, trace_rank: object) -> None:
        """Rank from the trace when it carries one, else from the file name; a disagreement is noted."""
        from_path = path_rank(landed)
        from_trace = as_int64(trace_rank)
        if from_trace is not None:
            self.rank, self.rank_source = from_trace, "trace"
            if from_path is not None and from_path != from_trace:
                self.notes.append(f"rank {from_trace} from the trace, file name says {from_path}")
        elif from_path is not None:
            self.rank, self.rank_source = from_path, "path"
        else:
            self.notes.append("rank unknown (neither the trace nor the file name carries one)")

    def note(self) -> str | None:
        parts = list(self.notes)
        if self.not_kept:
            dropped = ", ".join(f"{kind} {count}" for kind, count in self.not_kept.most_common(6))
            more = len(self.not_kept) - 6
            parts.append(
                f"kept {self.kept} events; not stored: {dropped}" + (f" and {more} more kinds" if more > 0 else "")
            )
        return "; ".join(parts) or None


def _day(ns: int | None, absolute: bool, default: date) -> date:
    if absolute and ns is not None:
        return datetime.fromtimestamp(ns / 1e9, tz=timezone.utc).date()
    return default


def _schema_with_date(key: str) -> pa.Schema:
    return pa.schema([*raw_table(key).schema, pa.field("event_date", pa.date32())])


def mark_activities(events: list[dict]) -> int:
    """Set kernel_type and in_breakdown on every event; returns how many GPU activities are excluded."""
    cutoff = last_step_start(
        (event["name"], event["start_ns"])
        for event in events
        if event["category"] == "annotation" and event.get("device_index") is None
    )
    launches = {
        event["correlation_id"]: event["start_ns"]
        for event in events
        if event["category"] == "runtime" and event.get("correlation_id") is not None
    }
    excluded = 0
    for event in events:
        if event["category"] in GPU_ACTIVITIES:
            event["kernel_type"] = classify_kernel(event["name"], event["category"])
            event["in_breakdown"] = in_traced_iterations(event.get("correlation_id"), launches, cutoff)
            excluded += not event["in_breakdown"]
        else:
            event["kernel_type"] = event["in_breakdown"] = None
    return excluded


def breakdown_rows(landed: LandedFile, context: TraceContext, events: list[dict], excluded: int) -> list[dict]:
    """One row per device with GPU activity; one row of unknowns (NULL) when there is none."""
    by_device: dict[int | None, list[dict]] = {}
    for event in events:
        if event["category"] in GPU_ACTIVITIES:
            by_device.setdefault(event.get("device_index"), []).append(event)
    base = {
        "capture_id": capture_id_of(landed),
        "trace_format": context.trace_format,
        "host": context.host,
        "job_id": context.job_id,
        "rank": context.rank,
        "rank_source": context.rank_source,
        "world_size": context.world_size,
        "captured_at": landed.captured_at,
        "time_base": context.time_base,
        "time_absolute": context.time_absolute,
        "activities_excluded": excluded,
    }
    note = context.note()
    if not by_device:
        only = next(iter(context.devices)) if len(context.devices) == 1 else None
        name, uuid = context.devices.get(only, (None, None)) if only is not None else (None, None)
        return [
            {
                **base,
                "device_index": only,
                "device_name": name,
                "device_uuid": uuid,
                "note": "; ".join(filter(None, ["no GPU activity (kernel, memcpy, memset): breakdown unknown", note])),
                "event_date": landed.default_event_date,
            }
        ]
    rows = []
    for device, activities in sorted(by_device.items(), key=lambda item: (item[0] is None, item[0] or 0)):
        kernels = [event for event in activities if event["category"] == "kernel"]
        counted = [(e["start_ns"], e["end_ns"], e["kernel_type"]) for e in activities if e["in_breakdown"]]
        result = temporal_breakdown(counted)
        name, uuid = context.devices.get(device, (None, None)) if device is not None else (None, None)
        row = {
            **base,
            "device_index": device,
            "device_name": name,
            "device_uuid": uuid,
            "kernel_count": len(kernels),
            "kernel_time_ns": sum(event["dur_ns"] for event in kernels),
            "communication_kernel_count": sum(event["kernel_type"] == COMMUNICATION for event in kernels),
            "note": note,
            "event_date": _day(
                result.span_start_ns if result else None, context.time_absolute, landed.default_event_date
            ),
        }
        if result is not None:
            row.update(
                {
                    name: getattr(result, name)
                    for name in (
                        "span_start_ns span_end_ns span_ns busy_ns idle_ns compute_ns non_compute_ns "
                        "communication_ns comm_compute_overlap_ns idle_share compute_share non_compute_share "
                        "comm_overlap_share"
                    ).split()
                }
            )
        rows.append(row)
    return rows


def derived_tables(landed: LandedFile, context: TraceContext, events: list[dict]) -> dict[str, pa.Table]:
    """Idle-time, kernel-type and per-step busy tables (perf_assets.lib.traces.rank_tables) with identity."""
    identity = {
        "capture_id": capture_id_of(landed),
        "trace_format": context.trace_format,
        "host": context.host,
        "job_id": context.job_id,
        "rank": context.rank,
    }
    devices, counted = by_device(events), by_device(events, counted_only=True)
    tables = {}
    for key, rows in (
        (IDLE, idle_rows(events, counted)),
        (KERNEL_TYPES, kernel_type_rows(counted)),
        (STEP_BUSY, step_rows(events, devices)),
    ):
        for row in rows:
            row.update(identity, time_absolute=context.time_absolute)
            row["event_date"] = _day(row.pop("_start_ns"), context.time_absolute, landed.default_event_date)
        tables[key] = pa.Table.from_pylist(rows, schema=_schema_with_date(key))
    return tables


def build_trace_tables(landed: LandedFile, context: TraceContext, events: list[dict]) -> dict[str, pa.Table]:
    """All canonical tables for one landed trace, keyed by RAW_TABLES key; the note rides in the metadata."""
    excluded = mark_activities(events)
    if excluded:
        context.notes.append(f"{excluded} GPU activities of the last, incomplete profiler step not in the breakdown")
    capture_id = capture_id_of(landed)
    default_day = landed.default_event_date
    for seq, event in enumerate(events):
        event.update(
            capture_id=capture_id,
            trace_format=context.trace_format,
            host=context.host,
            job_id=context.job_id,
            rank=context.rank,
            time_absolute=context.time_absolute,
            event_seq=seq,
            dur_ns=event["end_ns"] - event["start_ns"],
            event_date=_day(event["start_ns"], context.time_absolute, default_day),
        )
    context.kept = len(events)
    events_table = pa.Table.from_pylist(events, schema=_schema_with_date(EVENTS))
    breakdowns = pa.Table.from_pylist(
        breakdown_rows(landed, context, events, excluded), schema=_schema_with_date(BREAKDOWNS)
    )
    note = context.note()
    if note:
        events_table = events_table.replace_schema_metadata({NOTE_METADATA: note.encode()})
    return {EVENTS: events_table, BREAKDOWNS: breakdowns, **derived_tables(landed, context, events)}


_ARGS_ENCODER = json.JSONEncoder(sort_keys=True, default=str)  # what json.dumps(sort_keys=True, default=str) builds


def args_json(args: object) -> str | None:
    return _ARGS_ENCODER.encode(args) if args else None
