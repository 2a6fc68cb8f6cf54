"""DCGM history as Prometheus range-query JSON (`/api/v1/query_range`, resultType matrix)."""

from __future__ import annotations

import json
import math

import numpy as np
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


def parse_prometheus_range(landed: LandedFile) -> pa.Table:
    """Each file's JSON is parsed once; each series' values become two arrays (no per-sample objects)."""
    try:
        document = json.loads(read_bytes(landed.path))
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
    rows = DcgmRows()
    for position, series in enumerate(result):
        if not isinstance(series, dict) or not isinstance(series.get("metric") or {}, dict):
            raise QuarantineError(f"data.result[{position}] is not a series ({{'metric': {{...}}, 'values': [...]}})")
        labels = series.get("metric") or {}
        field = labels.get("__name__")
        gpu = identity_from_labels(labels, landed)
        if not field or gpu is None:
            rows.unattributed += 1  # cannot be tied to a GPU: not ingested (counted in the manifest reason)
            continue
        times, values = series_arrays(series.get("values") or [], f"series {field} on {gpu.host}")
        rows.add_arrays(gpu, field, labels, times, values)
    return rows.table(landed)
