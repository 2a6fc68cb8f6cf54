"""The ingest manifest: one Parquet row per (landed file, parser version), append-only."""

from __future__ import annotations

from dataclasses import dataclass, fields
from datetime import datetime
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq

from perf_assets.lib.contracts import MANIFEST_SCHEMA
from perf_assets.lib.ingest.lake import write_parquet_atomic


@dataclass(frozen=True)
class ManifestEntry:
    file_id: str
    path: str
    sha256: str
    size_bytes: int
    source: str
    format: str | None
    parser_version: int | None
    rows: int
    status: str  # ok | quarantined | skipped
    reason: str | None
    cluster: str | None
    host: str | None
    job_id: str | None
    rank: str | None
    captured_at: datetime | None
    ingested_at: datetime

    def file_name(self) -> str:
        return f"{self.file_id}__v{self.parser_version or 0}.parquet"


def write_entry(manifest_dir: Path, entry: ManifestEntry) -> None:
    row = {field.name: [getattr(entry, field.name)] for field in fields(entry)}
    write_parquet_atomic(pa.table(row, schema=MANIFEST_SCHEMA), manifest_dir / entry.file_name())


def read_manifest(manifest_dir: Path) -> pa.Table:
    files = sorted(manifest_dir.glob("*.parquet")) if manifest_dir.exists() else []
    if not files:
        return MANIFEST_SCHEMA.empty_table()
    return pa.concat_tables([pq.read_table(path, schema=MANIFEST_SCHEMA) for path in files])


def seen_versions(manifest_dir: Path) -> dict[tuple[str, str], set[int]]:
    """(sha256, path) -> parser versions that have already handled that landed file."""
    seen: dict[tuple[str, str], set[int]] = {}
    if not manifest_dir.exists():
        return seen
    table = read_manifest(manifest_dir)
    for sha, path, version in zip(
        table["sha256"].to_pylist(), table["path"].to_pylist(), table["parser_version"].to_pylist()
    ):
        seen.setdefault((sha, path), set()).add(version or 0)
    return seen
