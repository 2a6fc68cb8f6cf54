"""The Kineto reader's fast path (kineto_fast) gives the stdlib path's tables on every Kineto sample."""

from __future__ import annotations

import gzip
import json
from pathlib import Path

import pyarrow as pa
import pytest

from perf_assets.lib.ingest.formats import kineto_trace
from perf_assets.lib.ingest.formats.errors import QuarantineError
from perf_assets.lib.ingest.formats.kineto_fast import has_big_int
from perf_assets.lib.ingest.landing import describe

# Comms Id beyond int64 on a cpu_op (not stored): the dict parsers, which check the whole document, leave the fast path;
# the msgspec path, which checks the integers it stores or reads, keeps it.
BIG_INT_SAMPLES = {"hta_edgecase_uint64_comms_id.json.gz"}


def _expected_path(path: Path, chunk_parser: str) -> str:
    return "stdlib" if path.name in BIG_INT_SAMPLES and chunk_parser != "msgspec" else "fast"


def _sorted_rows(table: pa.Table) -> list[dict]:
    """The rows in a canonical order, args_json as its JSON value: the msgspec fast path keeps the trace's own
    spelling of numbers (`464.592590`), the paths that parse args into dicts write Python's (`464.59259`)."""
    rows = table.to_pylist()
    for row in rows:
        if row.get("args_json") is not None:
            row["args_json"] = json.dumps(json.loads(row["args_json"]), sort_keys=True)
    return sorted(rows, key=lambda row: json.dumps(row, sort_keys=True, default=str))


def _parse(path: Path, fast: bool) -> tuple[dict | str, str]:
    before = kineto_trace.PATHS.copy()
    try:
        tables = kineto_trace.parse_kineto_trace(describe(path.parent.parent, path), fast=fast)
    except QuarantineError as error:
        result: dict | str = f"quarantined: {error}"
    else:
        result = {key: (table.schema.metadata, _sorted_rows(table)) for key, table in tables.items()}
    (path_taken,) = (kineto_trace.PATHS - before).keys()
    return result, path_taken


def kineto_samples(samples: Path) -> list[Path]:
    found = sorted((samples / "kineto").glob("*.json*"))
    assert found, "no Kineto samples"
    return found


def test_fast_path_tables_equal_stdlib_path_on_every_sample(samples):
    for path in kineto_samples(samples):
        fast, fast_path = _parse(path, fast=True)
        slow, slow_path = _parse(path, fast=False)
        assert slow_path == "stdlib"
        assert fast_path == _expected_path(path, kineto_trace.kineto_fast.parser_name(structs=True)), path.name
        assert fast == slow, path.name


@pytest.mark.parametrize(
    ("text", "big"),
    [
        (b"", False),
        (b"12345678901234567890", True),
        (b"[9223372036854775807]", False),
        (b"[-9223372036854775808]", False),
        (b"[-9223372036854775809]", True),
        (b'{"a": 9223372036854775808}', True),
        (b"[0.12345678901234567890123]", False),
        (b"[12345678901234567890.5]", False),
        (b"[12345678901234567890e3]", False),
        (b'{"ts": 1683564901548726, "base": 1711964646000000000}', False),
    ],
)
def test_has_big_int(text, big):
    assert has_big_int(text) is big


def test_big_int_forces_stdlib_path(tmp_path):
    events = [{"ph": "X", "cat": "kernel", "name": "k", "pid": 0, "tid": 7, "ts": 1, "dur": 2}]
    events[0]["args"] = {"Comms Id": 2**64 - 1, "correlation": 5}
    root = tmp_path / "landing"
    (root / "kineto").mkdir(parents=True)
    path = root / "kineto" / "t.json.gz"
    path.write_bytes(gzip.compress(json.dumps({"traceEvents": events}).encode()))
    fast, taken = _parse(path, fast=True)
    assert taken == "stdlib"
    row = fast["trace_events"][1][0]
    assert json.loads(row["args_json"])["Comms Id"] == str(2**64 - 1)
    assert row["correlation_id"] == 5


# --- when the fast path vouches for its result, and when the checked path runs instead ----------------


def _write(tmp_path: Path, text: bytes, name: str = "t.json") -> Path:
    root = tmp_path / "landing"
    (root / "kineto").mkdir(parents=True, exist_ok=True)
    path = root / "kineto" / name
    path.write_bytes(text)
    return path


def _both(path: Path) -> tuple[str, str]:
    """The fast call's path; asserts it gives the checked path's tables (or quarantine reason)."""
    fast, taken = _parse(path, fast=True)
    slow, _ = _parse(path, fast=False)
    assert fast == slow
    return taken


KERNEL = {"ph": "X", "cat": "kernel", "name": "gemm", "pid": 0, "tid": 7, "ts": 100, "dur": 5, "args": {}}


@pytest.fixture(params=["msgspec", "orjson", "json"])
def chunk_parser(request, monkeypatch):
    """Each chunk parser of the fast path in turn (msgspec structs, orjson dicts, stdlib json dicts)."""
    from perf_assets.lib.ingest.formats import kineto_fast

    if request.param == "msgspec" and kineto_fast.msgspec is None:
        pytest.skip("msgspec not installed")
    if request.param == "orjson" and kineto_fast.orjson is None:
        pytest.skip("orjson not installed")
    if request.param != "msgspec":
        monkeypatch.setattr(kineto_fast, "msgspec", None)
    if request.param == "json":
        monkeypatch.setattr(kineto_fast, "orjson", None)
    return request.param


def test_every_chunk_parser_and_tiny_chunks_give_the_same_tables_on_every_sample(samples, monkeypatch, chunk_parser):
    """Each chunk parser, with 1 MiB and with 4 KiB chunks (thousands of chunk boundaries per trace)."""
    from perf_assets.lib.ingest.formats import kineto_fast

    for chunk_bytes in (kineto_fast.CHUNK_BYTES, 4096):
        monkeypatch.setattr(kineto_fast, "CHUNK_BYTES", chunk_bytes)
        for path in kineto_samples(samples):
            before = kineto_trace.PARSERS.copy()
            slow, _ = _parse(path, fast=False)
            fast, taken = _parse(path, fast=True)
            assert fast == slow and taken == _expected_path(path, chunk_parser), path.name
            if taken == "fast":
                assert list(kineto_trace.PARSERS - before) == [chunk_parser], path.name


def test_boundary_guesses_inside_strings_and_nested_values_are_rejected(tmp_path, monkeypatch, chunk_parser):
    from perf_assets.lib.ingest.formats import kineto_fast

    monkeypatch.setattr(kineto_fast, "CHUNK_BYTES", 16)
    tricky = {"note": 'x"}, {"ph": "X"}]', "nested": [{"a": 1}, {"b": [{"c": 2}]}], "z": "}]"}
    events = [dict(KERNEL, ts=100 + i, args=dict(tricky, correlation=i)) for i in range(30)]
    events.insert(7, {"ph": "f", "id": 1, "pid": 0, "tid": 7, "ts": 5, "cat": "ac2g", "bp": "e"})
    text = json.dumps({"traceEvents": events, "meta": [{"x": "]"}]}, indent=1).encode()
    assert _both(_write(tmp_path, text)) == "fast"


@pytest.mark.parametrize(
    ("text", "why"),
    [
        (b'{"traceEvents": [{"ph": "X", "cat": "kernel", "name": "k", "ts": 1, "dur": 2, "args": {"x": NaN}}]}', "NaN"),
        (b'{"traceEvents": [{"ph": "X", "cat": "kernel", "name": "k\xff", "ts": 1, "dur": 2}]}', "invalid UTF-8"),
        (b'{"traceEvents": [{"ph": "X", "cat": "kernel", "name": "k", "ts": 1, "dur": 2}], "traceEvents": []}', "dup"),
        (b'{"traceEvents": [{"ph": "X", "cat": "kernel", "name": "k", "ts": 1, "dur": 2}, 3]}', "not an object"),
        (b'{"traceEvents": [{"ph": "X", "cat": "kernel", "name": "k", "ts": 1, "dur": 2}, {"ph": "X"', "truncated"),
        (b'{"meta": {"traceEvents": [{"ph": "X"}]}, "traceEvents": []}', "nested key first"),
        (
            b'{"traceEvents": [{"ph": "X", "cat": "kernel", "name": "k", "ts": 9100000000000000.5, "dur": 2}]}',
            "ts beyond 2**53",
        ),
    ],
    ids=lambda value: value if isinstance(value, str) else None,
)
def test_what_the_fast_path_cannot_vouch_for_runs_the_checked_path(tmp_path, text, why, chunk_parser):
    taken = _both(_write(tmp_path, text))  # the same tables either way
    assert taken == ("fast" if why == "NaN" and chunk_parser == "json" else "stdlib"), why  # json reads NaN


def test_odd_but_checked_layouts_stay_on_the_fast_path(tmp_path, chunk_parser):
    odd = [
        dict(KERNEL, ts="120.5", dur=True),  # ts as text (float), dur a bool: `kernel without ts/dur`
        dict(KERNEL, ts=130, dur=2.5, pid="Spans", tid="x", args={"device": "1", "stream": 9}),
        dict(KERNEL, cat="Kernel", ts=131.25, dur=0),
        dict(KERNEL, cat=None, name=None),
        dict(KERNEL, cat=5),
        {"ph": "X", "cat": "cuda_runtime", "name": "cudaLaunchKernel", "ts": 99, "dur": 1, "args": {"correlation": 1}},
        dict(KERNEL, args={"correlation": 1, "Collective name": 7, "bytes": "12", "dtype": None, "é": "ü"}),
    ]
    text = json.dumps({"traceEvents": odd, "distributedInfo": {"rank": 2}}).encode()
    assert _both(_write(tmp_path, text)) == "fast"
    assert _both(_write(tmp_path, json.dumps({"traceEvents": []}).encode(), "empty.json")) == "fast"


def test_values_some_parsers_reject_give_the_checked_tables(tmp_path, chunk_parser):
    """1e400 (inf to the stdlib), non-ASCII text: the fast path's result or the checked one."""
    cases = {
        "inf_kept.json": b'{"traceEvents": [{"ph": "X", "cat": "kernel", "ts": 1, "dur": 2, "args": {"x": 1e400}}]}',
        "inf_skipped.json": b'{"traceEvents": [{"ph": "X", "cat": "kernel", "ts": 1, "dur": 2}, '
        b'{"ph": "X", "cat": "cpu_op", "ts": 1, "dur": 2, "args": {"x": 1e400}}]}',
        "utf8.json": '{"traceEvents": [{"ph": "X", "cat": "kernel", "ts": 1, "dur": 2, "name": "é"}]}'.encode(),
    }
    for name, text in cases.items():
        before = kineto_trace.PARSERS.copy()
        if name == "inf_kept.json" and chunk_parser == "msgspec":  # args_json is the trace's text: 1e400 as written
            path = _write(tmp_path, text, name)
            (fast, taken), (slow, _) = _parse(path, fast=True), _parse(path, fast=False)
            assert taken == "fast" and list(kineto_trace.PARSERS - before) == ["msgspec"]
            fast_row, slow_row = fast["trace_events"][1][0], slow["trace_events"][1][0]
            assert json.loads(fast_row.pop("args_json")) == {"x": float("inf")}
            assert json.loads(slow_row.pop("args_json")) == {"x": None}  # the stdlib reads inf, encoded as null
            assert fast_row == slow_row
            continue
        taken = _both(_write(tmp_path, text, name))
        if name == "utf8.json":  # msgspec skips values without checking their UTF-8: only ASCII documents
            assert taken == "fast" and "msgspec" not in kineto_trace.PARSERS - before
    surrogate = b'{"traceEvents": [{"ph": "X", "cat": "kernel", "ts": 1, "dur": 2, "name": "\\ud800"}]}'
    path = _write(tmp_path, surrogate, "surrogate.json")
    for fast in (True, False):  # the checked path's failure, as before: Arrow cannot store a lone surrogate
        # (msgspec and orjson reject it, so the checked path runs; the stdlib json chunk parser reads it)
        before = kineto_trace.PATHS.copy()
        with pytest.raises(UnicodeEncodeError):
            kineto_trace.parse_kineto_trace(describe(path.parent.parent, path), fast=fast)
        assert list(kineto_trace.PATHS - before) == ([] if fast and chunk_parser == "json" else ["stdlib"])


def test_int64_extremes_in_timestamps_run_the_checked_path(tmp_path):
    """-2**63 fits int64 (no big-int literal) but × 1000 does not: the checked path decides, as before."""
    text = b'{"traceEvents": [{"ph": "X", "cat": "kernel", "ts": -9223372036854775808, "dur": 2}]}'
    path = _write(tmp_path, text)
    for fast in (True, False):
        before = kineto_trace.PATHS.copy()
        with pytest.raises(OverflowError):
            kineto_trace.parse_kineto_trace(describe(path.parent.parent, path), fast=fast)
        assert list(kineto_trace.PATHS - before) == ["stdlib"]


def test_an_event_outside_the_trace_event_phases_runs_the_checked_path(tmp_path, chunk_parser):
    """The msgspec decoder is a tagged union on `ph`: an unknown phase or none fails it, and the checked path,
    which counts such events as not stored, decides; the dict parsers count them on the fast path."""
    events = [KERNEL, dict(KERNEL, ph="Q", ts=200), {"cat": "kernel", "name": "no phase", "ts": 300, "dur": 1}]
    taken = _both(_write(tmp_path, json.dumps({"traceEvents": events}).encode()))
    assert taken == ("stdlib" if chunk_parser == "msgspec" else "fast")


def test_args_json_is_the_traces_args_text_without_whitespace(samples):
    """args_json holds the same JSON value as the trace's args (no key lost, none added), keys in the trace's order,
    no whitespace outside strings, and on the msgspec path every number as the trace writes it."""
    import msgspec

    path = samples / "kineto" / "hta_nccl_data_a100_rank0of2.json.gz"
    table = kineto_trace.parse_kineto_trace(describe(path.parent.parent, path))["trace_events"]
    raw = json.loads(gzip.decompress(path.read_bytes()))["traceEvents"]
    stored = [
        event.get("args") or None
        for event in raw
        if event.get("ph") == "X" and str(event.get("cat")).lower() in kineto_trace.CATEGORIES
    ]
    texts = table.column("args_json").to_pylist()
    assert len(texts) == len(stored) and sum(text is not None for text in texts) > 10000
    for text, args in zip(texts, stored):
        assert (None if text is None else json.loads(text)) == args
        if text is not None:
            assert list(json.loads(text)) == list(args)  # the trace's key order
            assert msgspec.json.format(text, indent=-1) == text  # compact already
    if kineto_trace.PARSERS.get("msgspec"):  # this trace writes `"warps per SM": 464.592590`: kept, not 464.59259
        assert sum('"warps per SM":464.592590,' in text for text in texts if text) > 0


def test_the_gzip_module_and_isal_read_the_same_bytes_and_refuse_the_same_files(samples, tmp_path, monkeypatch):
    """read_bytes uses ISA-L's gzip reader when installed, else the gzip module: the same bytes, the same refusals."""
    import gzip as gzip_module

    readers = {"gzip": gzip_module}
    if kineto_trace._gzip is not gzip_module:
        readers["isal"] = kineto_trace._gzip
    original = samples / "kineto" / "hta_mi250_rocm6.2.json.gz"
    truncated = _write(tmp_path, original.read_bytes()[:3000], "truncated.json.gz")
    results = {}
    for name, reader in readers.items():
        monkeypatch.setattr(kineto_trace, "_gzip", reader)
        data = bytes(kineto_trace.read_bytes(describe(original.parent.parent, original)))
        with pytest.raises(QuarantineError, match="truncated or corrupt gzip"):
            kineto_trace.read_bytes(describe(truncated.parent.parent, truncated))
        results[name] = data
    assert all(data == gzip.decompress(original.read_bytes()) for data in results.values())


@pytest.mark.parametrize(
    ("where", "msgspec_path"),
    [
        ("args of an event not stored", "fast"),
        ("a field of an event of another phase", "fast"),
        ("the pid read for a missing device", "fast"),
        ("the args of a stored event", "stdlib"),
        ("the ts of an event not stored, read for the time base", "stdlib"),
        ("the document around the events", "stdlib"),
    ],
)
def test_integers_beyond_int64_where_the_msgspec_path_reads_them_run_the_checked_path(
    tmp_path, chunk_parser, where, msgspec_path
):
    """The msgspec path does not scan the whole document for integer literals beyond int64 (kineto_fast.has_big_int):
    it checks those it stores or reads (the stored args' text, the time-base sample, pid/tid, the top level), so
    one elsewhere keeps the fast path; the dict parsers check the whole document first. Same tables either way."""
    big = 2**64 + 7
    events = [
        {"ph": "X", "cat": "cuda_runtime", "name": "cudaLaunchKernel", "ts": 99, "dur": 1, "args": {"correlation": 1}},
        dict(KERNEL, args={"correlation": 1, "stream": 7}),
        {"ph": "X", "cat": "cpu_op", "name": "aten::mm", "pid": 1, "tid": 1, "ts": 98, "dur": 4, "args": {}},
        {"ph": "f", "id": 1, "pid": 0, "tid": 7, "ts": 100, "cat": "ac2g", "bp": "e"},
    ]
    document = {"traceEvents": events, "deviceProperties": [{"id": 0, "name": "GPU"}]}
    if where == "args of an event not stored":
        events[2]["args"] = {"Comms Id": big}
    elif where == "a field of an event of another phase":
        events[3]["id"] = big
    elif where == "the pid read for a missing device":
        events[1]["pid"] = big  # no args.device: the pid would be the device, but it does not fit BIGINT: NULL
    elif where == "the args of a stored event":
        events[1]["args"]["Comms Id"] = big
    elif where == "the ts of an event not stored, read for the time base":
        events[2]["ts"] = big
    else:
        document["deviceProperties"][0]["totalGlobalMem"] = big
    taken = _both(_write(tmp_path, json.dumps(document).encode()))
    assert taken == (msgspec_path if chunk_parser == "msgspec" else "stdlib")


@pytest.mark.parametrize("args", [5, 2.5, "text", [1, 2], None, True], ids=repr)
def test_args_that_are_not_an_object_give_the_checked_tables(tmp_path, chunk_parser, args):
    """The msgspec path decodes a chunk's stored args in one call over the joined texts (numbers between them):
    args that are not an object, a number among them, leave it for the checked path (which reads them as {})."""
    events = [dict(KERNEL, args={"correlation": 1}), dict(KERNEL, ts=110, args=args), dict(KERNEL, ts=120)]
    taken = _both(_write(tmp_path, json.dumps({"traceEvents": events}).encode()))
    assert taken == ("stdlib" if chunk_parser == "msgspec" else "fast")


def test_a_gzip_of_several_members_is_read_whole_and_the_bound_still_holds(samples, tmp_path, monkeypatch):
    """read_bytes sizes its buffer from gzip's trailer (ISIZE), which states only the last member's size: a trace
    written as several gzip members is still read whole, and one over the bound is still refused."""
    original = samples / "kineto" / "hta_mi250_rocm6.2.json.gz"
    whole = gzip.decompress(original.read_bytes())
    cut = len(whole) - 100  # the last member states 100 bytes of a much longer document
    members = _write(tmp_path, gzip.compress(whole[:cut]) + gzip.compress(whole[cut:]), "members.json.gz")
    assert bytes(kineto_trace.read_bytes(describe(members.parent.parent, members))) == whole
    assert kineto_trace.parse_kineto_trace(describe(members.parent.parent, members))["trace_events"].num_rows > 0
    monkeypatch.setenv("PERFWH_TRACE_MAX_JSON_BYTES", str(len(whole) - 1))
    with pytest.raises(QuarantineError, match="over the reader's bound"):
        kineto_trace.read_bytes(describe(members.parent.parent, members))


def test_a_gzip_trailer_that_overstates_the_size_reserves_little_and_is_refused(samples, tmp_path):
    """A trailer claiming 4 GiB: the buffer guess is capped at what deflate can expand the file to, and the gzip
    reader's size check refuses the file as corrupt."""
    original = (samples / "kineto" / "hta_mi250_rocm6.2.json.gz").read_bytes()
    lying = _write(tmp_path, original[:-4] + (2**32 - 1).to_bytes(4, "little"), "lying.json.gz")
    assert kineto_trace._expected_size(lying, compressed=True) <= len(original) * kineto_trace.DEFLATE_MAX_RATIO
    with pytest.raises(QuarantineError, match="truncated or corrupt gzip"):
        kineto_trace.read_bytes(describe(lying.parent.parent, lying))
