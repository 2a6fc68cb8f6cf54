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

BIG_INT_SAMPLES = {"hta_edgecase_uint64_comms_id.json.gz"}  # Comms Id beyond int64: the stdlib path must run


def _sorted_rows(table: pa.Table) -> list[dict]:
    rows = table.to_pylist()
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
        assert fast_path == ("stdlib" if path.name in BIG_INT_SAMPLES else "fast"), path.name
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
