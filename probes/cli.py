"""``python -m probes gemm --out-dir LANDING_ROOT --cluster NAME``: run a probe, land its JSON lines.

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
    return parser


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
