"""DCGM history as Prometheus range-query JSON (`/api/v1/query_range`, resultType matrix)."""

from __future__ import annotations

import json
import math
from datetime import datetime, timezone

import pyarrow as pa

from perf_assets.lib.ingest.formats.dcgm_rows import DcgmRows, identity_from_labels
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


def parse_prometheus_range(landed: LandedFile) -> pa.Table:
    try:
        document = json.loads(landed.path.read_bytes())
    except (json.JSONDecodeError, UnicodeDecodeError) as error:
        raise QuarantineError(f"invalid JSON ({error})") from None
    if not isinstance(document, dict) or document.get("status") != "success":
        raise QuarantineError(
            f"status is {document.get('status') if isinstance(document, dict) else None!r}, not 'success'"
        )
    data = document.get("data") or {}
    if data.get("resultType") != "matrix":
        raise QuarantineError(f"resultType {data.get('resultType')!r}, expected 'matrix' (a range query)")
    rows = DcgmRows()
    for series in data.get("result") or []:
        labels = series.get("metric") or {}
        field = labels.get("__name__")
        gpu = identity_from_labels(labels, landed)
        if not field or gpu is None:
            rows.unattributed += 1  # cannot be tied to a GPU: not ingested (counted in the manifest reason)
            continue
        points = []
        for pair in series.get("values") or []:
            if not isinstance(pair, list) or len(pair) != 2:
                raise QuarantineError(f"series {field} on {gpu.host}: sample {pair!r} is not [time, value]")
            points.append((datetime.fromtimestamp(float(pair[0]), tz=timezone.utc), sample_value(pair[1])))
        rows.add_series(gpu, field, labels, points)
    return rows.table(landed)
