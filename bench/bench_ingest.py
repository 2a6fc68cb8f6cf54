"""Ingestion throughput on the demo fleet, against a named baseline measured in the same run.

Baseline `pyarrow_json_read_json`: Arrow's C++ JSON-lines reader with an explicit schema on the
same step_events files. It does not validate versions, enumerations or required fields, does not
name the bad line, and writes nothing; ours does all of that and writes the Parquet lake. The
ratio says what that costs. Run: `.venv/bin/python bench/bench_ingest.py`.
"""

from __future__ import annotations

import shutil
import sys
import tempfile
import time
from pathlib import Path

import pyarrow as pa
import pyarrow.json as pa_json

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from perf_assets.lib.contracts import TS, raw_table  # noqa: E402
from perf_assets.lib.ingest import ingest, landed_files  # noqa: E402
from perf_assets.lib.ingest.formats.json_records import SPECS, parse_json_records  # noqa: E402
from perf_assets.lib.ingest.landing import describe  # noqa: E402
from perf_assets.lib.paths import data_home  # noqa: E402
from perf_assets.lib.simulate import simulate  # noqa: E402


def best_of(repeats: int, function) -> float:
    times = []
    for _ in range(repeats):
        started = time.perf_counter()
        function()
        times.append(time.perf_counter() - started)
    return min(times)


def main() -> None:
    root = Path(tempfile.mkdtemp(prefix="perfwh-bench-"))
    try:
        home = data_home(root).ensure()
        simulate(home, scenario="demo", seed=7)
        files = landed_files(home.landing)
        step_files = [describe(home.landing, path) for path in files if "/step_events/" in path.as_posix()]
        step_bytes = sum(f.size_bytes for f in step_files)
        schema = pa.schema(
            [pa.field("version", pa.int64()), *[pa.field(f.name, f.type) for f in raw_table("step_events").schema]]
        )
        schema = pa.schema(
            [field.with_type(pa.timestamp("us", tz="UTC")) if field.type == TS else field for field in schema]
        )
        options = pa_json.ParseOptions(explicit_schema=schema, unexpected_field_behavior="ignore")

        rows = sum(parse_json_records(SPECS["step_events"], f).num_rows for f in step_files)
        ours = best_of(3, lambda: [parse_json_records(SPECS["step_events"], f) for f in step_files])
        baseline = best_of(3, lambda: [pa_json.read_json(f.path, parse_options=options) for f in step_files])

        total_bytes = sum(path.stat().st_size for path in files)
        started = time.perf_counter()
        outcomes = ingest(home)
        full = time.perf_counter() - started
        total_rows = sum(outcome.rows for outcome in outcomes)

        print(f"python {sys.version.split()[0]}, pyarrow {pa.__version__}")
        print(f"step_events: {len(step_files)} files, {rows:,} events, {step_bytes / 1e6:.1f} MB")
        print(f"  ours (parse + validate, no write)  : {ours * 1000:8.1f} ms  ({rows / ours:,.0f} events/s)")
        print(f"  pyarrow_json_read_json (no checks) : {baseline * 1000:8.1f} ms  ({rows / baseline:,.0f} events/s)")
        ratio = ours / baseline
        print(
            f"ours is {ratio:.1f}x slower than pyarrow_json_read_json"
            if ratio >= 1
            else f"ours is {1 / ratio:.1f}x faster than pyarrow_json_read_json"
        )
        print(
            f"whole demo landing (all formats, parse + validate + Parquet + manifest): {len(outcomes)} files, "
            f"{total_rows:,} rows, {total_bytes / 1e6:.1f} MB in {full:.1f} s ({total_rows / full:,.0f} rows/s)"
        )
    finally:
        shutil.rmtree(root, ignore_errors=True)


if __name__ == "__main__":
    main()
