"""Resources: where the data lives (PERFWH_HOME) and the dbt CLI."""

import os

import dagster as dg
from dagster_dbt import DbtCliResource

from perf_assets.lib.dbt_project import dbt_project
from perf_assets.lib.deployment import configured_dbt_target
from perf_assets.lib.paths import DataHome, data_home


class PerfwhHome(dg.ConfigurableResource):
    """PERFWH_HOME for this run; empty means the environment variable, else ./data."""

    data_dir: str = ""

    def home(self) -> DataHome:
        home = data_home(self.data_dir or None).ensure()
        os.environ["PERFWH_HOME"] = str(home.root)  # dbt's profile and sources read it
        return home


@dg.definitions
def resources() -> dg.Definitions:
    return dg.Definitions(
        resources={
            "perfwh": PerfwhHome(),
            "dbt": DbtCliResource(project_dir=dbt_project, target=configured_dbt_target()),
        }
    )
