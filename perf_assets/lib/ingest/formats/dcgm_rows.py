"""Rows of raw_dcgm, shared by its parsers: GPU identity from DCGM labels and the table they make."""

from __future__ import annotations

import json
from dataclasses import dataclass
from datetime import datetime

import pyarrow as pa

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
    host = _label(labels, "Hostname", "hostname") or landed.host
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
    """Collects raw_dcgm rows of one landed file; `table()` adds cluster and event_date."""

    COLUMNS = ("host", "gpu_uuid", "gpu_index", "gpu_instance", "pci_bus_id", "model_name")

    def __init__(self) -> None:
        self.columns: dict[str, list] = {name: [] for name in raw_table("dcgm").schema.names}
        self.unattributed = 0  # series (or dmon entities) not tied to a GPU: counted, not ingested

    def add_series(
        self, gpu: GpuIdentity, field: str, labels: dict, points: list[tuple[datetime, float | None]]
    ) -> None:
        """One series' samples (time, value); the label map is kept whole in labels_json."""
        count = len(points)
        for name in self.COLUMNS:
            self.columns[name].extend([getattr(gpu, name)] * count)
        self.columns["field"].extend([field] * count)
        self.columns["ts"].extend(ts for ts, _ in points)
        self.columns["value"].extend(value for _, value in points)
        self.columns["labels_json"].extend([json.dumps(labels, sort_keys=True)] * count)

    def __len__(self) -> int:
        return len(self.columns["ts"])

    def table(self, landed: LandedFile) -> pa.Table:
        if not len(self):
            raise QuarantineError(
                f"no attributable samples ({self.unattributed} series without host and GPU labels)"
                if self.unattributed
                else "no samples"
            )
        self.columns["cluster"] = [landed.cluster] * len(self)
        self.columns["event_date"] = [ts.date() for ts in self.columns["ts"]]
        schema = pa.schema([*raw_table("dcgm").schema, pa.field("event_date", pa.date32())])
        table = pa.Table.from_pydict({name: self.columns[name] for name in schema.names}, schema=schema)
        return table.replace_schema_metadata({"unattributed_series": str(self.unattributed)})


def capture_time(landed: LandedFile, what: str) -> datetime:
    """Formats without sample times take the capture time of the file name; without one, quarantine."""
    if landed.captured_at is None:
        raise QuarantineError(
            f"no capture time: {what} carries no sample times, so name the file "
            "<host>__-__-__<utc-ts>.<ext> (utc-ts like 20261101T000000Z)"
        )
    return landed.captured_at
