"""The warehouse file: one writer at a time (file lock), and the read-only published snapshot."""

from __future__ import annotations

import os
import shutil
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING

import duckdb
from filelock import FileLock, Timeout

from perf_assets.lib.paths import DataHome

if TYPE_CHECKING:
    import pandas as pd

# Schemas copied into the published snapshot. Staging views read the lake directly, so users
# query the lake's Parquet (or these tables) rather than a copy of every raw row.
PUBLISHED_SCHEMAS = ("main", "intermediate")

# How every reader opens the published snapshot: read-only, and no way out of it. DuckDB's read_only
# alone still lets a query write files (COPY ... TO, EXPORT DATABASE), read any file (read_csv('/etc/...')),
# attach other databases and download extensions (INSTALL); external access off forbids all of these, and
# the locked configuration keeps a query from switching it back on (SET enable_external_access).
READER_CONFIG = {
    "enable_external_access": False,
    "autoinstall_known_extensions": False,
    "autoload_known_extensions": False,
    "allow_community_extensions": False,
    "lock_configuration": True,
}

_locks: dict[str, FileLock] = {}
_locks_guard = threading.Lock()


class WarehouseBusy(RuntimeError):
    """Another process holds the warehouse writer lock for longer than we were willing to wait."""


def _lock_for(path: Path) -> FileLock:
    # One FileLock object per path and process: FileLock is re-entrant per object, so a build
    # that holds the lock can run writer assets in-process that take it again.
    with _locks_guard:
        return _locks.setdefault(str(path), FileLock(str(path)))


@contextmanager
def warehouse_write_lock(home: DataHome, timeout_s: float = 3600.0) -> Iterator[None]:
    """Exclusive right to write warehouse/perf.duckdb, across processes (perfwh build, Dagster runs)."""
    home.warehouse_dir.mkdir(parents=True, exist_ok=True)
    lock = _lock_for(home.warehouse_lock)
    try:
        lock.acquire(timeout=timeout_s)
    except Timeout:
        raise WarehouseBusy(f"another writer holds {home.warehouse_lock} (waited {timeout_s:.0f} s)") from None
    try:
        yield
    finally:
        lock.release()


def connect(path: Path, *, read_only: bool, attempts: int = 8) -> duckdb.DuckDBPyConnection:
    """Open a DuckDB file, retrying while another process holds a conflicting lock."""
    delay = 0.1
    for attempt in range(attempts):
        try:
            return duckdb.connect(str(path), read_only=read_only)
        except duckdb.IOException:
            if attempt == attempts - 1:
                raise
            time.sleep(delay)
            delay = min(delay * 2, 2.0)
    raise AssertionError("unreachable")


def publish_snapshot(home: DataHome) -> Path:
    """Copy the warehouse's tables (views materialized) to published/perf.duckdb, atomically.

    Readers holding the old snapshot keep reading it; new readers see the new one. Call only while
    holding the writer lock.

    The snapshot is a file copy of the checkpointed warehouse (the kernel copies the bytes: no table is read or
    written again), from which every schema but ``PUBLISHED_SCHEMAS`` is dropped and any view left in them is
    materialized. Copying table by table through DuckDB cost 141 CPU s and 4.4 GiB at fleet-1k's 30 days (two
    sample-grain tables of 62 million rows each), twice a build (dbt, then detection). Should the warehouse keep a
    write-ahead log after its checkpoint, the tables are copied one by one instead.
    """
    target = home.published_db
    target.parent.mkdir(parents=True, exist_ok=True)
    temp = target.with_name(f".{target.name}.tmp")
    temp.unlink(missing_ok=True)
    connection = connect(home.warehouse_db, read_only=False)
    try:
        connection.execute("checkpoint")
    finally:
        connection.close()
    if home.warehouse_db.with_name(home.warehouse_db.name + ".wal").exists():
        _copy_tables(home.warehouse_db, temp)
    else:
        shutil.copyfile(home.warehouse_db, temp)
        _keep_published_schemas(temp)
    os.replace(temp, target)
    return target


def _keep_published_schemas(snapshot: Path) -> None:
    """Drop from a copied warehouse every schema outside ``PUBLISHED_SCHEMAS``; materialize their views."""
    connection = duckdb.connect(str(snapshot))
    try:
        database = connection.execute("select current_database()").fetchone()[0]
        schemas = connection.execute(
            "select schema_name from duckdb_schemas() where database_name = ? and not internal", [database]
        ).fetchall()
        for (schema,) in schemas:
            if schema not in PUBLISHED_SCHEMAS:
                connection.execute(f'drop schema "{schema}" cascade')
        views = connection.execute(
            "select schema_name, view_name from duckdb_views() where database_name = ? and schema_name in ? "
            "and not internal order by 1, 2",
            [database, list(PUBLISHED_SCHEMAS)],
        ).fetchall()
        for schema, name in views:
            connection.execute(f'create table "{schema}"."__materialized" as select * from "{schema}"."{name}"')
            connection.execute(f'drop view "{schema}"."{name}"')
            connection.execute(f'alter table "{schema}"."__materialized" rename to "{name}"')
        connection.execute("checkpoint")
    finally:
        connection.close()


def _copy_tables(warehouse: Path, snapshot: Path) -> None:
    """The published schemas' tables and views, copied table by table into a new database file."""
    connection = connect(warehouse, read_only=False)
    try:
        connection.execute(f"attach '{snapshot}' as snapshot")
        relations = connection.execute(
            """
            select schema_name, table_name from duckdb_tables()
            where database_name = current_database() and schema_name in ?
            union all
            select schema_name, view_name from duckdb_views()
            where database_name = current_database() and schema_name in ? and not internal
            order by 1, 2
            """,
            [list(PUBLISHED_SCHEMAS), list(PUBLISHED_SCHEMAS)],
        ).fetchall()
        for schema, name in relations:
            connection.execute(f'create schema if not exists snapshot."{schema}"')
            connection.execute(f'create table snapshot."{schema}"."{name}" as select * from "{schema}"."{name}"')
        connection.execute("detach snapshot")
    finally:
        connection.close()


def query_published(home: DataHome, sql: str) -> tuple[list[str], list[tuple]]:
    """Run one query on the published snapshot, read-only: never blocks or is blocked by a build.

    Writes of any kind (CREATE, INSERT, ATTACH, COPY ... TO, INSTALL, SET) raise a duckdb.Error; see READER_CONFIG."""
    if not home.published_db.exists():
        raise FileNotFoundError(f"no published warehouse at {home.published_db}: run `perfwh build` first")
    connection = duckdb.connect(str(home.published_db), read_only=True, config=READER_CONFIG)
    try:
        cursor = connection.execute(sql)
        columns = [column[0] for column in cursor.description] if cursor.description else []
        return columns, cursor.fetchall() if cursor.description else []
    finally:
        connection.close()


def published_frame(home: DataHome, sql: str) -> "pd.DataFrame":
    """`query_published` as a DataFrame (alerts, evaluation, the report and tests read it this way)."""
    import pandas as pd

    columns, rows = query_published(home, sql)
    return pd.DataFrame(rows, columns=columns)
