"""`perfwh build`: materialize every asset in-process, in one run, holding the warehouse lock."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
from pathlib import Path
from typing import TYPE_CHECKING

from perf_assets.lib.paths import DBT_PROJECT_DIR, DataHome
from perf_assets.lib.warehouse import warehouse_write_lock

if TYPE_CHECKING:
    import dagster as dg


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


# The warehouse alone (ingest, dbt's models and their checks), without detection, alerts and the evaluation: a
# selection for `build` where only tables are wanted.
WAREHOUSE_ASSETS = "group:raw or group:staging or group:intermediate or group:marts"
# Tags of every `perfwh build` run: which process on which host runs it.
RUN_PID_TAG = "perfwh/build_pid"
RUN_HOST_TAG = "perfwh/build_host"


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # someone else's process: alive
        return True
    return True


def release_abandoned_builds(instance) -> list[str]:
    """Mark failed the `perfwh build` runs of this host whose process is gone, and free their pool slots.

    A build killed part-way (SIGKILL, the OOM killer, a closed terminal) never ends its run: in a persistent
    instance (DAGSTER_HOME) the run stays STARTED and keeps its `warehouse_writer` slot, so every later build
    waits for that slot forever. Call only while holding the warehouse write lock (no other `perfwh build` of
    this data home runs then). Runs launched by the daemon are left to Dagster's run monitoring."""
    import dagster as dg

    if instance.is_ephemeral:
        return []
    unfinished = [dg.DagsterRunStatus.NOT_STARTED, dg.DagsterRunStatus.STARTING, dg.DagsterRunStatus.STARTED]
    records = instance.get_run_records(
        filters=dg.RunsFilter(statuses=unfinished, tags={RUN_HOST_TAG: socket.gethostname()})
    )
    released = []
    for record in records:
        run = record.dagster_run
        pid = run.tags.get(RUN_PID_TAG, "")
        if not pid.isdigit() or _alive(int(pid)):
            continue
        instance.report_run_failed(
            run,
            message=f"perfwh build process {pid} ended without finishing this run (killed?): marked failed by a "
            "later perfwh build, which freed the run's concurrency pool slots",
        )
        instance.event_log_storage.free_concurrency_slots_for_run(run.run_id)
        released.append(run.run_id)
    return released


def _full_refresh_config(definitions, selection) -> dict | None:
    """Run config asking the dbt assets for a full refresh; None when the selection leaves them out (config for an op
    that does not run is an error)."""
    import dagster as dg

    from perf_assets.defs.transform.assets import warehouse_dbt_models

    selected = dg.AssetSelection.from_coercible(selection).resolve(definitions.resolve_asset_graph())
    if not selected & set(warehouse_dbt_models.keys):
        return None
    return {"ops": {warehouse_dbt_models.op.name: {"config": {"full_refresh": True}}}}


def build(
    home: DataHome,
    selection: str | dg.AssetSelection | None = None,
    lock_timeout_s: float = 3600.0,
    log_level: str = "INFO",
    full_refresh: bool = False,
) -> bool:
    """Run every warehouse asset (or an asset selection: a string or an AssetSelection, e.g. one `without_checks()`
    so that dbt runs no data test) in-process; returns whether it succeeded.

    full_refresh: rebuild the incremental dbt models over every lake day (docs/incremental.md); else they rebuild
    only the days that may have changed."""
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
    instance = _instance()
    tags = {RUN_PID_TAG: str(os.getpid()), RUN_HOST_TAG: socket.gethostname()}
    with warehouse_write_lock(home, timeout_s=lock_timeout_s):
        for run_id in release_abandoned_builds(instance):
            print(f"an earlier perfwh build (run {run_id}) was killed part-way: marked failed, its pool slot freed")
        run_config = _full_refresh_config(definitions, chosen) if full_refresh else None
        result = dg.materialize(
            assets,
            resources=resources,
            instance=instance,
            selection=chosen,
            raise_on_error=False,
            tags=tags,
            run_config=run_config,
        )
    return result.success
