"""DCGM ingest (samples per second) against a named baseline measured in the same run, on the same files.

Files: the demo fleet's Prometheus range-query JSON (`simulate(..., "demo", seed=7)`: 112 node-day
files, about a million samples). Ours: `parse_prometheus_range` on each file, to the typed raw_dcgm
table (GPU identity normalised, DCGM blanks and NaN as NULL, sample times checked, values outside
their physical range set to NULL and counted). Baseline `plain_pandas`: what a user would write —
`json.load`, one `pandas.DataFrame` per series with its labels as columns, `pd.concat`,
`pd.to_datetime` and `pd.to_numeric(errors="coerce")`; no sentinels, no identity, no checks.
Both best of 3. Then the whole ingest of those files once (parse + Parquet + manifest).
Run: `.venv/bin/python bench/bench_dcgm.py`.
"""

from __future__ import annotations

import json
import shutil
import sys
import tempfile
import time
from pathlib import Path

import pandas as pd
import pyarrow as pa

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from perf_assets.lib.ingest import ingest, landed_files  # noqa: E402
from perf_assets.lib.ingest.formats.prometheus_range import parse_prometheus_range  # noqa: E402
from perf_assets.lib.ingest.landing import describe  # noqa: E402
from perf_assets.lib.paths import data_home  # noqa: E402
from perf_assets.lib.simulate import simulate  # noqa: E402


def plain_pandas(paths: list[Path]) -> pd.DataFrame:
    frames = []
    for path in paths:
        with open(path) as handle:
            document = json.load(handle)
        for series in document["data"]["result"]:
            frame = pd.DataFrame(series["values"], columns=["ts", "value"])
            for label, value in series["metric"].items():
                frame[label] = value
            frames.append(frame)
    samples = pd.concat(frames, ignore_index=True)
    samples["ts"] = pd.to_datetime(samples["ts"], unit="s", utc=True)
    samples["value"] = pd.to_numeric(samples["value"], errors="coerce")
    return samples


def best_of(repeats: int, function) -> tuple[float, object]:
    best, result = float("inf"), None
    for _ in range(repeats):
        started = time.perf_counter()
        result = function()
        best = min(best, time.perf_counter() - started)
    return best, result


def main() -> None:
    root = Path(tempfile.mkdtemp(prefix="perfwh-bench-dcgm-"))
    try:
        home = data_home(root).ensure()
        simulate(home, "demo", seed=7)
        paths = [path for path in landed_files(home.landing) if path.relative_to(home.landing).parts[0] == "dcgm"]
        paths = [path for path in paths if path.suffix == ".json"]
        landed = [describe(home.landing, path) for path in paths]
        size = sum(path.stat().st_size for path in paths)

        ours, tables = best_of(3, lambda: [parse_prometheus_range(file) for file in landed])
        baseline, frame = best_of(3, lambda: plain_pandas(paths))
        rows = sum(table.num_rows for table in tables)
        assert rows == len(frame), (rows, len(frame))

        started = time.perf_counter()
        outcomes = ingest(home, paths)
        full = time.perf_counter() - started
        assert {outcome.status for outcome in outcomes} == {"ok"}

        print(f"python {sys.version.split()[0]}, pyarrow {pa.__version__}, pandas {pd.__version__}")
        print(f"dcgm range-query JSON: {len(paths)} files, {rows:,} samples, {size / 1e6:.1f} MB")
        print(f"  ours (parse to raw_dcgm, checks)   : {ours * 1000:8.1f} ms  ({rows / ours:,.0f} samples/s)")
        print(f"  plain_pandas (no checks)           : {baseline * 1000:8.1f} ms  ({rows / baseline:,.0f} samples/s)")
        ratio = ours / baseline
        print(
            f"ours is {ratio:.1f}x slower than plain_pandas"
            if ratio >= 1
            else f"ours is {1 / ratio:.1f}x faster than plain_pandas"
        )
        print(f"whole ingest of these files (parse + Parquet + manifest): {full:.1f} s ({rows / full:,.0f} samples/s)")
    finally:
        shutil.rmtree(root, ignore_errors=True)


if __name__ == "__main__":
    main()
