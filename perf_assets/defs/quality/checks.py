"""Asset checks on the raw tables: quarantine rate and freshness (plain figures from lib.quality)."""

import dagster as dg

from perf_assets.defs.resources import PerfwhHome
from perf_assets.lib.contracts import RAW_TABLES, RawTable
from perf_assets.lib.quality.lake_checks import (
    FRESHNESS_LAG_DAYS_MAX,
    QUARANTINE_RATE_MAX,
    freshness_lag_days,
    lake_latest_event_date,
    latest_event_date,
    quarantine_rate,
)

# Tables written only when something changes or waits (pending_queue): no new rows is not staleness.
CHANGE_DRIVEN = {"raw_inventory", "raw_node_software", "raw_node_events", "raw_job_meta", "raw_pending_queue"}


def _quarantine_check(table: RawTable) -> dg.AssetChecksDefinition:
    @dg.asset_check(
        asset=table.name,
        name="quarantine_rate",
        description=f"Share of landed files quarantined (latest parser) at most {QUARANTINE_RATE_MAX:.0%}.",
    )
    def check(perfwh: PerfwhHome) -> dg.AssetCheckResult:
        figures = quarantine_rate(perfwh.home(), table)
        return dg.AssetCheckResult(
            passed=figures.rate is None or figures.rate <= QUARANTINE_RATE_MAX,
            severity=dg.AssetCheckSeverity.WARN,
            metadata={"files": figures.files, "quarantined": figures.quarantined, "rate": figures.rate},
        )

    return check


def _freshness_check(table: RawTable) -> dg.AssetChecksDefinition:
    @dg.asset_check(
        asset=table.name,
        name="freshness",
        description=f"Latest event day at most {FRESHNESS_LAG_DAYS_MAX} days behind the lake's latest event day.",
    )
    def check(perfwh: PerfwhHome) -> dg.AssetCheckResult:
        home = perfwh.home()
        latest = latest_event_date(home, table)
        lag = freshness_lag_days(latest, lake_latest_event_date(home, list(RAW_TABLES.values())))
        passed = latest is not None and (table.name in CHANGE_DRIVEN or lag <= FRESHNESS_LAG_DAYS_MAX)
        return dg.AssetCheckResult(
            passed=passed,
            severity=dg.AssetCheckSeverity.WARN,
            metadata={"latest_event_date": str(latest) if latest else "unknown (no rows)", "lag_days": lag},
        )

    return check


def raw_table_checks() -> list[dg.AssetChecksDefinition]:
    return [make(table) for table in RAW_TABLES.values() for make in (_quarantine_check, _freshness_check)]


@dg.definitions
def defs() -> dg.Definitions:
    return dg.Definitions(asset_checks=raw_table_checks())
