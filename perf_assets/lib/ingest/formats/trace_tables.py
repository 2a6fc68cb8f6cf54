"""The canonical trace tables both trace parsers fill (docs/formats/traces.md).

A parser reads its format into `TraceContext` (identity, time base, devices, notes) and a list of
canonical event dicts; `build_trace_tables` adds identity and kernel types, marks the activities
that count, computes the per-rank breakdowns (perf_assets.lib.traces) and returns both raw tables.
"""

from __future__ import annotations

import functools
import hashlib
import json
from collections import Counter
from dataclasses import dataclass, field
from datetime import date, datetime, timezone
from itertools import compress

import msgspec
import numpy as np
import pyarrow as pa

from perf_assets.lib.contracts import raw_table
from perf_assets.lib.ingest.landing import LandedFile
from perf_assets.lib.traces import rank_columns
from perf_assets.lib.traces.breakdown import COMMUNICATION, classify_kernel, temporal_breakdown
from perf_assets.lib.traces.profiler_steps import in_traced_iterations, last_step_start
from perf_assets.lib.traces.rank_columns import Activities, DeviceFigures
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
    figures = []
    for device, activities in sorted(by_device.items(), key=lambda item: (item[0] is None, item[0] or 0)):
        kernels = [event for event in activities if event["category"] == "kernel"]
        counted = [(e["start_ns"], e["end_ns"], e["kernel_type"]) for e in activities if e["in_breakdown"]]
        figures.append(
            DeviceFigures(
                device,
                len(kernels),
                sum(event["dur_ns"] for event in kernels),
                sum(event["kernel_type"] == COMMUNICATION for event in kernels),
                temporal_breakdown(counted),
            )
        )
    return device_rows(landed, context, figures, excluded)


def device_rows(landed: LandedFile, context: TraceContext, figures: list[DeviceFigures], excluded: int) -> list[dict]:
    """The rank breakdown rows from each device's figures (devices in order); one row of unknowns without any."""
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
    if not figures:
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
    for figure in figures:
        device, result = figure.device, figure.breakdown
        name, uuid = context.devices.get(device, (None, None)) if device is not None else (None, None)
        row = {
            **base,
            "device_index": device,
            "device_name": name,
            "device_uuid": uuid,
            "kernel_count": figure.kernel_count,
            "kernel_time_ns": figure.kernel_time_ns,
            "communication_kernel_count": figure.communication_kernel_count,
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
    devices, counted = by_device(events), by_device(events, counted_only=True)
    return identified_tables(
        landed,
        context,
        {
            IDLE: idle_rows(events, counted, launches),
            KERNEL_TYPES: kernel_type_rows(counted),
            STEP_BUSY: step_rows(events, devices),
        },
    )


def identified_tables(landed: LandedFile, context: TraceContext, rows_by_table: dict[str, list[dict]]) -> dict:
    """The derived tables' rows (rank_tables, rank_columns) with identity and event_date, as Arrow tables."""
    identity = {
        "capture_id": capture_id_of(landed),
        "trace_format": context.trace_format,
        "host": context.host,
        "job_id": context.job_id,
        "rank": context.rank,
    }
    tables = {}
    for key, rows in rows_by_table.items():
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


# args_json is the args object as compact JSON (no whitespace outside strings).
# * Kineto: keys in the trace's own order. The msgspec fast path keeps the trace's own text of the args object
#   with its whitespace removed (msgspec.json.format: every token as written, e.g. `1.50`, `1e5`, `\u00e9`); the
#   other Kineto paths (dicts) encode the parsed args with msgspec in their key order: the same JSON value, the
#   same text for the numbers and strings a profiler writes (tests/test_kineto_fast.py).
# * nsys: keys sorted (msgspec's encoder, `{"a":1,"b":[1,2]}`), built from the export's columns.
# Text as UTF-8, non-finite floats as null; objects msgspec cannot encode are written as str(value) (json.dumps'
# default=str); a lone surrogate falls back to the stdlib's escaped text.
_ARGS_ENCODE = msgspec.json.Encoder(order="sorted", enc_hook=str).encode
_ARGS_ENCODE_IN_ORDER = msgspec.json.Encoder(enc_hook=str).encode
_COMPACT = functools.partial(msgspec.json.format, indent=-1)


def args_json(args: object) -> str | None:
    """The args as compact, key-sorted JSON; None for empty or missing args (nsys)."""
    if not args:
        return None
    try:
        return _ARGS_ENCODE(args).decode()
    except UnicodeEncodeError:  # a lone surrogate (the stdlib json module reads "\ud800"): kept escaped
        return json.dumps(args, sort_keys=True, separators=(",", ":"), default=str)


def args_json_in_order(args: object) -> str | None:
    """The args as compact JSON, keys in their order (Kineto from dicts); None for empty or missing args."""
    if not args:
        return None
    try:
        return _ARGS_ENCODE_IN_ORDER(args).decode()
    except UnicodeEncodeError:  # a lone surrogate (the stdlib json module reads "\ud800"): kept escaped
        return json.dumps(args, separators=(",", ":"), default=str)


# Between two args objects joined for one msgspec.json.format call: a JSON number no profiler writes (it is
# found again only between `}` and `{`; an args object whose compact text holds it is caught, see below).
_BETWEEN_ARGS = b",-0.0e-0,"


def joined_args(raws: list) -> bytes:
    """The raw args objects as one JSON array, separated by _BETWEEN_ARGS (compact_args' input)."""
    return b"[%b]" % _BETWEEN_ARGS.join(raws)  # one copy of the joined text, not two


def compact_args(raws: list) -> tuple[bytes, list[bytes]]:
    """(joined_args(raws) with the whitespace outside strings removed, the text of each raw args object so compacted)
    for raws that msgspec has checked: args_json of the Kineto fast path (CompactTexts). The first is still one
    JSON array of the objects and the _BETWEEN_ARGS numbers (the args decoder reads it).

    The raws are formatted in one msgspec.json.format call and split on _BETWEEN_ARGS again: an object starts with
    `{` and ends with `}`, so only an occurrence inside one object's compact text can add a split, and then the count
    differs: each object is formatted alone instead."""
    formatted = msgspec.json.format(joined_args(raws), indent=-1)
    compact = formatted.split(_BETWEEN_ARGS)  # then the brackets off the ends, without a copy of the whole text
    compact[0], compact[-1] = compact[0][1:], compact[-1][:-1]
    if len(compact) == 1:  # one object: both brackets were on the same part
        compact[0] = formatted[1:-1]
    return formatted, compact if len(compact) == len(raws) else list(map(_COMPACT, raws))


class CompactTexts:
    """args_json of the Kineto fast path from compact_args' texts, chunk by chunk: their bytes joined and their
    lengths kept, one Arrow string array made from those buffers at the end (no Python str or Arrow conversion per
    event); `{}` (no args) is null. The texts are ASCII (the msgspec path reads ASCII documents only)."""

    def __init__(self) -> None:
        self.data: list[bytes] = []
        self.lengths: list[np.ndarray] = []
        self.size = 0  # bytes so far

    def add(self, compact: list[bytes]) -> None:
        lengths = np.fromiter(map(len, compact), dtype=np.int64, count=len(compact))
        empty = lengths == 2  # a compact JSON object of 2 bytes is `{}`
        if empty.any():
            compact = list(compress(compact, (~empty).tolist()))
            lengths[empty] = 0
        data = b"".join(compact)
        self.data.append(data)
        self.lengths.append(lengths)
        self.size += len(data)

    def array(self) -> pa.Array:
        """The texts as one Arrow string array (needs size < 2**31: string offsets are int32)."""
        lengths = np.concatenate(self.lengths) if self.lengths else np.zeros(0, dtype=np.int64)
        offsets = np.zeros(len(lengths) + 1, dtype=np.int32)
        np.cumsum(lengths, out=offsets[1:])
        valid = lengths != 0
        nulls = len(valid) - int(valid.sum())
        validity = pa.py_buffer(np.packbits(valid, bitorder="little")) if nulls else None
        data = b"".join(self.data)
        self.data, self.lengths = [], []
        return pa.Array.from_buffers(
            pa.string(), len(lengths), [validity, pa.py_buffer(offsets), pa.py_buffer(data)], null_count=nulls
        )


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
    activities: Activities,
    activity_rows: np.ndarray,
    annotations: list[tuple[str | None, int, int]],
    launches: rank_columns.Launches,
) -> dict[str, pa.Table]:
    """build_trace_tables for a parser that hands columns instead of one dict per event (kineto fast path).

    columns: the parser's columns of the events table in file order (category, name, device_index, stream,
    correlation_id, group_size, in_msg_nelems, out_msg_nelems, bytes, args_json, collective_name,
    process_group_name, msg_dtype as lists or Arrow arrays; start_ns, end_ns as int64 arrays). activities: the GPU
    activities' columns (rank_columns), at activity_rows of the events table; annotations: the CPU annotations'
    (name, start_ns, end_ns); launches: the launch start of each correlation id (runtime events). Same tables.
    """
    excluded = rank_columns.mark(activities, annotations, launches)
    if excluded:
        context.notes.append(f"{excluded} GPU activities of the last, incomplete profiler step not in the breakdown")
    count = len(columns["category"])
    kernel_type = np.full(count, None, dtype=object)
    kernel_type[activity_rows] = activities.kernel_type
    in_breakdown = np.full(count, None, dtype=object)
    in_breakdown[activity_rows] = activities.in_breakdown
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
        "kernel_type": pa.array(kernel_type, pa.string()),
        "in_breakdown": pa.array(in_breakdown, pa.bool_()),
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
    devices = rank_columns.by_device(activities)
    breakdowns = pa.Table.from_pylist(
        device_rows(landed, context, rank_columns.device_figures(activities, devices), excluded),
        schema=_schema_with_date(BREAKDOWNS),
    )
    note = context.note()
    if note:
        events_table = events_table.replace_schema_metadata({NOTE_METADATA: note.encode()})
    derived = identified_tables(
        landed,
        context,
        {
            IDLE: rank_columns.idle_rows(activities, devices),
            KERNEL_TYPES: rank_columns.kernel_type_rows(activities, devices),
            STEP_BUSY: rank_columns.step_rows(activities, devices, annotations),
        },
    )
    return {EVENTS: events_table, BREAKDOWNS: breakdowns, **derived}
