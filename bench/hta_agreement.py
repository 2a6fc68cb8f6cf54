"""HTA's temporal breakdown on each Kineto sample, written to bench/hta_reference.json (committed).

Needs a separate venv with a pinned HTA (never the project venv):

    python3 -m venv /tmp/hta-venv && /tmp/hta-venv/bin/pip install HolisticTraceAnalysis==0.5.0
    /tmp/hta-venv/bin/python bench/hta_agreement.py [--samples ../shared/samples] [--out bench/hta_reference.json]

Each trace is analysed alone (HTA keys ranks by distributedInfo.rank, so two files of rank 0 in one
folder would overwrite each other). A trace HTA cannot analyse is recorded with its error.
tests/test_formats_traces.py compares our breakdown to this file within 0.5 % of the span.
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import sys
import tempfile
import traceback
from pathlib import Path

HERE = Path(__file__).resolve().parent


def analyse(trace: Path) -> dict:
    from hta.trace_analysis import TraceAnalysis

    with tempfile.TemporaryDirectory() as folder:
        os.symlink(trace, Path(folder) / trace.name)
        analysis = TraceAnalysis(trace_dir=folder)
        frame = analysis.get_temporal_breakdown(visualize=False)
    row = frame.iloc[0]
    span = float(row["kernel_time(us)"])
    figures = {name: float(row[f"{name}(us)"]) for name in ("idle_time", "compute_time", "non_compute_time")}
    return {
        "rank": int(row["rank"]),
        "kernel_time_us": span,
        **{f"{name}_us": value for name, value in figures.items()},
        **{name.replace("_time", "_share"): value / span if span else None for name, value in figures.items()},
    }


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    default_samples = Path(os.environ.get("PERFWH_SAMPLES", HERE.parent.parent / "shared" / "samples"))
    parser.add_argument("--samples", type=Path, default=default_samples)
    parser.add_argument("--out", type=Path, default=HERE / "hta_reference.json")
    args = parser.parse_args()
    logging.disable(logging.WARNING)
    from importlib.metadata import version

    results: dict[str, dict] = {}
    for trace in sorted((args.samples / "kineto").glob("*.json*")):
        try:
            results[trace.name] = analyse(trace.resolve())
        except Exception as error:  # noqa: BLE001 - recorded, not raised: the reference says what HTA cannot read
            results[trace.name] = {"error": f"{type(error).__name__}: {error}".splitlines()[0][:300]}
            traceback.print_exc(limit=1)
        print(trace.name, results[trace.name], file=sys.stderr)
    document = {"hta_version": version("HolisticTraceAnalysis"), "unit": "us", "traces": results}
    args.out.write_text(json.dumps(document, indent=2, sort_keys=True) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
