"""The day window of a dbt build for the incremental (microbatch) models (docs/incremental.md).

dbt rebuilds a microbatch model one UTC day at a time, over the days it is told (`--event-time-start/--event-time-end`).
This module decides them from the lake, so that a build reprocesses exactly what may have changed:

* the first build of a warehouse, a build after the dbt project changed, or one asked for (`full_refresh`): every day
  of the lake, with `--full-refresh`;
  in batches of `PERFWH_BACKFILL_BATCH_SIZE` (`day`: bounded memory; `month`: fewer, larger batches, less of dbt's
  fixed cost per batch, more memory per batch; `auto`, the default: `month` when the lake's largest calendar month
  holds at most AUTO_MONTH_MAX_SAMPLES telemetry samples, else `day`);
* otherwise: from the earliest of (the last lake day − `lookback_days`) and every day a new or rewritten lake file
  belongs to (a late file for an old day), up to the last lake day. The day-local models (dbt tag `day_local`: a
  day's rows read only lake files of that day and earlier days) need no lookback: they are built in a first dbt build
  (selector `day_local`) from the earliest day a new or rewritten file belongs to, and everything else in a second one
  (selector `after_day_local`) over that window (`BuildWindow.dbt_invocations`).

What the warehouse has seen is a small JSON state file beside it, written only after a build of every incremental
model succeeded: the lake files (path, size, mtime) and a fingerprint of the dbt project. Plain functions, no Dagster.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
from dataclasses import dataclass, field
from datetime import date, datetime, timedelta, timezone
from pathlib import Path

import pyarrow.parquet as pq

from perf_assets.lib.paths import DataHome

STATE_FILE = "incremental_state.json"
DEFAULT_LOOKBACK_DAYS = 2
LOOKBACK_ENV = "PERFWH_INCREMENTAL_LOOKBACK_DAYS"
BACKFILL_BATCH_SIZE_ENV = "PERFWH_BACKFILL_BATCH_SIZE"
DAY_LOCAL_TAG = "day_local"  # dbt tag of the models whose day reads only lake files of that day and earlier days
DAY_LOCAL_SELECTOR = "day_local"  # dbt_project/selectors.yml: the day-local models, their parents and their tests
AFTER_DAY_LOCAL_SELECTOR = "after_day_local"  # every other node
BATCH_SIZES = ("day", "month", "year")  # dbt microbatch batch sizes that keep UTC days whole
AUTO_BATCH_SIZE = "auto"  # month batches when the lake's months are small enough, else day (choose_backfill_batch_size)
# Telemetry samples (raw rows of SAMPLE_TABLES, from the Parquet footers) of the lake's largest calendar month up to
# which `auto` takes month batches: fleet-1k's 30 days (62.4 million DCGM rows) built in one month batch under the
# 4 GiB DuckDB limit (docs/incremental.md, "Batch size of a full refresh").
AUTO_MONTH_MAX_SAMPLES = 70_000_000
SAMPLE_TABLES = ("raw_dcgm", "raw_nvidia_smi")
_DAY_FOLDER = re.compile(r"^event_date=(\d{4}-\d{2}-\d{2})$")


@dataclass(frozen=True)
class BuildWindow:
    """The days [start, end) the incremental models rebuild, and whether everything is rebuilt from scratch."""

    start: date
    end: date
    full_refresh: bool
    reason: str
    lake_files: dict[str, list[int]] = field(default_factory=dict, repr=False, compare=False)
    lookback: int = DEFAULT_LOOKBACK_DAYS
    batch_size: str = "day"
    # The first day the day-local models rebuild (the earliest day of a new or rewritten lake file, at least `start`
    # and at most the last day); None: the same as `start`.
    day_local_start: date | None = None

    @property
    def days(self) -> int:
        return (self.end - self.start).days

    @property
    def split(self) -> bool:
        """Whether the day-local models rebuild fewer days than the rest (two dbt builds, see dbt_invocations)."""
        return not self.full_refresh and self.day_local_start is not None and self.day_local_start > self.start

    def dbt_args(self, start: date | None = None) -> list[str]:
        """--event-time-start/--event-time-end (from `start`, default the window's), the batch size and
        --full-refresh."""
        args = ["--event-time-start", (start or self.start).isoformat(), "--event-time-end", self.end.isoformat()]
        if self.batch_size != "day":  # dbt var read by the daily_microbatch_config macro
            args += ["--vars", json.dumps({"microbatch_batch_size": self.batch_size})]
        return [*args, "--full-refresh"] if self.full_refresh else args

    def dbt_invocations(self) -> list[list[str]]:
        """The arguments of each dbt build this window takes, in order. Split: the day-local models (selector
        `day_local`) over [day_local_start, end), then every other node (selector `after_day_local`) over
        [start, end); the second reads the first's tables. Otherwise one build of everything over [start, end)."""
        if not self.split:
            return [self.dbt_args()]
        return [
            ["--selector", DAY_LOCAL_SELECTOR, *self.dbt_args(self.day_local_start)],
            ["--selector", AFTER_DAY_LOCAL_SELECTOR, *self.dbt_args()],
        ]

    def describe(self) -> str:
        kind = "full refresh" if self.full_refresh else "incremental"
        batches = "" if self.batch_size == "day" else f", {self.batch_size} batches"
        local = ""
        if self.split:
            local = f"; day-local models from {self.day_local_start} ({(self.end - self.day_local_start).days} day(s))"
        return (
            f"{kind}: days {self.start} to {self.end - timedelta(days=1)} ({self.days} day(s){batches}; {self.reason})"
            f"{local}"
        )


def lookback_days() -> int:
    """Days before the last lake day that every incremental build reprocesses (PERFWH_INCREMENTAL_LOOKBACK_DAYS)."""
    raw = os.environ.get(LOOKBACK_ENV, "")
    if not raw:
        return DEFAULT_LOOKBACK_DAYS
    if not raw.isdigit():
        raise ValueError(f"{LOOKBACK_ENV} must be a whole number of days >= 0, not {raw!r}")
    return int(raw)


def backfill_batch_size() -> str:
    """The batch size setting of a full refresh (PERFWH_BACKFILL_BATCH_SIZE: day, month, year or auto; default auto,
    which choose_backfill_batch_size resolves). Incremental builds always rebuild day by day."""
    raw = os.environ.get(BACKFILL_BATCH_SIZE_ENV, "").strip().lower() or AUTO_BATCH_SIZE
    if raw not in (*BATCH_SIZES, AUTO_BATCH_SIZE):
        raise ValueError(
            f"{BACKFILL_BATCH_SIZE_ENV} must be one of {', '.join(BATCH_SIZES)} or {AUTO_BATCH_SIZE}, not {raw!r}"
        )
    return raw


def samples_by_month(lake_raw: Path, files: dict[str, list[int]]) -> dict[str, int] | None:
    """Telemetry sample rows (SAMPLE_TABLES) per calendar month ('YYYY-MM') of their day folders, from the Parquet
    footers (no data page is read); None when a footer cannot be read."""
    months: dict[str, int] = {}
    for path in files:
        if Path(path).parts[0] not in SAMPLE_TABLES:
            continue
        try:
            rows = pq.read_metadata(lake_raw / path).num_rows
        except (OSError, ValueError):  # pyarrow raises OSError (ArrowIOError) or ArrowInvalid (a ValueError)
            return None
        month = _day_of(path).isoformat()[:7]
        months[month] = months.get(month, 0) + rows
    return months


def choose_backfill_batch_size(setting: str, lake_raw: Path, files: dict[str, list[int]]) -> tuple[str, str]:
    """The batch size of a full refresh and why: the setting itself, or for `auto` month when the lake's largest
    calendar month (a month batch's input) has at most AUTO_MONTH_MAX_SAMPLES telemetry samples, else day (also
    when a footer cannot be read: day is the size whose memory does not grow with the fleet's history)."""
    if setting != AUTO_BATCH_SIZE:
        return setting, ""
    months = samples_by_month(lake_raw, files)
    if months is None:
        return "day", "auto: a telemetry file's row count could not be read"
    largest = max(months.values(), default=0)
    size = "month" if largest <= AUTO_MONTH_MAX_SAMPLES else "day"
    relation = "<=" if size == "month" else ">"
    return size, f"auto: largest month {largest:,} telemetry samples {relation} {AUTO_MONTH_MAX_SAMPLES:,}"


def lake_files(lake_raw: Path) -> dict[str, list[int]]:
    """Every Parquet file of the lake's day folders: relative path -> [size, mtime_ns]."""
    files: dict[str, list[int]] = {}
    if not lake_raw.is_dir():
        return files
    for table in sorted(lake_raw.iterdir()):
        if not table.is_dir():
            continue
        for day in table.iterdir():
            if not _DAY_FOLDER.match(day.name):
                continue
            for path in day.rglob("*.parquet"):
                stat = path.stat()
                files[str(path.relative_to(lake_raw))] = [stat.st_size, stat.st_mtime_ns]
    return files


def _day_of(relative_path: str) -> date:
    return date.fromisoformat(_DAY_FOLDER.match(Path(relative_path).parts[1]).group(1))


def project_fingerprint(manifest_path: Path) -> str:
    """A hash of the dbt project's models, seeds, snapshots and macros as parsed (manifest.json): when it changes, the
    incremental tables may hold rows computed by other SQL, so the next build is a full refresh."""
    manifest = json.loads(manifest_path.read_text())
    digest = hashlib.sha256()
    for unique_id, node in sorted(manifest.get("nodes", {}).items()):
        if node.get("resource_type") in ("model", "seed", "snapshot"):
            digest.update(f"{unique_id}={node.get('checksum', {}).get('checksum')}\n".encode())
    for unique_id, macro in sorted(manifest.get("macros", {}).items()):
        if macro.get("package_name") == manifest.get("metadata", {}).get("project_name", "perf_warehouse"):
            digest.update(f"{unique_id}={hashlib.sha256(macro.get('macro_sql', '').encode()).hexdigest()}\n".encode())
    for name, value in sorted((manifest.get("metadata", {}).get("vars") or {}).items()):
        digest.update(f"var {name}={value!r}\n".encode())
    return digest.hexdigest()


def _lake_days(files: dict[str, list[int]]) -> set[date]:
    """The days of the lake's files; today (UTC) alone when it has none, so that dbt never batches from `begin`
    (2024-01-01) to now, hundreds of empty days."""
    return {_day_of(path) for path in files} or {datetime.now(timezone.utc).date()}


def every_lake_day_args(home: DataHome) -> list[str]:
    """dbt's --event-time-start/--event-time-end over every day of the lake, for a plain `dbt run` or `dbt build`
    outside perfwh (e.g. on Spark)."""
    days = _lake_days(lake_files(home.lake_raw))
    return [
        "--event-time-start",
        min(days).isoformat(),
        "--event-time-end",
        (max(days) + timedelta(days=1)).isoformat(),
    ]


def _state_path(home: DataHome) -> Path:
    return home.warehouse_dir / STATE_FILE


def read_state(home: DataHome) -> dict | None:
    path = _state_path(home)
    try:
        state = json.loads(path.read_text())
    except (OSError, ValueError):
        return None
    return state if isinstance(state, dict) and isinstance(state.get("lake_files"), dict) else None


def day_local_lake_tables(manifest_path: Path) -> frozenset[str]:
    """The lake tables (source identifiers, the folder names under lake/raw/) the day-local models (tag day_local)
    read, directly or through their parents: only these tables' new or rewritten files move the day-local window
    (a day's sacct file rewritten when the next day's export lands moves the lookback window alone)."""
    manifest = json.loads(manifest_path.read_text())
    nodes, sources = manifest.get("nodes", {}), manifest.get("sources", {})
    pending = [uid for uid, node in nodes.items() if DAY_LOCAL_TAG in node.get("tags", [])]
    seen: set[str] = set()
    tables: set[str] = set()
    while pending:
        uid = pending.pop()
        if uid in seen:
            continue
        seen.add(uid)
        if uid in sources:
            tables.add(sources[uid].get("identifier") or sources[uid]["name"])
        pending += nodes.get(uid, {}).get("depends_on", {}).get("nodes", [])
    return frozenset(tables)


def plan_window(
    home: DataHome,
    fingerprint: str,
    full_refresh: bool = False,
    lookback: int | None = None,
    day_local_tables: frozenset[str] | None = None,
) -> BuildWindow:
    """The days the next dbt build rebuilds (today alone while the lake has no day). day_local_tables: the lake tables
    the day-local models read (day_local_lake_tables); None: every table's changed files move their window too."""
    lookback = lookback_days() if lookback is None else lookback
    files = lake_files(home.lake_raw)
    days = _lake_days(files)
    first, last = min(days), max(days)
    end = last + timedelta(days=1)
    state = read_state(home)
    reason = ""
    if full_refresh:
        reason = "asked for"
    elif state is None or not home.warehouse_db.exists():
        reason = "no earlier incremental build in this warehouse"
    elif state.get("fingerprint") != fingerprint:
        reason = "the dbt project changed since the last build"
    if reason:
        batch_size, why = choose_backfill_batch_size(backfill_batch_size(), home.lake_raw, files)
        return BuildWindow(first, end, True, f"{reason}; {why}" if why else reason, files, lookback, batch_size)
    seen = state["lake_files"]
    late = sorted({_day_of(path) for path, stat in files.items() if seen.get(path) != stat})
    starts = [last - timedelta(days=lookback), *late]
    unsettled = _unsettled_since(state)
    if unsettled is not None:
        starts.append(unsettled)
    start = max(first, min(starts))
    old = [day for day in late if day < last - timedelta(days=lookback)]
    reason = f"lookback {lookback} day(s)" + (f"; late files for {', '.join(map(str, old))}" if old else "")
    if unsettled is not None and unsettled < min([last - timedelta(days=lookback), *late]):
        reason += f"; the last build's provisional days from {unsettled}"
    # The day-local models: the earliest day of a changed file of a table they read (a new day's files are new), else
    # the last day alone (a build with no new file still rebuilds one day, as cheap as it gets). Never before the
    # window: their parents are views and seeds, and a late day in the window is in `late`.
    local_late = [
        _day_of(path)
        for path, stat in files.items()
        if seen.get(path) != stat and (day_local_tables is None or Path(path).parts[0] in day_local_tables)
    ]
    day_local_start = max(start, min([last, *local_late]))
    return BuildWindow(start, end, False, reason, files, lookback, day_local_start=day_local_start)


def _unsettled_since(state: dict) -> date | None:
    """The first day the last build left provisional (is_provisional: the days after its last day − its lookback),
    which the next build must rebuild even when it comes more than one day later or with a shorter lookback; None
    when it left none or the state predates the record."""
    try:
        last_end = date.fromisoformat(state["window"][1])
        previous_lookback = int(state["lookback"])
    except (KeyError, IndexError, TypeError, ValueError):
        return None
    if previous_lookback <= 0:
        return None
    return last_end - timedelta(days=previous_lookback)


def record_build(home: DataHome, window: BuildWindow, fingerprint: str) -> Path:
    """Remember what the warehouse has seen, after a build of every incremental model over `window` succeeded."""
    path = _state_path(home)
    state = {
        "fingerprint": fingerprint,
        "window": [window.start.isoformat(), window.end.isoformat()],
        "full_refresh": window.full_refresh,
        "lookback": window.lookback,
        "lake_files": window.lake_files,
    }
    temporary = path.with_suffix(".tmp")
    temporary.write_text(json.dumps(state, sort_keys=True))
    temporary.replace(path)
    return path
