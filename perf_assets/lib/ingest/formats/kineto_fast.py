"""Fast path of the Kineto reader: the events array parsed in bounded chunks by a native JSON parser.

The checked path (kineto_trace, `stdlib`) decodes the whole document to text and parses it with the stdlib
json module and a per-integer Python hook that keeps integers beyond int64 as text: every event becomes a
dict while the whole document is held. The fast path (`fast`) instead

* checks with numpy that no integer literal lies outside int64 (`has_big_int`: digit runs of 19 or more);
  with one the checked path runs, since its hook is what keeps such an integer as text. The dict parsers check
  the whole document first; the msgspec path (which decodes any integer exactly) checks only what it stores or
  reads: the stored events' args text, the top level around the events (EventChunks(top_int64=True)), the
  time-base sample, pid/tid and ts/dur (kineto_trace._StructColumns, _parse_fast);
* splits the `traceEvents` array into chunks of about CHUNK_BYTES (1 MiB) at element boundaries (`EventChunks`)
  and parses each chunk alone, so only one chunk of raw events is alive at a time; the top-level object
  without its events is parsed on its own. The chunk parser is msgspec when installed and the document is
  ASCII (typed: a tagged union on `ph`, a slotted struct per complete event with the six fields read and
  `args` left as raw JSON until the event is stored, an empty struct per other event), else orjson, else the stdlib json module (a dict per event).

A split point is only a guess (a `}` `,` `{` sequence that may lie inside a string or a nested value), but
a wrong guess cannot parse: the chunk starts at an element boundary, so `[` + chunk + `]` is valid JSON
only if the guessed point is at the array's own level, outside any string. A guess that does not parse
is replaced by the next one (SPLIT_TRIES at most). The top level is checked the same way: the document
with its events array emptied must parse to an object whose `traceEvents` is that empty array, and no
second `traceEvents` key may follow. Whenever anything cannot be checked (no big-int check passed, the
parser rejects a chunk, NaN/Infinity, invalid UTF-8, lone surrogates, an unusual layout) `NotSure` is
raised and the caller runs the checked path on the same bytes: it gives the same tables or the same
quarantine reason as before.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Iterator
from typing import Union

import numpy as np

try:  # optional: about 2x the stdlib parser on Kineto traces; the fast path works (slower) without it
    import orjson

    def _orjson_loads(data: bytes) -> object:
        return orjson.loads(data)

except ImportError:  # pragma: no cover - depends on the environment
    orjson = None

try:  # optional: typed decoding into slotted structs, the args of an event left as raw JSON until wanted
    import msgspec
except ImportError:  # pragma: no cover - depends on the environment
    msgspec = None

INT64_MAX = 2**63 - 1
INT64_DIGITS = 19  # a literal shorter than this fits int64
_ZERO, _DOT, _MINUS = ord("0"), ord("."), ord("-")
_NOT_INT_AFTER = frozenset(b".eE")
_DIGITS = frozenset(b"0123456789")
_BLOCK = 1 << 22

CHUNK_BYTES = 1 << 20  # JSON bytes of raw events parsed at once (their objects take about 17x that)
SPLIT_TRIES = 16  # guesses of a chunk end before giving up (NotSure)
_EVENTS_KEY = re.compile(rb'"traceEvents"\s*:\s*\[\s*')
_BETWEEN = re.compile(rb"\}\s*,\s*\{")  # a guess at the boundary between two event objects
_LAST = re.compile(rb"\}\s*\]")  # a guess at the end of the last event object and of the array


class NotSure(Exception):
    """The fast path cannot vouch for the result: run the checked (stdlib) path instead."""


def parser_name(structs: bool = False) -> str:
    """The chunk parser the fast path uses: msgspec (structs, ASCII documents), orjson or json (dicts)."""
    if structs and msgspec is not None:
        return "msgspec"
    return "orjson" if orjson is not None else "json"


_STRUCT_DECODERS: list = []
# Every phase of the Trace Event Format ("ph"), deprecated ones included: B E X i I C b n e S T p F s t f P N O D M
# V v R c ( ). Only complete events (X) are read; a phase outside this list fails the struct decode (NotSure).
PHASES = tuple("BEXiICbneSTpFstfPNODMVvRc()")


# The args the tables read (trace_tables' promoted columns), by struct field -> JSON key; any other key is skipped.
ARGS_READ = {
    "device": "device",
    "stream": "stream",
    "correlation": "correlation",
    "group_size": "Group size",
    "in_msg_nelems": "In msg nelems",
    "out_msg_nelems": "Out msg nelems",
    "bytes": "bytes",
    "collective_name": "Collective name",
    "process_group_name": "Process Group Name",
    "msg_dtype": "dtype",
}


def struct_decoders() -> tuple[Callable[[bytes], list], Callable[[bytes], list], type, type]:
    """(chunk -> list of event structs, joined raw args -> list of args structs and separators, the struct type of
    complete events, the struct type of the args read) with msgspec, which must be installed.

    The chunk is decoded as a tagged union on `ph`: a complete event (ph X) becomes a struct with the top-level
    fields the reader needs (cat, name, pid, tid, ts, dur: any JSON value, None when absent) and `args` as
    msgspec.Raw (the args of events that are not stored are checked for JSON syntax but never become Python
    objects); an event of any other phase becomes an empty struct, its fields checked and skipped. An event
    without `ph` or with a `ph` that is not a phase of the format fails the decode, as does an array entry that
    is not an object (the checked path then counts them, as ever). msgspec checks the syntax of skipped values
    as strictly as the stdlib (tests/test_kineto_fast.py) but not their UTF-8, so the caller uses it on ASCII
    documents only.

    The args of a stored event are decoded into a struct of the ARGS_READ keys only (any JSON value each, None
    when absent; the other keys are checked and skipped, a repeated key keeps its last value, as dicts do), all
    of a chunk's in one call over trace_tables.joined_args (a JSON array with a number between two args objects);
    args that are neither an object nor a number fail that decode (msgspec.ValidationError), a number among them
    is caught by the caller's check that every other element is an args struct. The struct's fields are in
    ARGS_READ order, so msgspec.structs.astuple gives them in that order.
    """
    if not _STRUCT_DECODERS:

        class Complete(msgspec.Struct, tag_field="ph", tag="X", gc=False):  # no cycles: freshly decoded values
            cat: object = None
            name: object = None
            pid: object = None
            tid: object = None
            ts: object = None
            dur: object = None
            args: msgspec.Raw = msgspec.Raw(b"{}")  # no args: decoded as {}, as the other paths read them

        others = [
            msgspec.defstruct(f"Phase{index}", [], tag_field="ph", tag=phase, gc=False)
            for index, phase in enumerate(PHASES)
            if phase != "X"
        ]
        event = Union[tuple([Complete, *others])]  # noqa: UP007 - a Union built from a list
        args_read = msgspec.defstruct(
            "ArgsRead",
            [(field, object, msgspec.field(default=None, name=key)) for field, key in ARGS_READ.items()],
            gc=False,
        )
        # the stored events' raw args of a chunk joined into one array by a number (trace_tables.joined_args):
        # one decode call per chunk; the caller checks that every other element is an ArgsRead struct
        joined = msgspec.json.Decoder(list[Union[args_read, float]]).decode  # noqa: UP007 - as above
        _STRUCT_DECODERS.extend([msgspec.json.Decoder(list[event]).decode, joined, Complete, args_read])
    return tuple(_STRUCT_DECODERS)


def _stdlib_loads(data: bytes | bytearray | memoryview) -> object:
    return json.loads(str(data, "utf-8"))  # strict UTF-8, as the checked path's first decode attempt


def loads_function(use_orjson: bool = True) -> Callable[[bytes], object]:
    return _orjson_loads if use_orjson and orjson is not None else _stdlib_loads


def has_big_int(data: bytes | bytearray) -> bool:
    """Whether the bytes may hold an integer literal outside int64 (conservative: digits in strings count)."""
    offset = 0
    while offset < len(data):  # in blocks that end on a non-digit, so numpy's temporaries stay small
        end = min(len(data), offset + _BLOCK)
        while end < len(data) and data[end] in _DIGITS:
            end += 1
        if any(_big(data, start, stop) for start, stop in _long_runs(data, offset, end)):
            return True
        offset = end
    return False


def _long_runs(data: bytes | bytearray, offset: int, end: int) -> list[tuple[int, int]]:
    """(start, end) of the digit runs of 19 or more in data[offset:end] (which starts and ends off a run)."""
    digits = (np.frombuffer(data, dtype=np.uint8, count=end - offset, offset=offset) - _ZERO) < 10
    if len(digits) < INT64_DIGITS:
        return []
    run = digits  # run[i]: digits[i .. i + width - 1] all digits, width doubling 1, 2, 4, 8, 16, then 19
    for shift in (1, 2, 4, 8, 3):
        run = run[:-shift] & run[shift:]
    covered = np.flatnonzero(run)  # i where a run of 19+ digits covers i .. i + 18
    if not len(covered):
        return []
    starts = covered[np.concatenate(([True], np.diff(covered) > 1))]
    runs = []
    for start in (starts + offset).tolist():
        stop = start + INT64_DIGITS
        while stop < end and data[stop] in _DIGITS:
            stop += 1
        runs.append((start, stop))
    return runs


def _big(data: bytes | bytearray, start: int, end: int) -> bool:
    if start > 0 and data[start - 1] == _DOT:  # fraction digits
        return False
    if end < len(data) and data[end] in _NOT_INT_AFTER:  # mantissa of a float
        return False
    value = int(data[start:end])
    if start > 0 and data[start - 1] == _MINUS:
        value = -value
    return not -INT64_MAX - 1 <= value <= INT64_MAX


class EventChunks:
    """The `traceEvents` array of a Kineto document as lists of raw events, one bounded chunk at a time.

    Iterate `chunks()` to the end, then read `top_level` (the document without its events, checked).
    Raises NotSure (at any point, the end included) when the layout cannot be vouched for.
    """

    def __init__(
        self,
        data: bytes | bytearray,
        loads: Callable[[bytes], object],
        chunk_bytes: int | None = None,
        top_loads: Callable[[bytes], object] | None = None,
        top_int64: bool = False,
    ):
        """loads parses a chunk (a JSON array of events), top_loads (default loads) the top-level object;
        top_int64: NotSure when the top level (the document without its events) may hold an integer literal
        beyond int64 (has_big_int), for callers that have not checked the whole document."""
        self.data, self.loads, self.chunk_bytes = data, loads, chunk_bytes or CHUNK_BYTES
        self.top_loads, self.top_int64 = top_loads or loads, top_int64
        self.top_level: dict | None = None
        self.events = 0

    def _parse(self, start: int, end: int) -> list | None:
        """data[start:end] parsed as the elements of a JSON array, or None when it is not one.

        In a bytearray the array is parsed in place, without a copy of the chunk: the byte before the chunk (the
        events array's `[`, a `,` or whitespace) and the byte after it (a `,`, the `]` or whitespace) are set to
        `[` and `]` for the parse and then restored; the parsers read the bytes through a memoryview (msgspec's
        raw args keep a view of them until their chunk is processed; nothing else is changed meanwhile)."""
        data = self.data
        try:
            if isinstance(data, bytearray) and start > 0 and end < len(data):
                before, after = data[start - 1], data[end]
                data[start - 1], data[end] = 0x5B, 0x5D  # [ ]
                try:
                    with memoryview(data) as view:
                        chunk = self.loads(view[start - 1 : end + 1])
                finally:
                    data[start - 1], data[end] = before, after
            else:
                chunk = self.loads(b"[" + data[start:end] + b"]")
        except (ValueError, UnicodeDecodeError, RecursionError):  # orjson.JSONDecodeError is a ValueError
            return None
        return chunk if isinstance(chunk, list) else None

    def _next(self, start: int) -> tuple[list, int | None]:
        """The events from start up to a checked boundary, and where the next chunk starts (None: the last)."""
        data = self.data
        search = start + self.chunk_bytes
        for _ in range(SPLIT_TRIES):
            between = _BETWEEN.search(data, search) if search < len(data) else None
            if between is None:
                break
            chunk = self._parse(start, between.start() + 1)
            if chunk is not None:
                return chunk, between.end() - 1
            search = between.end()
        else:
            raise NotSure("no checked chunk boundary")
        search = start
        for _ in range(SPLIT_TRIES):  # the last chunk: up to the end of the array
            last = _LAST.search(data, search)
            if last is None:
                break
            chunk = self._parse(start, last.start() + 1)
            if chunk is not None:
                self._finish(last.end())
                return chunk, None
            search = last.start() + 1
        raise NotSure("no checked end of the traceEvents array")

    def _finish(self, tail: int) -> None:
        if b'"traceEvents"' in self.data[tail:]:
            raise NotSure("a second traceEvents key")
        top_text = self.data[: self._array_start] + b"[]" + self.data[tail:]
        if self.top_int64 and has_big_int(top_text):
            raise NotSure("an integer literal beyond int64 around traceEvents")
        try:
            top = self.top_loads(top_text)
        except (ValueError, UnicodeDecodeError, RecursionError):
            raise NotSure("the document around traceEvents does not parse") from None
        if not isinstance(top, dict) or top.get("traceEvents") != []:
            raise NotSure("traceEvents is not a top-level key")
        self.top_level = top

    def chunks(self) -> Iterator[list]:
        data = self.data
        found = _EVENTS_KEY.search(data)
        if found is None:
            raise NotSure("no traceEvents array")
        self._array_start = found.start() + found.group().index(b"[")
        start: int | None = found.end()
        if data[start : start + 1] == b"]":  # an empty array
            self._finish(start + 1)
            return
        if data[start : start + 1] != b"{":
            raise NotSure("traceEvents does not start with an object")
        while start is not None:
            chunk, start = self._next(start)
            self.events += len(chunk)
            yield chunk
        if self.top_level is None:  # pragma: no cover - _next sets it with the last chunk
            raise NotSure("unfinished")
