"""Small inline-SVG charts for the HTML reports: a line chart, a signed bar chart, a waterfall.

Standard library only; every text goes through html.escape. The charts carry no scripts, no styles
from outside and no external references.
"""

from __future__ import annotations

import math
from html import escape

WIDTH, HEIGHT = 760, 280
LEFT, RIGHT, TOP, BOTTOM = 70, 20, 20, 50
COLORS = ("#1f77b4", "#d62728", "#2ca02c", "#9467bd", "#8c564b", "#e377c2", "#7f7f7f")


def _finite(value) -> bool:
    return value is not None and isinstance(value, (int, float)) and math.isfinite(value)


def _svg(body: list[str], width: int = WIDTH, height: int = HEIGHT, title: str = "") -> str:
    label = f"<title>{escape(title)}</title>" if title else ""
    return (
        f'<svg width="{width}" height="{height}" '
        f'viewBox="0 0 {width} {height}" role="img" font-family="sans-serif" font-size="11">'
        + label
        + "".join(body)
        + "</svg>"
    )


def _text(x: float, y: float, text: str, anchor: str = "start", extra: str = "") -> str:
    return f'<text x="{x:.1f}" y="{y:.1f}" text-anchor="{anchor}" {extra}>{escape(text)}</text>'


def line_chart(
    days: list[str],
    series: dict[str, list[float | None]],
    *,
    y_label: str,
    markers: list[tuple[str, str]] = (),
    levels: list[tuple[str, str, float, str]] = (),
    bands: list[tuple[str, str, float, float]] = (),
    title: str = "",
) -> str:
    """Lines over ordered day labels. markers: (day, label) vertical lines; levels: (from_day, to_day,
    y, label) horizontal segments; bands: (from_day, to_day, y_low, y_high) shaded rectangles."""
    if not days:
        return _svg([_text(WIDTH / 2, HEIGHT / 2, "no data", "middle")], title=title)
    values = [v for line in series.values() for v in line if _finite(v)]
    values += [y for _, _, y, _ in levels if _finite(y)]
    values += [y for band in bands for y in band[2:] if _finite(y)]
    low, high = (min(values), max(values)) if values else (0.0, 1.0)
    pad = (high - low) * 0.08 or abs(high) * 0.05 or 0.05
    low, high = low - pad, high + pad
    plot_w, plot_h = WIDTH - LEFT - RIGHT, HEIGHT - TOP - BOTTOM
    index = {day: i for i, day in enumerate(days)}
    step = plot_w / max(len(days) - 1, 1)

    def x(day: str, shift: float = 0.0) -> float:
        return min(max(LEFT + (index[day] + shift) * step, LEFT), WIDTH - RIGHT)

    def y(value: float) -> float:
        return TOP + plot_h * (1 - (value - low) / (high - low))

    body = [
        f'<rect x="{LEFT}" y="{TOP}" width="{plot_w}" height="{plot_h}" fill="none" stroke="#999"/>',
        _text(14, TOP + plot_h / 2, y_label, "middle", f'transform="rotate(-90 14 {TOP + plot_h / 2:.1f})"'),
    ]
    for tick in range(5):
        value = low + (high - low) * tick / 4
        body.append(_text(LEFT - 4, y(value) + 4, f"{value:.4g}", "end"))
    every = max(1, math.ceil(len(days) / 10))
    for i, day in enumerate(days):
        if i % every == 0 or i == len(days) - 1:
            body.append(_text(LEFT + i * step, HEIGHT - BOTTOM + 14, day[5:] if len(day) == 10 else day, "middle"))
    for start, stop, y_low, y_high in bands:
        if start in index and stop in index and _finite(y_low) and _finite(y_high):
            body.append(
                f'<rect class="band" x="{x(start, -0.5):.1f}" y="{y(max(y_low, y_high)):.1f}" '
                f'width="{x(stop, 0.5) - x(start, -0.5):.1f}" height="{abs(y(y_low) - y(y_high)):.1f}" '
                f'fill="#ffbb78" fill-opacity="0.45"/>'
            )
    for start, stop, value, label in levels:
        if start in index and stop in index and _finite(value):
            body.append(
                f'<line class="level" x1="{x(start, -0.5):.1f}" x2="{x(stop, 0.5):.1f}" y1="{y(value):.1f}" '
                f'y2="{y(value):.1f}" stroke="#ff7f0e" stroke-width="2" stroke-dasharray="6 3"/>'
            )
            body.append(_text(x(stop, 0.5) - 2, y(value) - 4, label, "end", 'fill="#ff7f0e"'))
    for n, (day, label) in enumerate(markers):
        if day in index:
            body.append(
                f'<line class="change" data-change-date="{escape(day)}" x1="{x(day, -0.5):.1f}" '
                f'x2="{x(day, -0.5):.1f}" y1="{TOP}" y2="{TOP + plot_h}" stroke="#d62728" stroke-width="1.5"/>'
            )
            body.append(_text(x(day, -0.5) + 3, TOP + 12 + 12 * (n % 4), label, "start", 'fill="#d62728"'))
    for n, (name, line) in enumerate(series.items()):
        color = COLORS[n % len(COLORS)]
        points = [f"{x(day):.1f},{y(v):.1f}" for day, v in zip(days, line) if _finite(v)]
        if points:
            body.append(f'<polyline fill="none" stroke="{color}" stroke-width="1.8" points="{" ".join(points)}"/>')
        body.append(f'<rect x="{LEFT + 8 + 130 * n}" y="{HEIGHT - 18}" width="10" height="10" fill="{color}"/>')
        body.append(_text(LEFT + 22 + 130 * n, HEIGHT - 9, name))
    return _svg(body, title=title)


def bar_chart(items: list[tuple[str, float | None]], *, unit: str, title: str = "") -> str:
    """Horizontal signed bars, one per (label, value); a missing value is drawn as the text 'unknown'."""
    row_h, label_w = 24, 190
    height = TOP + row_h * max(len(items), 1) + 20
    values = [abs(v) for _, v in items if _finite(v)]
    scale = max(values) if values else 1.0
    scale = scale or 1.0
    half = (WIDTH - label_w - RIGHT - 90) / 2
    zero = label_w + half
    body = [f'<line x1="{zero}" x2="{zero}" y1="{TOP - 5}" y2="{height - 15}" stroke="#666"/>']
    for i, (label, value) in enumerate(items):
        top = TOP + i * row_h
        body.append(_text(label_w - 6, top + 15, label, "end"))
        if not _finite(value):
            body.append(_text(zero + 4, top + 15, "unknown"))
            continue
        length = half * abs(value) / scale
        left = zero if value >= 0 else zero - length
        color = "#2ca02c" if value >= 0 else "#d62728"
        body.append(f'<rect x="{left:.1f}" y="{top + 4}" width="{max(length, 0.5):.1f}" height="16" fill="{color}"/>')
        body.append(_text(zero + half + 8, top + 15, f"{value:+.4f} {unit}"))
    return _svg(body, height=height, title=title)


def waterfall(
    start: tuple[str, float],
    steps: list[tuple[str, float | None]],
    end_label: str,
    *,
    unit: str,
    subtotals: dict[int, str] | None = None,
) -> str:
    """A descending waterfall: a start bar, one bar per loss (a step of -value), the remainder at the end;
    subtotals {i: label} adds a bar of the running total after step i.

    A step whose value is unknown is drawn as text and the running total stops being drawn after it.
    """
    subtotals = subtotals or {}
    bar_w, gap = 44, 14
    width = max(WIDTH, LEFT + (len(steps) + len(subtotals) + 2) * (bar_w + gap) + RIGHT)
    height = 360
    plot_h = height - TOP - 140
    top_value = start[1] if _finite(start[1]) and start[1] > 0 else 1.0

    def y(value: float) -> float:
        return TOP + plot_h * (1 - value / top_value)

    body = [f'<line x1="{LEFT}" x2="{width - RIGHT}" y1="{y(0):.1f}" y2="{y(0):.1f}" stroke="#666"/>']
    level: float | None = start[1]
    columns = [(start[0], None, "start")]
    for i, (label, value) in enumerate(steps):
        columns.append((label, value, "step"))
        if i in subtotals:
            columns.append((subtotals[i], None, "subtotal"))
    columns.append((end_label, None, "end"))
    fills = {"start": "#1f77b4", "subtotal": "#aaaaaa", "end": "#2ca02c"}
    for i, (label, value, kind) in enumerate(columns):
        left = LEFT + i * (bar_w + gap)
        centre = left + bar_w / 2
        body.append(_text(centre, y(0) + 12, label, "end", f'transform="rotate(-45 {centre:.1f} {y(0) + 12:.1f})"'))
        if kind == "step":
            if not _finite(value) or level is None:
                body.append(_text(centre, y(0) - 4, "unknown", "middle"))
                level = None
                continue
            body.append(
                f'<rect x="{left}" y="{y(level):.1f}" width="{bar_w}" height="{max(y(level - value) - y(level), 0.5):.1f}" '
                f'fill="#d62728"/>'
            )
            body.append(_text(centre, y(level) - 4, f"-{value:.3g}", "middle"))
            level -= value
        else:
            if level is None or not _finite(level):
                body.append(_text(centre, y(0) - 4, "unknown", "middle"))
                continue
            body.append(
                f'<rect x="{left}" y="{y(level):.1f}" width="{bar_w}" height="{max(y(0) - y(level), 0.5):.1f}" '
                f'fill="{fills[kind]}"/>'
            )
            body.append(_text(centre, y(level) - 4, f"{level:.3g}", "middle"))
    body.append(_text(LEFT, height - 6, f"unit: {unit}"))
    return _svg(body, width=width, height=height)
