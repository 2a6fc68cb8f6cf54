"""Resources: where the data lives (PERFWH_HOME) and the dbt CLI."""

import os
import shutil
import sys
from pathlib import Path

import dagster as dg
from dagster_dbt import DbtCliResource

from perf_assets.lib.dbt_project import dbt_project
from perf_assets.lib.paths import DataHome, data_home


class PerfwhHome(dg.ConfigurableResource):
    """PERFWH_HOME for this run; empty means the environment variable, else ./data."""

    data_dir: str = ""

    def home(self) -> DataHome:
        home = data_home(self.data_dir or None).ensure()
        os.environ["PERFWH_HOME"] = str(home.root)  # dbt's profile and sources read it
        return home


def dbt_executable() -> str:
    """The dbt of this environment, found whether or not the virtualenv is activated."""
    beside_python = Path(sys.executable).parent / "dbt"
    return str(beside_python) if beside_python.exists() else (shutil.which("dbt") or "dbt")


@dg.definitions
def resources() -> dg.Definitions:
    return dg.Definitions(
        resources={
            "perfwh": PerfwhHome(),
            "dbt": DbtCliResource(project_dir=dbt_project, dbt_executable=dbt_executable()),
        }
    )
