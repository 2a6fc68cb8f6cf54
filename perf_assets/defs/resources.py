"""Resources: where the data lives (PERFWH_HOME) and the dbt CLI."""

import os
import shutil
from functools import cached_property
from pathlib import Path

import dagster as dg
from dagster_dbt import DbtCliResource
from packaging import version

from perf_assets.lib.dbt_project import ENV_BIN, dbt_project
from perf_assets.lib.deployment import configured_dbt_target
from perf_assets.lib.paths import DataHome, data_home


class PerfwhHome(dg.ConfigurableResource):
    """PERFWH_HOME for this run; empty means the environment variable, else ./data."""

    data_dir: str = ""

    def home(self) -> DataHome:
        home = data_home(self.data_dir or None).ensure()
        os.environ["PERFWH_HOME"] = str(home.root)  # dbt's profile and sources read it
        return home


def _same_environment(executable: str) -> bool:
    """Whether ``executable`` resolves to the dbt script of the Python environment running this process."""
    found = shutil.which(executable)
    return found is not None and Path(found).absolute().parent == ENV_BIN.absolute()


class WarehouseDbtCliResource(DbtCliResource):
    """dagster-dbt's CLI resource without two costs it pays on every run, where they buy this project nothing.

    * ``dbt --version`` in a subprocess (2.6 s on 2 cores) to tell dbt Core from the Fusion engine: when the dbt
      executable is the script of this process's own environment, it is the dbt-core package imported here.
    * A dbt adapter built in this process (1.8 s: it parses every macro), which dagster-dbt uses only for
      ``fetch_column_metadata`` and ``fetch_row_counts``; this project's row counts and figures come from
      ``lib.mart_figures`` after the build.

    Another executable (a dbt on PATH from elsewhere, dbt Fusion) is asked for its version as before."""

    @cached_property
    def _cli_version(self) -> version.Version:
        if not _same_environment(self.dbt_executable):
            return super()._cli_version
        from dbt.version import __version__

        return version.parse(__version__)

    def _initialize_dbt_core_adapter(self, args):
        return None


@dg.definitions
def resources() -> dg.Definitions:
    return dg.Definitions(
        resources={
            "perfwh": PerfwhHome(),
            "dbt": WarehouseDbtCliResource(project_dir=dbt_project, target=configured_dbt_target()),
        }
    )
