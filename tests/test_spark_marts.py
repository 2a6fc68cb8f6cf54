"""A Spark deployment's serving warehouse: the demo's tables built on Spark, loaded into DuckDB, give the DuckDB build's
columns and types, and detection and evaluation on them give the DuckDB build's regressions and scores.

Spark's side is the session's background dbt run on Spark (tests/conftest.py, `spark_demo_build`, shared with
tests/test_spark_equivalence.py): no Spark run of its own. DuckDB's side is the demo_home fixture (`perfwh build`).
"""

from __future__ import annotations

import shutil

import dagster as dg
import duckdb
import pytest

from perf_assets.defs.detection.assets import regressions
from perf_assets.defs.resources import PerfwhHome
from perf_assets.lib.evaluation import evaluate_home
from perf_assets.lib.paths import data_home
from perf_assets.lib.spark_marts import SparkTableMissing, load_spark_tables, spark_warehouse_uri
from perf_assets.lib.warehouse import PUBLISHED_SCHEMAS, published_frame

IDENTITY = ["grain", "entity_id", "metric", "change_date", "change_kind"]


@pytest.fixture(scope="module")
def served_home(spark_demo_build, demo_home, dbt_manifest, tmp_path_factory):
    """A data home whose warehouse holds the Spark-built demo tables, after detection ran on them (and published)."""
    spark_dir, _ = spark_demo_build
    home = data_home(tmp_path_factory.mktemp("spark_served")).ensure()
    shutil.copy(demo_home.labels_file, home.labels_file)
    loaded = load_spark_tables(home, dbt_manifest, warehouse_uri=str(spark_dir / "warehouse"))
    result = dg.materialize(
        [regressions],
        resources={"perfwh": PerfwhHome(data_dir=str(home.root))},
        instance=dg.DagsterInstance.ephemeral(),
    )
    assert result.success
    return home, loaded


def _columns(database, schemas) -> dict[tuple[str, str], dict[str, str]]:
    with duckdb.connect(str(database), read_only=True) as con:
        rows = con.execute(
            "select table_schema, table_name, column_name, data_type from information_schema.columns "
            "where table_schema in ? order by all",
            [list(schemas)],
        ).fetchall()
    tables: dict[tuple[str, str], dict[str, str]] = {}
    for schema, table, column, kind in rows:
        tables.setdefault((schema, table), {})[column] = kind
    return tables


@pytest.mark.spark
@pytest.mark.slow
def test_the_snapshot_from_spark_has_the_duckdb_builds_tables_columns_and_types(demo_home, served_home):
    home, loaded = served_home
    duck = _columns(demo_home.published_db, PUBLISHED_SCHEMAS)
    spark = _columns(home.published_db, PUBLISHED_SCHEMAS)
    assert set(spark) == set(duck), (sorted(set(duck) - set(spark)), sorted(set(spark) - set(duck)))
    differences = [
        f"{schema}.{table}.{column}: DuckDB {kind}, from Spark {spark[schema, table].get(column)}"
        for (schema, table), columns in duck.items()
        for column, kind in columns.items()
        if spark[schema, table].get(column) != kind
    ]
    assert not differences, "\n".join(differences)
    assert loaded["main.metric_tree_daily"] > 1000 and loaded["staging.stg_inventory__gpus"] == 64


@pytest.mark.spark
@pytest.mark.slow
def test_detection_on_the_spark_marts_finds_the_duckdb_builds_regressions(demo_home, served_home):
    home, _ = served_home
    duck = published_frame(demo_home, "select * from regressions").sort_values(IDENTITY).reset_index(drop=True)
    spark = published_frame(home, "select * from regressions").sort_values(IDENTITY).reset_index(drop=True)
    assert len(duck) >= 5  # the demo's incident is found: not a comparison of two empty tables
    assert spark[IDENTITY].values.tolist() == duck[IDENTITY].values.tolist()
    for column in ("relative_effect", "before_level", "after_level", "ci_low", "ci_high", "p_value", "q_value"):
        tolerance = 1e-9 * duck[column].abs().combine(spark[column].abs(), max) + 1e-12
        assert ((spark[column] - duck[column]).abs() <= tolerance).all(), column
    for column in ("top_factor", "top_cause_dimension", "attribution", "verdict"):
        assert spark[column].fillna("").tolist() == duck[column].fillna("").tolist(), column


@pytest.mark.spark
@pytest.mark.slow
def test_evaluation_on_the_spark_marts_scores_as_on_duckdb(demo_home, served_home):
    home, _ = served_home
    duck, spark = evaluate_home(demo_home), evaluate_home(home)
    assert duck["overall"]["recall"]["value"] == 1.0  # the demo's incident is found (docs/evaluation.md)
    for key in ("overall", "groups", "factor_accuracy", "cause_accuracy"):
        assert spark[key] == duck[key], key


@pytest.mark.spark
@pytest.mark.slow
def test_a_missing_spark_table_is_a_clear_error_and_the_warehouse_stays(served_home, dbt_manifest, tmp_path):
    home, loaded = served_home
    with pytest.raises(SparkTableMissing, match="no Spark table at"):
        load_spark_tables(home, dbt_manifest, warehouse_uri=str(tmp_path / "no_warehouse"))
    with duckdb.connect(str(home.warehouse_db), read_only=True) as con:
        assert (
            con.execute("select count(*) from main.metric_tree_daily").fetchone()[0] == loaded["main.metric_tree_daily"]
        )
        assert con.execute("select count(*) from main.regressions").fetchone()[0] > 0


def test_the_spark_warehouse_location(monkeypatch, tmp_path):
    home = data_home(tmp_path)
    monkeypatch.delenv("PERFWH_SPARK_WAREHOUSE_URI", raising=False)
    monkeypatch.delenv("PERFWH_SPARK_DIR", raising=False)
    assert spark_warehouse_uri(home) == str(tmp_path / "spark" / "warehouse")
    monkeypatch.setenv("PERFWH_SPARK_DIR", str(tmp_path / "elsewhere"))
    assert spark_warehouse_uri(home) == str(tmp_path / "elsewhere" / "warehouse")
    monkeypatch.setenv("PERFWH_SPARK_WAREHOUSE_URI", "s3a://perfwh-lake/spark-warehouse/")
    assert spark_warehouse_uri(home) == "s3://perfwh-lake/spark-warehouse"
