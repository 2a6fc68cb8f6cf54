"""Incremental dbt build on `fleet-1k`: a full build of D days, then one more day landed and built incrementally.

Steps, on one data home (docs/incremental.md):

  simulate   perfwh simulate --scenario fleet-1k --days D+1 into a side folder; days 1..D are landed
  ingest     perfwh build --select group:raw                       (not part of the dbt figures)
  full       dbt build <window of lib.incremental.plan_window>     (first build: every day, --full-refresh)
  land       day D+1, then perfwh build --select group:raw
  day        dbt build <window>                                    (incremental: day D+1 and the lookback before it)
  day, L=0   dbt build again over day D+1 alone                    (the floor of an added day: what plan_window
                                                                     gives a lookback-0 build after a new day)

An incremental build whose day-local models (dbt tag `day_local`) rebuild fewer days than the rest is two dbt builds
(BuildWindow.dbt_invocations: selector `day_local` from the first changed day, then `after_day_local` over the
lookback window); its figures are their sums, the fixed overhead paid twice included.

Each dbt build runs with one thread, so that its wall time splits exactly into model time (Σ execution_time of the
models in run_results.json, the incremental (microbatch) models apart), data-test time (Σ of the tests) and fixed dbt
overhead (wall − models − tests: start-up, parse, on-run-start, connections, the DAG walk). Ratios are printed against
the full build, the baseline measured in the same run. The goal (issue 6): a day's model time at most a tenth of the
full build's.

Run: `.venv/bin/python bench/bench_incremental.py [--days 7] [--seed 1] [--lookback 2] [--work /tmp/perfwh-incremental]`.

`--compare-full-refresh` then checks the incremental result (after the lookback build, before the day-alone build):
a copy of the home (lake hard-linked, warehouse copied) is built with `--full-refresh` over every lake day, and every
intermediate and mart table is compared with the incremental one (EXCEPT ALL both ways, then within 1e-9 relative for
the tables that differ in the last bits). `--scenario incidents` runs the same on the scenario with restarts.

Simulating and ingesting are no part of the dbt figures, and on fleet-1k they take longer than the builds. They can
be done once: `--ingest-only --work DIR` stops after ingesting days 1..D; `--ingested DIR` then starts from that
folder's simulation and ingested home (hard-linked: landed and lake files are never rewritten in place; the
warehouse is left out, so the full build is a first build).
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import os
import shutil
import subprocess
import sys
import time
from datetime import timedelta
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from perf_assets.lib.build import prepare_dbt_manifest  # noqa: E402
from perf_assets.lib.incremental import (  # noqa: E402
    day_local_lake_tables,
    plan_window,
    project_fingerprint,
    record_build,
)
from perf_assets.lib.paths import DBT_PROJECT_DIR, DataHome  # noqa: E402

BIN = Path(sys.executable).parent


def run(command: list[str], env: dict, log: Path) -> float:
    with open(log, "ab") as out:
        out.write(f"\n$ {' '.join(command)}\n".encode())
        out.flush()
        started = time.perf_counter()
        subprocess.run(command, env=env, stdout=out, stderr=subprocess.STDOUT, cwd=ROOT, check=True)
        return time.perf_counter() - started


def land(simulated: DataHome, home: DataHome, last_day: str, held_back: bool) -> int:
    """Copy the simulated landing files: all but last_day's (held_back False), or only last_day's (True)."""
    count = 0
    for path in sorted(simulated.landing.rglob("*")):
        relative = path.relative_to(simulated.landing)
        if path.is_file() and (last_day in relative.parts) == held_back:
            (home.landing / relative).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(path, home.landing / relative)
            count += 1
    return count


def dbt_build(home: DataHome, env: dict, log: Path, target: Path, lookback: int, last_day_alone: bool = False) -> dict:
    """One dbt build over plan_window's days (or the last lake day alone), timed and split; records the build like the
    Dagster asset does."""
    manifest_path = DBT_PROJECT_DIR / "target" / "manifest.json"
    fingerprint = project_fingerprint(manifest_path)
    window = plan_window(home, fingerprint, lookback=lookback, day_local_tables=day_local_lake_tables(manifest_path))
    if last_day_alone:  # the floor of an added day: the window plan_window gives a lookback-0 build after a new day
        window = dataclasses.replace(window, start=window.end - timedelta(days=1), reason="the last day alone")
    wall, results, manifest = 0.0, [], {}
    invocations = window.dbt_invocations()  # two when the day-local models rebuild fewer days (window.split)
    for number, args in enumerate(invocations):
        where = target if len(invocations) == 1 else target / f"invocation_{number + 1}"
        command = [str(BIN / "dbt"), "build", "--threads", "1", *args]
        command += ["--project-dir", str(DBT_PROJECT_DIR), "--profiles-dir", str(DBT_PROJECT_DIR)]
        command += ["--target-path", str(where), "--log-path", str(where / "logs")]
        wall += run(command, env, log)
        results += json.loads((where / "run_results.json").read_text())["results"]
        manifest.update(json.loads((where / "manifest.json").read_text())["nodes"])
    record_build(home, window, fingerprint)

    def is_microbatch(unique_id: str) -> bool:
        return manifest[unique_id]["config"].get("incremental_strategy") == "microbatch"

    models = [r for r in results if r["unique_id"].startswith("model.")]
    model_s = sum(r["execution_time"] for r in models)
    microbatch_s = sum(r["execution_time"] for r in models if is_microbatch(r["unique_id"]))
    test_s = sum(r["execution_time"] for r in results if r["unique_id"].startswith("test."))
    slowest = sorted(models, key=lambda r: -r["execution_time"])[:8]
    tables = sorted((r for r in models if not is_microbatch(r["unique_id"])), key=lambda r: -r["execution_time"])
    return {
        "window": window.describe(),
        "dbt_builds": len(invocations),
        "nodes": len(results),
        "wall_s": wall,
        "model_s": model_s,
        "microbatch_model_s": microbatch_s,
        "table_model_s": model_s - microbatch_s,
        "test_s": test_s,
        "overhead_s": wall - model_s - test_s,
        "slowest": [(r["unique_id"].split(".")[-1], round(r["execution_time"], 2)) for r in slowest],
        "slowest_tables": [(r["unique_id"].split(".")[-1], round(r["execution_time"], 2)) for r in tables[:10]],
    }


def compare_with_full_refresh(home: DataHome, work: Path, env: dict, log: Path) -> None:
    """Build a copy of home with --full-refresh over every lake day; print each table that differs from home's."""
    rebuilt = DataHome(work / "rebuilt")
    shutil.copytree(home.root, rebuilt.root, copy_function=os.link, ignore=shutil.ignore_patterns("warehouse"))
    rebuilt.ensure()
    window = plan_window(rebuilt, project_fingerprint(DBT_PROJECT_DIR / "target" / "manifest.json"))
    assert window.full_refresh  # no warehouse: every lake day, in the batches a first build takes
    for step in (["seed"], ["run", *window.dbt_args()]):
        command = [
            str(BIN / "dbt"),
            *step,
            "--project-dir",
            str(DBT_PROJECT_DIR),
            "--profiles-dir",
            str(DBT_PROJECT_DIR),
        ]
        command += ["--target-path", str(work / "target_rebuilt"), "--log-path", str(work / "target_rebuilt" / "logs")]
        run(command, dict(env, PERFWH_HOME=str(rebuilt.root)), log)
    compare_warehouses(home.warehouse_db, rebuilt.warehouse_db)


def compare_warehouses(incremental: Path, rebuilt: Path) -> None:
    """Print the intermediate and mart tables that differ between two warehouses."""
    import duckdb

    from perf_assets.lib.engine_equivalence import compare_frames

    con = duckdb.connect()
    con.execute(f"attach '{incremental}' as inc (read_only)")
    con.execute(f"attach '{rebuilt}' as rebuilt (read_only)")
    names = con.execute(
        "select table_schema, table_name from information_schema.tables where table_catalog = 'rebuilt' "
        "and table_type = 'BASE TABLE' and table_schema in ('intermediate', 'main') order by all"
    ).fetchall()
    differing = []
    for schema, name in names:
        table = f'"{schema}"."{name}"'
        columns = con.execute(
            "select column_name from information_schema.columns where table_catalog = 'rebuilt' "
            "and table_schema = ? and table_name = ? order by ordinal_position",
            [schema, name],
        ).fetchall()
        select = ", ".join(f'"{column}"' for (column,) in columns)
        only_inc, only_full = (
            con.execute(
                f"select count(*) from (select {select} from {a}.{table} except all select {select} from {b}.{table})"
            ).fetchone()[0]
            for a, b in (("inc", "rebuilt"), ("rebuilt", "inc"))
        )
        if only_inc or only_full:
            rows = con.execute(f"select count(*) from rebuilt.{table}").fetchone()[0]
            problems = ["too large to compare row by row"]
            if rows <= 500_000:  # pandas row by row: about 10 GB for a few million rows
                left = con.execute(f"select {select} from inc.{table}").df()
                problems = compare_frames(
                    name, left, con.execute(f"select {select} from rebuilt.{table}").df()
                ).problems
            verdict = f"{len(problems)} problem(s): {problems[:3]}" if problems else "equal within 1e-9 relative"
            differing.append(
                f"{schema}.{name}: {only_inc} rows only in the incremental, {only_full} only in the rebuild; {verdict}"
            )
    print(f"compared {len(names)} tables with a full refresh of the same lake; not equal row for row: {len(differing)}")
    for line in differing:
        print("  " + line)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--days", type=int, default=7, help="days of the full build (one more is added)")
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--scenario", default="fleet-1k", help="the simulated scenario (e.g. incidents: restarts)")
    parser.add_argument("--lookback", type=int, default=2, help="PERFWH_INCREMENTAL_LOOKBACK_DAYS")
    parser.add_argument("--work", type=Path, default=Path("/tmp/perfwh-incremental"))
    parser.add_argument("--ingest-only", action="store_true", help="stop after ingesting days 1..D")
    parser.add_argument("--compare-full-refresh", action="store_true", help="check the day build against a rebuild")
    parser.add_argument("--ingested", type=Path, help="the --work folder of an --ingest-only run to start from")
    args = parser.parse_args()
    shutil.rmtree(args.work, ignore_errors=True)
    args.work.mkdir(parents=True)
    log = args.work / "bench.log"
    env = dict(os.environ, PERFWH_INCREMENTAL_LOOKBACK_DAYS=str(args.lookback), DBT_SEND_ANONYMOUS_USAGE_STATS="false")
    ingest_command = [str(BIN / "perfwh"), "build", "--quiet", "--select", "group:raw", "--data-dir"]
    if args.ingested:

        def without_warehouse(folder: str, names: list[str]) -> list[str]:  # so that the full build is a first build
            return ["warehouse"] if Path(folder) == args.ingested / "home" else []

        simulated = DataHome(args.ingested / "simulated")
        shutil.copytree(args.ingested / "home", args.work / "home", copy_function=os.link, ignore=without_warehouse)
        home = DataHome(args.work / "home").ensure()
        simulate_s = ingest_s = float("nan")
        landed = sum(1 for path in home.landing.rglob("*") if path.is_file())
        days = sorted({p.name for p in simulated.landing.glob("*/*/????-??-??")})
        last_day = days[-1]
    else:
        simulated, home = DataHome(args.work / "simulated").ensure(), DataHome(args.work / "home").ensure()
        simulate_s = run(
            [str(BIN / "perfwh"), "simulate", "--data-dir", str(simulated.root), "--scenario", args.scenario]
            + ["--seed", str(args.seed), "--days", str(args.days + 1)],
            env,
            log,
        )
        days = sorted({p.name for p in simulated.landing.glob("*/*/????-??-??")})
        last_day = days[-1]
        landed = land(simulated, home, last_day, held_back=False)
        ingest_s = run(ingest_command + [str(home.root)], env, log)
        if args.ingest_only:
            print(f"simulated {simulate_s:.1f} s, ingested {landed} files of {days[0]}..{days[-2]} {ingest_s:.1f} s")
            return 0
    ingest = ingest_command + [str(home.root)]
    prepare_dbt_manifest()
    load_at_start = os.getloadavg()
    full = dbt_build(home, dict(env, PERFWH_HOME=str(home.root)), log, args.work / "target_full", args.lookback)
    added = land(simulated, home, last_day, held_back=True)
    ingest_day_s = run(ingest, env, log)
    day = dbt_build(home, dict(env, PERFWH_HOME=str(home.root)), log, args.work / "target_day", args.lookback)
    if args.compare_full_refresh:
        compare_with_full_refresh(home, args.work, env, log)
    day_alone = dbt_build(home, dict(env, PERFWH_HOME=str(home.root)), log, args.work / "target_day_alone", 0, True)

    print(
        f"{args.scenario} seed {args.seed}: {args.days} days ({days[0]} to {days[-2]}) + {last_day}, lookback {args.lookback}"
    )
    print(
        f"simulate {simulate_s:.1f} s; ingest {landed} files {ingest_s:.1f} s, then {added} files {ingest_day_s:.1f} s"
    )
    print(f"{'':22}{'full build (baseline)':>24}{'one added day':>16}{'ratio':>8}{'the day alone':>16}{'ratio':>8}")
    for key, label in (
        ("wall_s", "wall"),
        ("model_s", "model time"),
        ("microbatch_model_s", "  incremental models"),
        ("table_model_s", "  table models"),
        ("test_s", "data tests"),
        ("overhead_s", "fixed dbt overhead"),
    ):
        ratio = day[key] / full[key] if full[key] > 0 else float("nan")
        alone = day_alone[key] / full[key] if full[key] > 0 else float("nan")
        print(f"{label:22}{full[key]:>22.1f} s{day[key]:>14.1f} s{ratio:>7.2f}x{day_alone[key]:>14.1f} s{alone:>7.2f}x")
    for name, build in (("full", full), ("day", day), ("day alone", day_alone)):
        print(f"{name}: {build['window']}; {build['dbt_builds']} dbt build(s), {build['nodes']} nodes")
    print(f"slowest models, full: {full['slowest']}\nslowest models, day:  {day['slowest']}")
    print(f"slowest table models, day alone: {day_alone['slowest_tables']}")
    for name, build in (("with the lookback", day), ("alone", day_alone)):
        goal = build["model_s"] <= 0.1 * full["model_s"]
        print(f"goal (a day's model time <= 0.1x the full build's), {name}: {'met' if goal else 'NOT met'}")
    print(f"load average at the start: {load_at_start}, at the end: {os.getloadavg()}")
    (args.work / "result.json").write_text(json.dumps({"full": full, "day": day, "day_alone": day_alone}, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
