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

import msgspec
import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from perf_assets.lib.contracts import raw_table
from perf_assets.lib.ingest.landing import LandedFile
from perf_assets.lib.traces.breakdown import COMMUNICATION, classify_kernel, temporal_breakdown
from perf_assets.lib.traces.profiler_steps import in_traced_iterations, last_step_start
from perf_assets.lib.traces.rank_tables import by_device, idle_rows, kernel_type_rows, launch_starts, step_rows

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


def mark_activities(events: list[dict], launches: dict[int, int] | None = None) -> int:
    """Set kernel_type and in_breakdown on every event; returns how many GPU activities are excluded.

    launches: correlation id -> launch start (rank_tables.launch_starts), when the runtime events are not in `events`.
    """
    cutoff = last_step_start(
        (event["name"], event["start_ns"])
        for event in events
        if event["category"] == "annotation" and event.get("device_index") is None
    )
    if launches is None:
        launches = launch_starts(events)
    types: dict[tuple[str | None, str], str] = {}  # kernel names repeat: classify each once
    excluded = 0
    for event in events:
        if event["category"] in GPU_ACTIVITIES:
            key = (event["name"], event["category"])
            kernel_type = types.get(key)
            if kernel_type is None:
                kernel_type = types[key] = classify_kernel(event["name"], event["category"])
            event["kernel_type"] = kernel_type
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


def derived_tables(
    landed: LandedFile, context: TraceContext, events: list[dict], launches: dict[int, int] | None = None
) -> dict[str, pa.Table]:
    """Idle-time, kernel-type and per-step busy tables (perf_assets.lib.traces.rank_tables) with identity.

    events: at least the GPU activities and CPU annotations; launches as for mark_activities."""
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
        (IDLE, idle_rows(events, counted, launches)),
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


# args_json is the args object as compact JSON with its keys sorted (msgspec's encoder: `{"a":1,"b":[1,2]}`,
# text as UTF-8, non-finite floats as null), from the parsed args, so every reader path writes the same text
# for the same JSON value. Objects msgspec cannot encode are written as str(value) (json.dumps' default=str).
_ARGS_ENCODE = msgspec.json.Encoder(order="sorted", enc_hook=str).encode


def args_json(args: object) -> str | None:
    """The args as compact, key-sorted JSON; None for empty or missing args."""
    if not args:
        return None
    try:
        return _ARGS_ENCODE(args).decode()
    except UnicodeEncodeError:  # a lone surrogate (the stdlib json module reads "\\ud800"): kept escaped
        return json.dumps(args, sort_keys=True, separators=(",", ":"), default=str)


def args_json_array(args: list[dict]) -> pa.Array:
    """args_json of each dict as one Arrow string array (the encoding in one C-level pass, no str per event)."""
    encoded = pa.array(list(map(_ARGS_ENCODE, args)), pa.binary())
    return pc.if_else(pc.equal(encoded, b"{}"), pa.scalar(None, pa.binary()), encoded).cast(pa.string())


_EPOCH = date(1970, 1, 1)


def event_days(start_ns: np.ndarray, absolute: bool, default: date) -> pa.Array:
    """`_day` of every start, vectorized: datetime.fromtimestamp(ns / 1e9, utc).date() rounds the float
    seconds half-even to µs (CPython _PyTime_DoubleToDenominator) before taking the day; so does this."""
    if not absolute:
        days = np.full(len(start_ns), (default - _EPOCH).days, dtype=np.int32)
        return pa.array(days, pa.date32())
    seconds = start_ns.astype(np.float64) / 1e9
    fraction, whole = np.modf(seconds)
    micros = np.rint(fraction * 1e6)
    whole = whole + (micros >= 1e6) - (micros < 0)
    return pa.array(np.floor_divide(whole, 86400).astype(np.int32), pa.date32())


def build_columnar_tables(
    landed: LandedFile,
    context: TraceContext,
    columns: dict[str, object],
    slim: list[dict],
    launches: dict[int, int],
) -> dict[str, pa.Table]:
    """build_trace_tables for a parser that hands columns instead of one dict per event (kineto fast path).

    columns: the parser's columns of the events table in file order (category, name, device_index, stream,
    correlation_id, group_size, in_msg_nelems, out_msg_nelems, bytes, args_json, collective_name,
    process_group_name, msg_dtype as lists or Arrow arrays; start_ns, end_ns as int64 arrays). slim: one dict per GPU
    activity and CPU annotation (the keys build_trace_tables' events have, and `row`, its index in columns),
    all the breakdowns read. launches: correlation id -> launch start of the runtime events. Same tables.
    """
    excluded = mark_activities(slim, launches)
    if excluded:
        context.notes.append(f"{excluded} GPU activities of the last, incomplete profiler step not in the breakdown")
    count = len(columns["category"])
    kernel_type: list[str | None] = [None] * count
    in_breakdown: list[bool | None] = [None] * count
    for event in slim:
        if event["category"] in GPU_ACTIVITIES:
            kernel_type[event["row"]] = event["kernel_type"]
            in_breakdown[event["row"]] = event["in_breakdown"]
    context.kept = count
    schema = _schema_with_date(EVENTS)
    start_ns, end_ns = columns["start_ns"], columns["end_ns"]
    constant = {
        "capture_id": capture_id_of(landed),
        "trace_format": context.trace_format,
        "host": context.host,
        "job_id": context.job_id,
        "rank": context.rank,
        "time_absolute": context.time_absolute,
    }
    arrays = {name: pa.repeat(pa.scalar(value, schema.field(name).type), count) for name, value in constant.items()}
    arrays |= {
        "kernel_type": kernel_type,
        "in_breakdown": in_breakdown,
        "dur_ns": end_ns - start_ns,
        "event_seq": np.arange(count, dtype=np.int64),
        "event_date": event_days(start_ns, context.time_absolute, landed.default_event_date),
    }
    arrays = {name: arrays.get(name, columns.get(name)) for name in schema.names}
    events_table = pa.Table.from_arrays(
        [
            arrays[field.name] if isinstance(arrays[field.name], pa.Array) else pa.array(arrays[field.name], field.type)
            for field in schema
        ],
        schema=schema,
    )
    breakdowns = pa.Table.from_pylist(
        breakdown_rows(landed, context, slim, excluded), schema=_schema_with_date(BREAKDOWNS)
    )
    note = context.note()
    if note:
        events_table = events_table.replace_schema_metadata({NOTE_METADATA: note.encode()})
    return {EVENTS: events_table, BREAKDOWNS: breakdowns, **derived_tables(landed, context, slim, launches)}
