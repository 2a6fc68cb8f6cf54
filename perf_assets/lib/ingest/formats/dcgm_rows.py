"""Rows of raw_dcgm, shared by its parsers: GPU identity from DCGM labels and the table they make."""

from __future__ import annotations

import csv
import functools
import json
from dataclasses import dataclass
from datetime import datetime, timedelta, timezone

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from perf_assets.lib.contracts import raw_table
from perf_assets.lib.ingest.formats.errors import QuarantineError
from perf_assets.lib.ingest.formats.gpu_identity import (
    int_or_none,
    normalise_bus_id,
    normalise_model_name,
    normalise_uuid,
    text_or_none,
)
from perf_assets.lib.ingest.landing import LandedFile
from perf_assets.lib.paths import DBT_PROJECT_DIR

EPOCH = datetime(1970, 1, 1, tzinfo=timezone.utc)
ONE_US = timedelta(microseconds=1)

# Labels of NVLink / NVSwitch entities (dcgm-exporter): their series are links or switches, not GPUs.
NON_GPU_ENTITY_LABELS = ("nvlink", "nvswitch")


@dataclass(frozen=True)
class GpuIdentity:
    host: str
    gpu_uuid: str | None
    gpu_index: int | None
    gpu_instance: int | None  # MIG GPU instance; None: the whole GPU
    pci_bus_id: str | None
    model_name: str | None


def _label(labels: dict, *names: str) -> str | None:
    for name in names:
        value = text_or_none(labels.get(name))
        if value is not None:
            return value
    return None


def identity_from_labels(labels: dict, landed: LandedFile) -> GpuIdentity | None:
    """The GPU a dcgm-exporter series belongs to; None when it cannot be tied to one GPU of one host.

    `Hostname` (old exporters) or `hostname` (HEAD), else the host of the file name; `UUID` or
    `uuid`; `gpu` (DCGM index); `GPU_I_ID` (MIG instance); `pci_bus_id`; `modelName`.
    """
    if any(name in labels for name in NON_GPU_ENTITY_LABELS):
        return None
    values = tuple(labels.get(name) for name in _IDENTITY_LABELS)
    try:  # the types are part of the key: 1, 1.0 and True are equal keys but not equal labels
        return _identity_cached(values, tuple(map(type, values)), landed.host)
    except TypeError:  # a label value that cannot be a cache key (a list in hostile JSON): read it uncached
        return _identity(dict(zip(_IDENTITY_LABELS, values)), landed.host)


# The labels `_identity` reads. A file repeats each GPU's labels on every field's series (thousands per file),
# so the identity of each distinct combination is worked out once.
_IDENTITY_LABELS = ("Hostname", "hostname", "UUID", "uuid", "gpu", "GPU_I_ID", "pci_bus_id", "modelName")


@functools.lru_cache(maxsize=1 << 16)
def _identity_cached(values: tuple, types: tuple, file_host: str | None) -> GpuIdentity | None:
    return _identity(dict(zip(_IDENTITY_LABELS, values)), file_host)


def _identity(labels: dict, file_host: str | None) -> GpuIdentity | None:
    host = _label(labels, "Hostname", "hostname") or file_host
    uuid = normalise_uuid(_label(labels, "UUID", "uuid"))
    gpu_index = int_or_none(labels.get("gpu"))
    if host is None or (uuid is None and gpu_index is None):
        return None
    return GpuIdentity(
        host=host,
        gpu_uuid=uuid,
        gpu_index=gpu_index,
        gpu_instance=int_or_none(labels.get("GPU_I_ID")),
        pci_bus_id=normalise_bus_id(labels.get("pci_bus_id")),
        model_name=normalise_model_name(_label(labels, "modelName")),
    )


class DcgmRows:
    """Collects raw_dcgm rows of one landed file, one series at a time, as arrays.

    `table()` checks the sample times (plausibility window, dcgm_checks), sets values outside their
    field's physical range to NULL and counts them, and adds cluster and event_date.
    """

    COLUMNS = ("host", "gpu_uuid", "gpu_index", "gpu_instance", "pci_bus_id", "model_name")

    def __init__(self) -> None:
        self._series: list[tuple[GpuIdentity, str, str]] = []  # (gpu, field, labels_json)
        self._times: list[np.ndarray] = []  # int64 microseconds since the epoch, UTC
        self._values: list[np.ndarray] = []  # float64, NaN: unknown (NULL)
        self._counts: list[int] = []  # samples of each series, in the order of _series (and of the samples)
        self._count = 0
        self.unattributed = 0  # series (or dmon entities) not tied to a GPU: counted, not ingested

    def add_arrays(self, gpu: GpuIdentity, field: str, labels: dict, times_us: np.ndarray, values: np.ndarray) -> None:
        """One series: times in microseconds (int64) and values (float64, NaN for unknown)."""
        self._series.append((gpu, field, json.dumps(labels, sort_keys=True)))
        self._times.append(np.asarray(times_us, dtype=np.int64))
        self._values.append(np.asarray(values, dtype=np.float64))
        self._counts.append(len(times_us))
        self._count += len(times_us)

    def add_points(self, series: list[tuple[GpuIdentity, str, str]], times_us: np.ndarray, values: np.ndarray) -> None:
        """Many series of one sample each (an exporter scrape) at once: (gpu, field, labels_json) per sample, with
        labels_json as `add_arrays` writes it (json.dumps(labels, sort_keys=True))."""
        self._series.extend(series)
        self._times.append(np.asarray(times_us, dtype=np.int64))
        self._values.append(np.asarray(values, dtype=np.float64))
        self._counts.extend([1] * len(series))
        self._count += len(series)

    def add_series(
        self, gpu: GpuIdentity, field: str, labels: dict, points: list[tuple[datetime, float | None]]
    ) -> None:
        """One series' samples (time, value); the label map is kept whole in labels_json."""
        times = np.fromiter(((ts - EPOCH) // ONE_US for ts, _ in points), dtype=np.int64, count=len(points))
        values = np.fromiter((np.nan if v is None else v for _, v in points), dtype=np.float64, count=len(points))
        self.add_arrays(gpu, field, labels, times, values)

    def __len__(self) -> int:
        return self._count

    def table(self, landed: LandedFile) -> pa.Table:
        if not len(self):
            raise QuarantineError(
                f"no attributable samples ({self.unattributed} series without host and GPU labels)"
                if self.unattributed
                else "no samples"
            )
        counts = np.asarray(self._counts, dtype=np.int64)
        series_of_row = np.repeat(np.arange(len(self._series)), counts)
        times = np.concatenate(self._times)
        check_times(times, counts, [(gpu, field) for gpu, field, _ in self._series])
        values = np.concatenate(self._values)
        fields = [field for _, field, _ in self._series]
        nulled = null_absurd_values(values, fields, series_of_row)
        schema = pa.schema([*raw_table("dcgm").schema, pa.field("event_date", pa.date32())])
        take = pa.array(series_of_row)
        columns = {
            name: pa.array([getattr(gpu, name) for gpu, _, _ in self._series], schema.field(name).type).take(take)
            for name in self.COLUMNS
        }
        columns["field"] = pa.array(fields, pa.string()).take(take)
        columns["labels_json"] = pa.array([labels for _, _, labels in self._series], pa.string()).take(take)
        columns["cluster"] = pa.array([landed.cluster] * len(self), schema.field("cluster").type)
        columns["value"] = pa.array(values, pa.float64(), mask=np.isnan(values))
        columns["ts"] = pa.array(times, schema.field("ts").type)
        columns["event_date"] = pc.cast(columns["ts"], pa.date32())
        table = pa.Table.from_arrays([columns[name] for name in schema.names], schema=schema)
        return table.replace_schema_metadata(_metadata(self.unattributed, nulled))


def _metadata(unattributed: int, nulled: dict[str, int]) -> dict[str, str]:
    """The manifest note. The ingest driver shows `unattributed_series` alone when it is set, so with
    values set to NULL as well everything goes into `ingest_note` (same wording for the series)."""
    if not nulled:
        return {"unattributed_series": str(unattributed)}
    parts = [f"{unattributed} series without host/GPU labels not ingested"] if unattributed else []
    parts.append(absurd_note(nulled))
    return {"ingest_note": "; ".join(parts)}


def capture_time(landed: LandedFile, what: str) -> datetime:
    """Formats without sample times take the capture time of the file name; without one, quarantine."""
    if landed.captured_at is None:
        raise QuarantineError(
            f"no capture time: {what} carries no sample times, so name the file "
            "<host>__-__-__<utc-ts>.<ext> (utc-ts like 20261101T000000Z)"
        )
    return landed.captured_at


# ----------------------------------------------------------------------------- plausibility checks
# Sample times: a file with any sample time before 2000 or more than a day after ingestion is
# quarantined whole (its clock is wrong: the exporter's, Prometheus's or the host's). A single value
# outside its field's physical range is set to NULL (unknown) and counted in the manifest note.

EARLIEST_SAMPLE = datetime(2000, 1, 1, tzinfo=timezone.utc)
FUTURE_TOLERANCE = timedelta(days=1)
# unit of the dcgm_fields seed -> (low, high) of a physical value; None: unbounded on that side.
UNIT_RANGES = {
    "%": (0.0, 100.0),
    "ratio": (0.0, 1.0),
    **{unit: (0.0, None) for unit in ("W", "mJ", "MHz", "MiB", "B", "B/s", "ns", "count")},
}
RANGE_TOLERANCE = 1e-6  # float noise at the bounds (a ratio of 1.0000000001 is 1.0)


def _describe_time(us: int) -> str:
    try:
        return (EPOCH + timedelta(microseconds=int(us))).strftime("%Y-%m-%dT%H:%M:%SZ")
    except OverflowError:
        return f"{us / 1e6:.0f} s since 1970"


def _gpu_name(gpu: GpuIdentity) -> str:
    what = gpu.gpu_uuid or (f"GPU {gpu.gpu_index}" if gpu.gpu_index is not None else None)
    if gpu.gpu_instance is not None:
        what = f"{what + ' ' if what else ''}instance {gpu.gpu_instance}"
    return f"{gpu.host} {what}"


def check_times(times_us: np.ndarray, counts: np.ndarray, series: list[tuple[GpuIdentity, str]]) -> None:
    """QuarantineError naming the first series and sample whose time is implausible."""
    now = datetime.now(timezone.utc)
    low = (EARLIEST_SAMPLE - EPOCH) // ONE_US
    high = (now + FUTURE_TOLERANCE - EPOCH) // ONE_US
    bad = (times_us < low) | (times_us > high)
    if not bad.any():
        return
    first = int(np.argmax(bad))
    gpu, field = series[int(np.searchsorted(np.cumsum(counts), first, side="right"))]
    side = "before 2000-01-01" if times_us[first] < low else "more than 1 day after ingestion"
    raise QuarantineError(
        f"{int(bad.sum()):,} of {len(times_us):,} sample times are {side} or otherwise outside "
        f"2000-01-01 .. now + 1 day (first: series {field} on {_gpu_name(gpu)} at {_describe_time(times_us[first])}): "
        "the clock of the exporter, Prometheus or host that wrote the file is wrong (or the capture time in "
        "the file name is); fix it and re-export. Times are never shifted: skew between hosts is not corrected"
    )


@functools.cache
def _field_ranges() -> dict[str, tuple[float | None, float | None, str]]:
    """field -> (low, high, unit) from the dcgm_fields seed (units keyed on the field name)."""
    with open(DBT_PROJECT_DIR / "seeds" / "dcgm_fields.csv", newline="") as handle:
        return {
            row["field"]: (*UNIT_RANGES[row["unit"]], row["unit"])
            for row in csv.DictReader(handle)
            if row["unit"] in UNIT_RANGES
        }


def null_absurd_values(values: np.ndarray, fields: list[str], series_of_row: np.ndarray) -> dict[str, int]:
    """Set values outside their field's physical range to NaN (NULL), in place; count them per field and side."""
    ranges = _field_ranges()
    bounds = [ranges.get(field, (None, None, "")) for field in fields]
    low = np.asarray([-np.inf if b[0] is None else b[0] - RANGE_TOLERANCE for b in bounds])[series_of_row]
    high = np.asarray([np.inf if b[1] is None else b[1] + RANGE_TOLERANCE for b in bounds])[series_of_row]
    nulled: dict[str, int] = {}
    for side, outside in (("<", values < low), (">", values > high)):  # NaN compares False: stays NULL
        if not outside.any():
            continue
        positions, hits = np.unique(series_of_row[outside], return_counts=True)
        for position, count in zip(positions.tolist(), hits.tolist()):
            field_low, field_high, unit = bounds[position]
            key = f"{fields[position]} {side} {field_low if side == '<' else field_high:g} {unit}"
            nulled[key] = nulled.get(key, 0) + count
        values[outside] = np.nan
    return nulled


def absurd_note(nulled: dict[str, int]) -> str:
    details = ", ".join(f"{rule}: {count:,}" for rule, count in sorted(nulled.items()))
    return f"{sum(nulled.values()):,} values outside their physical range set to NULL ({details})"
