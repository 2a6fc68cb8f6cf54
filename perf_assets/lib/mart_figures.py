"""Figures of the warehouse after a dbt build, per table, for the models' materialization metadata.

Row counts of every table (staging views are left out: they read the raw Parquet, whose assets carry
their own counts), and for `fct_fleet_day` and `fct_cluster_day` goodput with its factors and a plot.
Plain values only (ints, floats, text, Markdown under names ending in _plot, _sparkline or _table).
"""

from __future__ import annotations

from perf_assets.lib import metadata_plots as plots
from perf_assets.lib.detection import SPINE_FACTORS
from perf_assets.lib.paths import DataHome
from perf_assets.lib.warehouse import connect

TREE_SQL = """
select grain, entity_id, metric_date, node_id, numerator, denominator
from main.metric_tree_daily where grain in ('fleet', 'cluster') and node_id in ?
"""


def mart_figures(home: DataHome) -> dict[str, dict]:
    """{table name: {metadata name: plain value}}, read from the warehouse (call while holding the writer lock)."""
    connection = connect(home.warehouse_db, read_only=True)
    try:
        tables = connection.execute(
            "select schema_name, table_name from duckdb_tables() where database_name = current_database()"
        ).fetchall()
        figures: dict[str, dict] = {}
        for schema, name in tables:
            count = connection.execute(f'select count(*) from "{schema}"."{name}"').fetchone()[0]
            figures.setdefault(name, {})["dagster/row_count"] = int(count)
        if "metric_tree_daily" not in figures:
            return figures
        tree = connection.execute(TREE_SQL, [[plots.GOODPUT, *SPINE_FACTORS]]).df()
    finally:
        connection.close()
    if tree.empty:
        return figures
    figures.setdefault("fct_fleet_day", {}).update(fleet_figures(tree))
    figures.setdefault("fct_cluster_day", {}).update(cluster_figures(tree))
    return figures


def _period(tree) -> str:
    days = sorted(str(day)[:10] for day in tree["metric_date"].unique())
    return f"{days[0]} .. {days[-1]} ({len(days)} days)" if days else "no days"


def fleet_figures(tree) -> dict:
    """Fleet goodput and its spine factors over the period (Σ/Σ; unknown ones left out), with the plot."""
    out: dict = {"period": _period(tree)}
    factors = plots.fleet_factors(tree)
    unknown = [name for name, value in factors.items() if value is None]
    out.update({name: value for name, value in factors.items() if value is not None})
    if unknown:
        out["unknown_factors"] = ", ".join(unknown)
    out["goodput_sparkline"] = plots.fleet_goodput_sparkline(tree)
    out["goodput_plot"] = plots.markdown_image(plots.fleet_goodput_chart(tree), "fleet goodput and its factors per day")
    return out


def cluster_figures(tree) -> dict:
    rows = plots.cluster_goodput(tree)
    return {
        "period": _period(tree),
        "clusters": len(rows),
        "goodput_by_cluster_table": plots.cluster_goodput_table(rows),
        "goodput_sparkline": plots.cluster_goodput_sparkline(tree),
        "goodput_plot": plots.markdown_image(plots.cluster_goodput_chart(tree), "goodput per cluster per day"),
    }
