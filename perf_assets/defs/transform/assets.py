"""The warehouse: dbt builds staging -> intermediate -> marts (data tests run as asset checks)."""

import dagster as dg
from dagster_dbt import DbtCliResource, dbt_assets

from perf_assets.defs.resources import PerfwhHome
from perf_assets.lib.contracts import WRITER_POOL
from perf_assets.lib.dbt_project import dbt_project
from perf_assets.lib.dbt_translator import translator
from perf_assets.lib.warehouse import publish_snapshot, warehouse_write_lock


@dbt_assets(
    manifest=dbt_project.manifest_path,
    project=dbt_project,
    pool=WRITER_POOL,
    name="warehouse_dbt_models",
    dagster_dbt_translator=translator,
)
def warehouse_dbt_models(context: dg.AssetExecutionContext, dbt: DbtCliResource, perfwh: PerfwhHome):
    """dbt build, holding the warehouse writer lock; publish the read-only snapshot when it succeeds."""
    home = perfwh.home()
    with warehouse_write_lock(home):
        yield from dbt.cli(["build"], context=context).stream()
        published = publish_snapshot(home)
    context.log.info(f"published {published}")
