"""The dbt project as dagster-dbt sees it. No @dbt_assets here, so `prepare-and-package` can import it."""

import os
import shutil
import sys
from pathlib import Path

from dagster_dbt import DbtProject

from perf_assets.lib.paths import DBT_PROJECT_DIR

# dagster-dbt looks for `dbt` on PATH (also when `dagster dev` re-parses the project): make the
# dbt of this environment (ENV_BIN: the folder of its Python and scripts) findable even when the virtualenv is not
# activated.
ENV_BIN = Path(sys.executable).parent
if shutil.which("dbt") is None and (ENV_BIN / "dbt").exists():
    os.environ["PATH"] = f"{ENV_BIN}{os.pathsep}{os.environ.get('PATH', '')}"


def default_duckdb_memory_limit() -> str:
    """DuckDB's memory limit for dbt builds: a quarter of this machine's memory, at least 1 GiB and at most 4 GiB.

    DuckDB's own default (80 % of RAM) let a fleet-1k build of 30 days hold 17 GiB; with a limit its operators
    spill to the warehouse's temp folder instead (docs/benchmarks.md has the measured cost)."""
    total = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    return f"{max(1024, min(4096, total // 4 // 2**20))}MiB"


# The profile (profiles.yml) reads it; set here so that every dbt this process starts gets the same limit.
os.environ.setdefault("PERFWH_DUCKDB_MEMORY_LIMIT", default_duckdb_memory_limit())

dbt_project = DbtProject(project_dir=DBT_PROJECT_DIR, profiles_dir=DBT_PROJECT_DIR)
dbt_project.prepare_if_dev()
