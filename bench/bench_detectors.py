"""Change-point detectors on the same labeled series: ours, Apache Otava and ruptures PELT. A script, not a test.

    make bench-detectors        # creates bench/.venvs/{otava,ruptures} if missing, then runs this
    .venv/bin/python bench/bench_detectors.py --otava-python bench/.venvs/otava/bin/python \\
        --ruptures-python bench/.venvs/ruptures/bin/python [--per-family 100] [--tune-per-family 40] [--out PATH]

Protocol (docs/benchmarks.md has the long form):

1. Series from bench/detector_series.py: ``--tune-per-family`` of each family on the TUNING seed and
   ``--per-family`` on the HELD-OUT seed. Every detector sees exactly the same values.
2. Tuning: every detector's thresholds are chosen on the tuning series only, by the best overall F1
   over a small stated grid (ties: the first in grid order). Otava is also reported with its own defaults
   and ours with ``DetectorConfig(max_qvalue=None)``; ruptures has no default penalty, so only its tuned ``c``.
   Ours tests each series alone (``max_qvalue=None``, no BH across the benchmark's series), as the competitors do.
   ``ours_tuned_fast`` is ours_tuned with ``n_permutations = max(99, 10 / max_pvalue - 1)``.
3. Held-out: each chosen setting runs ``--repeats`` times over all held-out series (fastest kept). Ours runs in this process
   (``detect_change_points`` with denominators of ones; batched as one NaN-padded matrix, and once more
   one call per series); Otava and ruptures run in their own venvs through bench/runners/*.py, one
   process per setting for all series, fed JSON lines. "detect s" sums the detection calls only; "wall
   s" adds interpreter start and imports (for ours: a cold ``python -c 'import ...changepoint'`` measured
   once, plus the batched detection).
4. Scoring: a detection matches a true change within +-``--tolerance`` (2) points, one to one
   (maximum matching on the line); precision, recall and F1 overall and per family; "false-alarm
   series" is the share of series without a true change that got any detection. A paired bootstrap over
   series gives 95 % intervals of F1 and of F1 differences between ours and each competitor.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import subprocess
import sys
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path

import numpy as np
import scipy

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from bench.detector_series import FAMILIES, HELD_OUT_SEED, TUNING_SEED, LabeledSeries, generate  # noqa: E402
from perf_assets.lib.changepoint import DetectorConfig, detect_change_points  # noqa: E402

RUNNERS = ROOT / "bench" / "runners"
#: A false positive this close to a true change counts as a near miss (mislocated) in the diagnostics.
NEAR_MISS = 6

# Tuning grids (chosen on the tuning seed only). Each grid was widened until its best setting was not on an edge
# that could move (a first run had ours and Otava best at a corner of smaller grids).
# Ours tests each series alone (max_qvalue None: no Benjamini-Hochberg across the benchmark's series), as the
# competitors do; with BH on, a series' result would depend on which other series share the call.
OURS_GRID = [
    {"max_pvalue": p, "min_relative_effect": e, "max_qvalue": None}
    for p in (0.001, 0.01, 0.05, 0.1, 0.2)
    for e in (0.0, 0.02, 0.03, 0.04, 0.05)
]
OTAVA_GRID = [
    {"window_len": 50, "max_pvalue": p, "min_magnitude": m}
    for p in (1e-6, 1e-5, 1e-4, 1e-3, 1e-2)
    for m in (0.0, 0.01, 0.02, 0.03, 0.04)
]
PELT_L2_GRID = [{"model": "l2", "c": c, "min_size": 3, "jump": 1} for c in (2.0, 4.0, 6.0, 8.0, 10.0, 12.0, 16.0)]
PELT_RBF_GRID = [{"model": "rbf", "c": c, "min_size": 3, "jump": 1} for c in (0.5, 0.75, 1.0, 1.5, 2.0)]


def match_count(truth: list[int], found: list[int], tolerance: int) -> tuple[int, list[int]]:
    """Largest one-to-one matching of ``found`` to ``truth`` with ``|t - d| <= tolerance``; (count, offsets).

    Both sorted; the two-pointer sweep is optimal because every true change's window has the same width.
    """
    truth, found = sorted(truth), sorted(found)
    i = j = 0
    offsets: list[int] = []
    while i < len(truth) and j < len(found):
        d = found[j] - truth[i]
        if abs(d) <= tolerance:
            offsets.append(d)
            i += 1
            j += 1
        elif d < 0:
            j += 1
        else:
            i += 1
    return len(offsets), offsets


@dataclass
class Score:
    series: int = 0
    tp: int = 0
    fp: int = 0
    fn: int = 0
    null_series: int = 0  # series without a true change
    false_alarm_series: int = 0  # of those, with any detection
    abs_offset_sum: int = 0
    fp_near: int = 0  # false positives within NEAR_MISS points of a true change (mislocated, not spurious)

    def add(self, truth: list[int], found: list[int], tolerance: int) -> None:
        tp, offsets = match_count(truth, found, tolerance)
        self.series += 1
        self.tp += tp
        self.fp += len(found) - tp
        self.fn += len(truth) - tp
        self.abs_offset_sum += sum(abs(o) for o in offsets)
        self.fp_near += min(len(found) - tp, sum(any(abs(d - t) <= NEAR_MISS for t in truth) for d in found) - tp)
        if not truth:
            self.null_series += 1
            self.false_alarm_series += bool(found)

    def summary(self) -> dict[str, float | int | None]:
        precision = self.tp / (self.tp + self.fp) if self.tp + self.fp else None
        recall = self.tp / (self.tp + self.fn) if self.tp + self.fn else None
        if self.tp + self.fp + self.fn == 0:
            f1 = None  # nothing true, nothing found
        else:
            f1 = 2 * self.tp / (2 * self.tp + self.fp + self.fn)
        return {
            "series": self.series,
            "tp": self.tp,
            "fp": self.fp,
            "fn": self.fn,
            "precision": precision,
            "recall": recall,
            "f1": f1,
            "false_alarm_series_rate": self.false_alarm_series / self.null_series if self.null_series else None,
            "mean_abs_offset": self.abs_offset_sum / self.tp if self.tp else None,
            "fp_near_miss": self.fp_near,
        }


def score(series: list[LabeledSeries], found: dict[str, list[int]], tolerance: int) -> dict[str, dict]:
    overall = Score()
    by_family: dict[str, Score] = {}
    for s in series:
        truth, got = list(s.changes), found[s.key]
        overall.add(truth, got, tolerance)
        by_family.setdefault(s.family, Score()).add(truth, got, tolerance)
    return {"overall": overall.summary(), "families": {f: sc.summary() for f, sc in by_family.items()}}


def diagnostics(series: list[LabeledSeries], found: dict[str, list[int]], tolerance: int) -> dict[str, dict]:
    """Recall of two_steps by sign pattern (a bump vs a staircase) and of single steps by magnitude."""
    counts: dict[str, dict[str, list[int]]] = {}  # group -> label -> [true, matched]
    for s in series:
        tp, _ = match_count(list(s.changes), found[s.key], tolerance)
        if s.family == "two_steps":
            label = "opposite_sign" if s.effects[0] * s.effects[1] < 0 else "same_sign"
            group = "two_steps_recall_by_sign"
        elif len(s.changes) == 1 and not s.family.startswith("step_"):
            label = f"{abs(s.effects[0]):.2f}"
            group = f"{s.family}_recall_by_magnitude"
        else:
            continue
        cell = counts.setdefault(group, {}).setdefault(label, [0, 0])
        cell[0] += len(s.changes)
        cell[1] += tp
    return {g: {k: v[1] / v[0] for k, v in sorted(d.items())} for g, d in counts.items()}


def per_series_counts(series: list[LabeledSeries], found: dict[str, list[int]], tolerance: int) -> np.ndarray:
    """(n_series, 3) array of tp, fp, fn, for the bootstrap."""
    rows = []
    for s in series:
        tp, _ = match_count(list(s.changes), found[s.key], tolerance)
        rows.append((tp, len(found[s.key]) - tp, len(s.changes) - tp))
    return np.asarray(rows, dtype=float)


def bootstrap_f1(counts: dict[str, np.ndarray], ours: list[str], resamples: int, seed: int) -> dict[str, dict]:
    """Paired bootstrap over series (the same resampled series for every detector): 95 % intervals of each
    detector's overall F1 and of ``F1(ours) - F1(other)`` for each of ``ours``."""
    names = list(counts)
    n = next(iter(counts.values())).shape[0]
    idx = np.random.default_rng(seed).integers(0, n, (resamples, n))
    f1 = {}
    for name in names:
        sums = counts[name][idx].sum(axis=1)  # (resamples, 3)
        f1[name] = 2 * sums[:, 0] / np.maximum(2 * sums[:, 0] + sums[:, 1] + sums[:, 2], 1.0)
    out: dict[str, dict] = {
        "f1_ci95": {k: [float(np.quantile(v, 0.025)), float(np.quantile(v, 0.975))] for k, v in f1.items()}
    }
    out["f1_difference_ci95"] = {
        f"{a} - {b}": [float(np.quantile(f1[a] - f1[b], 0.025)), float(np.quantile(f1[a] - f1[b], 0.975))]
        for a in ours
        for b in names
        if not b.startswith("ours")
    }
    out["resamples"] = resamples
    return out


def fast_permutations(max_pvalue: float) -> int:
    """Permutations for the fast variant of ours: p-value resolution a tenth of ``max_pvalue``, at least 99."""
    return max(99, round(10.0 / max_pvalue) - 1)


# --- ours, in process ------------------------------------------------------------------------------------------


def _matrix(series: list[LabeledSeries]) -> tuple[np.ndarray, np.ndarray]:
    """Series as rows of one NaN-padded matrix; denominators are ones (NaN where padded)."""
    width = max(len(s.values) for s in series)
    num = np.full((len(series), width), np.nan)
    for i, s in enumerate(series):
        num[i, : len(s.values)] = s.values
    den = np.where(np.isnan(num), np.nan, 1.0)
    return num, den


def run_ours_batched(series: list[LabeledSeries], config: DetectorConfig) -> tuple[dict[str, list[int]], float]:
    num, den = _matrix(series)
    t0 = time.perf_counter()
    cps = detect_change_points(num, den, config)
    seconds = time.perf_counter() - t0
    found: dict[str, list[int]] = {s.key: [] for s in series}
    for cp in cps:
        found[series[cp.series_index].key].append(cp.index)
    return found, seconds


def run_ours_per_series(series: list[LabeledSeries], config: DetectorConfig) -> tuple[dict[str, list[int]], float]:
    found: dict[str, list[int]] = {}
    seconds = 0.0
    for s in series:
        num = np.asarray(s.values)
        den = np.ones(num.size)
        t0 = time.perf_counter()
        cps = detect_change_points(num, den, config)
        seconds += time.perf_counter() - t0
        found[s.key] = [cp.index for cp in cps]
    return found, seconds


def ours_cold_start_seconds() -> float:
    """Interpreter start plus ``import perf_assets.lib.changepoint`` in the project venv, measured once."""
    t0 = time.perf_counter()
    subprocess.run(
        [sys.executable, "-c", "import perf_assets.lib.changepoint"],
        check=True,
        cwd=ROOT,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
    )
    return time.perf_counter() - t0


# --- competitors, in their own venvs -----------------------------------------------------------------------------


@dataclass
class RunnerResult:
    header: dict
    found: dict[int, dict[str, list[int]]] = field(default_factory=dict)  # setting number -> key -> changes
    detect_seconds: dict[int, float] = field(default_factory=dict)
    wall_seconds: float = 0.0


def run_runner(python: str, runner: str, series: list[LabeledSeries], settings: list[dict]) -> RunnerResult:
    """One process of ``runner`` under ``python`` for every (setting, series) pair, fed JSON lines."""
    lines = [
        json.dumps({"id": f"{k}|{s.key}", "values": s.values, "params": params})
        for k, params in enumerate(settings)
        for s in series
    ]
    t0 = time.perf_counter()
    proc = subprocess.run(
        [python, str(RUNNERS / runner)],
        input="\n".join(lines) + "\n",
        capture_output=True,
        text=True,
        check=False,
    )
    wall = time.perf_counter() - t0
    if proc.returncode != 0:
        raise SystemExit(f"{runner} failed ({proc.returncode}):\n{proc.stderr[-3000:]}")
    out = proc.stdout.splitlines()
    result = RunnerResult(header=json.loads(out[0]), wall_seconds=wall)
    for line in out[1:]:
        reply = json.loads(line)
        k, key = reply["id"].split("|", 1)
        result.found.setdefault(int(k), {})[key] = reply["changes"]
        result.detect_seconds[int(k)] = result.detect_seconds.get(int(k), 0.0) + reply["seconds"]
    expected = len(series)
    if any(len(result.found.get(k, {})) != expected for k in range(len(settings))):
        raise SystemExit(f"{runner} answered {sum(map(len, result.found.values()))} of {len(lines)} requests")
    return result


# --- the run ------------------------------------------------------------------------------------------------------


def _best(grid: list[dict], f1s: list[float | None]) -> int:
    values = [-1.0 if f is None else f for f in f1s]
    return int(np.argmax(values))  # first of the best in grid order


def tune(args: argparse.Namespace, series: list[LabeledSeries]) -> dict:
    tol = args.tolerance
    tuning: dict[str, dict] = {}

    ours_f1 = []
    for params in OURS_GRID:
        found, _ = run_ours_per_series(series, DetectorConfig(**params))  # same result as batched, faster here
        ours_f1.append(score(series, found, tol)["overall"]["f1"])
    tuning["ours"] = {"grid": OURS_GRID, "f1": ours_f1, "chosen": OURS_GRID[_best(OURS_GRID, ours_f1)]}
    print(f"  ours      : {len(OURS_GRID)} settings, best F1 {max(ours_f1):.3f} with {tuning['ours']['chosen']}")

    for name, python, runner, grid in (
        ("otava", args.otava_python, "otava_runner.py", OTAVA_GRID),
        ("pelt_l2", args.ruptures_python, "ruptures_runner.py", PELT_L2_GRID),
        ("pelt_rbf", args.ruptures_python, "ruptures_runner.py", PELT_RBF_GRID),
    ):
        result = run_runner(python, runner, series, grid)
        f1s = [score(series, result.found[k], tol)["overall"]["f1"] for k in range(len(grid))]
        tuning[name] = {"grid": grid, "f1": f1s, "chosen": grid[_best(grid, f1s)]}
        print(f"  {name:<10}: {len(grid)} settings, best F1 {max(f1s):.3f} with {tuning[name]['chosen']}")
    return tuning


def evaluate(args: argparse.Namespace, series: list[LabeledSeries], tuning: dict) -> tuple[dict, dict]:
    tol = args.tolerance
    results: dict[str, dict] = {}
    versions: dict[str, dict] = {}
    counts: dict[str, np.ndarray] = {}
    cold = ours_cold_start_seconds()

    chosen = tuning["ours"]["chosen"]
    ours_settings = {
        "ours_default": DetectorConfig(max_qvalue=None),  # shipped defaults, each series tested alone
        "ours_tuned": DetectorConfig(**chosen),
        "ours_tuned_fast": DetectorConfig(**chosen, n_permutations=fast_permutations(chosen["max_pvalue"])),
    }
    for name, config in ours_settings.items():
        batched = single = float("inf")
        for _ in range(args.repeats):
            found, seconds = run_ours_batched(series, config)
            batched = min(batched, seconds)
            found_single, seconds = run_ours_per_series(series, config)
            single = min(single, seconds)
            if found_single != found:
                raise SystemExit(f"{name}: batched and per-series calls disagree")
        counts[name] = per_series_counts(series, found, tol)
        results[name] = {
            "settings": {k: v for k, v in asdict(config).items()},
            **score(series, found, tol),
            "diagnostics": diagnostics(series, found, tol),
            "detect_seconds": batched,
            "detect_seconds_per_series_calls": single,
            "wall_seconds": cold + batched,
        }
    versions["ours"] = {"python": platform.python_version(), "numpy": np.__version__, "scipy": scipy.__version__}

    otava_default = {"window_len": 50, "max_pvalue": 0.001, "min_magnitude": 0.0}
    competitors = (
        ("otava_default", args.otava_python, "otava_runner.py", otava_default),
        ("otava_tuned", args.otava_python, "otava_runner.py", tuning["otava"]["chosen"]),
        ("pelt_l2_tuned", args.ruptures_python, "ruptures_runner.py", tuning["pelt_l2"]["chosen"]),
        ("pelt_rbf_tuned", args.ruptures_python, "ruptures_runner.py", tuning["pelt_rbf"]["chosen"]),
    )
    for name, python, runner, params in competitors:
        runs = [run_runner(python, runner, series, [params]) for _ in range(args.repeats)]
        result = runs[0]
        if any(r.found != result.found for r in runs):
            raise SystemExit(f"{name}: repeated runs disagree")
        if result.header.get("defaults") and name == "otava_default" and result.header["defaults"] != params:
            raise SystemExit(f"Otava's defaults are {result.header['defaults']}, not {params}")
        counts[name] = per_series_counts(series, result.found[0], tol)
        results[name] = {
            "settings": params,
            **score(series, result.found[0], tol),
            "diagnostics": diagnostics(series, result.found[0], tol),
            "detect_seconds": min(r.detect_seconds[0] for r in runs),
            "wall_seconds": min(r.wall_seconds for r in runs),
            "import_seconds": result.header.get("import_seconds"),
        }
        versions[runner.split("_")[0]] = {"python": result.header.get("python"), **result.header["versions"]}
    for res in results.values():
        res["series_per_second"] = len(series) / res["detect_seconds"]
        res["series_per_second_wall"] = len(series) / res["wall_seconds"]
        if "detect_seconds_per_series_calls" in res:
            res["series_per_second_per_series_calls"] = len(series) / res["detect_seconds_per_series_calls"]
    boot = bootstrap_f1(counts, [n for n in counts if n.startswith("ours")], resamples=2000, seed=args.held_out_seed)
    return results, versions, boot


def _fmt(x: float | None, digits: int = 3) -> str:
    return "  -  " if x is None else f"{x:.{digits}f}"


def print_tables(results: dict, n_series: int) -> None:
    names = list(results)
    print(f"\nHELD-OUT, {n_series} series; overall (match within +-tolerance, one to one)")
    print(
        f"{'detector':<16}{'P':>7}{'R':>7}{'F1':>7}{'tp':>6}{'fp':>6}{'fn':>6}{'FA-ser':>8}{'series/s':>10}{'s/s wall':>10}"
    )
    for name in names:
        o = results[name]["overall"]
        print(
            f"{name:<16}{_fmt(o['precision']):>7}{_fmt(o['recall']):>7}{_fmt(o['f1']):>7}{o['tp']:>6}{o['fp']:>6}"
            f"{o['fn']:>6}{_fmt(o['false_alarm_series_rate'], 2):>8}{results[name]['series_per_second']:>10.0f}"
            f"{results[name]['series_per_second_wall']:>10.0f}"
        )
    for name in names:
        if "series_per_second_per_series_calls" in results[name]:
            print(f"  {name}: one call per series {results[name]['series_per_second_per_series_calls']:.0f} series/s")
    for metric in ("f1", "precision", "recall"):
        print(f"\nper family: {metric}   (FA-ser = share of change-free series with any detection)")
        print(f"{'family':<12}" + "".join(f"{n:>16}" for n in names))
        for family in FAMILIES:
            row = "".join(f"{_fmt(results[n]['families'][family][metric]):>16}" for n in names)
            print(f"{family:<12}{row}")
    print(f"\nfalse positives within {NEAR_MISS} points of a true change (mislocated) / all false positives")
    print("  " + ", ".join(f"{n} {results[n]['overall']['fp_near_miss']}/{results[n]['overall']['fp']}" for n in names))
    print("\nrecall diagnostics")
    groups = sorted({g for n in names for g in results[n]["diagnostics"]})
    for group in groups:
        labels = sorted({k for n in names for k in results[n]["diagnostics"].get(group, {})})
        for label in labels:
            row = "".join(f"{_fmt(results[n]['diagnostics'].get(group, {}).get(label)):>16}" for n in names)
            print(f"{group + ' ' + label:<44}{row}")
    print("\nper family: false-alarm series rate")
    print(f"{'family':<12}" + "".join(f"{n:>16}" for n in names))
    for family in FAMILIES:
        row = "".join(f"{_fmt(results[n]['families'][family]['false_alarm_series_rate'], 2):>16}" for n in names)
        print(f"{family:<12}{row}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--otava-python", default=str(ROOT / "bench/.venvs/otava/bin/python"))
    parser.add_argument("--ruptures-python", default=str(ROOT / "bench/.venvs/ruptures/bin/python"))
    parser.add_argument("--per-family", type=int, default=100, help="held-out series per family")
    parser.add_argument("--tune-per-family", type=int, default=40, help="tuning series per family")
    parser.add_argument("--tuning-seed", type=int, default=TUNING_SEED)
    parser.add_argument("--held-out-seed", type=int, default=HELD_OUT_SEED)
    parser.add_argument("--tolerance", type=int, default=2, help="points between a detection and its true change")
    parser.add_argument("--repeats", type=int, default=2, help="held-out timing runs per setting (fastest kept)")
    parser.add_argument("--out", default="/tmp/detbench/bench_detectors.json")
    parser.add_argument("--reuse-tuning", help="take the chosen settings from an earlier --out JSON (same seeds)")
    args = parser.parse_args()
    if args.tuning_seed == args.held_out_seed:
        raise SystemExit("the tuning and held-out seeds must differ")

    print(
        f"python {platform.python_version()}, numpy {np.__version__}, scipy {scipy.__version__}, {os.cpu_count()} cpus"
    )
    tuning_series = generate(args.tuning_seed, args.tune_per_family)
    held_out = generate(args.held_out_seed, args.per_family)
    print(f"tuning on seed {args.tuning_seed}: {len(tuning_series)} series ({args.tune_per_family} per family)")
    t0 = time.perf_counter()
    if args.reuse_tuning:
        tuning = json.loads(Path(args.reuse_tuning).read_text())["tuning"]
        print(f"  tuning read from {args.reuse_tuning}: " + ", ".join(f"{k} {v['chosen']}" for k, v in tuning.items()))
    else:
        tuning = tune(args, tuning_series)
        print(f"  tuning took {time.perf_counter() - t0:.0f} s")
    print(f"held-out seed {args.held_out_seed}: {len(held_out)} series ({args.per_family} per family)")
    results, versions, boot = evaluate(args, held_out, tuning)
    print_tables(results, len(held_out))
    print(f"\npaired bootstrap over series ({boot['resamples']} resamples): 95 % intervals")
    for name, (lo, hi) in boot["f1_ci95"].items():
        print(f"  F1 {name:<40} [{lo:.3f}, {hi:.3f}]")
    for name, (lo, hi) in boot["f1_difference_ci95"].items():
        print(f"  F1 {name:<40} [{lo:+.3f}, {hi:+.3f}]")

    report = {
        "protocol": {
            "tolerance": args.tolerance,
            "tuning_seed": args.tuning_seed,
            "held_out_seed": args.held_out_seed,
            "tune_per_family": args.tune_per_family,
            "per_family": args.per_family,
            "families": list(FAMILIES),
            "held_out_series": len(held_out),
            "tuning_objective": "overall F1 on the tuning seed; ties: first in grid order",
            "cpus": os.cpu_count(),
            "load_average_at_end": os.getloadavg(),
            "timing_repeats": args.repeats,
        },
        "versions": versions,
        "tuning": tuning,
        "results": results,
        "bootstrap": boot,
    }
    out = Path(args.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(report, indent=2) + "\n")
    print(f"\nwrote {out}")


if __name__ == "__main__":
    main()
