"""``python -m probes gemm --out-dir LANDING_ROOT --cluster NAME``: run a probe, land its JSON lines;
``python -m probes run --out-dir LANDING_ROOT --cluster NAME [--probe NAME ...] [--quick]``: the catalogue (or a
subset), one file; ``--pipes`` when a Dagster Pipes client started it.

The file goes to ``landing_path(LANDING_ROOT, cluster, node, started_at)``, i.e.
``LANDING_ROOT/probe_results/<cluster>/<yyyy-mm-dd>/<node>__-__-__<ts>.jsonl``; point ``--out-dir`` at
the ``landing/`` folder under PERFWH_HOME (or a folder shipped there). Prints the path, then one line
with the result. Exit status: 0 when the result was written with status pass or fail, 1 when the probe
itself errored (the row is written all the same), 2 for bad arguments.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Sequence

from probes.backends import CHOICES, hostname, select_backend
from probes.gemm import DTYPES, run_gemm
from probes.records import ProbeResult, landing_path, utc_now, write_jsonl


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="python -m probes", description="GPU probes for the fleet performance warehouse."
    )
    commands = parser.add_subparsers(dest="command", required=True, metavar="PROBE")
    gemm = commands.add_parser(
        "gemm",
        help="dense matmul throughput (TFLOP/s)",
        description="Dense square matmul throughput. Defaults: size 8192, 50 iterations, 2 s warm-up on a GPU; "
        "1024, 20 and 0.5 s on the CPU (numpy runs bf16/fp16/tf32 as fp32).",
    )
    gemm.add_argument(
        "--out-dir", required=True, type=Path, help="landing root (the landing/ folder under PERFWH_HOME)"
    )
    gemm.add_argument("--cluster", required=True, help="cluster name (folder under probe_results/)")
    gemm.add_argument("--node", default=None, help="node name (default: this host's short name)")
    gemm.add_argument("--dtype", default="bf16", choices=DTYPES, help="default: bf16")
    gemm.add_argument("--size", type=int, default=None, help="matrix size n (n x n x n)")
    gemm.add_argument("--iterations", type=int, default=None, help="timed iterations")
    gemm.add_argument("--warmup-s", type=float, default=None, help="warm-up seconds")
    gemm.add_argument("--seed", type=int, default=0, help="input seed (default: 0)")
    gemm.add_argument(
        "--backend", default="auto", choices=CHOICES, help="default: auto (CUDA, else torch CPU, else numpy)"
    )
    gemm.add_argument("--gpu-index", type=int, default=0, help="CUDA device index (default: 0)")
    add_run_parser(commands)
    return parser


def add_run_parser(commands: argparse._SubParsersAction) -> None:
    run = commands.add_parser(
        "run",
        help="run the catalogue (or --probe NAME ...) on one device and land one JSON-lines file",
        description="Runs health (before/after) around launch_latency, hbm_stream, host_device_copy, gemm (every "
        "dtype), p2p_copy, allreduce and burn_soak on one GPU (or the CPU: GPU-only probes write skipped rows), "
        "re-runs a probe once when it fails its own verdict, and lands every row in one file.",
    )
    run.add_argument("--all", action="store_true", help="the whole catalogue (the default without --probe)")
    add_selection_arguments(run)
    run.add_argument("--out-dir", required=True, type=Path, help="landing root (the landing/ folder under PERFWH_HOME)")
    run.add_argument("--cluster", required=True, help="cluster name (folder under probe_results/)")
    run.add_argument("--node", default=None, help="node name (default: this host's short name)")
    run.add_argument("--backend", default="auto", choices=CHOICES, help="default: auto")
    run.add_argument("--gpu-index", type=int, default=0, help="CUDA device index (default: 0)")
    run.add_argument(
        "--pipes",
        action="store_true",
        help="report to Dagster over Pipes (needs dagster-pipes; started by a Pipes client, not by hand)",
    )


def add_selection_arguments(parser: argparse.ArgumentParser) -> None:
    """--probe, --gemm-dtype, --gemm-size, --burn-seconds, --quick, --no-confirm (shared with ``perfwh probe``)."""
    from probes.suite import SELECTABLE  # noqa: PLC0415 - keeps `gemm --help` light

    parser.add_argument(
        "--probe",
        action="append",
        choices=SELECTABLE,
        metavar="NAME",
        help=f"run only this probe (repeatable; one of {', '.join(SELECTABLE)}; default: all but roofline_sweep)",
    )
    parser.add_argument(
        "--gemm-dtype", action="append", choices=DTYPES, metavar="DTYPE", help="GEMM dtype (repeatable; default: all)"
    )
    parser.add_argument("--gemm-size", type=int, default=None, help="default: 8192 (bf16/fp16/fp8) or 4096 on a GPU")
    parser.add_argument("--burn-seconds", type=float, default=None, help="default: 30 on a GPU, 2 on the CPU")
    parser.add_argument("--quick", action="store_true", help="tiny sizes and few iterations (smoke tests)")
    parser.add_argument("--no-confirm", action="store_true", help="do not re-run a probe that failed its own verdict")


def suite_options(args: argparse.Namespace):
    from probes.suite import DEFAULT, SuiteOptions  # noqa: PLC0415

    return SuiteOptions(
        gemm_dtypes=tuple(args.gemm_dtype or DTYPES),
        gemm_size=args.gemm_size,
        burn_seconds=args.burn_seconds,
        quick=args.quick,
        probes=tuple(args.probe or DEFAULT),
        confirm=not args.no_confirm,
    )


def progress_bar(stream=None, width: int = 24):
    """A progress callback: a redrawn bar on a terminal, one line per step otherwise (logs, Pipes)."""
    stream = stream or sys.stderr
    tty = stream.isatty()

    def show(done: int, total: int, name: str) -> None:
        filled = int(width * done / total) if total else width
        bar = "#" * filled + "-" * (width - filled)
        text = f"[{bar}] {done}/{total} {name}"
        if tty:
            stream.write("\r" + text.ljust(width + 48) + ("\n" if name == "done" else ""))
        else:
            stream.write(text + "\n")
        stream.flush()

    return show


def table(results: Sequence[ProbeResult]) -> str:
    """One line per row: probe, metric, value ± CI half-width, fraction of peak, throttle class, status."""
    lines = []
    for r in results:
        if r.value is None:
            figure = "NULL"
        elif r.ci_low is not None and r.ci_high is not None:
            figure = f"{r.value:.4g} [{r.ci_low:.4g}, {r.ci_high:.4g}]"
        else:
            figure = f"{r.value:.4g}"
        frac = f"{r.fraction_of_peak:.1%}" if r.fraction_of_peak is not None else "-"
        why = f"  ({r.reason})" if r.reason and r.status != "pass" else ""
        lines.append(
            f"{r.probe:<16} {r.metric:<32} {figure:>30} {r.unit:<9} {frac:>7} {r.throttle_class or '-':<14} {r.status}{why}"
        )
    return "\n".join(lines)


def run_suite(args: argparse.Namespace) -> int:
    from probes.common import new_run  # noqa: PLC0415 - keeps `gemm --help` light
    from probes.suite import run_all  # noqa: PLC0415

    node = args.node or hostname()
    started_at = utc_now()
    try:
        target = landing_path(args.out_dir, args.cluster, node, started_at)
        backend = select_backend(args.backend, args.gpu_index)
        options = suite_options(args)
    except (ValueError, RuntimeError) as error:
        print(f"error: {error}", file=sys.stderr)
        return 2
    info = new_run(backend, node=node, started_at=started_at)
    if args.pipes:
        from probes.pipes_report import run_reporting_to_dagster  # noqa: PLC0415 - needs dagster-pipes

        return run_reporting_to_dagster(info, options, target, progress_bar())
    results = run_all(info, options, progress=progress_bar())
    write_jsonl(results, target)
    print(target)
    print(table(results))
    return 1 if any(r.status == "error" for r in results) else 0


def describe(result: ProbeResult) -> str:
    """One line: metric, value, CI, device, verdict."""
    where = f"{result.device_kind} ({result.context.get('backend')}, {result.context.get('device_name')})"
    if result.value is None:
        return f"{result.probe} {result.metric}: no value on {where}; status={result.status}: {result.reason}"
    line = (
        f"{result.probe} {result.metric} = {result.value:.4g} {result.unit} "
        f"[95% CI {result.ci_low:.4g}, {result.ci_high:.4g}; n={result.n}] on {where}"
    )
    if result.fraction_of_peak is not None:
        line += f", {result.fraction_of_peak:.1%} of {result.peak:g} peak"
    line += f"; status={result.status}"
    return line + (f" ({result.reason})" if result.reason else "")


def main(argv: Sequence[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    if args.command == "run":
        return run_suite(args)
    node = args.node or hostname()
    started_at = utc_now()
    try:
        target = landing_path(args.out_dir, args.cluster, node, started_at)
        backend = select_backend(args.backend, args.gpu_index)
    except (ValueError, RuntimeError) as error:
        print(f"error: {error}", file=sys.stderr)
        return 2
    result = run_gemm(
        dtype=args.dtype,
        size=args.size,
        iterations=args.iterations,
        warmup_s=args.warmup_s,
        seed=args.seed,
        backend=backend,
        node=node,
        started_at=started_at,
    )
    write_jsonl([result], target)
    print(target)
    print(describe(result))
    return 1 if result.status == "error" else 0
