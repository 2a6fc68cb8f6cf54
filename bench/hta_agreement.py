"""HTA's temporal, idle-time and kernel-type breakdowns on each Kineto sample -> bench/hta_reference.json.

Needs a separate venv with a pinned HTA (never the project venv):

    python3 -m venv /tmp/hta-venv && /tmp/hta-venv/bin/pip install HolisticTraceAnalysis==0.5.0
    /tmp/hta-venv/bin/python bench/hta_agreement.py [--samples ../shared/samples] [--out bench/hta_reference.json]

Each trace is analysed alone (HTA keys ranks by distributedInfo.rank, so two files of rank 0 in one
folder would overwrite each other). A trace HTA cannot analyse is recorded with its error.
tests/test_formats_traces.py and tests/test_trace_breakdowns.py compare ours to this file within 0.5 %.
All figures are in HTA's units: integer µs (HTA rounds float-µs traces: ceil(ts), floor(ts + dur)); the
idle-time breakdown is rounded by HTA to 0.01 µs.
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
        idle, _ = analysis.get_idle_time_breakdown(ranks=[int(frame.iloc[0]["rank"])], visualize=False)
        kernel_types, kernels = analysis.get_gpu_kernel_breakdown(visualize=False)
    row = frame.iloc[0]
    span = float(row["kernel_time(us)"])
    figures = {name: float(row[f"{name}(us)"]) for name in ("idle_time", "compute_time", "non_compute_time")}
    return {
        "rank": int(row["rank"]),
        "kernel_time_us": span,
        **{f"{name}_us": value for name, value in figures.items()},
        **{name.replace("_time", "_share"): value / span if span else None for name, value in figures.items()},
        # idle time per CUDA stream and category (host_wait | kernel_wait | other), µs
        "idle_by_stream_us": {
            str(int(stream)): {str(r["idle_category"]): float(r["idle_time"]) for _, r in part.iterrows()}
            for stream, part in idle.groupby("stream")
        },
        # time by kernel type over the union of kernels: COMPUTATION, COMMUNICATION, "... overlapping ...", µs
        "kernel_type_us": {str(r["kernel_type"]): float(r["sum"]) for _, r in kernel_types.iterrows()},
        # the top kernels HTA lists (by duration_ratio 0.8 / num_kernels 10): Σ duration and count-free stats, µs
        "top_kernels_us": {
            str(r["name"])[:200]: float(r["sum (us)"]) for _, r in kernels.sort_values("sum (us)").iterrows()
        },
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
