"""A dcgm-exporter scrape: Prometheus text exposition of `/metrics` saved to a file.

The exposition has no sample times (dcgm-exporter sets none): every sample is stamped with the
capture time of the file name (`<host>__-__-__<utc-ts>.txt`); a sample that carries its own
timestamp (milliseconds) keeps it. Series are tied to a GPU by their labels (dcgm_rows); series
without GPU identity (Datadog's unlabelled dummy block, exporter self-metrics, NVLink/NVSwitch
entities) are counted in the manifest, not ingested. Counters and gauges keep their value as
written; `# HELP`/`# TYPE` lines are read past (units live in the dcgm_fields seed).
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import numpy as np
import pyarrow as pa

from perf_assets.lib.ingest.formats.dcgm_rows import EPOCH, ONE_US, DcgmRows, capture_time, identity_from_labels
from perf_assets.lib.ingest.formats.dcgmi_dmon import looks_like_dmon
from perf_assets.lib.ingest.formats.decompress import sniff
from perf_assets.lib.ingest.formats.errors import QuarantineError
from perf_assets.lib.ingest.formats.prometheus_range import sample_value
from perf_assets.lib.ingest.formats.prometheus_text import read_exposition, read_text_file
from perf_assets.lib.ingest.landing import LandedFile

_SAMPLE_START = re.compile(r"^[A-Za-z_:][A-Za-z0-9_:]*(?:\{|\s+\S)")


def parse_dcgm_exporter_text(landed: LandedFile) -> pa.Table:
    text = read_text_file(landed.path)
    if landed.path.suffix == ".gz" and text.lstrip()[:1] == "{":
        raise QuarantineError(
            'gzip-compressed JSON that is not a Prometheus range-query result (no "resultType" in its first '
            "bytes): neither exporter text nor a range export"
        )
    exposition = read_exposition(text)
    untimed = any(sample.timestamp_ms is None for sample in exposition.samples)
    scraped_at = capture_time(landed, "dcgm-exporter text") if untimed else None
    rows = DcgmRows()
    series, times, values = [], [], []
    labels_json: dict[tuple, str] = {}  # a GPU's label set repeats on every field: written once
    for sample in exposition.samples:
        gpu = identity_from_labels(sample.labels, landed)
        if gpu is None:
            rows.unattributed += 1
            continue
        key = tuple(sample.labels.items())
        if key not in labels_json:
            labels_json[key] = json.dumps(sample.labels, sort_keys=True)
        series.append((gpu, sample.name, labels_json[key]))
        times.append((sample.sampled_at(scraped_at) - EPOCH) // ONE_US)
        value = sample_value(sample.value)
        values.append(np.nan if value is None else value)
    rows.add_points(series, np.array(times, dtype=np.int64), np.array(values, dtype=np.float64))
    return rows.table(landed)


def looks_like_exporter_text(landed: LandedFile, head: bytes) -> bool:
    """Prometheus text, not the range JSON, not dcgmi dmon, not a counters catalogue (.csv: reference data)."""
    suffix = Path(landed.path.stem).suffix if landed.path.suffix == ".gz" else landed.path.suffix
    head = sniff(head)  # a gzip export: its decompressed start
    if landed.path.suffix == ".gz" and head.lstrip()[:1] == b"{":
        return True  # gzip JSON: the range-query parser is only offered plain .json; quarantined with that reason
    if suffix in (".json", ".csv") or looks_like_dmon(head):
        return False
    if not head.strip():
        return True  # empty: read (and quarantined) here rather than skipped
    text = head.decode("utf-8", "replace")
    if "# TYPE " in text or "# HELP " in text:
        return True
    first = next((line for line in text.splitlines() if line.strip() and not line.startswith("#")), "")
    return bool(_SAMPLE_START.match(first))
