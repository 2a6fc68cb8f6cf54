"""Ingestion: landing -> parse -> validate -> typed Parquet + ingest manifest (+ quarantine reasons)."""

from perf_assets.lib.ingest.deliver import deliver
from perf_assets.lib.ingest.run import IngestOutcome, ingest, landed_files, reingest

__all__ = ["IngestOutcome", "deliver", "ingest", "landed_files", "reingest"]
