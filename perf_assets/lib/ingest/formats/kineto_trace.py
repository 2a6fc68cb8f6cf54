"""PyTorch profiler / Kineto Chrome-trace JSON, plain or gzip (formats.md section 1).

Memory bound: the stdlib json module parses a whole document, so the reader holds the decompressed
bytes, their text and the parsed objects at once. The decompressed JSON is capped at
`max_json_bytes()` (PERFWH_TRACE_MAX_JSON_BYTES, default 256 MiB): a larger trace is quarantined
before parsing, so peak memory stays under that cap times the factor measured in
docs/formats/traces.md. Truncated gzip or JSON is quarantined, never salvaged.
"""

from __future__ import annotations

import gzip
import json
import os
import zlib
from collections import Counter

import pyarrow as pa

from perf_assets.lib.ingest.formats.errors import QuarantineError
from perf_assets.lib.ingest.formats.kineto_fast import has_big_int
from perf_assets.lib.ingest.formats.trace_tables import (
    TraceContext,
    args_json,
    as_int64,
    build_trace_tables,
    int_or_text,
)
from perf_assets.lib.ingest.landing import LandedFile

DEFAULT_MAX_JSON_BYTES = 256 * 2**20
GZIP_MAGIC = b"\x1f\x8b"
ABSOLUTE_US_MIN = 1e14  # a µs timestamp this large is Unix-epoch time (1973+); smaller ones are relative

# Kineto `cat` (lower-cased; old traces capitalise) -> canonical category. Anything else is counted, not stored.
CATEGORIES = {
    "kernel": "kernel",
    "gpu_memcpy": "memcpy",
    "memcpy": "memcpy",
    "gpu_memset": "memset",
    "memset": "memset",
    "cuda_sync": "sync",
    "cuda_runtime": "runtime",
    "runtime": "runtime",
    "cuda_driver": "runtime",
    "mtia_runtime": "runtime",
    "user_annotation": "annotation",
    "gpu_user_annotation": "annotation",
    "cuda_profiler_range": "range_profiler",
}
DEVICE_SIDE = {"kernel", "gpu_memcpy", "memcpy", "gpu_memset", "memset", "cuda_sync", "gpu_user_annotation"}
DEVICE_SIDE |= {"cuda_profiler_range"}
COLLECTIVE_ARGS = {
    "collective_name": "Collective name",
    "process_group_name": "Process Group Name",
    "msg_dtype": "dtype",
}


PATHS: Counter = Counter()  # reader path -> calls (read_document), for tests and bench/


def max_json_bytes() -> int:
    return int(os.environ.get("PERFWH_TRACE_MAX_JSON_BYTES", DEFAULT_MAX_JSON_BYTES))


def _read_bounded(handle, limit: int) -> bytes:
    """At most limit + 1 bytes, read in 1 MiB blocks (one big read() would allocate the whole bound)."""
    blocks, total = [], 0
    while total <= limit:
        block = handle.read(min(1 << 20, limit + 1 - total))
        if not block:
            break
        blocks.append(block)
        total += len(block)
    return b"".join(blocks)


def read_document(landed: LandedFile, fast: bool = True) -> tuple[dict, list[str]]:
    """The trace's top-level object (and notes), or QuarantineError with what is wrong.

    fast: parse without the per-integer hook when no integer literal exceeds int64 (kineto_fast);
    the result is identical. PATHS counts which path each call took ("fast" or "stdlib").
    """
    limit = max_json_bytes()
    with open(landed.path, "rb") as handle:
        compressed = handle.read(2) == GZIP_MAGIC
    try:
        with (gzip.open if compressed else open)(landed.path, "rb") as handle:
            data = _read_bounded(handle, limit)
    except (EOFError, gzip.BadGzipFile, zlib.error) as error:
        raise QuarantineError(f"truncated or corrupt gzip ({error}); deliver the trace again") from None
    if len(data) > limit:
        raise QuarantineError(
            f"trace JSON is over the reader's bound of {limit} bytes decompressed (PERFWH_TRACE_MAX_JSON_BYTES): "
            "not parsed; raise the bound on a host with enough memory or profile fewer steps"
        )
    if not data.strip():
        raise QuarantineError("empty trace")
    notes = []
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as error:
        text = data.decode("utf-8", errors="replace")
        notes.append(f"invalid UTF-8 (first at byte {error.start}) replaced with U+FFFD")
    path = "fast" if fast and not has_big_int(data) else "stdlib"
    del data
    PATHS[path] += 1
    try:
        document = json.loads(text) if path == "fast" else json.loads(text, parse_int=int_or_text)
    except json.JSONDecodeError as error:
        where = "at the end (truncated trace?)" if error.pos >= len(text.rstrip()) - 1 else f"at char {error.pos}"
        raise QuarantineError(f"invalid JSON {where}: {error.msg}") from None
    if not isinstance(document, dict) or not isinstance(document.get("traceEvents"), list):
        raise QuarantineError("not a Kineto trace: no top-level object with a traceEvents array")
    return document, notes


def _ts(value: object) -> float | int | None:
    if isinstance(value, bool):
        return None
    if isinstance(value, (int, float)):
        return value
    try:
        return float(value)  # type: ignore[arg-type]
    except (TypeError, ValueError):
        return None


def time_base(document: dict, sample: list) -> tuple[str, bool, object]:
    """(name, absolute, µs -> ns function) following formats.md 1.3."""
    base = as_int64(document.get("baseTimeNanoseconds"))
    if base is not None:
        return "kineto_base_time_ns", True, lambda ts: base + round(ts * 1000)
    stamps = [ts for ts in sample if ts is not None]
    if stamps and max(stamps) >= ABSOLUTE_US_MIN:
        if all(isinstance(ts, int) for ts in stamps):
            return "kineto_unix_us", True, lambda ts: int(ts) * 1000
        return "kineto_unix_us_float", True, lambda ts: round(ts * 1000)
    return "kineto_relative_us", False, lambda ts: round(ts * 1000)


def _devices(document: dict) -> dict[int, tuple[str | None, str | None]]:
    devices = {}
    for entry in document.get("deviceProperties") or []:
        if isinstance(entry, dict) and as_int64(entry.get("id")) is not None:
            devices[as_int64(entry.get("id"))] = (entry.get("name"), None)
    return devices


def _host(document: dict) -> str | None:
    for holder in (document, document.get("metadata") if isinstance(document.get("metadata"), dict) else {}):
        value = holder.get("host_name") or holder.get("hostname")
        if isinstance(value, str) and value:
            return value
    return None


INT_ARGS = (
    ("correlation_id", "correlation"),
    ("group_size", "Group size"),
    ("in_msg_nelems", "In msg nelems"),
    ("out_msg_nelems", "Out msg nelems"),
    ("bytes", "bytes"),
)


def _event(raw: dict, category: str, cat: str, to_ns) -> dict | None:
    start, dur = _ts(raw.get("ts")), _ts(raw.get("dur"))
    if start is None or dur is None:
        return None
    args = raw.get("args")
    if not isinstance(args, dict):
        args = {}
    device_side = cat in DEVICE_SIDE
    if device_side:
        device = as_int64(args.get("device"))
        if device is None:
            device = as_int64(raw.get("pid"))
        stream = as_int64(args.get("stream"))
        if stream is None:
            stream = as_int64(raw.get("tid"))
    else:
        device = stream = None
    start_ns = to_ns(start)
    end_ns = to_ns(start + dur)
    name = raw.get("name")
    event = {
        "device_index": device,
        "stream": stream,
        "category": category,
        "name": str(name) if name is not None else None,
        "start_ns": start_ns,
        "end_ns": end_ns if end_ns > start_ns else start_ns,
    }
    for column, key in INT_ARGS:
        value = args.get(key)
        event[column] = None if value is None else as_int64(value)
    event["args_json"] = args_json(args)
    for column, key in COLLECTIVE_ARGS.items():
        value = args.get(key) if category == "kernel" else None
        event[column] = str(value) if value is not None else None
    return event


def parse_kineto_trace(landed: LandedFile, fast: bool = True) -> dict[str, pa.Table]:
    """All canonical tables of one Kineto trace; fast=False forces the stdlib reader (same tables)."""
    document, notes = read_document(landed, fast)
    raw_events = document["traceEvents"]
    complete = [raw for raw in raw_events if isinstance(raw, dict) and raw.get("ph") == "X"]
    name, absolute, to_ns = time_base(document, [_ts(raw.get("ts")) for raw in complete[:1000]])
    context = TraceContext(trace_format="kineto", time_base=name, time_absolute=absolute, notes=notes)
    if not absolute:
        context.notes.append("timestamps relative to the trace's own zero (no baseTimeNanoseconds, not epoch µs)")
    context.host = _host(document) or landed.host
    context.job_id = landed.job_id
    distributed = document.get("distributedInfo") if isinstance(document.get("distributedInfo"), dict) else {}
    context.resolve_rank(landed, distributed.get("rank"))
    context.world_size = as_int64(distributed.get("world_size"))
    context.devices = _devices(document)
    events: list[dict] = []
    not_kept: Counter = Counter()
    not_kept["non-duration events (metadata, instants, flows)"] = len(raw_events) - len(complete)
    for raw in complete:
        cat = str(raw.get("cat") or "").lower()
        category = CATEGORIES.get(cat)
        event = _event(raw, category, cat, to_ns) if category else None
        if event is None:
            not_kept[(cat or "no category") if category is None else f"{cat} without ts/dur"] += 1
        else:
            events.append(event)
    context.not_kept = +not_kept
    del raw_events, complete
    document.clear()  # the raw events are no longer needed: free them before the tables are built
    if not any(event["category"] == "kernel" for event in events):
        ranges = sum(event["category"] == "range_profiler" for event in events)
        context.notes.append(
            f"no kernel events: CUPTI range-profiler trace ({ranges} cuda_profiler_range events stored)"
            if ranges
            else "no kernel events"
        )
    if not events:
        raise QuarantineError(f"no trace events to store ({context.note() or 'traceEvents is empty'})")
    return build_trace_tables(landed, context, events)
