"""The raw layer: typed Parquet per (raw table, event day, landed file), written atomically."""

from __future__ import annotations

import os
import tempfile
from pathlib import Path

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from perf_assets.lib.contracts import MANIFEST_SCHEMA, RAW_TABLES, RawTable


def write_parquet_atomic(table: pa.Table, destination: Path) -> None:
    """Temp file in the same folder, then rename: a crash never leaves half a file."""
    destination.parent.mkdir(parents=True, exist_ok=True)
    handle, temp_name = tempfile.mkstemp(dir=destination.parent, prefix=".tmp-", suffix=".parquet")
    os.close(handle)
    try:
        pq.write_table(table, temp_name, compression="zstd")
        os.replace(temp_name, destination)
    except BaseException:
        Path(temp_name).unlink(missing_ok=True)
        raise


def ensure_schema_files(lake_raw: Path, manifest_dir: Path) -> None:
    """A zero-row file per raw table (and the manifest), so dbt can read them before data lands."""
    targets = [
        (lake_raw / table.name / "_schema" / "empty.parquet", table.full_schema) for table in RAW_TABLES.values()
    ]
    targets.append((manifest_dir / "_schema.parquet", MANIFEST_SCHEMA))
    for target, schema in targets:
        if not target.exists():
            write_parquet_atomic(schema.empty_table(), target)


def table_glob(lake_raw: Path, table: RawTable) -> str:
    return str(lake_raw / table.name / "**" / "*.parquet")


def remove_landed_file(lake_raw: Path, table: RawTable, file_id: str) -> int:
    """Delete the raw files of one landed file (before a re-ingest replaces them)."""
    removed = 0
    for path in (lake_raw / table.name).glob(f"event_date=*/{file_id}.parquet"):
        path.unlink()
        removed += 1
    return removed


def write_landed_rows(lake_raw: Path, table: RawTable, file_id: str, rows: pa.Table) -> int:
    """Split one landed file's rows by event_date and write one Parquet file per day."""
    rows = rows.append_column("landed_file_id", pa.array([file_id] * rows.num_rows, pa.string()))
    rows = rows.select(table.full_schema.names).cast(table.full_schema)
    remove_landed_file(lake_raw, table, file_id)
    for day in pc.unique(rows["event_date"]).to_pylist():
        day_rows = rows.filter(pc.equal(rows["event_date"], pa.scalar(day, pa.date32())))
        write_parquet_atomic(day_rows, lake_raw / table.name / f"event_date={day.isoformat()}" / f"{file_id}.parquet")
    return rows.num_rows
