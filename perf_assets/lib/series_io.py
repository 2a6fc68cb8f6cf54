"""Series in and results out for ``perfwh detect FILE``: the warehouse's detector on any series.

Input, one series: a CSV column (``column``; a one-column CSV needs no name) or JSON
``{"series": [numbers]}`` (optionally ``"denominators": [numbers]`` and an ``"id"`` echoed back)
or a bare JSON list. Input with ``jsonl=True``: one such JSON value per line, blank lines skipped.
Missing values (JSON ``null`` or ``NaN``, an empty CSV cell, ``NaN``, ``NA``, ``null``, ``None``)
are unknown, never zero: the detector drops them and indices keep the original numbering.
Values are taken as numerators over a denominator of 1 unless denominators are given.

The log scale (the default) takes positive values only: a value <= 0 is an error that names it
(:class:`SeriesInputError`), never silently dropped; ``scale="linear"`` takes any sign and reports
effects as ``(after - before) / |before|``.

Output, one JSON object per series: ``change_points`` (indices of the first point of each new
regime), ``changes`` (each with ``index``, ``before``, ``after``, ``effect`` (relative),
``ci`` ([low, high] bootstrap interval of the relative effect), ``p_value``, ``q_value``,
``direction`` (up/down), ``verdict`` (confirmed/provisional), ``shape`` (step/drift), ``n_before``,
``n_after``, ``welch_ci``, ``merge_p_value`` (only for a split-and-merge proposal: its test between its neighbouring
changes) and, when told which way is better, ``kind`` (improvement/regression)),
``status`` (changed, no_change or too_short: not tested), ``n``, ``n_valid``, ``min_length``, and
``p_value``/``q_value`` of the scan of the whole series (null when not tested).
"""

from __future__ import annotations

import csv
import io
import json
import math
from dataclasses import dataclass

import numpy as np

from perf_assets.lib.changepoint import ChangePoint, DetectorConfig, SeriesResult, detect

__all__ = ["InputSeries", "SeriesInputError", "detect_series", "read_series", "result_dict"]

MISSING_TOKENS = frozenset({"", "nan", "null", "none", "na", "n/a"})


class SeriesInputError(ValueError):
    """Input that cannot be read as series: the message says where and why."""


@dataclass(frozen=True)
class InputSeries:
    values: np.ndarray  # float, NaN where missing
    denominators: np.ndarray | None  # None: 1 for every point
    where: str  # for messages: "line 3", "column 'latency_ms'", "the JSON input"
    id: object = None  # the "id" of a JSON object, echoed in the result


def _number(value: object, where: str, position: int) -> float:
    if value is None:
        return math.nan
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise SeriesInputError(f"{where}: point {position} is {json.dumps(value)}, not a number or null")
    number = float(value)
    if math.isinf(number):
        raise SeriesInputError(f"{where}: point {position} is infinite (use null for a missing value)")
    return number


def _token(text: str, where: str, position: int) -> float:
    token = text.strip()
    if token.lower() in MISSING_TOKENS:
        return math.nan
    try:
        number = float(token)
    except ValueError:
        raise SeriesInputError(f"{where}: point {position} is {token!r}, not a number (or empty for missing)") from None
    if math.isinf(number):
        raise SeriesInputError(f"{where}: point {position} is infinite (leave it empty for a missing value)")
    return number


def _from_json_value(value: object, where: str) -> InputSeries:
    ident = None
    denominators = None
    if isinstance(value, dict):
        if "series" not in value:
            raise SeriesInputError(f'{where}: expected {{"series": [numbers]}}, got keys {sorted(value)}')
        ident = value.get("id")
        denominators = value.get("denominators")
        value = value["series"]
    if not isinstance(value, list):
        raise SeriesInputError(f'{where}: "series" must be a list of numbers, got {type(value).__name__}')
    values = np.array([_number(v, where, i) for i, v in enumerate(value)], dtype=float)
    den = None
    if denominators is not None:
        if not isinstance(denominators, list) or len(denominators) != len(value):
            raise SeriesInputError(f'{where}: "denominators" must be a list as long as "series" ({len(value)})')
        den = np.array([_number(v, where + " denominators", i) for i, v in enumerate(denominators)], dtype=float)
    return InputSeries(values=values, denominators=den, where=where, id=ident)


def _read_json(text: str) -> InputSeries:
    try:
        value = json.loads(text)
    except json.JSONDecodeError as error:
        raise SeriesInputError(f"the JSON input is not valid JSON: {error}") from None
    return _from_json_value(value, "the JSON input")


def _read_jsonl(text: str) -> list[InputSeries]:
    out = []
    for number, line in enumerate(text.splitlines(), start=1):
        if not line.strip():
            continue
        try:
            value = json.loads(line)
        except json.JSONDecodeError as error:
            raise SeriesInputError(f"line {number}: not valid JSON: {error}") from None
        out.append(_from_json_value(value, f"line {number}"))
    if not out:
        raise SeriesInputError("no series: the JSON lines input is empty")
    return out


def _read_csv(text: str, column: str | None, denominator_column: str | None) -> InputSeries:
    rows = [row for row in csv.reader(io.StringIO(text)) if row and any(cell.strip() for cell in row)]
    if not rows:
        raise SeriesInputError("no series: the CSV input is empty")
    header = [cell.strip() for cell in rows[0]]

    def is_number(cell: str) -> bool:
        try:
            float(cell)
        except ValueError:
            return cell.strip().lower() in MISSING_TOKENS
        return True

    has_header = not all(is_number(cell) for cell in header)
    if column is None:
        if len(header) != 1:
            names = ", ".join(header) if has_header else f"{len(header)} unnamed columns"
            raise SeriesInputError(f"the CSV has several columns ({names}): choose one with --column NAME")
        index, name = 0, header[0] if has_header else "1"
    else:
        if not has_header:
            raise SeriesInputError(f"--column {column!r}: the CSV has no header row to find it in")
        if column not in header:
            raise SeriesInputError(f"--column {column!r} is not a column of the CSV (columns: {', '.join(header)})")
        index, name = header.index(column), column
    body = rows[1:] if has_header else rows
    first_line = 2 if has_header else 1

    def cells(col: int, label: str) -> np.ndarray:
        values = []
        for i, row in enumerate(body):
            if col >= len(row):
                raise SeriesInputError(f"CSV line {first_line + i}: no value for column {label!r} (short row)")
            values.append(_token(row[col], f"column {label!r}", i))
        return np.array(values, dtype=float)

    values = cells(index, name)
    den = None
    if denominator_column is not None:
        if not has_header or denominator_column not in header:
            raise SeriesInputError(f"--denominator-column {denominator_column!r} is not a column of the CSV")
        den = cells(header.index(denominator_column), denominator_column)
    return InputSeries(values=values, denominators=den, where=f"column {name!r}")


def read_series(
    text: str, *, column: str | None = None, denominator_column: str | None = None, jsonl: bool = False
) -> list[InputSeries]:
    """Parse ``text`` into series: JSON lines when ``jsonl``, else JSON when it starts with ``{``/``[``
    (and no ``column`` is named), else CSV. Raises :class:`SeriesInputError` with a clear message."""
    if not text.strip():
        raise SeriesInputError("no series: the input is empty")
    if jsonl:
        if column is not None or denominator_column is not None:
            raise SeriesInputError("--column and --denominator-column are for CSV input, not --jsonl")
        return _read_jsonl(text)
    if column is None and denominator_column is None and text.lstrip()[:1] in "{[":
        return [_read_json(text)]
    return [_read_csv(text, column, denominator_column)]


def _check(series: InputSeries, scale: str) -> None:
    if scale != "log":
        return
    with np.errstate(invalid="ignore"):
        bad = np.flatnonzero(series.values <= 0)
    if bad.size:
        i = int(bad[0])
        raise SeriesInputError(
            f"{series.where}: point {i} is {series.values[i]:g}, <= 0: the log scale takes positive values only "
            f"({bad.size} such point(s)); use --scale linear for values that can be zero or negative"
        )


def _clean(value: float) -> float | None:
    return float(value) if math.isfinite(value) else None


def result_dict(status: SeriesResult, changes: list[ChangePoint], better: str | None = None) -> dict:
    """The JSON result of one series (module docstring)."""
    out_changes = []
    for cp in changes:
        item = {
            "index": cp.index,
            "before": _clean(cp.before_level),
            "after": _clean(cp.after_level),
            "effect": _clean(cp.relative_effect),
            "ci": [_clean(cp.ci_low), _clean(cp.ci_high)],
            "p_value": cp.p_value,
            "q_value": cp.q_value,
            "direction": cp.direction,
            "verdict": cp.verdict,
            "shape": cp.shape,
            "n_before": cp.n_before,
            "n_after": cp.n_after,
            "welch_ci": [_clean(cp.welch_ci_low), _clean(cp.welch_ci_high)],
        }
        if cp.merge_p_value is not None:  # split_merge: a proposal kept by its test between its neighbours
            item["merge_p_value"] = cp.merge_p_value
        if better is not None:
            item["kind"] = "improvement" if (cp.direction == "up") == (better == "higher") else "regression"
        out_changes.append(item)
    return {
        "change_points": [cp.index for cp in changes],
        "changes": out_changes,
        "status": status.status,
        "n": status.n_points,
        "n_valid": status.n_valid,
        "min_length": status.min_length,
        "p_value": status.p_value,
        "q_value": status.q_value,
    }


def detect_series(series: list[InputSeries], config: DetectorConfig, better: str | None = None) -> list[dict]:
    """Run the detector once on all ``series`` (one batch: the vectorized path, one BH family).

    Series are padded with missing points to the longest one; the detector groups them by valid
    length, so series of equal length are scanned together.
    """
    for item in series:
        _check(item, config.scale)
    width = max((item.values.size for item in series), default=0)
    num = np.full((len(series), width), np.nan)
    den = np.full((len(series), width), np.nan)
    for row, item in enumerate(series):
        n = item.values.size
        num[row, :n] = item.values
        den[row, :n] = 1.0 if item.denominators is None else item.denominators
    result = detect(num, den, config)
    per_row: dict[int, list[ChangePoint]] = {}
    for cp in result.changes:
        per_row.setdefault(cp.series_index, []).append(cp)
    out = []
    for row, item in enumerate(series):
        status = result.series[row]
        status = SeriesResult(**{**status.__dict__, "n_points": item.values.size})
        record = result_dict(status, per_row.get(row, []), better)
        if item.id is not None:
            record = {"id": item.id, **record}
        out.append(record)
    return out
