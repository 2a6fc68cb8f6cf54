"""Plots and figures for asset metadata (lib.metadata_plots, lib.mart_figures) on the built demo fleet."""

from __future__ import annotations

import xml.etree.ElementTree as ElementTree
from urllib.parse import unquote

import pytest

from perf_assets.lib import metadata_plots as plots
from perf_assets.lib.mart_figures import mart_figures

pytestmark = pytest.mark.slow

SVG = "{http://www.w3.org/2000/svg}"
TREE_SQL = "select grain, entity_id, metric_date, node_id, numerator, denominator from metric_tree_daily"


def _inline_svg(markdown: str) -> ElementTree.Element:
    """The SVG of an inline Markdown image, parsed (fails on anything but one data:image/svg+xml URI)."""
    assert markdown.startswith("![") and markdown.endswith(")"), markdown[:80]
    prefix = "](data:image/svg+xml,"
    assert prefix in markdown
    return ElementTree.fromstring(unquote(markdown.split(prefix, 1)[1][:-1]))


@pytest.fixture(scope="module")
def tree(demo_snapshot):
    return demo_snapshot(TREE_SQL)


def test_sparklines_fit_the_ui_inline_limit_and_draw_every_day(demo_home, demo_snapshot, tree):
    days = demo_snapshot("select count(distinct metric_date) as n from fct_fleet_day")["n"].iloc[0]
    clusters = demo_snapshot("select count(distinct cluster) as n from fct_cluster_day")["n"].iloc[0]
    view = plots.regression_view(demo_snapshot("select * from regressions"), tree)
    for markdown, lines in (
        (plots.fleet_goodput_sparkline(tree), 1),
        (plots.cluster_goodput_sparkline(tree), clusters),
        (plots.regression_sparkline(view), 1),
    ):
        assert len(markdown) < plots.INLINE_LIMIT
        drawing = _inline_svg(markdown)
        polylines = drawing.findall(f"{SVG}polyline")
        assert len(polylines) == lines
        for polyline in polylines:  # the demo's days are fewer than the thinning limit: one point per day
            assert len(polyline.get("points").split(",")) == 2 * days


def test_fleet_figures_multiply_to_goodput_and_match_the_mart(demo_home, demo_snapshot):
    figures = mart_figures(demo_home)
    fleet = figures["fct_fleet_day"]
    factors = fleet["availability"] * fleet["allocation"] * fleet["runtime_goodput"] * fleet["program_goodput"]
    assert factors == pytest.approx(fleet["goodput"], rel=1e-9)
    mart = demo_snapshot("select sum(useful_flop) / sum(installed_pfs) as goodput from fct_fleet_day")
    assert fleet["goodput"] == pytest.approx(mart["goodput"].iloc[0], rel=1e-9)
    for table in ("fct_fleet_day", "fct_cluster_day", "metric_tree_daily"):
        rows = demo_snapshot(f"select count(*) as n from {table}")["n"].iloc[0]
        assert figures[table]["dagster/row_count"] == rows
    cluster = figures["fct_cluster_day"]
    for name in demo_snapshot("select distinct cluster from fct_cluster_day")["cluster"]:
        assert f"| {name} |" in cluster["goodput_by_cluster_table"]
    assert fleet["goodput_plot"].startswith("![") and "data:image/svg+xml;base64," in fleet["goodput_plot"]


def test_regression_view_plots_the_headline_change_with_its_interval(demo_snapshot, tree):
    found = demo_snapshot("select * from regressions")
    row = plots.headline_regression(found)
    assert row is not None and row["change_kind"] == "regression"
    regressions = found[found["change_kind"] == "regression"]
    confirmed = regressions[regressions["verdict"] == "confirmed"]
    # the demo's rollout has 7 days after it, the last 2 provisional (perf_assets/lib/provisional.py): maybe none
    candidates = confirmed if len(confirmed) else regressions
    widest = min(plots.GRAIN_ORDER[grain] for grain in candidates["grain"])
    assert plots.GRAIN_ORDER[row["grain"]] == widest
    view = plots.regression_view(found, tree)
    assert view["change"] == str(row["change_date"])[:10] and view["change"] in view["days"]
    low, high = sorted(view["band"])
    assert low <= row["after_level"] <= high  # the after level lies inside the effect's 95% interval
    drawing = ElementTree.fromstring(plots.regression_chart(view))  # lib.svg: inline-HTML SVG, no namespace
    changes = [line for line in drawing.iter("line") if line.get("class") == "change"]
    assert [line.get("data-change-date") for line in changes] == [view["change"]]
