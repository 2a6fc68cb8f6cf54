"""Raw layer: landed files -> typed Parquet in the lake, one asset per raw table plus the manifest."""

from collections import Counter

import dagster as dg
import duckdb

from perf_assets.defs.resources import PerfwhHome
from perf_assets.lib.contracts import OWNER, RAW_TABLES
from perf_assets.lib.ingest import ingest
from perf_assets.lib.ingest.lake import ensure_schema_files, table_glob

MANIFEST_KEY = dg.AssetKey("raw_ingest_manifest")


def _raw_specs() -> list[dg.AssetSpec]:
    """Built in a function: a module-level AssetSpec would be autoloaded as a second definition."""
    return [
        dg.AssetSpec(
            key=table.name,
            group_name="raw",
            owners=[OWNER],
            description=f"{table.description} Parquet under lake/raw/{table.name}/, natural key ({', '.join(table.natural_key)}).",
            kinds={"parquet", "python"},
            metadata={"natural_key": ", ".join(table.natural_key)},
        )
        for table in RAW_TABLES.values()
    ] + [
        dg.AssetSpec(
            key=MANIFEST_KEY,
            group_name="raw",
            owners=[OWNER],
            description="Ingest manifest: one row per landed file and parser version (sha256, rows, status, reason).",
            kinds={"parquet", "python"},
        )
    ]


def _row_count(home, table) -> int:
    """Rows in the lake for one raw table (from Parquet metadata: cheap)."""
    glob = table_glob(home.lake_raw, table)
    return int(duckdb.sql(f"select count(*) from read_parquet('{glob}', union_by_name = true)").fetchone()[0])


@dg.multi_asset(specs=_raw_specs(), name="ingest_landing")
def ingest_landing(context: dg.AssetExecutionContext, perfwh: PerfwhHome):
    """Parse every landed file the manifest has not seen; quarantine bad files with their reason."""
    home = perfwh.home()
    ensure_schema_files(home.lake_raw, home.manifest_dir)
    before = {source: _row_count(home, table) for source, table in RAW_TABLES.items()}
    outcomes = ingest(home)
    by_folder: dict[str, Counter] = {}
    for outcome in outcomes:
        by_folder.setdefault(outcome.source, Counter())[outcome.status] += 1
        if outcome.status == "quarantined":
            context.log.warning(f"quarantined {outcome.path}: {outcome.reason}")
    for source, table in RAW_TABLES.items():
        total = _row_count(home, table)
        counts = sum((by_folder.get(folder, Counter()) for folder in table.fed_by or (source,)), Counter())
        yield dg.MaterializeResult(
            asset_key=table.name,
            metadata={
                "dagster/row_count": dg.MetadataValue.int(total),
                "rows_added": dg.MetadataValue.int(total - before[source]),
                "files_ok": dg.MetadataValue.int(counts["ok"]),
                "files_quarantined": dg.MetadataValue.int(counts["quarantined"]),
                "files_already_ingested": dg.MetadataValue.int(counts["already_ingested"]),
            },
        )
    statuses = Counter(outcome.status for outcome in outcomes)
    yield dg.MaterializeResult(
        asset_key=MANIFEST_KEY,
        metadata={f"files_{status}": dg.MetadataValue.int(count) for status, count in sorted(statuses.items())},
    )
