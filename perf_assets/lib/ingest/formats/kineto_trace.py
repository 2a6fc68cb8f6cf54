"""PyTorch profiler / Kineto Chrome-trace JSON, plain or gzip (formats.md section 1).

Two readers give the same tables (tests/test_kineto_fast.py, on every sample):

* `fast` (kineto_fast): the events array is parsed in checked chunks of about 1 MiB, by msgspec into
  slotted structs when msgspec is installed and the document is ASCII (a tagged union on `ph`: only complete
  events get fields; the args of an event stay raw JSON unless it is stored), else by orjson, else by the
  stdlib json module (a dict per event); only the fields the tables need are taken from the complete events
  of the stored categories (msgspec: column by column in C-level passes, _StructColumns; dicts: one tuple per
  stored event, _Collected), and the times are converted with numpy. No whole-document object tree.
* `stdlib`, the checked path: the whole document through the stdlib json module with a per-integer hook
  that keeps integers beyond int64 as text, one dict per event. It runs when the fast path cannot vouch for
  its result (kineto_fast.NotSure: an integer literal beyond int64, anything the chunk parser rejects such
  as NaN, invalid UTF-8 or truncated JSON, an unusual layout, timestamps beyond 2**53 µs) and for
  `fast=False`; its errors are the quarantine reasons, unchanged.

The cyclic garbage collector is paused while a trace is parsed (_without_cyclic_gc).

Memory bound: the decompressed bytes are held (capped at `max_json_bytes()`, PERFWH_TRACE_MAX_JSON_BYTES,
default 256 MiB: a larger trace is quarantined before parsing). The fast path adds one chunk of raw events
(kineto_fast.CHUNK_BYTES of JSON) and the stored events' columns and tables (about 0.75 KB each):
2.0-3.7x the decompressed size in all, measured; the checked path holds the whole parsed document, about
6.5x (docs/formats/traces.md). Truncated gzip or JSON is quarantined, never salvaged. Gzip is read with
ISA-L (isal.igzip) when installed, else the gzip module: the same bytes and refusals.
"""

from __future__ import annotations

import gc
import gzip
import json
import math
import operator
import os
import zlib
from collections import Counter, deque
from collections.abc import Iterator
from contextlib import contextmanager
from itertools import compress

import numpy as np
import pyarrow as pa

from perf_assets.lib.ingest.formats import kineto_fast
from perf_assets.lib.ingest.formats.errors import QuarantineError
from perf_assets.lib.ingest.formats.kineto_fast import EventChunks, NotSure, has_big_int, loads_function
from perf_assets.lib.ingest.formats.trace_tables import (
    GPU_ACTIVITIES,
    CompactTexts,
    TraceContext,
    args_json_in_order,
    as_int64,
    build_columnar_tables,
    build_trace_tables,
    compact_args,
    int_or_text,
)
from perf_assets.lib.ingest.landing import LandedFile
from perf_assets.lib.traces.rank_columns import Activities, Launches

try:  # ISA-L's gzip reader: the same format, checks and exceptions as the gzip module, about 3x faster
    from isal import igzip as _gzip
    from isal.igzip_lib import IsalError as _DeflateError
except ImportError:  # pragma: no cover - depends on the environment
    _gzip, _DeflateError = gzip, zlib.error

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


PATHS: Counter = Counter()  # reader path ("fast" | "stdlib") -> parse_kineto_trace calls, for tests and bench/
PARSERS: Counter = Counter()  # the fast path's chunk parser (msgspec | orjson | json) -> calls


def max_json_bytes() -> int:
    return int(os.environ.get("PERFWH_TRACE_MAX_JSON_BYTES", DEFAULT_MAX_JSON_BYTES))


def _read_bounded(handle, limit: int, expected: int = 0) -> bytearray:
    """At most limit + 1 bytes into one buffer. expected: the likely size (gzip's ISIZE, the file size): a buffer of
    that size (+ 1, capped at the bound) is filled in place by readinto, so a right guess copies nothing and the
    buffer never moves (a growing buffer is copied as it grows, and then briefly held twice: the peak memory
    varied by the document's size run to run). Past a wrong guess the buffer grows in 1 MiB blocks (one big read()
    would allocate the whole bound; joining a list of blocks would hold the document twice)."""
    data = bytearray(min(max(expected, 0), limit) + 1)
    filled = 0
    with memoryview(data) as view:
        while filled < len(data):
            read = handle.readinto(view[filled : filled + (1 << 20)])
            if not read:
                break
            filled += read
    if filled < len(data):  # the end came first (a 1-byte shrink keeps the buffer where it is)
        del data[filled:]
        return data
    while len(data) <= limit:
        block = handle.read(min(1 << 20, limit + 1 - len(data)))
        if not block:
            break
        data += block
    return data


DEFLATE_MAX_RATIO = 1032  # deflate cannot expand data more than about 1032-fold


def _expected_size(path, compressed: bool) -> int:
    """The decompressed size a gzip file states in its trailer (ISIZE: modulo 2**32, of the last member only, so a
    guess; capped at what deflate can expand the file to, so a corrupt trailer cannot make a small file reserve the
    whole bound), else the file's size."""
    with open(path, "rb") as handle:
        size = handle.seek(0, os.SEEK_END)
        if not compressed:
            return size
        if size < 18:  # shorter than a gzip header and trailer
            return 0
        handle.seek(-4, os.SEEK_END)
        return min(int.from_bytes(handle.read(4), "little"), size * DEFLATE_MAX_RATIO)


def read_bytes(landed: LandedFile) -> bytearray:
    """The decompressed JSON (at most max_json_bytes()), or QuarantineError for bad gzip, too big, empty."""
    limit = max_json_bytes()
    with open(landed.path, "rb") as handle:
        compressed = handle.read(2) == GZIP_MAGIC
    expected = _expected_size(landed.path, compressed)
    try:
        with (_gzip.open if compressed else open)(landed.path, "rb") as handle:
            data = _read_bounded(handle, limit, expected)
    except (EOFError, gzip.BadGzipFile, zlib.error, _DeflateError) as error:
        raise QuarantineError(f"truncated or corrupt gzip ({error}); deliver the trace again") from None
    if len(data) > limit:
        raise QuarantineError(
            f"trace JSON is over the reader's bound of {limit} bytes decompressed (PERFWH_TRACE_MAX_JSON_BYTES): "
            "not parsed; raise the bound on a host with enough memory or profile fewer steps"
        )
    if not data or data.isspace():  # what `not data.strip()` says, without a copy of the document
        raise QuarantineError("empty trace")
    return data


def checked_document(data: bytes | bytearray, big_int: bool | None = None) -> tuple[dict, list[str]]:
    """The checked (stdlib) parse of the whole document (and notes), or QuarantineError with what is wrong.

    Without an integer literal beyond int64 (big_int False, kineto_fast.has_big_int) the per-integer hook is
    left out: it would return int(token) for every literal, so the document is the same.
    """
    notes = []
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as error:
        text = data.decode("utf-8", errors="replace")
        notes.append(f"invalid UTF-8 (first at byte {error.start}) replaced with U+FFFD")
    if big_int is None:
        big_int = has_big_int(data)
    del data
    try:
        document = json.loads(text, parse_int=int_or_text) if big_int else json.loads(text)
    except json.JSONDecodeError as error:
        where = "at the end (truncated trace?)" if error.pos >= len(text.rstrip()) - 1 else f"at char {error.pos}"
        raise QuarantineError(f"invalid JSON {where}: {error.msg}") from None
    if not isinstance(document, dict) or not isinstance(document.get("traceEvents"), list):
        raise QuarantineError("not a Kineto trace: no top-level object with a traceEvents array")
    return document, notes


def read_document(landed: LandedFile) -> tuple[dict, list[str]]:
    """The trace's top-level object (and notes) by the checked path, or QuarantineError with what is wrong."""
    return checked_document(read_bytes(landed))


def _ts(value: object) -> float | int | None:
    """A time or duration in the trace's unit; None when missing, not a number, NaN or infinite (unknown)."""
    if isinstance(value, bool):
        return None
    if isinstance(value, int):
        return value
    try:
        number = value if isinstance(value, float) else float(value)  # type: ignore[arg-type]
    except (TypeError, ValueError):
        return None
    return number if math.isfinite(number) else None


def time_mode(document: dict, sample: list) -> tuple[str, bool, int | None]:
    """(name, absolute, baseTimeNanoseconds or None) following formats.md 1.3, from the first complete events' ts."""
    base = as_int64(document.get("baseTimeNanoseconds"))
    if base is not None:
        return "kineto_base_time_ns", True, base
    stamps = [ts for ts in sample if ts is not None]
    if stamps and max(stamps) >= ABSOLUTE_US_MIN:
        if all(isinstance(ts, int) for ts in stamps):
            return "kineto_unix_us", True, None
        return "kineto_unix_us_float", True, None
    return "kineto_relative_us", False, None


def time_base(document: dict, sample: list) -> tuple[str, bool, object]:
    """(name, absolute, µs -> ns function) following formats.md 1.3."""
    name, absolute, base = time_mode(document, sample)
    if base is not None:
        return name, absolute, lambda ts: base + round(ts * 1000)
    if name == "kineto_unix_us":
        return name, absolute, lambda ts: int(ts) * 1000
    return name, absolute, lambda ts: round(ts * 1000)


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
    event["args_json"] = args_json_in_order(args)
    for column, key in COLLECTIVE_ARGS.items():
        value = args.get(key) if category == "kernel" else None
        event[column] = str(value) if value is not None else None
    return event


@contextmanager
def _without_cyclic_gc() -> Iterator[None]:
    """The cyclic garbage collector paused: parsing allocates hundreds of thousands of containers, each
    allocation burst triggers a collection that walks all of them (a third of the A100 trace's load time),
    and parsed JSON and the tables hold no reference cycles. Reference counting still frees everything."""
    enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if enabled:
            gc.enable()


def parse_kineto_trace(landed: LandedFile, fast: bool = True) -> dict[str, pa.Table]:
    """All canonical tables of one Kineto trace; fast=False forces the checked stdlib reader (same tables)."""
    with _without_cyclic_gc():
        data = read_bytes(landed)
        structs = fast and kineto_fast.msgspec is not None and data.isascii()
        big_int = None if structs else has_big_int(data)  # the msgspec path checks what it stores (_StructColumns)
        if fast and not big_int:
            try:
                tables = _parse_fast(landed, data, structs)
            except NotSure:
                pass
            except QuarantineError:  # the fast path was sure: e.g. nothing to store
                PATHS["fast"] += 1
                raise
            else:
                PATHS["fast"] += 1
                return tables
        PATHS["stdlib"] += 1
        document, notes = checked_document(data, has_big_int(data) if big_int is None else big_int)
        del data
        return _parse_checked(landed, document, notes)


def _context(landed: LandedFile, document: dict, notes: list[str], sample: list) -> TraceContext:
    name, absolute, _ = time_mode(document, sample)
    context = TraceContext(trace_format="kineto", time_base=name, time_absolute=absolute, notes=notes)
    if not absolute:
        context.notes.append("timestamps relative to the trace's own zero (no baseTimeNanoseconds, not epoch µs)")
    context.host = _host(document) or landed.host
    context.job_id = landed.job_id
    distributed = document.get("distributedInfo") if isinstance(document.get("distributedInfo"), dict) else {}
    context.resolve_rank(landed, distributed.get("rank"))
    context.world_size = as_int64(distributed.get("world_size"))
    context.devices = _devices(document)
    return context


def _no_kernel_note(context: TraceContext, categories: list[str]) -> None:
    if "kernel" not in categories:
        ranges = categories.count("range_profiler")
        context.notes.append(
            f"no kernel events: CUPTI range-profiler trace ({ranges} cuda_profiler_range events stored)"
            if ranges
            else "no kernel events"
        )
    if not categories:
        raise QuarantineError(f"no trace events to store ({context.note() or 'traceEvents is empty'})")


def _parse_checked(landed: LandedFile, document: dict, notes: list[str]) -> dict[str, pa.Table]:
    raw_events = document["traceEvents"]
    complete = [raw for raw in raw_events if isinstance(raw, dict) and raw.get("ph") == "X"]
    sample = [_ts(raw.get("ts")) for raw in complete[:1000]]
    context = _context(landed, document, notes, sample)
    _, _, to_ns = time_base(document, sample)
    events: list[dict] = []
    not_kept: Counter = Counter()
    not_kept[NON_DURATION] = len(raw_events) - len(complete)
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
    _no_kernel_note(context, [event["category"] for event in events])
    return build_trace_tables(landed, context, events)


# --- the fast path: chunks of raw events -> one tuple per kept event -> columns ------------------------

NON_DURATION = "non-duration events (metadata, instants, flows)"
_CAT_INFO: dict[str, tuple[str, str | None, bool]] = {}  # raw `cat` -> (lower-cased, category, device side)


def _cat_info(cat: object) -> tuple[str, str | None, bool]:
    lowered = str(cat or "").lower()
    info = (lowered, CATEGORIES.get(lowered), lowered in DEVICE_SIDE)
    if type(cat) is str and len(_CAT_INFO) < 1000:
        _CAT_INFO[cat] = info
    return info


def _text(value: object) -> str | None:
    return None if value is None else str(value)


# the order of the tuple _Collected.add builds per kept event
FIELDS = (
    "category name device_index stream ts dur correlation_id group_size in_msg_nelems out_msg_nelems bytes "
    "args_json collective_name process_group_name msg_dtype"
).split()
_BREAKDOWN_INPUT = frozenset(GPU_ACTIVITIES)
_NO_COLLECTIVE = (None, None, None)


class _Collected:
    """What the fast path keeps of the raw events: one tuple (FIELDS) per stored event, and bookkeeping."""

    def __init__(self) -> None:
        self.rows: list[tuple] = []
        self.not_kept: Counter = Counter()
        self.not_kept[NON_DURATION] = 0  # first, as in the checked path (the note lists ties in insertion order)
        self.non_duration = 0
        self.sample: list = []  # _ts of the first 1000 complete events, for the time base
        self.breakdown_rows: list[int] = []  # rows of GPU activities and CPU annotations
        self.launch_rows: list[int] = []  # rows of runtime calls with a correlation id

    def add(self, chunk: list) -> None:
        """The same decisions as _parse_checked and _event, field for field (as_int64 inlined for ints, which
        fit int64 on this path); the µs -> ns conversion is left to _nanoseconds (ts and dur are kept as the
        int or float that _ts gives)."""
        rows, not_kept, sample = self.rows, self.not_kept, self.sample
        append = rows.append
        cat_info = _CAT_INFO.get
        for raw in chunk:
            if type(raw) is not dict or raw.get("ph") != "X":
                self.non_duration += 1
                continue
            ts = raw.get("ts")
            if len(sample) < 1000:
                sample.append(_ts(ts))
            cat = raw.get("cat")
            info = cat_info(cat) if type(cat) is str else None
            if info is None:
                info = _cat_info(cat)
            lowered, category, device_side = info
            if category is None:
                not_kept[lowered or "no category"] += 1
                continue
            dur = raw.get("dur")
            if type(ts) is not int and type(ts) is not float:
                ts = _ts(ts)
            if type(dur) is not int and type(dur) is not float:
                dur = _ts(dur)
            if ts is None or dur is None:
                not_kept[f"{lowered} without ts/dur"] += 1
                continue
            args = raw.get("args")
            if type(args) is not dict:
                args = {}
            get = args.get
            if device_side:
                device = get("device")
                if type(device) is not int:
                    device = None if device is None else as_int64(device)
                if device is None:
                    device = raw.get("pid")
                    if type(device) is not int:
                        device = None if device is None else as_int64(device)
                stream = get("stream")
                if type(stream) is not int:
                    stream = None if stream is None else as_int64(stream)
                if stream is None:
                    stream = raw.get("tid")
                    if type(stream) is not int:
                        stream = None if stream is None else as_int64(stream)
            else:
                device = stream = None
            correlation = get("correlation")
            if type(correlation) is not int and correlation is not None:
                correlation = as_int64(correlation)
            name = raw.get("name")
            if type(name) is not str and name is not None:
                name = str(name)
            if category in _BREAKDOWN_INPUT or (category == "annotation" and device is None):
                self.breakdown_rows.append(len(rows))
            elif category == "runtime" and correlation is not None:
                self.launch_rows.append(len(rows))
            if category == "kernel":
                collective = _text(get("Collective name")), _text(get("Process Group Name")), _text(get("dtype"))
            else:
                collective = _NO_COLLECTIVE
            sizes = get("Group size"), get("In msg nelems"), get("Out msg nelems"), get("bytes")
            if sizes != (None, None, None, None):
                sizes = tuple(value if type(value) is int or value is None else as_int64(value) for value in sizes)
            append(
                (category, name, device, stream, ts, dur, correlation, *sizes, args_json_in_order(args), *collective)
            )

    def columns(self) -> dict[str, list]:
        """The stored events' columns (FIELDS), in file order; the tuples are dropped."""
        rows, self.rows = self.rows, []
        return dict(zip(FIELDS, map(list, zip(*rows)))) if rows else {field: [] for field in FIELDS}


_CATEGORY, _DEVICE_SIDE = operator.itemgetter(1), operator.itemgetter(2)
_NUMBER_TYPES = {int, float}
_INT_OR_NONE = {int, type(None)}
_TEXT_OR_NONE = {str, type(None)}
_INT_ARGS = (("group_size", "Group size"), ("in_msg_nelems", "In msg nelems"), ("out_msg_nelems", "Out msg nelems"))
_INT_ARGS += (("bytes", "bytes"),)


_CAT, _NAME, _PID, _TID = (operator.attrgetter(field) for field in ("cat", "name", "pid", "tid"))
_TS, _DUR, _ARGS = (operator.attrgetter(field) for field in ("ts", "dur", "args"))
_ARGS_GETTERS = tuple((field, operator.attrgetter(field)) for field in kineto_fast.ARGS_READ)
# stored category -> a small code; the GPU activities first (code < len(GPU_ACTIVITIES))
_CATEGORY_CODE = {name: code for code, name in enumerate(dict.fromkeys([*GPU_ACTIVITIES, *CATEGORIES.values()]))}
_ANNOTATION, _RUNTIME = _CATEGORY_CODE["annotation"], _CATEGORY_CODE["runtime"]
_CATEGORY_NAMES: list[pa.Array] = []  # the codes' texts as Arrow, made at first use (not at import: Arrow sets up its
# memory pool at its first allocation, which bench/bench_traces.py counts as part of a load's peak memory)


def _kept(complete: list, infos: list, times: bool = False) -> tuple[list, list, list[str]]:
    """(the complete events that are stored, their _cat_info, the kinds of the others in event order, as
    _Collected.add counts them): events of a category not stored; with times, also events without ts/dur."""
    if times:
        keys = [
            (lowered or "no category")
            if category is None
            else (f"{lowered} without ts/dur" if _ts(event.ts) is None or _ts(event.dur) is None else None)
            for event, (lowered, category, _) in zip(complete, infos)
        ]
        keep = [key is None for key in keys]
        return list(compress(complete, keep)), list(compress(infos, keep)), [key for key in keys if key is not None]
    categories = list(map(_CATEGORY, infos))
    if all(categories):
        return complete, infos, []
    dropped = [lowered or "no category" for lowered, category, _ in infos if category is None]
    return list(compress(complete, categories)), list(compress(infos, categories)), dropped


def _cat_infos(cats: list) -> list[tuple[str, str | None, bool]]:
    """_cat_info of each raw `cat`, through the cache in one C-level pass where every cat is a known string."""
    try:
        return list(map(_CAT_INFO.__getitem__, cats))
    except (KeyError, TypeError):  # a cat not seen yet, or unhashable (a JSON array or object)
        return [_cat_info(cat) for cat in cats]


def _int64s(values: list) -> list:
    """as_int64 of each value; ints and None as they are (an int fits int64 on the fast path: has_big_int)."""
    if values and values[0] is None and values.count(None) == len(values):  # an absent key: by identity, fast
        return values
    if set(map(type, values)) <= _INT_OR_NONE:
        return values
    return [value if type(value) is int or value is None else as_int64(value) for value in values]


def _times(values: list) -> list:
    """_ts of each value; ints and floats as they are (finite on the msgspec path: it rejects NaN and 1e400)."""
    if set(map(type, values)) <= _NUMBER_TYPES:
        return values
    return [value if type(value) is int or type(value) is float else _ts(value) for value in values]


class _StructColumns(_Collected):
    """_Collected for msgspec event structs (kineto_fast.struct_decoders), column by column instead of event by
    event: the fields of a chunk's stored events are read one C-level pass per field (map over attrgetter), and
    each column is checked and converted in one C-level pass (map, set of types; an absent key by identity);
    Python code runs per event only where a value is unusual (a string where an int is expected, a missing
    device...). The same decisions as _Collected.add and _event, value for value. The args of stored events are
    compacted (one msgspec.json.format call per chunk) and decoded from that text into a struct of the keys read
    (kineto_fast.ARGS_READ); args_json is the compacted text (trace_tables.CompactTexts); the other events' args
    stay raw JSON. The rows the breakdowns read are found from category codes once all chunks are in (columns)."""

    def __init__(self, complete_type: type, args_type: type) -> None:
        super().__init__()
        self.complete_type = complete_type  # the struct of complete (ph X) events; other phases are empty structs
        self.args_type = args_type  # the struct of the args read (kineto_fast.ARGS_READ)
        self.lists: dict[str, list] = {field: [] for field in FIELDS if field != "args_json"}
        self.args_json = CompactTexts()
        self.all_int = True  # every stored ts and dur is an int (µs traces)
        self.count = 0

    def add(self, chunk: list, decode_args) -> None:
        complete_type = self.complete_type
        complete = [event for event in chunk if type(event) is complete_type]
        self.non_duration += len(chunk) - len(complete)
        if not complete:
            return
        if len(self.sample) < 1000:
            self.sample.extend(map(_ts, map(_TS, complete[: 1000 - len(self.sample)])))
        all_infos = _cat_infos(list(map(_CAT, complete)))
        stored, infos, dropped = _kept(complete, all_infos)  # only stored events are read further
        starts, durations = list(map(_TS, stored)), list(map(_DUR, stored))
        types = set(map(type, starts)) | set(map(type, durations))
        self.all_int = self.all_int and types <= {int}
        if not types <= _NUMBER_TYPES:
            self.all_int = False
            starts, durations = _times(starts), _times(durations)
            if None in starts or None in durations:  # rare: events without ts/dur are not stored either
                stored, infos, dropped = _kept(complete, all_infos, times=True)
                starts, durations = _times(list(map(_TS, stored))), _times(list(map(_DUR, stored)))
        self.not_kept.update(dropped)
        del complete, all_infos
        count = len(stored)
        if not count:
            return
        categories = list(map(_CATEGORY, infos))
        names = list(map(_NAME, stored))
        joined, compact = compact_args(list(map(_ARGS, stored)))  # the args compacted: one JSON array, one text each
        if has_big_int(joined):  # the checked path keeps such an integer as text, in args_json too
            raise NotSure("an integer literal beyond int64 in the args of a stored event")
        try:
            decoded = decode_args(joined)
        except ValueError:  # msgspec.ValidationError: args that are not an object (the checked path reads {})
            raise NotSure("args that are not a JSON object") from None
        if len(decoded) != 2 * count - 1:
            raise NotSure("args that are not a JSON object")
        args = decoded[::2]  # the others are the separators
        del decoded
        try:  # every element is an args struct, or a number (args that are not an object) that has no such field
            values = {field: list(map(getter, args)) for field, getter in _ARGS_GETTERS}
        except AttributeError:
            raise NotSure("args that are not a JSON object") from None
        del args
        device, stream = _device_and_stream(values["device"], values["stream"], stored, list(map(_DEVICE_SIDE, infos)))
        del stored
        if not set(map(type, names)) <= _TEXT_OR_NONE:
            names = [_text(name) for name in names]
        lists = self.lists
        for field, column in (
            ("category", categories),
            ("name", names),
            ("device_index", device),
            ("stream", stream),
            ("ts", starts),
            ("dur", durations),
            ("correlation_id", _int64s(values["correlation"])),
        ):
            lists[field] += column
        for field, _ in _INT_ARGS:
            lists[field] += _int64s(values[field])
        for field in COLLECTIVE_ARGS:
            column = values[field]
            if column.count(None) != count:  # kernels only, as text
                column = [
                    None if value is None or category != "kernel" else str(value)
                    for value, category in zip(column, categories)
                ]
            lists[field] += column
        self.args_json.add(compact)
        self.count += count

    def columns(self) -> dict[str, object]:
        columns: dict[str, object] = dict(self.lists)
        if self.args_json.size >= 2**31:  # beyond a string array's int32 offsets
            raise NotSure("args_json too large for one string array")
        columns["args_json"] = self.args_json.array()
        self.lists = {}
        # the rows the breakdowns read, from the whole columns at once (device and correlation become Arrow here)
        category = columns["category"]
        codes = np.fromiter(map(_CATEGORY_CODE.__getitem__, category), dtype=np.int8, count=len(category))
        device = columns["device_index"] = pa.array(columns["device_index"], pa.int64())
        correlation = columns["correlation_id"] = pa.array(columns["correlation_id"], pa.int64())
        no_device = device.is_null().to_numpy(zero_copy_only=False)
        with_correlation = correlation.is_valid().to_numpy(zero_copy_only=False)
        self.codes = codes
        self.breakdown_rows = np.flatnonzero((codes < len(GPU_ACTIVITIES)) | ((codes == _ANNOTATION) & no_device))
        self.launch_rows = np.flatnonzero((codes == _RUNTIME) & with_correlation)
        return columns


def _device_and_stream(device: list, stream: list, events: list, device_side: list[bool]) -> tuple[list, list]:
    """device_index and stream of each event: args.device (else the event's pid) and args.stream (else its tid) for
    device-side categories, None for the others (as _event)."""
    count = len(device_side)
    if True not in device_side:
        return [None] * count, [None] * count
    every = False not in device_side
    if not every:
        device, stream, events = (list(compress(values, device_side)) for values in (device, stream, events))
    device = _either(_int64s(device), events, _PID)
    stream = _either(_int64s(stream), events, _TID)
    if every:
        return device, stream
    rows = list(compress(range(count), device_side))
    return _scatter(device, rows, count), _scatter(stream, rows, count)


def _scatter(values: list, rows: list[int], count: int) -> list:
    """A list of count values: values at rows, None elsewhere."""
    spread = [None] * count
    deque(map(spread.__setitem__, rows, values), maxlen=0)  # a C-level loop
    return spread


def _either(values: list, events: list, fallback) -> list:
    """values, with the event's fallback field (as_int64, range checked: on the msgspec path no check of the whole
    document has cleared pid and tid) where a value is None."""
    if None not in values:
        return values
    return [value if value is not None else as_int64(fallback(event)) for value, event in zip(values, events)]


def _fits_int64(value: object) -> bool:
    """False for an int outside int64 (msgspec decodes any integer literal exactly)."""
    return type(value) is not int or -(2**63) <= value < 2**63


EXACT_US = 2**53  # |µs| below this: exact as a double, and × 1000 (+ a base) checked to stay inside int64


def _nanoseconds(values: list, mode: str, base: int | None) -> np.ndarray:
    """time_base's µs -> ns function over int/float values, vectorized with the same rounding:
    base + round(x × 1000) | int(x) × 1000 | round(x × 1000); Python's round and numpy's rint both round
    half to even, on the same IEEE product. NotSure where int64 could overflow (Python's ints would not)."""
    offset = base or 0
    if not values:
        return np.zeros(0, dtype=np.int64)
    types = set(map(type, values))
    if types <= {int}:
        largest = max(max(values), -min(values))  # Python ints: np.abs(-2**63) would overflow
        if not largest < EXACT_US:  # before the conversion: an int beyond int64 would not convert
            raise NotSure("timestamps too large for the vectorized conversion")
        integers, floats, is_float = np.array(values, dtype=np.int64), None, None
    else:
        floats = np.array(values, dtype=np.float64)
        largest = float(np.abs(floats).max())
        if types == {float}:  # float-µs traces: no int among them
            integers = is_float = None
        else:
            is_float = np.array([type(value) is float for value in values], dtype=bool)
            integers = np.where(is_float, 0, floats).astype(np.int64)  # the int ones: exact below 2**53
    if not largest < EXACT_US or largest * 1000 + abs(offset) >= 2**63:
        raise NotSure("timestamps too large for the vectorized conversion")
    ns = None if integers is None else integers * 1000 + offset
    if floats is not None:
        if mode == "kineto_unix_us":
            converted = np.trunc(floats).astype(np.int64) * 1000
        else:
            converted = np.rint(floats * 1000).astype(np.int64) + offset
        ns = converted if is_float is None else np.where(is_float, converted, ns)
    return ns


def _start_end_ns(
    starts: list, durations: list, mode: str, base: int | None, all_int: bool | None = None
) -> tuple[np.ndarray, np.ndarray]:
    """_nanoseconds of the starts and of start + dur (with Python's types), the end never before the start.
    All ints (µs traces; all_int when the caller has checked the types, None: checked here): the sums in int64,
    exact, once the bound below shows they fit."""
    if all_int is None:
        all_int = set(map(type, starts)) <= {int} and set(map(type, durations)) <= {int}
    if starts and all_int:
        offset = base or 0
        try:
            start_us, dur_us = np.array(starts, dtype=np.int64), np.array(durations, dtype=np.int64)
        except OverflowError:  # an int beyond int64
            raise NotSure("timestamps too large for the vectorized conversion") from None
        # as Python ints (np.abs(-2**63) would overflow); bounds |start + dur| too
        largest = max(int(start_us.max()), -int(start_us.min())) + max(int(dur_us.max()), -int(dur_us.min()))
        if not largest < EXACT_US or largest * 1000 + abs(offset) >= 2**63:
            raise NotSure("timestamps too large for the vectorized conversion")
        start_ns = (
            start_us * 1000 + offset
        )  # int x: base + round(x × 1000) = int(x) × 1000 (+ base) = x × 1000 (+ base)
        end_ns = (start_us + dur_us) * 1000 + offset
    else:
        start_ns = _nanoseconds(starts, mode, base)
        end_ns = _nanoseconds(_sums(starts, durations), mode, base)
    return start_ns, np.maximum(end_ns, start_ns)


def _sums(starts: tuple, durations: tuple) -> list:
    """start + dur with Python's types (int + int stays int, anything with a float is the float sum)."""
    return list(map(operator.add, starts, durations))


def _parse_fast(landed: LandedFile, data: bytearray, structs: bool) -> dict[str, pa.Table]:
    """structs: msgspec event structs (msgspec installed, an ASCII document; see struct_decoders), which check
    the integers they store; else dicts, for a document that has_big_int has cleared."""
    if structs:
        decode_chunk, decode_args, complete_type, args_type = kineto_fast.struct_decoders()
        collected: _Collected = _StructColumns(complete_type, args_type)
        reader = EventChunks(data, decode_chunk, top_loads=loads_function(), top_int64=True)
        for chunk in reader.chunks():
            collected.add(chunk, decode_args)
            del chunk
        if not all(map(_fits_int64, collected.sample)):  # the time base reads them: the checked path decides
            raise NotSure("a timestamp beyond int64")
    else:
        collected = _Collected()
        reader = EventChunks(data, loads_function())
        for chunk in reader.chunks():
            collected.add(chunk)
            del chunk
    document = reader.top_level
    collected.not_kept[NON_DURATION] = collected.non_duration
    context = _context(landed, document, [], collected.sample)
    context.not_kept = +collected.not_kept
    mode, _, base = time_mode(document, collected.sample)
    columns = collected.columns()
    starts, durations = columns.pop("ts"), columns.pop("dur")
    columns["start_ns"], columns["end_ns"] = _start_end_ns(
        starts, durations, mode, base, getattr(collected, "all_int", None)
    )
    del starts, durations
    PARSERS[kineto_fast.parser_name(structs)] += 1  # no NotSure past this point
    _no_kernel_note(context, columns["category"])
    codes = getattr(collected, "codes", None)  # _StructColumns: the category codes of the stored events
    activities, rows, annotations, launches = _breakdown_inputs(
        columns, collected.breakdown_rows, collected.launch_rows, codes
    )
    if codes is not None:  # the category column from its codes (Arrow's cast) rather than from the list of text
        if not _CATEGORY_NAMES:
            _CATEGORY_NAMES.append(pa.array(list(_CATEGORY_CODE), pa.string()))
        columns["category"] = pa.DictionaryArray.from_arrays(codes, _CATEGORY_NAMES[0]).cast(pa.string())
    return build_columnar_tables(landed, context, columns, activities, rows, annotations, launches)


def _breakdown_inputs(
    columns: dict,
    wanted: list[int] | np.ndarray,
    launch_rows: list[int] | np.ndarray,
    codes: np.ndarray | None = None,
) -> tuple[Activities, np.ndarray, list[tuple], Launches]:
    """What the breakdowns read: the GPU activities' columns and their rows, the CPU annotations' (name, start,
    end), and the launches by correlation id. wanted: the rows of GPU activities and CPU annotations. The columns
    are lists or Arrow arrays; codes: the categories' _CATEGORY_CODE when known."""
    start_ns, end_ns = columns["start_ns"], columns["end_ns"]
    category, name, correlation = columns["category"], columns["name"], columns["correlation_id"]
    wanted, launch_rows = np.asarray(wanted, dtype=np.int64), np.asarray(launch_rows, dtype=np.int64)
    if isinstance(correlation, pa.Array):  # the launch rows hold no null
        launch_ids = correlation.take(launch_rows).to_numpy(zero_copy_only=False).astype(np.int64)
    else:
        launch_ids = np.array(_pick(correlation, launch_rows), dtype=np.int64)
    launches = Launches.of(launch_ids, start_ns[launch_rows])
    if codes is not None:
        is_activity = codes[wanted] < len(GPU_ACTIVITIES)
    else:
        is_activity = np.array([category[row] in _BREAKDOWN_INPUT for row in wanted.tolist()], dtype=bool)
    at, others = wanted[is_activity], wanted[~is_activity]
    annotations = list(zip(_pick(name, others), start_ns[others].tolist(), end_ns[others].tolist()))
    activities = Activities(
        category=_pick(category, at),
        name=_pick(name, at),
        device=_pick(columns["device_index"], at),
        stream=_pick(columns["stream"], at),
        correlation=_pick(correlation, at),
        start_ns=start_ns[at],
        end_ns=end_ns[at],
    )
    return activities, at, annotations, launches


def _pick(column: list | pa.Array, rows: np.ndarray) -> list:
    """The values at rows (int64) of a list or an Arrow array, as Python objects."""
    if isinstance(column, pa.Array):
        return column.take(rows).to_pylist()
    return list(map(column.__getitem__, rows.tolist()))
