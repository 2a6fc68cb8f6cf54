"""The tables dbt built on Spark, loaded into the DuckDB serving warehouse that detection and publishing read.

With PERFWH_DBT_TARGET=spark or spark_thrift, dbt builds the models on Spark, which writes each table as Parquet under
its warehouse directory: <warehouse>/<schema>.db/<table>/ (an incremental model's rows in <partition column>=<value>/
folders). Everything downstream of dbt (detection, alerts, evaluation, reports, `perfwh sql`, the UI's metadata) reads
DuckDB: the warehouse file warehouse/perf.duckdb, which detection writes `regressions` into, and the read-only snapshot
published from it. After a successful dbt build on Spark, `load_spark_tables` replaces the dbt tables of that
warehouse file with Spark's: every table and seed of the schemas the snapshot publishes (main, intermediate) and the
staging models that Python reads (detection: node software and inventory; they are tables on Spark, see the macro
`read_by_python_materialization`). One transaction: a load that fails part-way leaves the warehouse as it was.

An incremental build (`days`: the [start, end) window it rebuilt, lib.incremental.BuildWindow) changed only those
days' partitions of the partitioned (microbatch) tables on Spark, so for each of those tables that the warehouse
already holds with the same columns, only the window's rows are replaced (deleted by partition column, inserted from
the window's partition folders); every other table is replaced whole. At fleet scale this is what keeps a day's load
small: the sample-grain tables are the bulk of the rows (docs/spark.md).

Types are DuckDB's reading of Spark's Parquet: Spark's TIMESTAMP (an instant) is DuckDB's TIMESTAMPTZ, TIMESTAMP_NTZ
is TIMESTAMP, arrays are lists. Where the two engines type the same expression differently, the column is cast to
what the DuckDB build makes of it (`DUCKDB_TYPE_RULES`); a partition column's type comes from the table's files (its
values are folder names) and it is the last column, as on Spark.

Where Spark's warehouse is: PERFWH_SPARK_WAREHOUSE_URI, else PERFWH_SPARK_DIR/warehouse (default PERFWH_HOME/spark),
the session target's `spark.sql.warehouse.dir`. On a cluster it is the Thrift server's warehouse directory on object
storage (`s3a://bucket/warehouse`): DuckDB reads it as s3:// through its httpfs extension, with the credentials of a
DuckDB secret (docs/spark.md).
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass
from datetime import date, timedelta
from pathlib import Path

import duckdb

from perf_assets.lib.paths import DataHome
from perf_assets.lib.warehouse import PUBLISHED_SCHEMAS, connect

SPARK_TARGETS = ("spark", "spark_thrift")
WAREHOUSE_URI_ENV = "PERFWH_SPARK_WAREHOUSE_URI"

# Staging models that perf_assets' Python reads from the warehouse (defs/detection, lib/topology): tables on Spark.
STAGING_READ_BY_PYTHON = ("stg_inventory__gpus", "stg_node_software__versions")


@dataclass(frozen=True)
class SparkTable:
    """A table dbt builds on Spark: its schema, its name and the columns its files are partitioned by."""

    schema: str
    name: str
    partition_by: tuple[str, ...] = ()

    @property
    def qualified(self) -> str:
        return f'"{self.schema}"."{self.name}"'


def is_spark_target(target: str | None) -> bool:
    return target in SPARK_TARGETS


def spark_warehouse_uri(home: DataHome) -> str:
    """Where Spark's managed tables are, as DuckDB reads it (s3a:// and s3n:// become s3://)."""
    uri = os.environ.get(WAREHOUSE_URI_ENV, "").strip()
    if not uri:
        spark_dir = os.environ.get("PERFWH_SPARK_DIR", "").strip() or str(home.root / "spark")
        uri = str(Path(spark_dir).expanduser().resolve() / "warehouse")
    for scheme in ("s3a://", "s3n://"):
        if uri.startswith(scheme):
            uri = "s3://" + uri[len(scheme) :]
    return uri.rstrip("/")


def served_tables(manifest_path: Path) -> list[SparkTable]:
    """The Spark tables the serving warehouse takes, from a dbt manifest: every model materialized as a table or an
    incremental and every seed of the published schemas, and the staging models Python reads."""
    manifest = json.loads(Path(manifest_path).read_text())
    tables = []
    for node in manifest["nodes"].values():
        kind, config = node["resource_type"], node.get("config", {})
        in_published = node["schema"] in PUBLISHED_SCHEMAS
        if kind == "seed" and in_published:
            pass
        elif kind == "model" and in_published and config.get("materialized") in ("table", "incremental"):
            pass
        elif kind == "model" and node["name"] in STAGING_READ_BY_PYTHON:
            pass
        else:
            continue
        partition_by = config.get("partition_by") or ()
        if isinstance(partition_by, str):
            partition_by = (partition_by,)
        tables.append(SparkTable(node["schema"], node.get("alias") or node["name"], tuple(partition_by)))
    return sorted(tables, key=lambda table: (table.schema, table.name))


def table_location(warehouse_uri: str, table: SparkTable) -> str:
    """A managed table's folder: <warehouse>/<schema>.db/<table> (Spark's default database has no .db folder)."""
    if table.schema == "default":
        return f"{warehouse_uri}/{table.name}"
    return f"{warehouse_uri}/{table.schema}.db/{table.name}"


def parquet_source(connection: duckdb.DuckDBPyConnection, warehouse_uri: str, table: SparkTable) -> str:
    """The read_parquet expression over a Spark table's files: a partitioned table's <column>=<value>/ folders, or,
    when it has none (no rows), its schema file (`_schema/`, written by the dbt macro write_table_schema_files)."""
    location = table_location(warehouse_uri, table).replace("'", "''")
    if not table.partition_by:
        return f"read_parquet('{location}/*.parquet')"
    data = f"{location}/{'/'.join('*=*' for _ in table.partition_by)}/*.parquet"
    if connection.execute("select count(*) from glob(?)", [data]).fetchone()[0]:
        return f"read_parquet('{data}', hive_partitioning = true)"
    return f"read_parquet('{location}/_schema/*.parquet')"


class SparkTableMissing(RuntimeError):
    """A table the serving warehouse needs has no Parquet files where Spark's warehouse should have them."""


def load_spark_tables(
    home: DataHome, manifest_path: Path, warehouse_uri: str | None = None, days: tuple[date, date] | None = None
) -> dict[str, int]:
    """Replace the dbt tables of home's DuckDB warehouse with those dbt built on Spark; returns rows per table.

    ``days``: the [start, end) window an incremental build rebuilt; a partitioned table the warehouse already holds
    with the same columns then gets only that window's partitions (module docstring). None: every table whole.
    Call only while holding the warehouse writer lock. Tables that are not dbt's (regressions, detection_runs) stay."""
    uri = warehouse_uri or spark_warehouse_uri(home)
    tables = served_tables(manifest_path)
    home.warehouse_dir.mkdir(parents=True, exist_ok=True)
    connection = connect(home.warehouse_db, read_only=False)
    rows: dict[str, int] = {}
    try:
        connection.execute("begin transaction")
        for table in tables:
            try:
                source = parquet_source(connection, uri, table)
                columns = connection.execute(f"describe select * from {source}").fetchall()
            except duckdb.IOException as error:
                raise SparkTableMissing(
                    f"{table.schema}.{table.name}: no Spark table at {table_location(uri, table)} ({error}); "
                    f"did dbt build it on Spark, and is {WAREHOUSE_URI_ENV} (or PERFWH_SPARK_DIR) its warehouse?"
                ) from None
            select = ", ".join(_select_expression(table.name, name, kind) for name, kind, *_ in columns)
            connection.execute(f'create schema if not exists "{table.schema}"')
            if days is None or not _replace_window(connection, uri, table, columns, select, days):
                _drop_relation(connection, table)
                connection.execute(f"create table {table.qualified} as select {select} from {source}")
            rows[f"{table.schema}.{table.name}"] = connection.execute(
                f"select count(*) from {table.qualified}"
            ).fetchone()[0]
        connection.execute("commit")
    except BaseException:
        connection.execute("rollback")
        raise
    finally:
        connection.close()
    return rows


def _replace_window(
    connection: duckdb.DuckDBPyConnection,
    warehouse_uri: str,
    table: SparkTable,
    spark_columns: list,
    select: str,
    days: tuple[date, date],
) -> bool:
    """Replace the rows of ``days`` ([start, end)) of a table partitioned by one date column, from that window's
    partition folders; False (nothing done) when the table is not one, or the warehouse does not hold it with the
    same column names and types, so the caller replaces it whole."""
    if len(table.partition_by) != 1:
        return False
    column = table.partition_by[0]
    held = connection.execute(
        "select column_name, data_type from information_schema.columns "
        "where table_schema = ? and table_name = ? and table_catalog = current_database() order by ordinal_position",
        [table.schema, table.name],
    ).fetchall()
    kind = connection.execute(
        "select table_type from information_schema.tables where table_schema = ? and table_name = ?",
        [table.schema, table.name],
    ).fetchone()
    incoming = connection.execute(f"describe select {select} from {parquet_source(connection, warehouse_uri, table)}")
    if kind is None or kind[0] != "BASE TABLE" or held != [(name, kind_) for name, kind_, *_ in incoming.fetchall()]:
        return False
    if dict((name, kind_) for name, kind_, *_ in spark_columns).get(column) != "DATE":
        return False
    start, end = days
    quoted = '"' + column.replace('"', '""') + '"'
    connection.execute(f"delete from {table.qualified} where {quoted} >= ? and {quoted} < ?", [start, end])
    location = table_location(warehouse_uri, table).replace("'", "''")
    folders = []
    day = start
    while day < end:
        files = f"{location}/{column}={day.isoformat()}/*.parquet"
        if connection.execute("select count(*) from glob(?)", [files]).fetchone()[0]:
            folders.append("'" + files + "'")
        day += timedelta(days=1)
    if folders:
        connection.execute(
            f"insert into {table.qualified} by name select {select} "
            f"from read_parquet([{', '.join(folders)}], hive_partitioning = true)"
        )
    return True


def _drop_relation(connection: duckdb.DuckDBPyConnection, table: SparkTable) -> None:
    """Drop what the name holds now: a table, or a view (a DuckDB build's staging model)."""
    kind = connection.execute(
        "select table_type from information_schema.tables where table_schema = ? and table_name = ?",
        [table.schema, table.name],
    ).fetchone()
    if kind is not None:
        connection.execute(f"drop {'view' if kind[0] == 'VIEW' else 'table'} {table.qualified}")


# (table, column) -> the DuckDB build's type, where the two engines type the same SQL differently. From the comparison
# of both builds of the demo fleet; tests/test_spark_marts.py asserts every column's type equal, so a model change that
# adds or removes a difference fails there. Values are equal either way (tests/test_spark_equivalence.py).
DUCKDB_TYPE_RULES: dict[tuple[str, str], str] = {
    # row_number() and friends: INT on Spark, BIGINT on DuckDB
    **{
        (table, column): "BIGINT"
        for table, column in [
            ("fct_job_window", "attempt"),
            ("int_job_attempt_days", "attempt"),
            ("int_job_attempt_steps", "job_attempt"),
            ("int_job_attempt_steps", "step_rank"),
            ("int_job_attempts", "attempt"),
            ("int_job_interruptions", "attempt"),
            ("int_job_window_ladder", "attempt"),
            ("int_job_windows", "attempt"),
            ("int_requeue_gap_nodes", "attempt"),
            ("int_traces__top_kernels", "time_rank"),
        ]
    },
    # sums of integers: HUGEINT (128 bits) on DuckDB, BIGINT on Spark
    **{
        (table, column): "HUGEINT"
        for table, column in [
            ("fct_cluster_day", "gpu_count"),
            ("fct_cluster_day", "dcgm_gpu_util_samples"),
            ("fct_cluster_day", "dcgm_tensor_active_samples"),
            ("fct_fleet_day", "node_count"),
            ("fct_fleet_day", "gpu_count"),
            ("fct_fleet_day", "dcgm_gpu_util_samples"),
            ("fct_fleet_day", "dcgm_tensor_active_samples"),
            ("fct_job", "step_count"),
            ("fct_job_day", "step_count"),
            ("fct_nccl_test_runs", "wrong_total"),
            ("int_job_window_ladder", "traced_span_ns"),
            ("int_job_window_ladder", "traced_critical_idle_ns"),
            ("int_job_windows", "typical_step_count"),
            ("int_node_down_intervals", "island"),
            ("int_traces__rank_idle", "idle_ns"),
            ("int_traces__rank_idle", "host_wait_ns"),
            ("int_traces__rank_idle", "kernel_wait_ns"),
            ("int_traces__rank_idle", "other_ns"),
            ("int_traces__top_kernels", "time_ns"),
        ]
    },
    # an integer divided by a decimal literal: DECIMAL on Spark (6 or more decimals), DOUBLE on DuckDB
    **{
        (table, column): "DOUBLE"
        for table, column in [
            ("fct_mlperf_runs", "init_s"),
            ("fct_mlperf_runs", "run_duration_s"),
            ("fct_mlperf_runs", "time_to_train_s"),
            ("int_companion_gpu_days", "covered_throttle_share"),
            ("int_quality_dcgm_gpu_days", "longest_silent_h"),
            ("int_job_interruptions", "interruption_share"),
        ]
    },
}


def _select_expression(table: str, column: str, spark_type: str) -> str:
    quoted = '"' + column.replace('"', '""') + '"'
    duckdb_type = DUCKDB_TYPE_RULES.get((table, column))
    if duckdb_type and duckdb_type != spark_type:
        return f"cast({quoted} as {duckdb_type}) as {quoted}"
    return quoted
