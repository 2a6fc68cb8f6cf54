"""Raw DCGM samples to per-GPU hourly rollups at fleet scale: DuckDB (the named baseline) against Spark local mode.

Data: a generated DCGM lake of N samples (default 100 M) in the project's raw_dcgm layout and schema
(PERFWH_HOME/lake/raw/raw_dcgm/event_date=YYYY-MM-DD/*.parquet plus its _schema file): 512 GPUs on 64 nodes,
8 fields, one sample per field every 10 s, as many days as N needs; 0.1 % of the values unknown (NULL) and
0.1 % of the samples delivered twice (a replayed scrape), so the dedupe has work to do. Vectorized numpy/pyarrow.

Work: the project's own staging model `stg_dcgm__samples` (dedupe on the natural key with window functions,
conflict flags), compiled by dbt for each target from the same model file, rolled up per GPU, field and hour
(samples, known values, mean, min, max, conflicts) and written as Parquet. Each engine runs in a child process
with 2 threads and 6 GB (DuckDB threads=2 and memory_limit, spilling to disk; Spark local[2], driver memory 6g); the parent polls the RSS of the child's
whole process tree (Python + the Spark JVM) every 0.2 s. Printed per engine: wall seconds, input rows per
second, peak RSS, hourly rows out, and the ratio against DuckDB. The two outputs are checked to hold the same
rows and sums.

Run: `.venv/bin/python bench/bench_hourly_scale.py [--rows 100000000] [--dir /tmp/perfwh-bench-scale]`
(needs the spark extra and Java 17+ for the Spark leg; `--engines duckdb` runs the baseline alone).
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from datetime import datetime, timedelta, timezone
from pathlib import Path

import numpy as np
import psutil
import pyarrow as pa
import pyarrow.parquet as pq

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

GPUS_PER_NODE = 8
NODES = 64
FIELDS = [
    "DCGM_FI_DEV_GPU_UTIL",
    "DCGM_FI_PROF_SM_ACTIVE",
    "DCGM_FI_PROF_PIPE_TENSOR_ACTIVE",
    "DCGM_FI_DEV_POWER_USAGE",
    "DCGM_FI_DEV_GPU_TEMP",
    "DCGM_FI_DEV_SM_CLOCK",
    "DCGM_FI_DEV_FB_USED",
    "DCGM_FI_PROF_DRAM_ACTIVE",
]
STEP_S = 10
START = datetime(2026, 1, 1, tzinfo=timezone.utc)

SCHEMA = pa.schema(
    [
        ("cluster", pa.string()),
        ("host", pa.string()),
        ("gpu_uuid", pa.string()),
        ("gpu_index", pa.int32()),
        ("gpu_instance", pa.int32()),
        ("pci_bus_id", pa.string()),
        ("model_name", pa.string()),
        ("field", pa.string()),
        ("ts", pa.timestamp("us", tz="UTC")),
        ("value", pa.float64()),
        ("labels_json", pa.string()),
        ("landed_file_id", pa.string()),
        ("event_date", pa.date32()),
    ]
)


def generate(home: Path, rows: int, seed: int = 7) -> int:
    """Write the raw_dcgm lake; returns the number of rows written (>= rows, whole 6-hour blocks)."""
    table_dir = home / "lake" / "raw" / "raw_dcgm"
    (table_dir / "_schema").mkdir(parents=True, exist_ok=True)
    pq.write_table(SCHEMA.empty_table(), table_dir / "_schema" / "empty.parquet")
    rng = np.random.default_rng(seed)
    gpus = NODES * GPUS_PER_NODE
    hosts = np.array([f"node-{n:03d}" for n in range(NODES)])
    uuids = np.array([f"GPU-{g:08x}-bench" for g in range(gpus)])
    fields = np.array(FIELDS)
    block_s = 6 * 3600
    steps = block_s // STEP_S
    per_block = gpus * len(FIELDS) * steps
    written = 0
    block = 0
    while written < rows:
        start = START + timedelta(seconds=block * block_s)
        day = start.date()
        n = per_block
        gpu = np.repeat(np.arange(gpus, dtype=np.int32), len(FIELDS) * steps)
        field = np.tile(np.repeat(np.arange(len(FIELDS), dtype=np.int32), steps), gpus)
        step = np.tile(np.arange(steps, dtype=np.int64), gpus * len(FIELDS))
        ts = int(start.timestamp() * 1e6) + step * STEP_S * 1_000_000
        value = np.round(rng.random(n) * 100.0, 3)
        value_mask = rng.random(n) < 0.001
        replay = rng.random(n) < 0.001
        index = np.concatenate([np.arange(n), np.flatnonzero(replay)])
        file_ids = np.where(np.arange(len(index)) < n, f"bench-{block:05d}", f"replay-{block:05d}")
        table = pa.table(
            {
                "cluster": pa.DictionaryArray.from_arrays(np.zeros(len(index), dtype=np.int32), ["bench"]),
                "host": pa.DictionaryArray.from_arrays(gpu[index] // GPUS_PER_NODE, hosts),
                "gpu_uuid": pa.DictionaryArray.from_arrays(gpu[index], uuids),
                "gpu_index": pa.array(gpu[index] % GPUS_PER_NODE, pa.int32()),
                "gpu_instance": pa.nulls(len(index), pa.int32()),
                "pci_bus_id": pa.nulls(len(index), pa.string()),
                "model_name": pa.DictionaryArray.from_arrays(
                    np.zeros(len(index), dtype=np.int32), ["NVIDIA H100 80GB HBM3"]
                ),
                "field": pa.DictionaryArray.from_arrays(field[index], fields),
                "ts": pa.array(ts[index], pa.timestamp("us", tz="UTC")),
                "value": pa.array(value[index], mask=value_mask[index]),
                "labels_json": pa.nulls(len(index), pa.string()),
                "landed_file_id": pa.array(file_ids),
                "event_date": pa.array(np.full(len(index), np.datetime64(day, "D")), pa.date32()),
            }
        )
        folder = table_dir / f"event_date={day.isoformat()}"
        folder.mkdir(exist_ok=True)
        pq.write_table(table.cast(SCHEMA), folder / f"block-{block:05d}.parquet", row_group_size=1 << 20)
        written += len(index)
        block += 1
    return written


def compiled_model_sql(home: Path, target: str, work: Path) -> str:
    """stg_dcgm__samples as dbt compiles it for a target (the same model file for both engines)."""
    env = {**os.environ, "PERFWH_HOME": str(home), "DBT_SEND_ANONYMOUS_USAGE_STATS": "false"}
    env["PERFWH_SPARK_DIR"] = str(work / "spark")
    project = ROOT / "dbt_project"
    target_path = work / f"dbt_{target}"
    done = subprocess.run(
        [str(Path(sys.executable).parent / "dbt"), "compile", "--target", target, "--select", "stg_dcgm__samples"]
        + ["--project-dir", str(project), "--profiles-dir", str(project), "--target-path", str(target_path)]
        + ["--log-path", str(target_path / "logs"), "--no-introspect", "--quiet"],
        env=env,
        capture_output=True,
        text=True,
    )
    if done.returncode != 0:
        raise SystemExit(f"dbt compile --target {target} failed:\n{done.stdout[-3000:]}\n{done.stderr[-3000:]}")
    return (target_path / "compiled/perf_warehouse/models/staging/stg_dcgm__samples.sql").read_text()


def hourly_sql(model_sql: str, hour_expr: str) -> str:
    return f"""
        select node, gpu_uuid, field, {hour_expr} as hour,
            count(*) as samples, count(value) as known, avg(value) as mean_value,
            min(value) as min_value, max(value) as max_value,
            sum(case when conflicting then 1 else 0 end) as conflicts
        from ({model_sql}) as samples
        group by node, gpu_uuid, field, {hour_expr}
    """


def run_duckdb(sql: str, out: Path) -> dict:
    import duckdb

    con = duckdb.connect(config={"threads": 2, "memory_limit": "6GB", "temp_directory": str(out.parent / "duckdb_tmp")})
    con.execute(f"copy ({sql}) to '{out}' (format parquet)")
    return {"rows_out": con.sql(f"select count(*) from read_parquet('{out}')").fetchone()[0]}


def run_spark(home: Path, sql: str, out: Path, work: Path) -> dict:
    from pyspark.sql import SparkSession

    spark = (
        SparkSession.builder.master("local[2]")
        .config("spark.driver.memory", "6g")
        .config("spark.sql.session.timeZone", "UTC")
        .config("spark.ui.enabled", "false")
        .config("spark.driver.bindAddress", "127.0.0.1")
        .config("spark.driver.host", "127.0.0.1")
        .config("spark.sql.shuffle.partitions", "8")
        .config("spark.sql.warehouse.dir", str(work / "spark" / "warehouse"))
        .getOrCreate()
    )
    spark.sparkContext.setLogLevel("ERROR")
    # What macros/lake_sources.sql does on-run-start: the source table over the folder, the schema file's columns.
    table_dir = home / "lake" / "raw" / "raw_dcgm"
    columns = spark.read.parquet(str(table_dir / "_schema" / "empty.parquet")).schema.toDDL()
    spark.sql("create database if not exists lake")
    spark.sql("drop table if exists lake.raw_dcgm")
    spark.sql(
        f"create table lake.raw_dcgm ({columns}) using parquet options (path '{table_dir}', "
        "recursiveFileLookup 'true', pathGlobFilter '*.parquet')"
    )
    spark.sql(sql).write.mode("overwrite").parquet(str(out))
    rows_out = spark.read.parquet(str(out)).count()
    spark.stop()
    return {"rows_out": rows_out}


def measure(argv: list[str]) -> dict:
    """Run a child process; wall seconds and the peak RSS of its process tree."""
    started = time.perf_counter()
    child = subprocess.Popen(argv, stdout=subprocess.PIPE, text=True, env={**os.environ, "SPARK_LOCAL_IP": "127.0.0.1"})
    root = psutil.Process(child.pid)
    peak = 0
    while child.poll() is None:
        try:
            tree = [root, *root.children(recursive=True)]
            peak = max(peak, sum(p.memory_info().rss for p in tree if p.is_running()))
        except psutil.Error:
            pass
        time.sleep(0.2)
    wall = time.perf_counter() - started
    output = child.stdout.read()
    if child.returncode != 0:
        raise SystemExit(f"{argv[-1]} failed ({child.returncode})")
    return {"wall_s": wall, "peak_rss_bytes": peak, **json.loads(output.strip().splitlines()[-1])}


def summary(out: Path) -> tuple:
    import duckdb

    return duckdb.sql(
        f"select count(*), sum(samples), sum(known), round(sum(mean_value), 3), sum(conflicts) from read_parquet('{out}')"
    ).fetchone()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rows", type=int, default=100_000_000)
    parser.add_argument("--dir", type=Path, default=Path("/tmp/perfwh-bench-scale"))
    parser.add_argument("--engines", default="duckdb,spark")
    parser.add_argument("--child", choices=["duckdb", "spark"], help=argparse.SUPPRESS)
    args = parser.parse_args()
    home, work = args.dir / "home", args.dir / "work"

    if args.child:
        sql = (work / f"{args.child}.sql").read_text()
        out = work / f"hourly_{args.child}.parquet"
        result = run_duckdb(sql, out) if args.child == "duckdb" else run_spark(home, sql, out, work)
        print(json.dumps(result))
        return

    work.mkdir(parents=True, exist_ok=True)
    (home / "warehouse").mkdir(parents=True, exist_ok=True)  # the duckdb target's path (dbt compile opens it)
    marker = home / "rows.json"
    if marker.exists() and json.loads(marker.read_text())["requested"] == args.rows:
        rows = json.loads(marker.read_text())["written"]
        print(f"data: {rows:,} DCGM samples already generated under {home}")
    else:
        started = time.perf_counter()
        rows = generate(home, args.rows)
        marker.write_text(json.dumps({"requested": args.rows, "written": rows}))
        print(f"data: {rows:,} DCGM samples generated under {home} in {time.perf_counter() - started:.0f} s")

    results = {}
    for engine in args.engines.split(","):
        model = compiled_model_sql(home, engine, work)
        hour = "date_trunc('hour', sampled_at)"
        (work / f"{engine}.sql").write_text(hourly_sql(model, hour))
        results[engine] = measure([sys.executable, __file__, "--dir", str(args.dir), "--child", engine])

    base = results.get("duckdb")
    print(f"\n{'engine':<8} {'wall s':>8} {'M rows/s':>9} {'peak RSS':>10} {'hourly rows':>12}  vs duckdb")
    for engine, r in results.items():
        ratio = (
            f"{r['wall_s'] / base['wall_s']:.1f}x time, {r['peak_rss_bytes'] / base['peak_rss_bytes']:.1f}x memory"
            if base
            else ""
        )
        print(
            f"{engine:<8} {r['wall_s']:>8.1f} {rows / r['wall_s'] / 1e6:>9.2f} {r['peak_rss_bytes'] / 2**30:>8.2f} GiB"
            f" {r['rows_out']:>12,}  {ratio}"
        )
    if len(results) == 2:
        sums = {engine: summary(work / f"hourly_{engine}.parquet") for engine in results}
        same = sums["duckdb"] == sums["spark"]
        print(f"\noutputs {'agree' if same else 'DIFFER'}: (rows, samples, known, Σmean, conflicts) = {sums}")


if __name__ == "__main__":
    main()
