"""Key plots and figures for Dagster materialization metadata: plain functions, no Dagster import.

What the Dagster 1.13 UI does with a Markdown metadata value (checked in the browser): an image whose
source is a `data:` URI is rendered (its sanitizer allows `data` in `src`; raw `<svg>` markup is stripped
to its text), and the value is shown inline in the asset's metadata table only when it is shorter than
1,000 characters; a longer one becomes a "[Show Markdown]" button that opens it in a dialog. So each
asset gets two plots: a sparkline (`*_sparkline`, an SVG data URI under 1,000 characters, inline) and
the full chart of lib/svg.py with axes and legend (`*_plot`, base64, in the dialog). Neither carries
scripts nor external references.

The inputs are rows of `metric_tree_daily` (grain, entity_id, metric_date, node_id, numerator,
denominator) and of `regressions`. Ratios over a period are Σ numerator / Σ denominator; a missing
or zero denominator is unknown (None), never 0.
"""

from __future__ import annotations

import base64
from datetime import date, timedelta
from urllib.parse import quote

import pandas as pd

from perf_assets.lib import svg
from perf_assets.lib.detection import SPINE_FACTORS

GOODPUT = "goodput"
GRAIN_ORDER = {"fleet": 0, "cluster": 1, "node": 2, "gpu": 3}
INLINE_LIMIT = 1000  # the UI shows a Markdown value inline below this many characters
SPARK_W, SPARK_H, SPARK_PAD = 240, 60, 3
SPARK_COLORS = ("steelblue", "crimson", "seagreen", "darkorange", "purple", "gray")  # no '#': URL-safe


def inline_markdown_image(drawing: str, alt: str) -> str:
    """Markdown for a small SVG as a percent-encoded data URI (shorter than base64 for SVG text)."""
    safe_alt = alt.replace("[", "(").replace("]", ")")
    encoded = quote(drawing, safe="=',.:/-")
    return f"![{safe_alt}](data:image/svg+xml,{encoded})"


def _stride(values: list, points: int) -> list[int]:
    """Indices of at most `points` evenly spaced items, the first and the last included."""
    if len(values) <= points:
        return list(range(len(values)))
    step = (len(values) - 1) / (points - 1)
    return sorted({round(i * step) for i in range(points)})


def sparkline(
    days: list[str],
    lines: dict[str, list[float | None]],
    *,
    change_day: str | None = None,
    band: tuple[float, float] | None = None,
    points: int = 48,
) -> str:
    """A compact SVG: one polyline per series (integer coordinates, days thinned to `points`), a red
    vertical line on the change day and a shaded band (y_low, y_high) after it. No text: the metadata
    entry next to it says what it shows."""
    keep = _stride(days, points)
    values = [v for line in lines.values() for i in keep if _known(v := line[i])]
    if band:
        values += [y for y in band if _known(y)]
    low, high = (min(values), max(values)) if values else (0.0, 1.0)
    if high == low:
        low, high = low - 0.5 * (abs(low) or 1.0) * 0.1, high + 0.5 * (abs(high) or 1.0) * 0.1
    inner_w, inner_h = SPARK_W - 2 * SPARK_PAD, SPARK_H - 2 * SPARK_PAD
    slot = {index: n for n, index in enumerate(keep)}

    def x(index: int) -> int:
        return round(SPARK_PAD + inner_w * slot[index] / max(len(keep) - 1, 1))

    def y(value: float) -> int:
        return round(SPARK_PAD + inner_h * (1 - (value - low) / (high - low)))

    parts = [f"<rect width='{SPARK_W}' height='{SPARK_H}' fill='white' stroke='silver'/>"]
    if change_day in days:
        at = min(keep, key=lambda i: abs(i - days.index(change_day)))
        if band and all(_known(v) for v in band):
            top, bottom = y(max(band)), y(min(band))
            parts.append(
                f"<rect x='{x(at)}' y='{top}' width='{SPARK_W - SPARK_PAD - x(at)}' height='{max(bottom - top, 1)}' "
                "fill='orange' fill-opacity='.35'/>"
            )
        parts.append(f"<path d='M{x(at)},0V{SPARK_H}' stroke='red'/>")
    for n, line in enumerate(lines.values()):
        coords = ",".join(f"{x(i)},{y(line[i])}" for i in keep if _known(line[i]))
        if coords:
            color = SPARK_COLORS[n % len(SPARK_COLORS)]
            parts.append(f"<polyline points='{coords}' fill='none' stroke='{color}' stroke-width='1.5'/>")
    return (
        f"<svg xmlns='http://www.w3.org/2000/svg' width='{SPARK_W}' height='{SPARK_H}' "
        f"viewBox='0 0 {SPARK_W} {SPARK_H}'>{''.join(parts)}</svg>"
    )


def inline_sparkline(days: list[str], lines: dict[str, list[float | None]], alt: str, **marks) -> str:
    """`sparkline` as inline Markdown, thinned until it fits the UI's inline limit."""
    points = max(8, 60 // max(len(lines), 1))
    while True:
        text = inline_markdown_image(sparkline(days, lines, points=points, **marks), alt)
        if len(text) < INLINE_LIMIT or points <= 4:
            return text
        points -= 4


def markdown_image(drawing: str, alt: str) -> str:
    """Markdown for an inline SVG image (a data URI) that the Dagster UI shows in the metadata table."""
    if "xmlns=" not in drawing.split(">", 1)[0]:  # an SVG image (not inline in HTML) needs its namespace
        drawing = drawing.replace("<svg ", '<svg xmlns="http://www.w3.org/2000/svg" ', 1)
    encoded = base64.b64encode(drawing.encode("utf-8")).decode("ascii")
    safe_alt = alt.replace("[", "(").replace("]", ")")
    return f"![{safe_alt}](data:image/svg+xml;base64,{encoded})"


def _day(value) -> str:
    return str(value)[:10]


def _known(value) -> bool:
    """False for None, NaN and NaT (unknown), true for any other scalar."""
    return value is not None and not bool(pd.isna(value))


def _ratio(numerator, denominator) -> float | None:
    if not _known(numerator) or not _known(denominator) or float(denominator) == 0.0:
        return None
    return float(numerator) / float(denominator)


def daily_ratios(tree: pd.DataFrame, grain: str, node_id: str) -> dict[str, dict[str, float | None]]:
    """{entity: {day: Σnum/Σden}} of one tree node at one grain (None where unknown)."""
    rows = tree[(tree["grain"] == grain) & (tree["node_id"] == node_id)]
    out: dict[str, dict[str, float | None]] = {}
    for row in rows.itertuples(index=False):
        out.setdefault(str(row.entity_id), {})[_day(row.metric_date)] = _ratio(row.numerator, row.denominator)
    return out


def period_ratio(tree: pd.DataFrame, grain: str, entity_id: str, node_id: str) -> float | None:
    """Σ numerator / Σ denominator of one node over every day of the frame (unknown days left out of both)."""
    rows = tree[(tree["grain"] == grain) & (tree["entity_id"] == entity_id) & (tree["node_id"] == node_id)]
    rows = rows[rows["numerator"].notna() & rows["denominator"].notna()]
    if rows.empty:
        return None
    return _ratio(rows["numerator"].sum(), rows["denominator"].sum())


def latest_day(tree: pd.DataFrame, grain: str) -> str | None:
    days = tree.loc[tree["grain"] == grain, "metric_date"]
    return _day(days.max()) if len(days) else None


def fleet_factors(tree: pd.DataFrame) -> dict[str, float | None]:
    """Fleet goodput and its spine factors over the whole period (Σ/Σ): goodput = A x U x R x P."""
    fleet = tree.loc[tree["grain"] == "fleet", "entity_id"]
    if fleet.empty:
        return {name: None for name in (GOODPUT, *SPINE_FACTORS)}
    entity = str(fleet.iloc[0])
    return {name: period_ratio(tree, "fleet", entity, name) for name in (GOODPUT, *SPINE_FACTORS)}


def fleet_goodput_chart(tree: pd.DataFrame) -> str:
    """Fleet goodput per day with its four spine factors (capacity lens)."""
    series = {}
    days: set[str] = set()
    for name in (GOODPUT, *SPINE_FACTORS):
        by_entity = daily_ratios(tree, "fleet", name)
        by_day = next(iter(by_entity.values()), {})
        days.update(by_day)
        series[name] = by_day
    ordered = sorted(days)
    return svg.line_chart(
        ordered,
        {name: [by_day.get(day) for day in ordered] for name, by_day in series.items()},
        y_label="fraction",
        title="fleet goodput and its factors per day",
    )


def cluster_goodput(tree: pd.DataFrame) -> list[dict]:
    """Per cluster: goodput over the period (Σ/Σ) and on the latest day, sorted by cluster."""
    last = latest_day(tree, "cluster")
    rows = []
    for cluster, by_day in sorted(daily_ratios(tree, "cluster", GOODPUT).items()):
        rows.append(
            {
                "cluster": cluster,
                "goodput": period_ratio(tree, "cluster", cluster, GOODPUT),
                "latest_day": last,
                "goodput_latest_day": by_day.get(last) if last else None,
            }
        )
    return rows


def cluster_goodput_table(rows: list[dict]) -> str:
    def shown(value) -> str:
        return f"{value:.4f}" if _known(value) else "unknown"

    lines = ["| cluster | goodput (period, Σ/Σ) | goodput on the latest day |", "| --- | ---: | ---: |"]
    lines += [f"| {r['cluster']} | {shown(r['goodput'])} | {shown(r['goodput_latest_day'])} |" for r in rows]
    return "\n".join(lines)


def cluster_goodput_chart(tree: pd.DataFrame) -> str:
    """Goodput per day, one line per cluster."""
    by_cluster = daily_ratios(tree, "cluster", GOODPUT)
    days = sorted({day for by_day in by_cluster.values() for day in by_day})
    return svg.line_chart(
        days,
        {cluster: [by_day.get(day) for day in days] for cluster, by_day in sorted(by_cluster.items())},
        y_label="goodput (fraction)",
        title="goodput per cluster per day",
    )


def headline_regression(found: pd.DataFrame) -> dict | None:
    """The regression to plot: confirmed before provisional, the widest grain, goodput first, then |effect|."""
    if found.empty:
        return None
    rows = found[found["change_kind"] == "regression"]
    if rows.empty:
        return None
    ranked = sorted(
        rows.to_dict("records"),
        key=lambda r: (
            r.get("verdict") != "confirmed",
            GRAIN_ORDER.get(r["grain"], 9),
            r["metric"] != GOODPUT,
            -abs(r["relative_effect"]) if _known(r.get("relative_effect")) else 0.0,
        ),
    )
    return ranked[0]


def _previous_day(day: str) -> str:
    return (date.fromisoformat(day) - timedelta(days=1)).isoformat()


def _percent(value) -> str:
    return f"{value:+.1%}" if _known(value) else "unknown"


def regression_view(found: pd.DataFrame, tree: pd.DataFrame) -> dict:
    """What the regression plots show: the headline regression's series (days, values), the change day,
    the before/after levels, the 95% CI of the effect as a band around the after level, and a title;
    the fleet's goodput when no regression was found."""
    row = headline_regression(found)
    if row is None:
        by_day = next(iter(daily_ratios(tree, "fleet", GOODPUT).values()), {})
        days = sorted(by_day)
        return {
            "title": "fleet goodput: no regression detected",
            "name": "fleet goodput",
            "metric": GOODPUT,
            "days": days,
            "values": [by_day.get(d) for d in days],
            "change": None,
            "levels": [],
            "band": None,
            "band_from": None,
            "band_to": None,
        }
    grain, entity, metric = row["grain"], str(row["entity_id"]), row["metric"]
    by_day = daily_ratios(tree, grain, metric).get(entity, {})
    days = sorted(by_day)
    change = _day(row["change_date"])
    levels, band, last = [], None, days[-1] if days else None
    before, after = row.get("before_level"), row.get("after_level")
    if days and _known(before) and _known(after):
        first = max(_day(row["before_start_date"]) if _known(row.get("before_start_date")) else days[0], days[0])
        last = min(_day(row["after_end_date"]) if _known(row.get("after_end_date")) else days[-1], days[-1])
        levels = [
            (first, _previous_day(change), before, f"before {before:.4g}"),
            (change, last, after, f"after {after:.4g}"),
        ]
        if _known(row.get("ci_low")) and _known(row.get("ci_high")):
            band = (before * (1 + row["ci_low"]), before * (1 + row["ci_high"]))
    where = "fleet" if grain == "fleet" else f"{grain} {entity}"
    return {
        "title": (
            f"{metric} of {where}: {_percent(row.get('relative_effect'))} from {change} "
            f"(95% CI {_percent(row.get('ci_low'))} to {_percent(row.get('ci_high'))})"
        ),
        "name": f"{metric} ({where})",
        "metric": metric,
        "days": days,
        "values": [by_day.get(d) for d in days],
        "change": change,
        "levels": levels,
        "band": band,
        "band_from": change,
        "band_to": last,
    }


def regression_chart(view: dict) -> str:
    """The full chart of `regression_view` (axes, levels, CI band, legend)."""
    bands = [(view["band_from"], view["band_to"], *view["band"])] if view["band"] else []
    return svg.line_chart(
        view["days"],
        {view["name"]: view["values"]},
        y_label=f"{view['metric']} (fraction)",
        markers=[(view["change"], f"change {view['change']}")] if view["change"] else [],
        levels=view["levels"],
        bands=bands,
        title=view["title"],
    )


def regression_sparkline(view: dict) -> str:
    """The inline sparkline of `regression_view`."""
    return inline_sparkline(
        view["days"], {view["name"]: view["values"]}, view["title"], change_day=view["change"], band=view["band"]
    )


def fleet_goodput_sparkline(tree: pd.DataFrame) -> str:
    by_day = next(iter(daily_ratios(tree, "fleet", GOODPUT).values()), {})
    days = sorted(by_day)
    return inline_sparkline(days, {"fleet": [by_day.get(d) for d in days]}, "fleet goodput per day")


def cluster_goodput_sparkline(tree: pd.DataFrame, most: int = len(SPARK_COLORS)) -> str:
    """Goodput per day of the first `most` clusters (sorted by name), one colour each."""
    by_cluster = dict(sorted(daily_ratios(tree, "cluster", GOODPUT).items())[:most])
    days = sorted({day for by_day in by_cluster.values() for day in by_day})
    names = ", ".join(f"{name} {SPARK_COLORS[n]}" for n, name in enumerate(by_cluster))
    lines = {name: [by_day.get(d) for d in days] for name, by_day in by_cluster.items()}
    return inline_sparkline(days, lines, f"goodput per day: {names}")
