"""Loading Spark's tables after an incremental build: only the rebuilt days' partitions of a partitioned table, the
rest of it kept; every other table whole; a table whose columns changed whole as well.

No Spark here: the Parquet files are laid out as Spark writes a managed table (<warehouse>/<schema>.db/<table>/,
a microbatch model's rows in partition_date=<day>/ folders), by DuckDB, and the manifest names the two tables."""

from __future__ import annotations

import json
from datetime import date

import duckdb
import pytest

from perf_assets.lib.paths import data_home
from perf_assets.lib.spark_marts import load_spark_tables

DAYS = [date(2026, 11, 1), date(2026, 11, 2), date(2026, 11, 3)]


def _write_spark_tables(warehouse, shift: float, extra_column: bool = False) -> None:
    """int_samples (partitioned by partition_date, 2 rows a day, value = day number + shift) and fct_days (one file)."""
    extra = ", 'x' as note" if extra_column else ""
    with duckdb.connect() as con:
        for day in DAYS:
            folder = warehouse / "intermediate.db" / "int_samples" / f"partition_date={day.isoformat()}"
            folder.mkdir(parents=True, exist_ok=True)
            con.execute(
                f"copy (select 'gpu-' || i as gpu, {day.day} + {shift} as value{extra} from range(2) t(i)) "
                f"to '{folder}/part-00000.parquet' (format parquet)"
            )
        folder = warehouse / "main.db" / "fct_days"
        folder.mkdir(parents=True, exist_ok=True)
        con.execute(f"copy (select {shift} as shift) to '{folder}/part-00000.parquet' (format parquet)")


def _manifest(path):
    nodes = {
        "model.perf.int_samples": {
            "resource_type": "model",
            "schema": "intermediate",
            "name": "int_samples",
            "config": {"materialized": "incremental", "partition_by": ["partition_date"]},
        },
        "model.perf.fct_days": {
            "resource_type": "model",
            "schema": "main",
            "name": "fct_days",
            "config": {"materialized": "table"},
        },
    }
    path.write_text(json.dumps({"nodes": nodes}))
    return path


def _values(home) -> dict:
    with duckdb.connect(str(home.warehouse_db), read_only=True) as con:
        by_day = dict(
            con.execute(
                "select partition_date, list(value order by gpu) from intermediate.int_samples group by all"
            ).fetchall()
        )
        shift = con.execute("select shift from main.fct_days").fetchone()[0]
        columns = [row[0] for row in con.execute("describe intermediate.int_samples").fetchall()]
    return {"by_day": by_day, "shift": shift, "columns": columns}


@pytest.fixture()
def loaded(tmp_path):
    warehouse, home = tmp_path / "spark" / "warehouse", data_home(tmp_path / "home").ensure()
    manifest = _manifest(tmp_path / "manifest.json")
    _write_spark_tables(warehouse, shift=0.0)
    rows = load_spark_tables(home, manifest, warehouse_uri=str(warehouse))
    assert rows == {"intermediate.int_samples": 6, "main.fct_days": 1}
    return warehouse, home, manifest


def test_an_incremental_load_replaces_only_the_rebuilt_days_partitions(loaded):
    warehouse, home, manifest = loaded
    _write_spark_tables(warehouse, shift=100.0)  # Spark changed every day; the build says it rebuilt 11-02 only
    rows = load_spark_tables(home, manifest, warehouse_uri=str(warehouse), days=(DAYS[1], DAYS[2]))
    after = _values(home)
    assert rows == {"intermediate.int_samples": 6, "main.fct_days": 1}
    assert after["by_day"] == {DAYS[0]: [1.0, 1.0], DAYS[1]: [102.0, 102.0], DAYS[2]: [3.0, 3.0]}
    assert after["shift"] == 100.0  # an unpartitioned table is replaced whole
    assert after["columns"] == ["gpu", "value", "partition_date"]  # Spark's layout: the partition column last


def test_a_full_load_after_an_incremental_one_equals_spark(loaded):
    warehouse, home, manifest = loaded
    _write_spark_tables(warehouse, shift=100.0)
    load_spark_tables(home, manifest, warehouse_uri=str(warehouse), days=(DAYS[1], DAYS[2]))
    load_spark_tables(home, manifest, warehouse_uri=str(warehouse))
    assert _values(home)["by_day"] == {day: [day.day + 100.0] * 2 for day in DAYS}


def test_a_table_whose_columns_changed_is_replaced_whole(loaded):
    warehouse, home, manifest = loaded
    _write_spark_tables(warehouse, shift=100.0, extra_column=True)  # a project change added a column
    load_spark_tables(home, manifest, warehouse_uri=str(warehouse), days=(DAYS[1], DAYS[2]))
    after = _values(home)
    assert after["columns"] == ["gpu", "value", "note", "partition_date"]
    assert after["by_day"] == {day: [day.day + 100.0] * 2 for day in DAYS}


def test_a_day_of_the_window_without_a_partition_loses_its_old_rows(loaded):
    warehouse, home, manifest = loaded
    folder = warehouse / "intermediate.db" / "int_samples" / f"partition_date={DAYS[2].isoformat()}"
    for file in folder.iterdir():
        file.unlink()
    folder.rmdir()
    load_spark_tables(home, manifest, warehouse_uri=str(warehouse), days=(DAYS[1], date(2026, 11, 4)))
    assert sorted(_values(home)["by_day"]) == DAYS[:2]
