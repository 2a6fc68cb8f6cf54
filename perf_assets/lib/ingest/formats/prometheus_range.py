"""DCGM history as Prometheus range-query JSON (`/api/v1/query_range`, resultType matrix)."""

from __future__ import annotations

import itertools
import json
import math

import numpy as np
import orjson
import pyarrow as pa

from perf_assets.lib.ingest.formats.dcgm_rows import DcgmRows, identity_from_labels
from perf_assets.lib.ingest.formats.decompress import read_bytes
from perf_assets.lib.ingest.formats.errors import QuarantineError
from perf_assets.lib.ingest.landing import LandedFile

# DCGM blank sentinels (0x7ffffffffffffff0 + n: blank, not found, not supported, no permission).
DCGM_INT64_BLANK_MIN = 9223372036854775792  # 0x7ffffffffffffff0 .. +5
DCGM_FP64_BLANK = 140737488355328.0  # 2**47 .. +4 (DCGM_FP64_BLANK, NOT_FOUND, NOT_SUPPORTED, NOT_PERMISSIONED)


def _is_fp64_blank(value: float) -> bool:
    """Exactly one of DCGM's five FP64 sentinels; a large real counter (bytes, energy) is a value."""
    return DCGM_FP64_BLANK <= value <= DCGM_FP64_BLANK + 4 and value == int(value)


def sample_value(text: object) -> float | None:
    """Prometheus values are strings; NaN, +-Inf and DCGM blanks are unknown (NULL), never zero."""
    try:
        value = float(text)  # type: ignore[arg-type]
    except (TypeError, ValueError):
        raise QuarantineError(f"sample value {text!r} is not a number") from None
    if math.isnan(value) or math.isinf(value) or value >= float(DCGM_INT64_BLANK_MIN) or _is_fp64_blank(value):
        return None
    return value


def blank_mask(values: np.ndarray) -> np.ndarray:
    """`sample_value`'s NULL rule on an array: NaN, +-Inf, int64 blanks and the exact FP64 blanks."""
    with np.errstate(invalid="ignore"):
        fp64_blank = (values >= DCGM_FP64_BLANK) & (values <= DCGM_FP64_BLANK + 4) & (values == np.floor(values))
        return ~np.isfinite(values) | (values >= float(DCGM_INT64_BLANK_MIN)) | fp64_blank


def _numbers(items: list, what: str) -> np.ndarray:
    """float() of every item as one array (numpy parses strings as float() does); one bad item quarantines."""
    if set(map(type, items)) <= _NUMERIC_TYPES:
        try:
            return np.array(items, dtype=np.float64)
        except ValueError:
            pass
    for item in items:  # name the first item float() refuses (bool and the like are accepted, as before)
        try:
            float(item)
        except (TypeError, ValueError):
            raise QuarantineError(f"{what} {item!r} is not a number") from None
    return np.array([float(item) for item in items], dtype=np.float64)


_NUMERIC_TYPES = {str, float, int}


def to_microseconds(seconds: np.ndarray, where: str) -> np.ndarray:
    """Unix seconds -> int64 microseconds, rounded half to even as datetime.fromtimestamp does."""
    if not np.isfinite(seconds).all():
        first = seconds[~np.isfinite(seconds)][0]
        raise QuarantineError(f"{where}: sample time {first!r} is not a finite number of seconds")
    if (np.abs(seconds) > 1e14).any():  # far outside any datetime: the plausibility check reports it
        seconds = np.clip(seconds, -1e14, 1e14)
    whole = np.floor(seconds)
    return whole.astype(np.int64) * 1_000_000 + np.round((seconds - whole) * 1e6).astype(np.int64)


def series_arrays(pairs: object, where: str) -> tuple[np.ndarray, np.ndarray]:
    """A series' `values` ([[time, "value"], ...]) as (int64 microseconds, float64 with NaN for NULL)."""
    if not isinstance(pairs, list):
        raise QuarantineError(f"{where}: values is {type(pairs).__name__}, not a list of [time, value]")
    if pairs and (set(map(type, pairs)) != {list} or set(map(len, pairs)) != {2}):
        bad = next(pair for pair in pairs if not isinstance(pair, list) or len(pair) != 2)
        raise QuarantineError(f"{where}: sample {bad!r} is not [time, value]")
    times = to_microseconds(_numbers([pair[0] for pair in pairs], f"{where}: sample time"), where)
    values = _numbers([pair[1] for pair in pairs], f"{where}: sample value")
    values[blank_mask(values)] = np.nan
    return times, values


def _load_json(data: bytes) -> object:
    """json.loads' answer, by orjson where it reads the document (a few times faster); json.loads decides the rest
    (what orjson refuses: NaN literals, UTF-16, integers over 64 bits, lone surrogates, deep nesting)."""
    try:
        return orjson.loads(data)
    except orjson.JSONDecodeError:
        return json.loads(data)


def parse_prometheus_range(landed: LandedFile) -> pa.Table:
    """Each file's JSON is parsed once; all series' values become two arrays (no per-sample objects)."""
    try:
        document = _load_json(read_bytes(landed.path))
    except (json.JSONDecodeError, UnicodeDecodeError) as error:
        raise QuarantineError(f"invalid JSON ({error}): truncated or not a range-query export") from None
    if not isinstance(document, dict) or document.get("status") != "success":
        raise QuarantineError(
            f"status is {document.get('status') if isinstance(document, dict) else None!r}, not 'success'"
        )
    data = document.get("data") or {}
    if not isinstance(data, dict) or data.get("resultType") != "matrix":
        kind = data.get("resultType") if isinstance(data, dict) else None
        raise QuarantineError(f"resultType {kind!r}, expected 'matrix' (a range query)")
    result = data.get("result") or []
    if not isinstance(result, list):
        raise QuarantineError(f"data.result is {type(result).__name__}, not a list of series")
    rows = _rows_at_once(result, landed)
    return (_rows_series_by_series(result, landed) if rows is None else rows).table(landed)


def _attributed(result: list, landed: LandedFile, rows: DcgmRows) -> list[tuple]:
    """(gpu, field, labels, values) of each series tied to a GPU, in order; the others are counted in `rows`."""
    out = []
    for position, series in enumerate(result):
        if not isinstance(series, dict) or not isinstance(series.get("metric") or {}, dict):
            raise QuarantineError(f"data.result[{position}] is not a series ({{'metric': {{...}}, 'values': [...]}})")
        labels = series.get("metric") or {}
        field = labels.get("__name__")
        gpu = identity_from_labels(labels, landed)
        if not field or gpu is None:
            rows.unattributed += 1  # cannot be tied to a GPU: not ingested (counted in the manifest reason)
            continue
        out.append((gpu, field, labels, series.get("values") or []))
    return out


def _rows_series_by_series(result: list, landed: LandedFile) -> DcgmRows:
    """Each series' samples checked and converted alone: the first bad one names its series."""
    rows = DcgmRows()
    for gpu, field, labels, pairs in _attributed(result, landed, rows):
        times, values = series_arrays(pairs, f"series {field} on {gpu.host}")
        rows.add_arrays(gpu, field, labels, times, values)
    return rows


def _rows_at_once(result: list, landed: LandedFile) -> DcgmRows | None:
    """Every series' samples converted in one numpy call per column (a fleet-1k node-day: 56 series a GPU).

    None where any series needs a closer look (a structure, a number or a time `series_arrays` refuses, or a value
    that is not a plain str, float or int): `_rows_series_by_series` then reads the file again and says why, as
    it did alone. Same rows either way (the same conversions, on a concatenation)."""
    rows = DcgmRows()
    try:
        series = _attributed(result, landed, rows)
    except QuarantineError:
        return None
    counts = []
    for _, _, _, pairs in series:
        if not isinstance(pairs, list) or (pairs and (set(map(type, pairs)) != {list} or set(map(len, pairs)) != {2})):
            return None
        counts.append(len(pairs))
    samples = itertools.chain.from_iterable(pairs for _, _, _, pairs in series)
    flat = list(itertools.chain.from_iterable(samples))  # time, value, time, value, ...
    seconds, texts = flat[0::2], flat[1::2]
    if not (set(map(type, seconds)) | set(map(type, texts))) <= _NUMERIC_TYPES:
        return None
    try:
        seconds = np.array(seconds, dtype=np.float64)
        values = np.array(texts, dtype=np.float64)
    except ValueError:
        return None
    if not np.isfinite(seconds).all():
        return None
    times = to_microseconds(seconds, "")
    values[blank_mask(values)] = np.nan
    stops = np.cumsum(counts).tolist()
    for (gpu, field, labels, _), start, stop in zip(series, [0, *stops[:-1]], stops):
        rows.add_arrays(gpu, field, labels, times[start:stop], values[start:stop])
    return rows
