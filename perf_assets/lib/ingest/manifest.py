"""The ingest manifest: one Parquet row per (landed file, parser version), append-only.

An ingest run writes its rows in batches (`ManifestWriter`: one Parquet file per `PERFWH_MANIFEST_BATCH` files,
default 256, or per 10 seconds), each only after the lake holds the rows of every file in it; a run killed before a
batch is written leaves those files' rows in the lake without a manifest row, and the next run ingests them again,
replacing their rows (nothing counted twice). `compact_manifest` merges the manifest's files into one, swapped in
atomically like a lake day (readers see every row once)."""

from __future__ import annotations

import time
import uuid
from dataclasses import dataclass, fields
from datetime import datetime
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq

from perf_assets.lib.contracts import MANIFEST_SCHEMA
from perf_assets.lib.ingest.lake import replace_day, write_parquet_atomic
from perf_assets.lib.paths import positive_int_setting

ENTRIES_PREFIX = "entries-"


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
    """One entry in a file of its own (`<file_id>__v<parser_version>.parquet`)."""
    write_parquet_atomic(_table([entry]), manifest_dir / entry.file_name())


def write_entries(manifest_dir: Path, entries: list[ManifestEntry]) -> Path | None:
    """Several entries in one file (`entries-<token>.parquet`), written atomically."""
    if not entries:
        return None
    path = manifest_dir / f"{ENTRIES_PREFIX}{uuid.uuid4().hex[:16]}.parquet"
    write_parquet_atomic(_table(entries), path)
    return path


def _table(entries: list[ManifestEntry]) -> pa.Table:
    return pa.table(
        {field.name: [getattr(entry, field.name) for entry in entries] for field in fields(ManifestEntry)},
        schema=MANIFEST_SCHEMA,
    )


def manifest_batch_size() -> int:
    """Files per manifest write of an ingest run: PERFWH_MANIFEST_BATCH (default 256; 1: a file per entry)."""
    return positive_int_setting("PERFWH_MANIFEST_BATCH", 256, "files")


class ManifestWriter:
    """Collects an ingest run's entries and writes them `batch_size` at a time (or after `max_wait_s`), and the
    rest on `close`. Add an entry only once the lake holds its file's rows.

    The manifest keeps one row per (landed file, parser version): a batch holding an entry the manifest already
    has (a forced re-ingest) is written together with the files that held the old rows, rewritten without them,
    in one atomic swap of the manifest folder (lake.replace_day). Call under the lake lock."""

    def __init__(self, manifest_dir: Path, lake_raw: Path, batch_size: int | None = None, max_wait_s: float = 10.0):
        self.manifest_dir, self.lake_raw = manifest_dir, lake_raw
        self.batch_size = manifest_batch_size() if batch_size is None else batch_size
        self.max_wait_s = max_wait_s
        self._entries: list[ManifestEntry] = []
        self._since = time.monotonic()
        on_disk = read_manifest(manifest_dir).select(["file_id", "parser_version"]).to_pydict()
        self._on_disk = {(f, v or 0) for f, v in zip(on_disk["file_id"], on_disk["parser_version"])}

    def add(self, entry: ManifestEntry) -> None:
        if not self._entries:
            self._since = time.monotonic()
        self._entries.append(entry)
        if len(self._entries) >= self.batch_size or time.monotonic() - self._since >= self.max_wait_s:
            self.flush()

    def flush(self) -> None:
        if not self._entries:
            return
        keys = {(entry.file_id, entry.parser_version or 0) for entry in self._entries}
        if keys & self._on_disk:
            self._replace(keys & self._on_disk)
        else:
            write_entries(self.manifest_dir, self._entries)
        self._on_disk |= keys
        self._entries = []

    def _replace(self, keys: set[tuple[str, int]]) -> None:
        keep, rewritten = [], []
        for path in manifest_files(self.manifest_dir):
            table = pq.read_table(path, schema=MANIFEST_SCHEMA, use_threads=False)
            held = [
                (f, v or 0) in keys for f, v in zip(table["file_id"].to_pylist(), table["parser_version"].to_pylist())
            ]
            if not any(held):
                keep.append(path)
            elif not all(held):
                rewritten.append((table.filter(pa.array([not h for h in held])), {}))
        replace_day(self.lake_raw, self.manifest_dir, keep, [*rewritten, (_table(self._entries), {})])

    def close(self) -> None:
        self.flush()


def manifest_files(manifest_dir: Path) -> list[Path]:
    return sorted(manifest_dir.glob("*.parquet")) if manifest_dir.exists() else []


def read_manifest(manifest_dir: Path) -> pa.Table:
    files = manifest_files(manifest_dir)
    if not files:
        return MANIFEST_SCHEMA.empty_table()
    # one thread per file: they are small, and Arrow's thread pool costs more than it saves on them
    return pa.concat_tables([pq.read_table(path, schema=MANIFEST_SCHEMA, use_threads=False) for path in files])


def compact_manifest(manifest_dir: Path, lake_raw: Path, max_files: int = 32) -> tuple[int, int] | None:
    """Merge the manifest's files into one once there are more than `max_files` (call under the lake lock).

    Built beside the lake and swapped in with the manifest folder in one atomic exchange (lake.replace_day), so a
    reader sees the old files or the merged one, never both. Returns (files before, files after), or None."""
    files = [path for path in manifest_files(manifest_dir) if path.name != "_schema.parquet"]
    if len(files) <= max_files:
        return None
    merged = pa.concat_tables([pq.read_table(path, schema=MANIFEST_SCHEMA, use_threads=False) for path in files])
    keep = [path for path in manifest_files(manifest_dir) if path.name == "_schema.parquet"]
    replace_day(lake_raw, manifest_dir, keep, [(merged, {})])
    return len(files), len(keep) + 1


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
