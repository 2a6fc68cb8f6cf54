"""Ingestion: landed files -> parser -> typed Parquet in the lake, recorded in the manifest."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import date, datetime, timezone
from pathlib import Path

from filelock import FileLock

from perf_assets.lib.contracts import RAW_TABLES, raw_table
from perf_assets.lib.ingest.formats.errors import QuarantineError
from perf_assets.lib.ingest.lake import (
    CompactionPolicy,
    DayCompaction,
    compact_lake,
    ensure_schema_files,
    recover_staging,
    remove_orphan_temp_files,
    write_landed_rows,
)
from perf_assets.lib.ingest.landing import LandedFile, describe
from perf_assets.lib.ingest.manifest import ManifestEntry, read_manifest, seen_versions, write_entry
from perf_assets.lib.ingest.registry import SIDECAR_NAMES, find_format
from perf_assets.lib.paths import DataHome


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


def _entry(landed: LandedFile, *, fmt, rows: int, status: str, reason: str | None) -> ManifestEntry:
    return ManifestEntry(
        file_id=landed.file_id,
        path=landed.relative_path,
        sha256=landed.sha256,
        size_bytes=landed.size_bytes,
        source=landed.source,
        format=fmt.name if fmt else None,
        parser_version=fmt.parser_version if fmt else 0,
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


def ingest_file(home: DataHome, landed: LandedFile, seen: dict, *, force: bool = False) -> IngestOutcome:
    fmt = None if landed.link_target is not None else find_format(landed)
    versions = seen.get((landed.sha256, landed.relative_path), set())
    if not force and (fmt.parser_version if fmt else 0) in versions:
        return IngestOutcome(
            landed.relative_path, landed.source, fmt.name if fmt else None, 0, "already_ingested", None
        )
    if landed.link_target is not None:
        reason = f"a link to {landed.link_target!r}, which is not a file inside the landing zone: not read"
        entry = _entry(landed, fmt=None, rows=0, status="quarantined", reason=reason)
    elif fmt is None:
        reason = f"no parser for source {landed.source!r} and file {landed.path.name!r}"
        entry = _entry(landed, fmt=None, rows=0, status="skipped", reason=reason)
    else:
        tables = None
        try:
            parsed = fmt.parse(landed)  # one table, or several keyed by RAW_TABLES key (traces)
            tables = parsed if isinstance(parsed, dict) else {fmt.source: parsed}
        except QuarantineError as error:
            entry = _entry(landed, fmt=fmt, rows=0, status="quarantined", reason=str(error))
        except Exception as error:  # a parser bug must not stop the batch: quarantine with the cause
            entry = _entry(landed, fmt=fmt, rows=0, status="quarantined", reason=parser_failure(error))
        if tables is not None:
            # A failure to write the lake (disk, a crash) is not the file's fault: it propagates, and the
            # manifest records nothing, so the next run tries the file again.
            written = sum(
                write_landed_rows(home.lake_raw, raw_table(key), landed.file_id, rows) for key, rows in tables.items()
            )
            metadata = {k: v for rows in tables.values() for k, v in (rows.schema.metadata or {}).items()}
            dropped = int(metadata.get(b"unattributed_series", b"0"))
            notes = [f"{dropped} series without host/GPU labels not ingested"] if dropped else []
            if b"ingest_note" in metadata and metadata[b"ingest_note"].decode() not in " ".join(notes):
                notes.append(metadata[b"ingest_note"].decode())
            note = "; ".join(notes) or None
            entry = _entry(landed, fmt=fmt, rows=written, status="ok", reason=note)
    write_entry(home.manifest_dir, entry)
    seen.setdefault((landed.sha256, landed.relative_path), set()).add(entry.parser_version or 0)
    return IngestOutcome(entry.path, entry.source, entry.format, entry.rows, entry.status, entry.reason)


def _lake_lock(home: DataHome) -> FileLock:
    """Held by every writer of the lake: ingestion, re-ingestion and compaction."""
    return FileLock(str(home.root / "lake" / ".ingest.lock"))


def ingest(
    home: DataHome,
    paths: list[Path] | None = None,
    *,
    force: bool = False,
    compaction: CompactionPolicy | None = None,
) -> list[IngestOutcome]:
    """Ingest landed files (all of landing/ by default). Safe to run twice: seen files are skipped.

    Ends by compacting the table-days that hold more than `compaction.min_files` small files
    (default: CompactionPolicy.from_env())."""
    home.ensure()
    ensure_schema_files(home.lake_raw, home.manifest_dir)
    with _lake_lock(home):
        recover_staging(home.lake_raw)
        remove_orphan_temp_files(home.root / "lake")
        seen = seen_versions(home.manifest_dir)
        targets = landed_files(home.landing) if paths is None else paths
        outcomes = [ingest_file(home, describe(home.landing, path), seen, force=force) for path in targets]
        if any(outcome.rows for outcome in outcomes):
            compact_lake(home.lake_raw, compaction or CompactionPolicy.from_env())
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
