"""Nsight Systems `nsys export --type sqlite` files, read with Python's sqlite3 (formats.md section 2).

Columns are selected by name and absent tables or columns tolerated (schema drift across nsys
versions); tables we do not read (CPU sampling, OSRT, third-party EXTRAP_* ...) are ignored. Text is
read as bytes and decoded as UTF-8 with replacement; a replacement is noted. Memory: only the CUDA
activity, runtime and NVTX rows are held (as Python rows, then Arrow), capped at `max_rows()`.
"""

from __future__ import annotations

import os
import sqlite3
from collections import Counter

import pyarrow as pa

from perf_assets.lib.ingest.formats.errors import QuarantineError
from perf_assets.lib.ingest.formats.trace_tables import TraceContext, args_json, as_int64, build_trace_tables
from perf_assets.lib.ingest.landing import LandedFile

SQLITE_MAGIC = b"SQLite format 3\x00"
DEFAULT_MAX_ROWS = 5_000_000

# table -> (canonical category, name source: a StringIds column or a fixed name)
ACTIVITY_TABLES = {
    "CUPTI_ACTIVITY_KIND_KERNEL": "kernel",
    "CUPTI_ACTIVITY_KIND_MEMCPY": "memcpy",
    "CUPTI_ACTIVITY_KIND_MEMSET": "memset",
    "CUPTI_ACTIVITY_KIND_RUNTIME": "runtime",
    "NVTX_EVENTS": "annotation",
}
# CUPTI memcpy kinds (copyKind) as Kineto names them.
COPY_KINDS = {1: "HtoD", 2: "DtoH", 3: "HtoA", 4: "AtoH", 5: "AtoA", 6: "AtoD", 7: "DtoA", 8: "DtoD", 10: "PtoP"}
NVTX_RANGES = (59, 60)  # push/pop and start/end ranges; marks (34) and domain/registrations have no duration


def max_rows() -> int:
    return int(os.environ.get("PERFWH_NSYS_MAX_ROWS", DEFAULT_MAX_ROWS))


class _Reader:
    """A read-only connection whose text is decoded with replacement, counting what had to be replaced."""

    def __init__(self, landed: LandedFile):
        self.replaced: Counter = Counter()
        try:
            # The path percent-encoded: a name holding '?' or '#' would otherwise end the path early, and SQLite
            # would open (and create, read-write) another file next to the landed one.
            uri = f"{landed.path.absolute().as_uri()}?mode=ro&immutable=1"
            self.db = sqlite3.connect(uri, uri=True)
            self.db.text_factory = bytes
            self.tables = {row[0].decode() for row in self.db.execute("select name from sqlite_master")}
        except sqlite3.DatabaseError as error:
            raise QuarantineError(f"not a readable SQLite database ({error})") from None

    def text(self, value: object, where: str) -> object:
        if not isinstance(value, bytes):
            return value
        try:
            return value.decode("utf-8")
        except UnicodeDecodeError:
            self.replaced[where] += 1
            return value.decode("utf-8", errors="replace")

    def columns(self, table: str) -> list[str]:
        return [row[1].decode() for row in self.db.execute(f'pragma table_info("{table}")')]

    def rows(self, table: str, wanted: list[str]) -> tuple[list[str], list[tuple]]:
        present = [name for name in wanted if name in self.columns(table)]
        quoted = ", ".join(f'"{name}"' for name in present)
        return present, self.db.execute(f'select {quoted} from "{table}"').fetchall()

    def pairs(self, table: str, key: str, value: str) -> dict:
        if table not in self.tables:
            return {}
        present, rows = self.rows(table, [key, value])
        if len(present) < 2:
            return {}
        return {self.text(k, table): self.text(v, table) for k, v in rows}


def _devices(reader: _Reader) -> dict[int, tuple[str | None, str | None]]:
    """deviceId -> (name, uuid): TARGET_INFO_GPU (newer, with cuDevice/uuid) or TARGET_INFO_CUDA_GPU (older)."""
    devices: dict[int, tuple[str | None, str | None]] = {}
    if "TARGET_INFO_CUDA_GPU" in reader.tables:
        present, rows = reader.rows("TARGET_INFO_CUDA_GPU", ["deviceId", "name"])
        if present == ["deviceId", "name"]:
            devices.update({row[0]: (reader.text(row[1], "TARGET_INFO_CUDA_GPU"), None) for row in rows})
    if "TARGET_INFO_GPU" in reader.tables:
        cols = reader.columns("TARGET_INFO_GPU")
        key = "cuDevice" if "cuDevice" in cols else "deviceId" if "deviceId" in cols else "id"
        present, rows = reader.rows("TARGET_INFO_GPU", [key, "name", "uuid", "smCount"])
        for row in rows:
            record = dict(zip(present, row))
            if record.get("smCount") == 0:  # non-CUDA adapters (Intel iGPU, render driver) share cuDevice 0
                continue
            uuid = reader.text(record.get("uuid"), "TARGET_INFO_GPU")
            uuid = f"GPU-{uuid}" if uuid and not str(uuid).startswith("GPU-") else uuid
            devices.setdefault(record[key], (reader.text(record.get("name"), "TARGET_INFO_GPU"), uuid))
    return devices


def _session_start_ns(reader: _Reader) -> int | None:
    if "TARGET_INFO_SESSION_START_TIME" not in reader.tables:
        return None
    present, rows = reader.rows("TARGET_INFO_SESSION_START_TIME", ["utcEpochNs"])
    return as_int64(rows[0][0]) if present and rows else None


def _activity_events(
    reader: _Reader, table: str, category: str, strings: dict, offset: int, not_kept: Counter
) -> list[dict]:
    name_columns = ["demangledName", "shortName", "nameId", "textId", "text"]
    extra = ["deviceId", "streamId", "correlationId", "bytes", "copyKind", "eventType", "globalTid", "globalPid"]
    present, rows = reader.rows(table, ["start", "end", *name_columns, *extra])
    if "start" not in present or "end" not in present:
        raise QuarantineError(f"{table} has no start/end columns (columns: {', '.join(reader.columns(table))})")
    events = []
    for row in rows:
        record = dict(zip(present, row))
        if category == "annotation" and (record.get("end") is None or record.get("eventType") not in NVTX_RANGES):
            not_kept["NVTX marks and registrations"] += 1
            continue
        name = next(
            (
                strings.get(record[column]) if column != "text" else reader.text(record[column], table)
                for column in name_columns
                if record.get(column) is not None
            ),
            None,
        )
        if category == "memcpy":
            name = f"Memcpy {COPY_KINDS.get(record.get('copyKind'), 'unknown kind')}"
        elif category == "memset":
            name = "Memset"
        device_side = category in ("kernel", "memcpy", "memset")
        events.append(
            {
                "device_index": as_int64(record.get("deviceId")) if device_side else None,
                "stream": as_int64(record.get("streamId")) if device_side else None,
                "category": category,
                "name": name,
                "start_ns": offset + record["start"],
                "end_ns": offset + max(record["start"], record["end"]),
                "correlation_id": as_int64(record.get("correlationId")),
                "bytes": as_int64(record.get("bytes")),
                "args_json": args_json({k: record[k] for k in extra if record.get(k) is not None}),
            }
        )
    return events


def parse_nsys_sqlite(landed: LandedFile) -> dict[str, pa.Table]:
    with open(landed.path, "rb") as handle:
        if handle.read(16) != SQLITE_MAGIC:
            raise QuarantineError("not an SQLite file (nsys export --type sqlite expected)")
    reader = _Reader(landed)
    try:
        return _parse(landed, reader)
    except sqlite3.DatabaseError as error:
        raise QuarantineError(f"SQLite read failed ({error}); truncated or corrupt export?") from None
    finally:
        reader.db.close()


def _parse(landed: LandedFile, reader: _Reader) -> dict[str, pa.Table]:
    limit = max_rows()
    counts = {
        t: reader.db.execute(f'select count(*) from "{t}"').fetchone()[0] for t in ACTIVITY_TABLES if t in reader.tables
    }
    if sum(counts.values()) > limit:
        raise QuarantineError(
            f"{sum(counts.values())} activity rows, over the reader's bound of {limit} (PERFWH_NSYS_MAX_ROWS)"
        )
    start = _session_start_ns(reader)
    context = TraceContext(
        trace_format="nsys",
        time_base="nsys_session_utc_ns" if start is not None else "nsys_session_relative_ns",
        time_absolute=start is not None,
    )
    if start is None:
        context.notes.append("no TARGET_INFO_SESSION_START_TIME: timestamps relative to the session start")
    meta = reader.pairs("EXPORT_META_DATA", "name", "value")
    if meta.get("EXPORT_SCHEMA_VERSION"):
        context.notes.append(f"nsys {meta.get('EXPORT_PRODUCT_VERSION')} schema {meta['EXPORT_SCHEMA_VERSION']}")
    env = reader.pairs("TARGET_INFO_SYSTEM_ENV", "name", "value")
    context.host = env.get("Hostname") or env.get("HostName") or landed.host
    context.job_id = landed.job_id
    context.resolve_rank(landed, None)
    context.devices = _devices(reader)
    strings = {key: value for key, value in reader.pairs("StringIds", "id", "value").items()}
    events: list[dict] = []
    for table, category in ACTIVITY_TABLES.items():
        if table in reader.tables:
            events.extend(_activity_events(reader, table, category, strings, start or 0, context.not_kept))
    missing = [table for table in ACTIVITY_TABLES if table not in reader.tables]
    if missing:
        context.notes.append(f"absent: {', '.join(missing)}")
    if reader.replaced:
        where = ", ".join(f"{table} {count}" for table, count in sorted(reader.replaced.items()))
        context.notes.append(f"non-UTF-8 text decoded with replacement ({where})")
    if not any(event["category"] == "kernel" for event in events):
        context.notes.append("no kernel events")
    if not events:
        raise QuarantineError(f"no CUDA activity, runtime or NVTX rows ({context.note()})")
    return build_trace_tables(landed, context, events)
