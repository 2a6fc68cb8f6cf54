"""Ingestion: landed files -> parser -> typed Parquet in the lake, recorded in the manifest."""

from __future__ import annotations

import ctypes
import dataclasses
import multiprocessing
import os
import signal
from collections import deque
from concurrent.futures import ProcessPoolExecutor
from dataclasses import dataclass
from datetime import date, datetime, timezone
from pathlib import Path

import pyarrow as pa
from filelock import FileLock

from perf_assets.lib.contracts import RAW_TABLES, raw_table
from perf_assets.lib.ingest.formats.errors import QuarantineError
from perf_assets.lib.ingest.lake import (
    CompactionPolicy,
    DayCompaction,
    LakeIndex,
    compact_day,
    compact_lake,
    day_dirs,
    ensure_schema_files,
    recover_staging,
    remove_orphan_temp_files,
    write_landed_rows,
)
from perf_assets.lib.ingest.landing import LandedFile, describe
from perf_assets.lib.ingest.manifest import (
    ManifestEntry,
    ManifestWriter,
    compact_manifest,
    read_manifest,
    seen_versions,
    write_entry,
)
from perf_assets.lib.ingest.registry import SIDECAR_NAMES, find_format, format_named
from perf_assets.lib.paths import DataHome, positive_int_setting


@dataclass(frozen=True)
class IngestOutcome:
    """What happened to one landed file. `already_ingested` writes nothing; the rest add a manifest row."""

    path: str
    source: str
    format: str | None
    rows: int
    status: str  # ok | quarantined | skipped | already_ingested
    reason: str | None

    def line(self) -> str:
        status = self.status if self.status in ("ok", "already_ingested") else f"{self.status}: {self.reason}"
        note = f" ({self.reason})" if self.status == "ok" and self.reason else ""
        return f"{self.path}\t{self.format or '-'}\t{self.rows} rows\t{status}{note}"


def is_landed_file(landing: Path, path: Path) -> bool:
    """A file under landing/<source>/... that is data: not top-level (labels.json), hidden or a sidecar.

    A link counts (ingest quarantines one that leads out of landing/ rather than skip it silently)."""
    parts = path.relative_to(landing).parts
    return (
        (path.is_file() or path.is_symlink())
        and len(parts) >= 2
        and not any(part.startswith(".") for part in parts)
        and path.name not in SIDECAR_NAMES
    )


def landed_files(landing: Path) -> list[Path]:
    """Every file under landing/<source>/..., sorted; top-level files (labels.json) and sidecars excluded."""
    if not landing.exists():
        return []
    return sorted(path for path in landing.rglob("*") if is_landed_file(landing, path))


MAX_REASON_CHARS = 1000  # a reason quoting a hostile line stays readable and the manifest small


def _bounded(reason: str | None) -> str | None:
    if reason is None or len(reason) <= MAX_REASON_CHARS:
        return reason
    return f"{reason[: MAX_REASON_CHARS - 40]}... ({len(reason)} characters in all)"


def parser_failure(error: Exception) -> str:
    """The reason of a file a parser failed on without saying why (hostile input, or a parser bug)."""
    text = f"{type(error).__name__}: {error}"
    if isinstance(error, RecursionError):
        return f"nested too deeply to parse ({text})"
    if isinstance(error, OverflowError) or "integer string conversion" in str(error):
        return f"a number too large for its field ({text})"
    return f"parser error: {text}"


def _entry(landed: LandedFile, parsed: ParsedFile, *, rows: int, status: str, reason: str | None) -> ManifestEntry:
    return ManifestEntry(
        file_id=landed.file_id,
        path=landed.relative_path,
        sha256=landed.sha256,
        size_bytes=landed.size_bytes,
        source=landed.source,
        format=parsed.format_name,
        parser_version=parsed.parser_version,
        rows=rows,
        status=status,
        reason=_bounded(reason),
        cluster=landed.cluster,
        host=landed.host,
        job_id=landed.job_id,
        rank=landed.rank,
        captured_at=landed.captured_at,
        ingested_at=datetime.now(timezone.utc),
    )


@dataclass(frozen=True)
class ParsedFile:
    """A landed file read by its parser: what a parse worker hands the one process that records it.

    `tables`: rows still to be written to the lake (by the recorder); a worker that wrote them itself leaves it
    None and says how many rows it wrote to which day folders (`rows`, `written_days`)."""

    landed: LandedFile
    format_name: str | None
    parser_version: int  # 0 without a parser
    tables: dict[str, pa.Table] | None  # RAW_TABLES key -> rows
    status: str  # ok | quarantined | skipped | already_ingested
    reason: str | None
    rows: int = 0
    written_days: tuple[tuple[str, Path], ...] = ()  # (RAW_TABLES key, day folder) a worker wrote


def _format_of(landed: LandedFile):
    return None if landed.link_target is not None else find_format(landed)


def _already_ingested(landed: LandedFile, fmt, seen: dict, force: bool) -> bool:
    return not force and (fmt.parser_version if fmt else 0) in seen.get((landed.sha256, landed.relative_path), ())


def parse_landed(landed: LandedFile, seen: dict, *, force: bool = False, fmt=False) -> ParsedFile:
    """Find the file's parser (unless given) and parse it; a file the manifest has seen with this parser version
    is not read. Writes nothing."""
    fmt = _format_of(landed) if fmt is False else fmt
    name, version = (fmt.name, fmt.parser_version) if fmt else (None, 0)
    if _already_ingested(landed, fmt, seen, force):
        return ParsedFile(landed, name, version, None, "already_ingested", None)
    if landed.link_target is not None:
        reason = f"a link to {landed.link_target!r}, which is not a file inside the landing zone: not read"
        return ParsedFile(landed, None, 0, None, "quarantined", reason)
    if fmt is None:
        reason = f"no parser for source {landed.source!r} and file {landed.path.name!r}"
        return ParsedFile(landed, None, 0, None, "skipped", reason)
    try:
        parsed = fmt.parse(landed)  # one table, or several keyed by RAW_TABLES key (traces)
    except QuarantineError as error:
        return ParsedFile(landed, name, version, None, "quarantined", str(error))
    except Exception as error:  # a parser bug must not stop the batch: quarantine with the cause
        return ParsedFile(landed, name, version, None, "quarantined", parser_failure(error))
    tables = parsed if isinstance(parsed, dict) else {fmt.source: parsed}
    return ParsedFile(landed, name, version, tables, "ok", _ingest_note(tables))


def _ingest_note(tables: dict[str, pa.Table]) -> str | None:
    """What the parser says about rows it left out (in the tables' schema metadata), for the manifest's reason."""
    metadata = {k: v for rows in tables.values() for k, v in (rows.schema.metadata or {}).items()}
    dropped = int(metadata.get(b"unattributed_series", b"0"))
    notes = [f"{dropped} series without host/GPU labels not ingested"] if dropped else []
    if b"ingest_note" in metadata and metadata[b"ingest_note"].decode() not in " ".join(notes):
        notes.append(metadata[b"ingest_note"].decode())
    return "; ".join(notes) or None


def record_parsed(
    home: DataHome,
    parsed: ParsedFile,
    seen: dict,
    *,
    force: bool = False,
    index: LakeIndex | None = None,
    manifest: ManifestWriter | None = None,
) -> IngestOutcome:
    """Write a parsed file's rows to the lake (unless a worker did), then its manifest row (to `manifest`, which
    writes it with its batch; without one, in a file of its own now).

    The manifest is checked again here: a path listed twice in one run is recorded once."""
    landed = parsed.landed
    key = (landed.sha256, landed.relative_path)
    if parsed.status == "already_ingested" or (not force and parsed.parser_version in seen.get(key, ())):
        return IngestOutcome(landed.relative_path, landed.source, parsed.format_name, 0, "already_ingested", None)
    rows = parsed.rows
    if parsed.tables is not None:
        # A failure to write the lake (disk, a crash) is not the file's fault: it propagates, and the
        # manifest records nothing, so the next run tries the file again.
        rows = sum(
            write_landed_rows(home.lake_raw, raw_table(name), landed.file_id, table, index)
            for name, table in parsed.tables.items()
        )
    elif index is not None:
        for name, day_dir in parsed.written_days:
            index.add(raw_table(name), landed.file_id, day_dir)
    entry = _entry(landed, parsed, rows=rows, status=parsed.status, reason=parsed.reason)
    if manifest is None:
        write_entry(home.manifest_dir, entry)
    else:
        manifest.add(entry)
    seen.setdefault(key, set()).add(entry.parser_version or 0)
    return IngestOutcome(entry.path, entry.source, entry.format, entry.rows, entry.status, entry.reason)


def ingest_file(
    home: DataHome,
    landed: LandedFile,
    seen: dict,
    *,
    force: bool = False,
    index: LakeIndex | None = None,
    manifest: ManifestWriter | None = None,
) -> IngestOutcome:
    """Parse and record one landed file in this process."""
    parsed = parse_landed(landed, seen, force=force)
    return record_parsed(home, parsed, seen, force=force, index=index, manifest=manifest)


def _lake_lock(home: DataHome) -> FileLock:
    """Held by every writer of the lake: ingestion, re-ingestion and compaction."""
    return FileLock(str(home.root / "lake" / ".ingest.lock"))


def ingest_workers() -> int:
    """Worker processes of an ingest run: PERFWH_INGEST_WORKERS, default 2 (1: all in the ingest process)."""
    return positive_int_setting("PERFWH_INGEST_WORKERS", 2, "worker processes")


# ----------------------------------------------------------------------------- worker processes
#
# With more than one worker, forked processes parse the landed files and write each one's small Parquet files
# (`<file_id>.parquet` per day, temp file + rename, as before), then compact the table-days. The ingest process
# (which holds the lake lock) hashes each file, checks the manifest, hands out one file per task, and writes the
# manifest row of a file only after its worker wrote the rows: the order of the single-process ingest, so a run
# killed at any point leaves rows without a manifest row at worst, which the next run replaces. Two tasks never
# touch the same file: a landed file listed twice in one run is handed out once, and a file whose rows an
# earlier run left inside a compacted file is kept by the ingest process, which rewrites those days once the
# workers are idle (a day folder is swapped whole: no worker may write into it meanwhile).

# State of a worker process, set once by `_start_worker` (inherited through fork, never pickled).
_WORKER: dict = {}


def _start_worker(lake_raw: Path, index: LakeIndex, parent_pid: int) -> None:
    _die_with(parent_pid)
    _WORKER.update(lake_raw=lake_raw, index=index)
    pa.set_cpu_count(1)  # one worker per core already: Arrow's own thread pool would only add switching
    pa.set_io_thread_count(1)


_PR_SET_PDEATHSIG = 1


def _die_with(parent_pid: int) -> None:
    """Have the kernel kill this worker when the ingest process dies (killed, out of memory): an orphaned worker
    would otherwise go on holding the lake lock it inherited, or wait forever for its next task."""
    libc = ctypes.CDLL(None, use_errno=True)
    libc.prctl(_PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)
    if os.getppid() != parent_pid:  # the ingest process died before the line above
        os._exit(1)


def _parse_and_write(landed: LandedFile, format_name: str | None) -> ParsedFile:
    """In a worker: parse one landed file (the caller checked the manifest) and write its rows to the lake."""
    fmt = _format_named_for(landed, format_name)
    parsed = parse_landed(landed, {}, force=True, fmt=fmt)
    if parsed.tables is None:
        return parsed
    # The index as of the run's start: this file's own entries are all it reads (its old small files, never a
    # compacted file: the ingest process keeps those files for itself).
    index: LakeIndex = _WORKER["index"]
    rows, days = 0, []
    for name, table in parsed.tables.items():
        rows += write_landed_rows(_WORKER["lake_raw"], raw_table(name), landed.file_id, table, index)
        days += [(name, day_dir) for day_dir in index.days_holding(raw_table(name), landed.file_id)]
    return dataclasses.replace(parsed, tables=None, rows=rows, written_days=tuple(days))


def _format_named_for(landed: LandedFile, format_name: str | None):
    """The format the ingest process chose (formats hold functions: the worker looks it up again by name)."""
    if format_name is None:
        return None
    fmt = _format_of(landed)  # the ingest process's answer (same bytes, same registry, a test's patch included)
    return fmt if fmt is not None and fmt.name == format_name else format_named(format_name)


def _compact_in_worker(table_key: str, day_dir: Path, policy: CompactionPolicy) -> DayCompaction | None:
    return compact_day(_WORKER["lake_raw"], raw_table(table_key), day_dir, policy)


def _pooled_outcomes(
    home: DataHome,
    pool: ProcessPoolExecutor,
    targets: list[Path],
    seen: dict,
    force: bool,
    index: LakeIndex,
    manifest: ManifestWriter,
    workers: int,
) -> list[IngestOutcome]:
    """Hand the targets to the pool, at most 3 tasks per worker waiting, and record each as it comes back.

    A file whose old rows sit in a compacted file (a re-ingest, or a killed run's leftovers since compacted) is
    kept for the end: removing them rewrites a whole day folder, which must not happen while workers write into
    it, so this process does those files alone once the pool is idle. Outcomes come back in the targets' order."""
    window = 3 * workers
    pending: deque = deque()  # (position, future or None, ParsedFile or None)
    outcomes: dict[int, IngestOutcome] = {}
    deferred: list[tuple[int, LandedFile]] = []
    handed_out: set[tuple[str, str, int]] = set()

    def drain(limit: int) -> None:
        while len(pending) > limit:
            position, future, parsed = pending.popleft()
            parsed = future.result() if future is not None else parsed  # a worker that died ends the run
            outcomes[position] = record_parsed(home, parsed, seen, force=force, index=index, manifest=manifest)

    for position, path in enumerate(targets):
        landed = describe(home.landing, path)
        fmt = _format_of(landed)
        claim = (landed.sha256, landed.relative_path, fmt.parser_version if fmt else 0)
        if _already_ingested(landed, fmt, seen, force) or claim in handed_out:
            parsed = ParsedFile(landed, fmt.name if fmt else None, claim[2], None, "already_ingested", None)
            pending.append((position, None, parsed))
        elif fmt is None:  # nothing to read: a link out of the landing zone, or no parser
            pending.append((position, None, parse_landed(landed, seen, force=force, fmt=None)))
        elif index.in_any_compacted(landed.file_id):
            handed_out.add(claim)
            deferred.append((position, landed))
        else:
            handed_out.add(claim)
            pending.append((position, pool.submit(_parse_and_write, landed, fmt.name), None))
        drain(window)
    drain(0)
    for position, landed in deferred:  # the pool is idle: this process alone writes the lake now
        outcomes[position] = ingest_file(home, landed, seen, force=force, index=index, manifest=manifest)
    return [outcomes[position] for position in sorted(outcomes)]


def ingest(
    home: DataHome,
    paths: list[Path] | None = None,
    *,
    force: bool = False,
    compaction: CompactionPolicy | None = None,
    workers: int | None = None,
) -> list[IngestOutcome]:
    """Ingest landed files (all of landing/ by default). Safe to run twice: seen files are skipped.

    `workers` processes (default `ingest_workers()`) parse and write the files; this process records the manifest,
    each file after its rows, in batches (manifest.ManifestWriter). Ends by compacting the table-days that hold more
    than `compaction.min_files` small files (default: CompactionPolicy.from_env()), and the manifest."""
    home.ensure()
    workers = ingest_workers() if workers is None else workers
    ensure_schema_files(home.lake_raw, home.manifest_dir)
    policy = compaction or CompactionPolicy.from_env()
    with _lake_lock(home):
        recover_staging(home.lake_raw)
        remove_orphan_temp_files(home.root / "lake")
        seen = seen_versions(home.manifest_dir)
        index = LakeIndex(home.lake_raw)
        targets = landed_files(home.landing) if paths is None else paths
        manifest = ManifestWriter(home.manifest_dir, home.lake_raw)
        if workers <= 1 or len(targets) <= 1:
            try:
                outcomes = [
                    ingest_file(home, describe(home.landing, path), seen, force=force, index=index, manifest=manifest)
                    for path in targets
                ]
            finally:
                manifest.close()  # the entries of the files whose rows are in the lake, even when one failed
            if any(outcome.rows for outcome in outcomes):
                compact_lake(home.lake_raw, policy)
        else:
            # fork: workers inherit the loaded modules (and a test's patches); only tasks and results are pickled.
            context = multiprocessing.get_context("fork")
            initargs = (home.lake_raw, index, os.getpid())
            with ProcessPoolExecutor(workers, context, initializer=_start_worker, initargs=initargs) as pool:
                try:
                    outcomes = _pooled_outcomes(home, pool, targets, seen, force, index, manifest, workers)
                finally:
                    manifest.close()
                if any(outcome.rows for outcome in outcomes):
                    days = [(key, day) for key, table in RAW_TABLES.items() for day in day_dirs(home.lake_raw, table)]
                    for future in [pool.submit(_compact_in_worker, key, day, policy) for key, day in days]:
                        future.result()
        compact_manifest(home.manifest_dir, home.lake_raw)
        return outcomes


def compact(
    home: DataHome,
    *,
    table: str | None = None,
    since: date | None = None,
    policy: CompactionPolicy | None = None,
) -> list[DayCompaction]:
    """Compact the lake (one raw table: `raw_dcgm` or `dcgm`; days on or after `since`) under the lake lock."""
    home.ensure()
    tables = None
    if table is not None:
        tables = [t for key, t in RAW_TABLES.items() if table in (key, t.name)]
        if not tables:
            raise ValueError(f"no raw table {table!r}; one of {', '.join(t.name for t in RAW_TABLES.values())}")
    with _lake_lock(home):
        recover_staging(home.lake_raw)
        remove_orphan_temp_files(home.root / "lake")
        return compact_lake(home.lake_raw, policy or CompactionPolicy.from_env(), tables=tables, since=since)


def reingest(home: DataHome, format_name: str, since: date | None = None) -> list[IngestOutcome]:
    """Re-read every landed file a format handled (captured on or after `since`), e.g. after a parser fix."""
    manifest = read_manifest(home.manifest_dir).to_pylist()
    paths = sorted(
        {
            row["path"]
            for row in manifest
            if row["format"] == format_name
            and (since is None or _capture_day(row) is None or _capture_day(row) >= since)
        }
    )
    return ingest(home, [home.landing / path for path in paths if (home.landing / path).exists()], force=True)


def _capture_day(row: dict) -> date | None:
    if row["captured_at"] is not None:
        return row["captured_at"].date()
    parts = row["path"].split("/")
    try:
        return date.fromisoformat(parts[2]) if len(parts) >= 4 else None
    except ValueError:
        return None
