"""Load: `fleet-1k` end to end, time and peak memory per layer, at two window lengths.

Layers, each a `perfwh` subprocess on the same data home (the way an operator runs them):

  simulate   perfwh simulate --scenario fleet-1k --seed S --days D
  ingest     perfwh build --select group:raw                      (landing -> Parquet lake + manifest)
  dbt        perfwh build --select 'group:staging or group:intermediate or group:marts'
  detection  perfwh build --select group:detection                (change points on every series)
  alerts     perfwh build --select 'group:alerts or group:evaluation'

CPU seconds (user + system of the layer's process and every descendant it waited for, from `os.wait4`)
are printed next to the wall time, with the load average while it ran: on a shared machine the wall time
grows with the other work, the CPU time hardly does; alone on 2 cores a layer takes at least its CPU time / 2
(both cores busy all along), and about its CPU time where it runs on one core without waiting.
Peak memory is the largest resident set of the process tree (every descendant, dbt and DuckDB
included), sampled from /proc every 0.2 s, and also the largest single process from `os.wait4`.
Run at two window lengths, it prints each layer's cost per GPU-day at the longer window as a ratio
of the shorter one's (in CPU time, which the machine's other load hardly moves): about 1.0 means the layer grows linearly with GPUs × days, below 1.0 that a
fixed cost (imports, dbt parse, the Dagster run) dominates. The goal (issue 9) is the whole of
`fleet-1k` (1,024 GPUs, 30 days) in under 10 minutes and under 8 GiB on 2 cores.

Run: `.venv/bin/python bench/bench_fleet_load.py [--days 7 30] [--seed 1] [--work /tmp/perfwh-load]`.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import threading
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PERFWH = Path(sys.executable).with_name("perfwh")
LAYERS = (
    ("ingest", "group:raw"),
    ("dbt", "group:staging or group:intermediate or group:marts"),
    ("detection", "group:detection"),
    ("alerts", "group:alerts or group:evaluation"),
)


def tree_rss_bytes(root_pid: int) -> int:
    """Resident bytes of a process and all its descendants, from /proc."""
    children: dict[int, list[int]] = {}
    rss: dict[int, int] = {}
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat") as handle:
                fields = handle.read().rsplit(")", 1)[1].split()
            pid, ppid = int(entry), int(fields[1])
            rss[pid] = int(fields[21]) * os.sysconf("SC_PAGE_SIZE")
            children.setdefault(ppid, []).append(pid)
        except (OSError, IndexError, ValueError):
            continue
    total, stack = 0, [root_pid]
    while stack:
        pid = stack.pop()
        total += rss.get(pid, 0)
        stack.extend(children.get(pid, []))
    return total


def run_layer(command: list[str], env: dict, log: Path) -> dict:
    """Run one layer; wall seconds, peak tree RSS (sampled) and the largest single process (wait4)."""
    with open(log, "ab") as out:
        started = time.perf_counter()
        process = subprocess.Popen(command, env=env, stdout=out, stderr=subprocess.STDOUT, cwd=ROOT)
        peak = [0]
        loads: list[float] = []
        done = threading.Event()

        def sample() -> None:
            while not done.is_set():
                peak[0] = max(peak[0], tree_rss_bytes(process.pid))
                loads.append(os.getloadavg()[0])
                done.wait(0.2)

        sampler = threading.Thread(target=sample, daemon=True)
        sampler.start()
        _, status, usage = os.wait4(process.pid, 0)
        wall = time.perf_counter() - started
        done.set()
        sampler.join()
    return {
        "wall_s": wall,
        "peak_tree_mib": peak[0] / 2**20,
        "peak_process_mib": usage.ru_maxrss / 1024,
        "cpu_s": usage.ru_utime + usage.ru_stime,
        "mean_load_1m": sum(loads) / len(loads) if loads else os.getloadavg()[0],
        "ok": os.waitstatus_to_exitcode(status) == 0,
    }


def run_size(days: int, seed: int, work: Path) -> dict:
    home = work / f"days{days}"
    shutil.rmtree(home, ignore_errors=True)
    home.mkdir(parents=True)
    env = dict(os.environ, PERFWH_HOME=str(home))
    env.pop("DAGSTER_HOME", None)
    log = work / f"days{days}.log"
    layers = {
        "simulate": run_layer(
            [str(PERFWH), "simulate", "--scenario", "fleet-1k", "--seed", str(seed), "--days", str(days)], env, log
        )
    }
    for name, selection in LAYERS:
        layers[name] = run_layer([str(PERFWH), "build", "--quiet", "--select", selection], env, log)
    landed = sum(path.stat().st_size for path in (home / "landing").rglob("*") if path.is_file())
    return {"days": days, "gpu_days": 1024 * days, "landed_bytes": landed, "layers": layers}


def print_one(size: dict, seed: int) -> None:
    print(f"fleet-1k seed {seed}: 1,024 GPUs at {size['days']} days")
    print("| layer | wall s | CPU s | load | peak tree MiB | largest process MiB | ok |")
    print("|---|---|---|---|---|---|---|")
    for name, a in size["layers"].items():
        print(
            f"| {name} | {a['wall_s']:.1f} | {a['cpu_s']:.1f} | {a['mean_load_1m']:.1f} | {a['peak_tree_mib']:.0f} | "
            f"{a['peak_process_mib']:.0f} | {a['ok']} |"
        )


def print_two(short: dict, long: dict, seed: int) -> None:
    print(f"fleet-1k seed {seed}: 1,024 GPUs at {short['days']} and {long['days']} days")
    print(
        "| layer | wall s | CPU s | load | peak tree MiB | largest process MiB | ok "
        "| wall s | CPU s | load | peak tree MiB | ok | CPU per GPU-day, long / short |"
    )
    print("|---|---|---|---|---|---|---|---|---|---|---|---|---|")
    for name in short["layers"]:
        a, b = short["layers"][name], long["layers"][name]
        ratio = (b["cpu_s"] / long["gpu_days"]) / (a["cpu_s"] / short["gpu_days"])
        print(
            f"| {name} | {a['wall_s']:.1f} | {a['cpu_s']:.1f} | {a['mean_load_1m']:.1f} | {a['peak_tree_mib']:.0f} | "
            f"{a['peak_process_mib']:.0f} | {a['ok']} | {b['wall_s']:.1f} | {b['cpu_s']:.1f} | "
            f"{b['mean_load_1m']:.1f} | {b['peak_tree_mib']:.0f} | {b['ok']} | {ratio:.2f} |"
        )


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument(
        "--days", type=int, nargs="+", default=[7, 30], metavar="DAYS", help="one window length, or two (short, long)"
    )
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--work", type=Path, default=Path("/tmp/perfwh-load"))
    parser.add_argument("--json", type=Path, default=None)
    args = parser.parse_args()
    args.work.mkdir(parents=True, exist_ok=True)
    subprocess.run([str(PERFWH), "--help"], check=True, capture_output=True)  # fail early without the CLI

    if len(args.days) > 2:
        parser.error("--days takes one or two window lengths")
    sizes = [run_size(days, args.seed, args.work) for days in sorted(args.days)]
    short, long = sizes[0], sizes[-1]
    if len(sizes) == 1:
        print_one(short, args.seed)
    else:
        print_two(short, long, args.seed)
    for size in sizes:
        total = sum(layer["wall_s"] for layer in size["layers"].values())
        cpu = sum(layer["cpu_s"] for layer in size["layers"].values())
        peak = max(layer["peak_tree_mib"] for layer in size["layers"].values())
        print(
            f"{size['days']} days: {total:.0f} s end to end ({cpu:.0f} CPU s: alone on 2 cores at least "
            f"{cpu / 2:.0f} s), peak {peak:.0f} MiB, landed {size['landed_bytes'] / 2**30:.2f} GiB "
            "(goal at 30 days: < 600 s, < 8,192 MiB)"
        )
    if args.json:
        args.json.write_text(json.dumps(sizes, indent=2) + "\n")
    return 0 if all(layer["ok"] for size in sizes for layer in size["layers"].values()) else 1


if __name__ == "__main__":
    raise SystemExit(main())
