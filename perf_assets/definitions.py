"""The Dagster code location: everything under perf_assets/defs. Steps run in-process unless the deployment
names another executor (PERFWH_EXECUTOR, perf_assets/lib/deployment.py)."""

from pathlib import Path

import dagster as dg

from perf_assets.lib.deployment import configured_executor


@dg.definitions
def defs() -> dg.Definitions:
    loaded = dg.load_from_defs_folder(path_within_project=Path(__file__).parent)
    return dg.Definitions.merge(loaded, dg.Definitions(executor=configured_executor()))
