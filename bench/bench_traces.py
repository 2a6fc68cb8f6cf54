"""Kineto trace loading: our parser against HTA's, on the same files, in one run.

Baseline `hta_load`: HolisticTraceAnalysis 0.5.0 `TraceAnalysis(trace_dir=...)` (parse and index
one rank's trace into pandas; no analysis), run in its own venv (/tmp/hta-venv, or PERFWH_HTA_PYTHON).
Ours: `parse_kineto_trace` (parse, all five canonical tables with the HTA breakdowns; nothing written).
Files: every Kineto sample HTA can load (bench/hta_reference.json without an error), the biggest
one repeated so each side runs for a while. Each side runs in a fresh subprocess; peak memory is
that process's max RSS (getrusage) minus its RSS after imports. Throughput = trace events (the
`traceEvents` entries) per second of wall time, best of --repeats passes over the files; the CPU time of
the process (best pass) is printed too: on a shared machine it moves less with the load than wall time.

    .venv/bin/python bench/bench_traces.py [--samples ../shared/samples] [--repeats 3] [--biggest-copies 3]
"""

from __future__ import annotations

import argparse
import gzip
import json
import os
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
HTA_PYTHON = os.environ.get("PERFWH_HTA_PYTHON", "/tmp/hta-venv/bin/python")


def rss_mib() -> float:
    with open("/proc/self/statm") as handle:
        return int(handle.read().split()[1]) * os.sysconf("SC_PAGE_SIZE") / 2**20


def load_ours(path: Path) -> None:
    from perf_assets.lib.ingest.formats.kineto_trace import parse_kineto_trace
    from perf_assets.lib.ingest.landing import describe

    parse_kineto_trace(describe(path.parent.parent, path))


def load_hta(path: Path) -> None:
    from hta.trace_analysis import TraceAnalysis

    with tempfile.TemporaryDirectory() as folder:
        os.symlink(path, Path(folder) / path.name)
        TraceAnalysis(trace_dir=folder)


def side(name: str, files: list[Path], repeats: int) -> dict:
    """Runs inside the subprocess: best wall time over the files, and peak RSS above the post-import RSS."""
    import logging

    logging.disable(logging.WARNING)
    load = load_ours if name == "ours" else load_hta
    if name == "ours":
        sys.path.insert(0, str(HERE.parent))
        import perf_assets.lib.ingest.formats.kineto_trace  # noqa: F401
    else:
        import hta.trace_analysis  # noqa: F401
    base = rss_mib()
    best = best_cpu = float("inf")
    for _ in range(repeats):
        started, started_cpu = time.perf_counter(), time.process_time()
        for path in files:
            load(path)
        best = min(best, time.perf_counter() - started)
        best_cpu = min(best_cpu, time.process_time() - started_cpu)
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    result = {"seconds": best, "cpu_seconds": best_cpu, "peak_mib": peak - base, "base_mib": base}
    if name == "ours":  # which reader path (fast or stdlib) each load took, and the fast path's chunk parser
        from perf_assets.lib.ingest.formats.kineto_trace import PARSERS, PATHS

        result["paths"] = dict(PATHS) | {f"fast with {parser}": count for parser, count in PARSERS.items()}
    return result


def run_side(python: str, name: str, files: list[Path], repeats: int) -> dict:
    command = [python, __file__, "--side", name, "--repeats", str(repeats), *map(str, files)]
    done = subprocess.run(command, capture_output=True, text=True, check=True, cwd=HERE.parent)
    return json.loads(done.stdout.strip().splitlines()[-1])


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--samples",
        type=Path,
        default=Path(os.environ.get("PERFWH_SAMPLES", HERE.parent.parent / "shared" / "samples")),
    )
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--biggest-copies", type=int, default=3)
    parser.add_argument("--side", choices=["ours", "hta"])
    parser.add_argument("files", nargs="*", type=Path)
    args = parser.parse_args()
    if args.side:
        print(json.dumps(side(args.side, args.files, args.repeats)))
        return 0
    reference = json.loads((HERE / "hta_reference.json").read_text())["traces"]
    names = sorted(name for name, figures in reference.items() if "error" not in figures)
    files = [(args.samples / "kineto" / name).resolve() for name in names]
    biggest = max(files, key=lambda path: path.stat().st_size)
    files += [biggest] * (args.biggest_copies - 1)
    events = sum(len(json.loads(gzip.open(path).read())["traceEvents"]) for path in files)
    print(f"{len(files)} trace loads ({len(names)} files, {biggest.name} x{args.biggest_copies}), {events} events")
    results = {}
    for name, python in (("ours", sys.executable), ("hta_load", HTA_PYTHON)):
        results[name] = run_side(python, "ours" if name == "ours" else "hta", files, args.repeats)
        rate = events / results[name]["seconds"]
        print(
            f"{name:8s} {results[name]['seconds']:7.3f} s ({results[name]['cpu_seconds']:.3f} s CPU)  {rate:12,.0f} events/s  "
            f"peak memory {results[name]['peak_mib']:7.1f} MiB above {results[name]['base_mib']:.0f} MiB after imports"
        )
        if "paths" in results[name]:
            print(f"         reader paths: {', '.join(f'{k} {v}' for k, v in sorted(results[name]['paths'].items()))}")
    ratio = results["hta_load"]["seconds"] / results["ours"]["seconds"]
    cpu_ratio = results["hta_load"]["cpu_seconds"] / results["ours"]["cpu_seconds"]
    word = "faster" if ratio >= 1 else "slower"
    print(
        f"ours is {ratio if ratio >= 1 else 1 / ratio:.1f}x {word} than hta_load ({cpu_ratio:.1f}x in CPU time), "
        f"peak memory {results['ours']['peak_mib']:.1f} vs {results['hta_load']['peak_mib']:.1f} MiB; "
        f"load average {os.getloadavg()[0]:.1f}"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
