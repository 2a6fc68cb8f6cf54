"""The dbt project as dagster-dbt sees it. No @dbt_assets here, so `prepare-and-package` can import it."""

from dagster_dbt import DbtProject

from perf_assets.lib.paths import DBT_PROJECT_DIR

dbt_project = DbtProject(project_dir=DBT_PROJECT_DIR, profiles_dir=DBT_PROJECT_DIR)
dbt_project.prepare_if_dev()
