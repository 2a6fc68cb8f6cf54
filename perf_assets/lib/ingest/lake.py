"""The raw layer: typed Parquet per (raw table, event day), written atomically.

A table-day folder ``lake/raw/<table>/event_date=D/`` holds small files named ``<landed_file_id>.parquet``
(one per landed file, as ingestion writes them) and, once compacted, a few ``compacted-<token>-<n>.parquet``
files whose footer lists the landed files they hold. Every change that removes rows from a day (compaction,
re-ingest of a landed file whose rows sit in a compacted file) builds the day's next folder beside the lake
(``lake/.staging/``, hard links for the files it keeps) and swaps it with the live one in one atomic
``renameat2(RENAME_EXCHANGE)``: a reader's glob sees the old set of files or the new one, never both or
neither. docs/data_quality.md (Lake compaction) explains the steps and the recovery.
"""

from __future__ import annotations

import ctypes
import json
import os
import shutil
import tempfile
import uuid
from collections.abc import Iterable
from dataclasses import dataclass
from datetime import date
from pathlib import Path

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from perf_assets.lib.contracts import MANIFEST_SCHEMA, RAW_TABLES, RawTable

COMPACTED_PREFIX = "compacted-"
LANDED_IDS_KEY = b"perfwh.landed_file_ids"
STAGING_DIR = ".staging"


def write_parquet_atomic(
    table: pa.Table, destination: Path, metadata: dict[bytes, bytes] | None = None, *, plain_schema: bool = False
) -> None:
    """Temp file in the same folder, then rename: a crash never leaves half a file.

    The temp name does not end in ``.parquet``, so a reader's ``**/*.parquet`` glob never sees it.
    ``plain_schema``: store no Arrow schema (the footer's key-value metadata is `metadata` alone), so dictionary
    columns (compaction's strings) read back as the plain strings they stand for (`_dictionary_schema`)."""
    destination.parent.mkdir(parents=True, exist_ok=True)
    handle, temp_name = tempfile.mkstemp(dir=destination.parent, prefix=TEMP_PREFIX, suffix=".parquet.part")
    os.close(handle)
    try:
        if plain_schema:
            with pq.ParquetWriter(temp_name, table.schema, compression="zstd", store_schema=False) as writer:
                writer.write_table(table)
                if metadata:
                    writer.add_key_value_metadata(metadata)
        else:
            if metadata:
                table = table.replace_schema_metadata({**(table.schema.metadata or {}), **metadata})
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


# --------------------------------------------------------------------------- day folders


def day_dirs(lake_raw: Path, table: RawTable) -> list[Path]:
    return sorted(path for path in (lake_raw / table.name).glob("event_date=*") if path.is_dir())


def is_compacted(path: Path) -> bool:
    return path.name.startswith(COMPACTED_PREFIX)


def landed_ids_in(path: Path) -> list[str]:
    """The landed files whose rows a Parquet file holds: its name, or a compacted file's footer."""
    if not is_compacted(path):
        return [path.stem]
    metadata = pq.read_schema(path).metadata or {}
    return json.loads(metadata.get(LANDED_IDS_KEY, b"[]"))


def _checkpoint(step: str) -> None:
    """A no-op between the steps of a day swap; tests replace it to simulate a crash at `step`."""


_RENAME_EXCHANGE = 2
_AT_FDCWD = -100


def _exchange(a: Path, b: Path) -> None:
    """Swap two folders in one atomic step (Linux renameat2 RENAME_EXCHANGE)."""
    libc = ctypes.CDLL(None, use_errno=True)
    if libc.renameat2(_AT_FDCWD, os.fsencode(a), _AT_FDCWD, os.fsencode(b), _RENAME_EXCHANGE) != 0:
        errno = ctypes.get_errno()
        raise OSError(errno, f"renameat2 exchange failed: {os.strerror(errno)}", str(a))


def _staging_for(lake_raw: Path, day_dir: Path) -> Path:
    return lake_raw.parent / STAGING_DIR / day_dir.parent.name / f"{day_dir.name}.{uuid.uuid4().hex[:8]}"


def replace_day(lake_raw: Path, day_dir: Path, keep: Iterable[Path], new_files: list[tuple[pa.Table, dict]]) -> None:
    """Make `day_dir` hold exactly `keep` (files already in it) plus `new_files`, atomically for readers.

    Steps: build the next folder under lake/.staging (hard links + new compacted files), exchange it with
    the live folder, delete what is now the old folder. A crash before the exchange leaves the old files
    live; after it, the new ones; the leftover under lake/.staging is invisible to readers and removed by
    `recover_staging`."""
    staged = _staging_for(lake_raw, day_dir)
    staged.mkdir(parents=True)
    for path in keep:
        os.link(path, staged / path.name)
    for table, metadata in new_files:
        # dictionary columns come from compaction (`_dictionary_schema`): stored as the plain strings they stand for
        plain = any(pa.types.is_dictionary(field.type) for field in table.schema)
        name = staged / f"{COMPACTED_PREFIX}{uuid.uuid4().hex[:12]}.parquet"
        write_parquet_atomic(table, name, metadata, plain_schema=plain)
    _checkpoint("staged")
    _exchange(staged, day_dir)
    _checkpoint("swapped")
    shutil.rmtree(staged)
    _checkpoint("cleaned")


def recover_staging(lake_raw: Path) -> int:
    """Remove what an interrupted swap left under lake/.staging (never visible to readers)."""
    root = lake_raw.parent / STAGING_DIR
    if not root.exists():
        return 0
    leftovers = [path for path in root.glob("*/*") if path.is_dir()]
    for path in leftovers:
        shutil.rmtree(path)
    return len(leftovers)


TEMP_PREFIX = ".tmp-"


def remove_orphan_temp_files(lake_root: Path) -> int:
    """Remove the temp files (``.tmp-*.parquet.part``) a killed writer left under lake/. Readers never saw them
    (their names do not end in .parquet); call only under the lake lock, which every lake writer holds."""
    orphans = [path for path in lake_root.rglob(f"{TEMP_PREFIX}*.parquet.part") if path.is_file()]
    for path in orphans:
        path.unlink(missing_ok=True)
    return len(orphans)


def _compacted_table(paths: list[Path], table: RawTable) -> tuple[pa.Table, dict]:
    """The rows of `paths` as one table (strings as dictionaries where `_dictionary_schema` allows) and its footer
    metadata."""
    ids = sorted({landed for path in paths for landed in landed_ids_in(path)})
    metadata = {LANDED_IDS_KEY: json.dumps(ids).encode()}
    schema = _dictionary_schema(table)
    if schema is None:
        # One thread per read: the files are small, and Arrow's thread pool costs more CPU than it saves on them.
        parts = [pq.read_table(path, schema=table.full_schema, use_threads=False) for path in paths]
        return (pa.concat_tables(parts) if parts else table.full_schema.empty_table()), metadata
    parts = [_read_as(path, schema) for path in paths]
    return (pa.concat_tables(parts) if parts else schema.empty_table()), metadata


def _dictionary_schema(table: RawTable) -> pa.Schema | None:
    """The table's schema with its string columns dictionary-encoded, for compaction, when a file written from it
    without an Arrow schema reads back as the table's own schema; else None (compaction reads plain columns).

    Compaction reads a day's small files into memory: a string repeated on every row (a DCGM series' labels_json,
    host, field) as plain strings is most of a day's bytes (768 MB for one fleet-1k day of raw_dcgm) and most of the
    reading's CPU (allocating them); as dictionaries it is an index per row, and Parquet stores both the same way."""
    return _DICTIONARY_SCHEMAS.setdefault(table.name, _dictionary_schema_of(table.full_schema))


_DICTIONARY_SCHEMAS: dict[str, pa.Schema | None] = {}


def _dictionary_schema_of(schema: pa.Schema) -> pa.Schema | None:
    strings = [field.name for field in schema if field.type == pa.string()]
    if not strings:
        return None
    sink = pa.BufferOutputStream()
    pq.write_table(schema.empty_table(), sink, store_schema=False)
    if not pq.read_schema(pa.BufferReader(sink.getvalue())).equals(schema):
        return None  # a type Parquet alone does not carry back: keep the stored Arrow schema
    return pa.schema(
        [
            field.with_type(pa.dictionary(pa.int32(), pa.string())) if field.name in strings else field
            for field in schema
        ]
    )


def _read_as(path: Path, schema: pa.Schema) -> pa.Table:
    """One Parquet file's rows in `schema` (read_table(schema=...)'s rules: columns it lacks are NULL, others cast,
    extra columns dropped), its dictionary columns read as dictionaries."""
    footer = pq.read_metadata(path)
    present = set(footer.schema.names)
    strings = [field.name for field in schema if pa.types.is_dictionary(field.type) and field.name in present]
    rows = pq.ParquetFile(path, metadata=footer, read_dictionary=strings).read(use_threads=False)
    columns = []
    for field in schema:
        if field.name not in rows.column_names:
            columns.append(pa.nulls(rows.num_rows, field.type))
            continue
        column = rows[field.name]
        if column.type != field.type:
            column = column.cast(field.type)
        columns.append(column)
    return pa.Table.from_arrays(columns, schema=schema)


# --------------------------------------------------------------------------- landed files


class LakeIndex:
    """Which day folders of each raw table hold a landed file's rows (its small file, or a compacted file whose
    footer lists it), read once per ingest run under the lake lock.

    Writing a landed file first removes the rows an earlier run left of it (a re-ingest, or a run killed between
    the lake write and the manifest row); without the index that meant listing every day folder of the table for
    every file, a cost that grew with files x days. Keep it current with `add` after each write; compaction and
    `remove_landed_file` without the index leave it stale (build a new one)."""

    def __init__(self, lake_raw: Path, tables: Iterable[RawTable] | None = None):
        self._days: dict[tuple[str, str], set[Path]] = {}
        self._compacted: dict[str, set[str]] = {}  # landed file -> tables where a compacted file holds its rows
        for table in tables if tables is not None else RAW_TABLES.values():
            for day_dir in day_dirs(lake_raw, table):
                with os.scandir(day_dir) as entries:
                    names = [entry.name for entry in entries if entry.name.endswith(".parquet")]
                for name in names:
                    for landed in landed_ids_in(day_dir / name):
                        self.add(table, landed, day_dir)
                        if name.startswith(COMPACTED_PREFIX):
                            self._compacted.setdefault(landed, set()).add(table.name)

    def days_holding(self, table: RawTable, file_id: str) -> list[Path]:
        return sorted(self._days.get((table.name, file_id), ()))

    def in_compacted(self, table: RawTable, file_id: str) -> bool:
        """Whether a compacted file holds some of the landed file's rows (removing them rewrites its day)."""
        return table.name in self._compacted.get(file_id, ())

    def in_any_compacted(self, file_id: str) -> bool:
        return bool(self._compacted.get(file_id))

    def add(self, table: RawTable, file_id: str, day_dir: Path) -> None:
        self._days.setdefault((table.name, file_id), set()).add(day_dir)

    def forget(self, table: RawTable, file_id: str) -> None:
        self._days.pop((table.name, file_id), None)
        self._compacted.get(file_id, set()).discard(table.name)


def remove_landed_file(lake_raw: Path, table: RawTable, file_id: str, days: list[Path] | None = None) -> int:
    """Remove one landed file's rows (before a re-ingest replaces them), also from compacted files.

    A small file is unlinked; a compacted file holding the landed file is rewritten without its rows and
    swapped in with the rest of its day. `days`: the day folders that may hold the file (a LakeIndex's
    answer); default every day folder of the table. Returns the number of day folders changed."""
    changed = 0
    for day_dir in day_dirs(lake_raw, table) if days is None else days:
        if not day_dir.is_dir():
            continue
        files = sorted(day_dir.glob("*.parquet"))
        small = [path for path in files if path.name == f"{file_id}.parquet"]
        holders = [path for path in files if is_compacted(path) and file_id in landed_ids_in(path)]
        if not holders:
            for path in small:
                path.unlink()
            changed += bool(small)
            continue
        rewritten = []
        for path in holders:
            rows = pq.read_table(path, schema=table.full_schema)
            rows = rows.filter(pc.not_equal(rows["landed_file_id"], pa.scalar(file_id)))
            ids = [landed for landed in landed_ids_in(path) if landed != file_id]
            if rows.num_rows:
                rewritten.append((rows, {LANDED_IDS_KEY: json.dumps(ids).encode()}))
        keep = [path for path in files if path not in holders and path not in small]
        replace_day(lake_raw, day_dir, keep, rewritten)
        changed += 1
    return changed


def write_landed_rows(
    lake_raw: Path, table: RawTable, file_id: str, rows: pa.Table, index: LakeIndex | None = None
) -> int:
    """Split one landed file's rows by event_date and write one Parquet file per day (after removing the rows an
    earlier ingest left of the same landed file: only from the days `index` names, when given)."""
    rows = rows.append_column("landed_file_id", pa.array([file_id] * rows.num_rows, pa.string()))
    rows = rows.select(table.full_schema.names).cast(table.full_schema)
    if index is None:
        remove_landed_file(lake_raw, table, file_id)
    else:
        holding = index.days_holding(table, file_id)
        if holding:
            remove_landed_file(lake_raw, table, file_id, days=holding)
            index.forget(table, file_id)
    days = pc.unique(rows["event_date"]).to_pylist()
    for day in days:
        day_rows = rows if len(days) == 1 else rows.filter(pc.equal(rows["event_date"], pa.scalar(day, pa.date32())))
        day_dir = lake_raw / table.name / f"event_date={day.isoformat()}"
        write_parquet_atomic(day_rows, day_dir / f"{file_id}.parquet")
        if index is not None:
            index.add(table, file_id, day_dir)
    return rows.num_rows


# --------------------------------------------------------------------------- compaction


@dataclass(frozen=True)
class CompactionPolicy:
    """Compact a table-day once it holds more than `min_files` small files, into files of ~`target_bytes`."""

    min_files: int = 4
    target_bytes: int = 128 * 1024 * 1024

    @classmethod
    def from_env(cls) -> "CompactionPolicy":
        """PERFWH_COMPACT_MIN_FILES and PERFWH_COMPACT_TARGET_MB override the defaults."""
        return cls(
            min_files=int(os.environ.get("PERFWH_COMPACT_MIN_FILES", cls.min_files)),
            target_bytes=int(float(os.environ.get("PERFWH_COMPACT_TARGET_MB", 128)) * 1024 * 1024),
        )


@dataclass(frozen=True)
class DayCompaction:
    table: str
    day: str
    files_before: int
    files_after: int
    rows: int

    def line(self) -> str:
        return f"{self.table}\t{self.day}\t{self.files_before} -> {self.files_after} files\t{self.rows} rows"


def _groups(paths: list[Path], target_bytes: int) -> list[list[Path]]:
    """Consecutive runs of files whose sizes add up to at most ~target_bytes (at least one file each)."""
    groups: list[list[Path]] = [[]]
    size = 0
    for path in paths:
        file_size = path.stat().st_size
        if groups[-1] and size + file_size > target_bytes:
            groups.append([])
            size = 0
        groups[-1].append(path)
        size += file_size
    return [group for group in groups if group]


def compact_day(lake_raw: Path, table: RawTable, day_dir: Path, policy: CompactionPolicy) -> DayCompaction | None:
    """Merge a day's small files (and compacted files under half the target) into a few compacted files."""
    files = sorted(day_dir.glob("*.parquet"))
    if sum(not is_compacted(path) for path in files) <= policy.min_files:
        return None
    inputs = [path for path in files if not is_compacted(path) or path.stat().st_size < policy.target_bytes // 2]
    new_files = [_compacted_table(group, table) for group in _groups(inputs, policy.target_bytes)]
    keep = [path for path in files if path not in inputs]
    replace_day(lake_raw, day_dir, keep, new_files)
    rows = sum(table_.num_rows for table_, _ in new_files)
    return DayCompaction(table.name, day_dir.name.split("=", 1)[1], len(files), len(keep) + len(new_files), rows)


def compact_lake(
    lake_raw: Path, policy: CompactionPolicy, tables: Iterable[RawTable] | None = None, since: date | None = None
) -> list[DayCompaction]:
    """Compact every table-day (of `tables`, on or after `since`) that has more than policy.min_files small files."""
    done = []
    for table in tables if tables is not None else RAW_TABLES.values():
        for day_dir in day_dirs(lake_raw, table):
            if since is not None and day_dir.name.split("=", 1)[1] < since.isoformat():
                continue
            result = compact_day(lake_raw, table, day_dir, policy)
            if result is not None:
                done.append(result)
    return done
