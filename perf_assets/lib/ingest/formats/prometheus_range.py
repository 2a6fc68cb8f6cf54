"""DCGM history as Prometheus range-query JSON (`/api/v1/query_range`, resultType matrix)."""

from __future__ import annotations

import json
import math
from datetime import datetime, timezone

import pyarrow as pa

from perf_assets.lib.contracts import raw_table
from perf_assets.lib.ingest.formats.errors import QuarantineError
from perf_assets.lib.ingest.landing import LandedFile

# DCGM blank sentinels (0x7ffffffffffffff0 + n: blank, not found, not supported, no permission).
DCGM_INT64_BLANK_MIN = 9223372036854775792
DCGM_FP64_BLANK_MIN = 140737488355328.0


def sample_value(text: object) -> float | None:
    """Prometheus values are strings; NaN, +-Inf and DCGM blanks are unknown (NULL), never zero."""
    try:
        value = float(text)  # type: ignore[arg-type]
    except (TypeError, ValueError):
        raise QuarantineError(f"sample value {text!r} is not a number") from None
    if math.isnan(value) or math.isinf(value) or value >= DCGM_FP64_BLANK_MIN:
        return None
    return value


def _label(labels: dict, *names: str) -> str | None:
    for name in names:
        value = labels.get(name)
        if value not in (None, "", "<<<NULL>>>"):
            return str(value)
    return None


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
    columns: dict[str, list] = {
        name: [] for name in ["host", "gpu_uuid", "gpu_index", "model_name", "field", "ts", "value", "labels_json"]
    }
    unattributed = 0
    for series in data.get("result") or []:
        labels = series.get("metric") or {}
        field = labels.get("__name__")
        host = _label(labels, "Hostname", "hostname") or landed.host
        uuid = _label(labels, "UUID", "uuid")
        gpu = _label(labels, "gpu")
        if not field or (uuid is None and gpu is None) or host is None:
            unattributed += 1  # cannot be tied to a GPU: not ingested (counted in the manifest reason)
            continue
        values = series.get("values") or []
        labels_json = json.dumps(labels, sort_keys=True)
        gpu_index = int(gpu) if gpu is not None and gpu.isdigit() else None
        model = _label(labels, "modelName")
        model = model.replace("-", " ") if model and " " not in model else model
        for pair in values:
            if not isinstance(pair, list) or len(pair) != 2:
                raise QuarantineError(f"series {field} on {host}: sample {pair!r} is not [time, value]")
            columns["ts"].append(datetime.fromtimestamp(float(pair[0]), tz=timezone.utc))
            columns["value"].append(sample_value(pair[1]))
        count = len(values)
        columns["host"].extend([host] * count)
        columns["gpu_uuid"].extend([uuid] * count)
        columns["gpu_index"].extend([gpu_index] * count)
        columns["model_name"].extend([model] * count)
        columns["field"].extend([field] * count)
        columns["labels_json"].extend([labels_json] * count)
    if not columns["ts"]:
        raise QuarantineError(
            f"no attributable samples ({unattributed} series without host and GPU labels)"
            if unattributed
            else "no samples"
        )
    count = len(columns["ts"])
    columns["cluster"] = [landed.cluster] * count
    columns["event_date"] = [ts.date() for ts in columns["ts"]]
    schema = pa.schema([*raw_table("dcgm").schema, pa.field("event_date", pa.date32())])
    table = pa.Table.from_pydict({name: columns[name] for name in schema.names}, schema=schema)
    return table.replace_schema_metadata({"unattributed_series": str(unattributed)})
