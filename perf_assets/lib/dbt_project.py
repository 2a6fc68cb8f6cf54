"""The dbt project as dagster-dbt sees it. No @dbt_assets here, so `prepare-and-package` can import it."""

import os
import shutil
import sys
from pathlib import Path

from dagster_dbt import DbtProject

from perf_assets.lib.paths import DBT_PROJECT_DIR

# dagster-dbt looks for `dbt` on PATH (also when `dagster dev` re-parses the project): make the
# dbt of this environment findable even when the virtualenv is not activated.
_ENV_BIN = Path(sys.executable).parent
if shutil.which("dbt") is None and (_ENV_BIN / "dbt").exists():
    os.environ["PATH"] = f"{_ENV_BIN}{os.pathsep}{os.environ.get('PATH', '')}"

dbt_project = DbtProject(project_dir=DBT_PROJECT_DIR, profiles_dir=DBT_PROJECT_DIR)
dbt_project.prepare_if_dev()
