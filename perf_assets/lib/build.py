"""`perfwh build`: materialize every asset in-process, in one run, holding the warehouse lock."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from perf_assets.lib.paths import DBT_PROJECT_DIR, DataHome
from perf_assets.lib.warehouse import warehouse_write_lock


def prepare_dbt_manifest(force: bool = False) -> Path:
    """dagster-dbt needs target/manifest.json outside `dagster dev`: `dbt parse` when it is missing."""
    manifest = DBT_PROJECT_DIR / "target" / "manifest.json"
    if force or not manifest.exists() or _project_changed_since(manifest.stat().st_mtime):
        dbt = Path(sys.executable).parent / "dbt"
        subprocess.run(
            [
                str(dbt) if dbt.exists() else "dbt",
                "parse",
                "--quiet",
                "--project-dir",
                str(DBT_PROJECT_DIR),
                "--profiles-dir",
                str(DBT_PROJECT_DIR),
            ],
            check=True,
            env=os.environ.copy(),
        )
    return manifest


def _project_changed_since(mtime: float) -> bool:
    """A model, macro, seed, test or project file newer than the manifest makes it stale."""
    for folder in ("models", "macros", "seeds", "tests"):
        for path in (DBT_PROJECT_DIR / folder).rglob("*"):
            if path.is_file() and path.stat().st_mtime > mtime:
                return True
    return any((DBT_PROJECT_DIR / name).stat().st_mtime > mtime for name in ("dbt_project.yml", "profiles.yml"))


def _instance():
    import dagster as dg

    return dg.DagsterInstance.get() if os.environ.get("DAGSTER_HOME") else dg.DagsterInstance.ephemeral()


def build(
    home: DataHome, selection: str | None = None, lock_timeout_s: float = 3600.0, log_level: str = "INFO"
) -> bool:
    """Run every warehouse asset (or an asset selection string) in-process; returns whether it succeeded."""
    os.environ["PERFWH_HOME"] = str(home.root)
    home.ensure()
    prepare_dbt_manifest()
    import dagster as dg

    from perf_assets.definitions import defs
    from perf_assets.defs.resources import PerfwhHome

    definitions = defs()
    resources = {**definitions.resources, "perfwh": PerfwhHome(data_dir=str(home.root))}
    assets = list(definitions.assets or [])
    # Probes are not part of a build (they measure this host now, so a build would not be reproducible).
    chosen = selection or (dg.AssetSelection.all() - dg.AssetSelection.groups("probes"))
    with warehouse_write_lock(home, timeout_s=lock_timeout_s):
        result = dg.materialize(
            assets, resources=resources, instance=_instance(), selection=chosen, raise_on_error=False
        )
    return result.success
