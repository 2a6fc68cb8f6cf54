"""Checks on the lake itself, cheap enough to run after every ingestion (docs/data_quality.md)."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import date, timedelta

import duckdb

from perf_assets.lib.contracts import RawTable
from perf_assets.lib.ingest.lake import table_glob
from perf_assets.lib.ingest.manifest import read_manifest
from perf_assets.lib.paths import DataHome

QUARANTINE_RATE_MAX = 0.05
FRESHNESS_LAG_DAYS_MAX = 2


@dataclass(frozen=True)
class QuarantineRate:
    files: int  # files of the table's landing folders, latest parser version, skipped files excluded
    quarantined: int

    @property
    def rate(self) -> float | None:
        """None when no file was delivered: unknown, not 0."""
        return self.quarantined / self.files if self.files else None


def quarantine_rate(home: DataHome, table: RawTable) -> QuarantineRate:
    manifest = read_manifest(home.manifest_dir).to_pylist()
    folders = set(table.fed_by or (table.source,))
    latest: dict[str, dict] = {}
    for row in manifest:
        if row["source"] in folders and row["status"] != "skipped":
            previous = latest.get(row["file_id"])
            if previous is None or (row["parser_version"] or 0) >= (previous["parser_version"] or 0):
                latest[row["file_id"]] = row
    return QuarantineRate(len(latest), sum(row["status"] == "quarantined" for row in latest.values()))


def latest_event_date(home: DataHome, table: RawTable) -> date | None:
    """The latest event_date in a raw table; None when it has no rows (freshness unknown)."""
    glob = table_glob(home.lake_raw, table)
    return duckdb.sql(f"select max(event_date) from read_parquet('{glob}', union_by_name = true)").fetchone()[0]


def lake_latest_event_date(home: DataHome, tables: list[RawTable]) -> date | None:
    days = [day for day in (latest_event_date(home, table) for table in tables) if day is not None]
    return max(days) if days else None


def freshness_lag_days(latest: date | None, reference: date | None) -> int | None:
    """Days the table's latest event lags the lake's latest event (None: unknown)."""
    if latest is None or reference is None:
        return None
    return max((reference - latest) // timedelta(days=1), 0)
