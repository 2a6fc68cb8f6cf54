"""Simulator generation speed (GPU-days per second) and peak memory at two sizes.

Sizes: the `demo` scenario (64 GPUs x 14 days = 896 GPU-days) and the demo with 4x the nodes per
cluster (256 GPUs x 14 days = 3,584 GPU-days). Each size runs in its own subprocess so that its peak
memory (max RSS, from `os.wait4`) is its own; the RSS includes the interpreter and imports (numpy,
pandas, pyarrow), measured alone as `imports only`. Time is the `simulate()` call only, best of
`--repeats` runs. Files are written into a temporary folder that is deleted. The last line compares
the cost per GPU-day at 4x size with the small size's: ~1.0x means cost grows linearly. A third
run simulates the first `--fleet-days` days of `fleet-1k` (whole incident catalogue, seven DCGM fields,
the hbm probe) and extrapolates its landed size and time to the scenario's 30 days.
Run: `.venv/bin/python bench/bench_simulate.py [--seed 7] [--repeats 2] [--scale 4]`.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from dataclasses import replace
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))


FLEET = -1  # child "scale" of the fleet-1k run


def scaled_demo(scale: int, fleet_days: int = 2):
    from perf_assets.lib.simulate.scenario import get_scenario

    if scale == FLEET:
        fleet = get_scenario("fleet-1k")
        return replace(fleet, name=f"fleet-1k-{fleet_days}d", days=fleet_days)
    demo = get_scenario("demo")
    if scale == 1:
        return demo
    clusters = tuple(replace(cluster, n_nodes=cluster.n_nodes * scale) for cluster in demo.clusters)
    return replace(demo, name=f"demo-x{scale}-nodes", clusters=clusters)


def child(scale: int, seed: int, repeats: int, out: Path, fleet_days: int) -> None:
    """Runs in the subprocess: simulate, print one JSON line."""
    if scale == 0:  # imports only, for the RSS floor
        import perf_assets.lib.simulate  # noqa: F401

        print(json.dumps({"scale": 0}))
        return
    from perf_assets.lib.paths import data_home
    from perf_assets.lib.simulate import simulate

    scenario = scaled_demo(scale, fleet_days)
    best = float("inf")
    for index in range(repeats):
        home = out / f"run{index}"
        started = time.perf_counter()
        result = simulate(data_home(home), scenario, seed=seed)
        best = min(best, time.perf_counter() - started)
        shutil.rmtree(home)
    gpus = sum(cluster.n_nodes * cluster.gpus_per_node for cluster in scenario.clusters)
    print(
        json.dumps(
            {
                "scale": scale,
                "scenario": scenario.name,
                "gpus": gpus,
                "days": scenario.days,
                "gpu_days": gpus * scenario.days,
                "seconds": best,
                "bytes": result.size_bytes,
                "files": len(result.files),
            }
        )
    )


def run_child(scale: int, seed: int, repeats: int, out: Path, fleet_days: int = 2) -> dict:
    command = [sys.executable, __file__, "--child", str(scale), "--seed", str(seed), "--repeats", str(repeats)]
    command += ["--fleet-days", str(fleet_days)]
    process = subprocess.Popen([*command, "--out", str(out)], stdout=subprocess.PIPE, cwd=ROOT)
    stdout = process.stdout.read()
    _, status, usage = os.wait4(process.pid, 0)
    process.returncode = os.waitstatus_to_exitcode(status)
    if process.returncode != 0:
        raise SystemExit(f"child for scale {scale} failed with {process.returncode}")
    row = json.loads(stdout.decode().strip().splitlines()[-1])
    row["max_rss_mib"] = usage.ru_maxrss / 1024  # Linux: KiB
    return row


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seed", type=int, default=7)
    parser.add_argument("--repeats", type=int, default=2)
    parser.add_argument("--scale", type=int, default=4, help="node multiplier of the large size")
    parser.add_argument("--fleet-days", type=int, default=2, help="days of fleet-1k simulated (0: skip)")
    parser.add_argument("--child", type=int, default=None, help=argparse.SUPPRESS)
    parser.add_argument("--out", type=Path, default=None, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child is not None:
        child(args.child, args.seed, args.repeats, args.out, args.fleet_days)
        return

    tmp = Path(tempfile.mkdtemp(prefix="bench_simulate_"))
    try:
        floor = run_child(0, args.seed, 1, tmp)
        rows = [run_child(scale, args.seed, args.repeats, tmp / f"x{scale}") for scale in (1, args.scale)]
        if args.fleet_days:
            rows.append(run_child(FLEET, args.seed, 1, tmp / "fleet", args.fleet_days))
    finally:
        shutil.rmtree(tmp, ignore_errors=True)

    print(f"simulator bench: seed {args.seed}, best of {args.repeats}, cpus {os.cpu_count()}")
    print(f"imports only: max RSS {floor['max_rss_mib']:.0f} MiB")
    header = f"{'scenario':<16} {'GPUs':>5} {'days':>4} {'GPU-days':>8} {'seconds':>8} {'GPU-days/s':>10}"
    print(f"{header} {'MB written':>10} {'KB/GPU-day':>10} {'max RSS MiB':>11}")
    for row in rows:
        row["speed"] = row["gpu_days"] / row["seconds"]
        print(
            f"{row['scenario']:<16} {row['gpus']:>5} {row['days']:>4} {row['gpu_days']:>8} {row['seconds']:>8.2f}"
            f" {row['speed']:>10.0f} {row['bytes'] / 1e6:>10.1f} {row['bytes'] / row['gpu_days'] / 1e3:>10.1f}"
            f" {row['max_rss_mib']:>11.0f}"
        )
    small, large = rows[:2]
    ratio = (large["seconds"] / large["gpu_days"]) / (small["seconds"] / small["gpu_days"])
    size = large["gpu_days"] / small["gpu_days"]
    print(f"cost per GPU-day at {size:.0f}x size is {ratio:.2f}x the small size's")
    if len(rows) > 2:
        fleet = rows[2]
        scale = 30 / fleet["days"]
        print(
            f"fleet-1k (1,024 GPUs x 30 days = 30,720 GPU-days, catalogue, 7 DCGM fields) extrapolates from "
            f"{fleet['days']} days to ~{fleet['bytes'] * scale / 1e9:.2f} GB landed in ~{fleet['seconds'] * scale:.0f} s"
        )


if __name__ == "__main__":
    main()
