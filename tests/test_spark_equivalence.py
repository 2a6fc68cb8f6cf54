"""The dbt project on Spark (session mode, local[2]) over the demo fleet's lake gives the same marts as DuckDB.

DuckDB's side is the demo_home fixture's warehouse (`perfwh build`); Spark's is `dbt seed` + `dbt run --target spark`
over the same Parquet lake. Every model under models/marts is compared row by row after sorting on all columns:
exact for integers, strings, booleans, dates, timestamps and lists (percentiles are exact on both engines: median /
quantile_cont vs percentile), floats within 1e-9 relative or 1e-12 absolute. The incremental (microbatch) models
build over every lake day on both (perfwh's first build; --event-time-start/--event-time-end on Spark).
The Spark run (~4 min on 2 cores alone) starts in the background, at the lowest CPU priority, as soon as the
shared demo fixture is built (tests/conftest.py, `spark_demo_build`), and this test waits for it.
"""

from __future__ import annotations

import pytest

from perf_assets.lib.build import DBT_PROJECT_DIR
from perf_assets.lib.engine_equivalence import (
    ABS_TOL,
    REL_TOL,
    compare_frames,
    duckdb_table_frame,
    mart_models,
    spark_table_frame,
)

pytestmark = [pytest.mark.spark, pytest.mark.slow]


@pytest.fixture(scope="module")
def spark_build(spark_demo_build):
    return spark_demo_build


def test_every_mart_is_identical_on_duckdb_and_spark(demo_home, spark_build):
    spark_dir, target = spark_build
    marts = mart_models(target / "manifest.json")
    assert len(marts) == len(list((DBT_PROJECT_DIR / "models" / "marts").rglob("*.sql"))), marts
    differences = []
    rows_compared = 0
    for schema, name in marts:
        duck = duckdb_table_frame(demo_home.warehouse_db, schema, name)
        spark = spark_table_frame(spark_dir, schema, name)
        diff = compare_frames(name, duck, spark, rel_tol=REL_TOL, abs_tol=ABS_TOL)
        differences += [f"{name}: {problem}" for problem in diff.problems]
        rows_compared += len(duck)
    assert not differences, "\n".join(differences)
    assert rows_compared > 1000  # the demo fleet fills the marts: not a comparison of empty tables


def test_the_comparison_catches_a_changed_value(demo_home, spark_build):
    """The comparison itself can fail: one float moved beyond the tolerance, one string changed."""
    spark_dir, _ = spark_build
    spark = spark_table_frame(spark_dir, "main", "fct_cluster_day")
    duck = duckdb_table_frame(demo_home.warehouse_db, "main", "fct_cluster_day")
    assert not compare_frames("fct_cluster_day", duck, spark).problems
    moved = spark.copy()
    moved.loc[0, "installed_gs"] = moved.loc[0, "installed_gs"] * (1 + 1e-7)
    assert any(p.startswith("installed_gs") for p in compare_frames("fct_cluster_day", duck, moved).problems)
    renamed = spark.copy()
    renamed.loc[0, "cluster"] = "not-a-cluster"
    assert compare_frames("fct_cluster_day", duck, renamed).problems
