"""The dbt project on a second engine (Spark), and a table-by-table comparison with the DuckDB warehouse.

The same models build on `--target spark` (dbt_project/profiles.yml, session mode) over the same Parquet lake;
Spark writes each table as Parquet under <spark dir>/warehouse/<schema>.db/<table>/, which DuckDB reads back, so
both sides are compared with one reader. Equal means: the same columns, the same number of rows, and row by row
after sorting on every column, exact for integers, strings, booleans, dates and timestamps, floats within a
relative or an absolute tolerance (NULL only equals NULL, NaN only NaN).
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import duckdb
import pandas as pd

from perf_assets.lib.build import DBT_PROJECT_DIR

REL_TOL = 1e-9
ABS_TOL = 1e-12

# Named residuals (metric_tree.md): what is left of the installed time after its measured parts, computed as a
# difference of sums. They are 0 up to rounding, and the rounding depends on the order in which an engine adds
# floats, so their tolerance is relative to the quantity they are a residual of, not to their own tiny value.
RESIDUAL_SCALE = {
    "badput_other_gs": "allocated_gs",
    "badput_other_pfs": "allocated_pfs",
}
# The same residuals in the long metric tree: rows whose node_id is one of these carry the residual as numerator and
# what it is a residual of (allocated time) as denominator.
RESIDUAL_NODES = {"badput_other_share", "job_badput_other_share"}


def spark_available() -> str | None:
    """None when Spark can run here, else why not (no java on PATH, or pyspark/dbt-spark not installed)."""
    if shutil.which("java") is None:
        return "java is not on PATH (Spark 4 needs Java 17+)"
    try:
        import dbt.adapters.spark  # noqa: F401
        import pyspark  # noqa: F401
    except ImportError as error:
        return f"the spark extra is not installed ({error.name}): pip install -e '.[spark]'"
    return None


def dbt_run_on_spark(
    perfwh_home: Path, spark_dir: Path, target_path: Path, runs: tuple[tuple[str, ...], ...] = ((),)
) -> None:
    """`dbt seed`, then one `dbt run` per argument list of ``runs`` in order, on the spark target over perfwh_home's
    lake; raises with dbt's output on failure."""
    env = {
        **os.environ,
        "PERFWH_HOME": str(perfwh_home),
        "PERFWH_SPARK_DIR": str(spark_dir),
        "SPARK_LOCAL_IP": "127.0.0.1",
        "DBT_SEND_ANONYMOUS_USAGE_STATS": "false",
    }
    dbt = Path(sys.executable).parent / "dbt"
    common = ["--target", "spark", "--project-dir", str(DBT_PROJECT_DIR), "--profiles-dir", str(DBT_PROJECT_DIR)]
    common += ["--target-path", str(target_path), "--log-path", str(target_path / "logs")]
    for command in (["seed"], *(["run", *args] for args in runs)):
        done = subprocess.run(
            [str(dbt) if dbt.exists() else "dbt", *command, *common], env=env, capture_output=True, text=True
        )
        if done.returncode != 0:
            tail = "\n".join(line for line in done.stdout.splitlines() if not line.startswith('{"ts"'))[-6000:]
            raise RuntimeError(f"dbt {command[0]} --target spark failed ({done.returncode}):\n{tail}")


def start_dbt_run_on_spark(
    perfwh_home: Path,
    spark_dir: Path,
    target_path: Path,
    runs: tuple[tuple[str, ...], ...] = ((),),
    niceness: int = 19,
) -> subprocess.Popen:
    """dbt_run_on_spark in a background process at the lowest CPU priority, in its own process group; its output
    (and the error, if it fails) goes to <spark_dir>/dbt_run_on_spark.log. Wait with `wait_dbt_run_on_spark`."""
    spark_dir.mkdir(parents=True, exist_ok=True)
    code = (
        "import json, sys; from pathlib import Path; from perf_assets.lib.engine_equivalence import dbt_run_on_spark; "
        "dbt_run_on_spark(Path(sys.argv[1]), Path(sys.argv[2]), Path(sys.argv[3]), "
        "tuple(tuple(args) for args in json.loads(sys.argv[4])))"
    )
    command = [sys.executable, "-c", code, str(perfwh_home), str(spark_dir), str(target_path), json.dumps(runs)]
    if niceness and shutil.which("nice"):
        command = ["nice", "-n", str(niceness), *command]
    with (spark_dir / "dbt_run_on_spark.log").open("w") as log:  # the child keeps its own copy of the handle
        return subprocess.Popen(
            command, stdout=log, stderr=subprocess.STDOUT, start_new_session=True, cwd=str(DBT_PROJECT_DIR.parent)
        )


def wait_dbt_run_on_spark(process: subprocess.Popen, spark_dir: Path, timeout_s: float = 1800) -> None:
    """Wait for a background dbt_run_on_spark; raise with its log's tail when it failed."""
    returncode = process.wait(timeout=timeout_s)
    if returncode != 0:
        tail = (spark_dir / "dbt_run_on_spark.log").read_text(errors="replace")[-6000:]
        raise RuntimeError(f"the background dbt run on Spark failed ({returncode}):\n{tail}")


def mart_models(manifest_path: Path) -> list[tuple[str, str]]:
    """(schema, name) of every model under models/marts, from a dbt manifest."""
    manifest = json.loads(manifest_path.read_text())
    return sorted(
        (node["schema"], node["name"])
        for node in manifest["nodes"].values()
        if node["resource_type"] == "model" and node["original_file_path"].startswith("models/marts/")
    )


def spark_table_frame(spark_dir: Path, schema: str, name: str) -> pd.DataFrame:
    """A table Spark built, read from its Parquet files (an incremental model's under its partition folders, e.g.
    metric_date=2026-11-01/, with the partition column read back from the folder names; a partitioned table without
    rows from its `_schema/` file, see dbt_project/macros/table_schema_files.sql)."""
    folder = spark_dir / "warehouse" / f"{schema}.db" / name
    if any(child.is_dir() and "=" in child.name for child in folder.iterdir()):
        source = f"read_parquet('{folder}/*=*/*.parquet', hive_partitioning = true)"
    elif (folder / "_schema").is_dir():
        source = f"read_parquet('{folder}/_schema/*.parquet')"
    else:
        source = f"read_parquet('{folder}/*.parquet')"
    with duckdb.connect() as con:
        return con.sql(f"select * from {source}").df()


def duckdb_table_frame(database: Path, schema: str, name: str) -> pd.DataFrame:
    with duckdb.connect(str(database), read_only=True) as con:
        return con.sql(f'select * from "{schema}"."{name}"').df()


@dataclass(frozen=True)
class TableDiff:
    table: str
    problems: list[str]


def _normalized(frame: pd.DataFrame) -> pd.DataFrame:
    """Engine-neutral values: instants as UTC-naive timestamps, lists as tuples, decimals as floats."""
    out = frame.copy()
    for column in out.columns:
        series = out[column]
        if isinstance(series.dtype, pd.DatetimeTZDtype):
            out[column] = series.dt.tz_convert("UTC").dt.tz_localize(None)
        elif series.dtype == object:
            sample = series.dropna()
            first = sample.iloc[0] if len(sample) else None
            if hasattr(first, "__len__") and not isinstance(first, (str, bytes, dict)):
                out[column] = series.map(lambda v: None if v is None else tuple(v))
            elif first is not None and type(first).__name__ == "Decimal":
                out[column] = series.astype("float64")
    return out


def _is_float(series: pd.Series) -> bool:
    return pd.api.types.is_float_dtype(series)


def _text_key(series: pd.Series) -> pd.Series:
    """Values as text, nulls (None, NaN) after every value: "0<text>" / "1<text>"."""
    text = series.astype(str)
    return text.radd("0").where(series.notna(), text.radd("1"))


def _sorted_alike(left: pd.DataFrame, right: pd.DataFrame, order: list[str]) -> tuple[pd.DataFrame, pd.DataFrame]:
    """Both frames' rows sorted on the columns of `order`, with one key per column for both sides: the values
    themselves where neither side holds Python objects (numbers, booleans, instants: NaN last), else their text
    (nulls last). Vectorized: a Python key per value cost ~1 s per 100k rows and column."""
    keys_left, keys_right = {}, {}
    for column in order:
        a, b = left[column], right[column]
        native = a.dtype != object and b.dtype != object
        keys_left[column], keys_right[column] = (a, b) if native else (_text_key(a), _text_key(b))

    def sort(frame: pd.DataFrame, keys: dict[str, pd.Series]) -> pd.DataFrame:
        positions = (
            pd.DataFrame({c: k.reset_index(drop=True) for c, k in keys.items()}).sort_values(order, kind="stable").index
        )
        return frame.iloc[positions].reset_index(drop=True)

    return sort(left, keys_left), sort(right, keys_right)


def compare_frames(
    table: str,
    left: pd.DataFrame,
    right: pd.DataFrame,
    rel_tol: float = REL_TOL,
    abs_tol: float = ABS_TOL,
    residual_scale: dict[str, str] | None = None,
) -> TableDiff:
    """Row-by-row comparison of two results of the same model (left: DuckDB, right: Spark). A float column named
    in residual_scale (default RESIDUAL_SCALE) is within rel_tol of its scale column's value in the same row, and
    so is the numerator of a long metric-tree row of a RESIDUAL_NODES node, relative to its denominator."""
    residual_scale = RESIDUAL_SCALE if residual_scale is None else residual_scale
    problems: list[str] = []
    if set(left.columns) != set(right.columns):
        problems.append(
            f"columns differ: only DuckDB {sorted(set(left.columns) - set(right.columns))}, "
            f"only Spark {sorted(set(right.columns) - set(left.columns))}"
        )
        return TableDiff(table, problems)
    if len(left) != len(right):
        problems.append(f"row counts differ: DuckDB {len(left)}, Spark {len(right)}")
        return TableDiff(table, problems)
    left, right = _normalized(left), _normalized(right[list(left.columns)])
    floats = [c for c in left.columns if _is_float(left[c]) or _is_float(right[c])]
    exact = [c for c in left.columns if c not in floats]
    order = exact + floats
    left, right = _sorted_alike(left, right, order)
    for column in left.columns:
        a, b = left[column], right[column]
        if column in floats:
            a, b = a.astype("float64"), b.astype("float64")
            both_nan = a.isna() & b.isna()
            magnitude = pd.concat([a.abs(), b.abs()], axis=1).max(axis=1)
            if residual_scale.get(column) in left.columns:
                magnitude = left[residual_scale[column]].astype("float64").abs()
            elif column == "numerator" and {"node_id", "denominator"} <= set(left.columns):
                residual = left["node_id"].isin(RESIDUAL_NODES)
                magnitude = magnitude.where(~residual, left["denominator"].astype("float64").abs())
            close = (a - b).abs() <= (rel_tol * magnitude).clip(lower=abs_tol)
            bad = ~(both_nan | close.fillna(False))
        else:
            a_null, b_null = a.isna(), b.isna()
            if a.dtype == b.dtype and a.dtype.kind in "biumM" and not pd.api.types.is_extension_array_dtype(a):
                # numpy booleans, integers and instants (no pd.NA in them) compare as such, not one Python object each
                equal = pd.Series(a.to_numpy() == b.to_numpy(), index=a.index)
            else:
                equal = a.astype(object) == b.astype(object)
            same = (a_null & b_null) | (~a_null & ~b_null & equal)
            bad = ~same
        if bad.any():
            first = int(bad.idxmax())
            problems.append(
                f"{column}: {int(bad.sum())} rows differ, e.g. row {first}: DuckDB {a[first]!r}, Spark {b[first]!r}"
            )
    return TableDiff(table, problems)
