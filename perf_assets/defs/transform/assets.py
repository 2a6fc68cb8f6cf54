"""The warehouse: dbt builds staging -> intermediate -> marts (data tests run as asset checks)."""

import os
from pathlib import Path

import dagster as dg
from dagster_dbt import DbtCliResource, dbt_assets

from perf_assets.defs.resources import PerfwhHome
from perf_assets.lib import dbt_parse_cache
from perf_assets.lib.contracts import WRITER_POOL
from perf_assets.lib.dbt_project import dbt_project
from perf_assets.lib.dbt_translator import translator
from perf_assets.lib.incremental import day_local_lake_tables, plan_window, project_fingerprint, record_build
from perf_assets.lib.mart_figures import mart_figures
from perf_assets.lib.spark_marts import is_spark_target, load_spark_tables
from perf_assets.lib.warehouse import publish_snapshot, warehouse_write_lock


def _metadata_values(figures: dict) -> dict[str, dg.MetadataValue]:
    """Plain figures (lib.mart_figures) as Dagster metadata: ints, floats, text and Markdown."""
    values = {}
    for name, value in figures.items():
        if isinstance(value, bool) or value is None:
            continue
        if isinstance(value, int):
            values[name] = dg.MetadataValue.int(value)
        elif isinstance(value, float):
            values[name] = dg.MetadataValue.float(value)
        elif name.endswith(("_plot", "_sparkline", "_table")):
            values[name] = dg.MetadataValue.md(value)
        else:
            values[name] = dg.MetadataValue.text(str(value))
    return values


class WarehouseBuildConfig(dg.Config):
    """How the dbt build treats the incremental models (docs/incremental.md)."""

    full_refresh: bool = False  # rebuild every incremental model over every lake day (dbt --full-refresh)


@dbt_assets(
    manifest=dbt_project.manifest_path,
    project=dbt_project,
    pool=WRITER_POOL,
    name="warehouse_dbt_models",
    dagster_dbt_translator=translator,
)
def warehouse_dbt_models(
    context: dg.AssetExecutionContext, dbt: DbtCliResource, perfwh: PerfwhHome, config: WarehouseBuildConfig
):
    """dbt build, holding the warehouse writer lock; publish the read-only snapshot when it succeeds.

    On a Spark target (PERFWH_DBT_TARGET=spark or spark_thrift) the tables dbt built on Spark are first loaded into
    the DuckDB warehouse file (lib.spark_marts), which detection writes to and the snapshot is published from.

    The incremental models rebuild the days lib.incremental.plan_window picks (new days, the lookback, days a late
    file landed for; everything on the first build, after a project change or with full_refresh). When every model and
    check runs and the day-local models rebuild fewer days, that is two dbt builds (BuildWindow.dbt_invocations: the
    day-local models, then the rest); their events are yielded in order and a failure in either fails the asset. What
    was built is recorded only when the run built every model (not a subset of them; the data tests may have been
    left out) and every dbt build succeeded, so a partial run never hides a late day.

    Each dbt invocation starts from the project as the home's previous invocation of the same kind parsed it
    (lib.dbt_parse_cache): dbt skips its full parse when nothing it depends on changed.

    dbt's events are held back until it has finished (it holds DuckDB's lock while it runs), then yielded
    in order, the models' with their row counts, the fleet and cluster marts' with goodput, factors and a plot.
    """
    home = perfwh.home()
    held: list = []
    failure: Exception | None = None
    with warehouse_write_lock(home):
        fingerprint = project_fingerprint(dbt_project.manifest_path)
        window = plan_window(
            home,
            fingerprint,
            full_refresh=config.full_refresh,
            day_local_tables=day_local_lake_tables(dbt_project.manifest_path),
        )
        context.log.info(f"incremental models: {window.describe()}")
        # Every model and test selected: one build, or two when the day-local models rebuild fewer days
        # (window.split; dbt selectors, which override a --select). A subset (models chosen in the UI, checks left
        # out): dagster-dbt selects it itself, in one build over the whole window, as before the split.
        every_model = set(context.selected_asset_keys) >= set(context.assets_def.keys)
        every_check = set(context.selected_asset_check_keys) >= set(context.assets_def.check_keys)
        invocations = window.dbt_invocations() if every_model and every_check else [window.dbt_args()]
        # each invocation's dbt.log and run_results.json lie in the home they built (DBT_TARGET_PATH, relative to the
        # dbt project as dbt reads it, moves them)
        target_root = (
            Path(dbt.project_dir) / os.environ["DBT_TARGET_PATH"] if "DBT_TARGET_PATH" in os.environ else home.dbt_runs
        )
        try:
            for args in invocations:  # in order; a failure stops here, so the second never runs on a failed first
                # dbt's parse of the project, kept in the home by the last invocation like this one (lib.dbt_parse_cache)
                parsed = dbt_parse_cache.cache_file(home, dbt.target or "default", args)
                folder = dbt_parse_cache.run_folder(
                    target_root, context.op_execution_context.op.name, context.run.run_id
                )
                dbt_parse_cache.seed(parsed, folder)
                try:
                    for event in dbt.cli(["build", *args], context=context, target_path=folder).stream():
                        held.append(event)
                finally:
                    dbt_parse_cache.keep(folder, parsed)
        except Exception as error:  # yield what was built before re-raising dbt's failure
            failure = error
        if failure is None and is_spark_target(dbt.target):
            try:  # detection, alerts, reports and the snapshot read DuckDB: Spark's tables go there first
                rebuilt = None if window.full_refresh else (window.start, window.end)  # only those partitions
                loaded = load_spark_tables(home, dbt_project.manifest_path, days=rebuilt)
                context.log.info(f"loaded {len(loaded)} tables built on Spark into {home.warehouse_db}")
            except Exception as error:
                failure = error
        figures = {}
        if failure is None:
            try:
                figures = mart_figures(home)
            except Exception as error:  # the figures are extras: a build that succeeded stays a success
                context.log.warning(f"no row counts, goodput figures or plots for this build: {error!r}")
            context.log.info(f"published {publish_snapshot(home)}")
            if every_model:  # every model (tests may be left out), and every invocation succeeded
                record_build(home, window, fingerprint)
    for event in held:  # in dbt's order: each model's output, then its tests' check results
        extra = {}
        if isinstance(event, dg.Output):
            extra = _metadata_values(figures.get(context.asset_key_for_output(event.output_name).path[-1], {}))
        yield event.with_metadata({**event.metadata, **extra}) if extra else event
    if failure is not None:
        raise failure
