"""The Dagster code location: everything under perf_assets/defs, run in-process (one writer per run)."""

from pathlib import Path

import dagster as dg


@dg.definitions
def defs() -> dg.Definitions:
    loaded = dg.load_from_defs_folder(path_within_project=Path(__file__).parent)
    return dg.Definitions.merge(loaded, dg.Definitions(executor=dg.in_process_executor))
