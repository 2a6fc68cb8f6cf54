"""Runs whose worker process died: mark them failed so their `warehouse_writer` pool slot is freed.

With Dagster's DefaultRunLauncher (`make ui`, `dagster dev`, one host) the run worker is a process on this
host. Killed (SIGKILL, the OOM killer, a reboot), it never ends its run: the run stays STARTED and keeps its
concurrency pool slot, so every later run that writes the warehouse queues forever. Dagster's own run
monitoring cannot see it: the DefaultRunLauncher does not support worker health checks. This watchdog reads
the worker's pid from the run's "Started process for run (pid: N)" engine event and checks the process: gone,
or a pid reused by a process that started after the run did, means the worker is dead.

`perfwh build` runs carry their own pid tag and are released by the next build (perf_assets/lib/build.py).
"""

from __future__ import annotations

import socket
from dataclasses import dataclass

import psutil

PID_REUSE_SLACK_S = 2.0  # a process created this long after the run started is not its worker


@dataclass(frozen=True)
class DeadRun:
    run_id: str
    job_name: str
    pid: int
    why: str


def run_worker_pid(instance, run_id: str) -> int | None:
    """The pid of the run's worker process, from its last 'Started process for run' engine event."""
    import dagster as dg

    pid = None
    for entry in instance.all_logs(run_id, of_type=dg.DagsterEventType.ENGINE_EVENT):
        event = entry.dagster_event
        data = getattr(event, "engine_event_data", None) if event else None
        value = (data.metadata or {}).get("pid") if data else None
        text = getattr(value, "value", value)
        if text is not None and str(text).isdigit() and "Started process for run" in (entry.message or ""):
            pid = int(text)
    return pid


def worker_gone(pid: int, run_started_at: float | None) -> str | None:
    """Why the worker `pid` of a run started at `run_started_at` (epoch s) is dead, or None while it lives."""
    try:
        process = psutil.Process(pid)
        created = process.create_time()
        if process.status() == psutil.STATUS_ZOMBIE:
            return f"process {pid} is a zombie (exited, not yet reaped)"
    except psutil.NoSuchProcess:
        return f"process {pid} is gone"
    except psutil.AccessDenied:  # someone else's process with that pid: alive as far as we can tell
        return None
    if run_started_at is not None and created > run_started_at + PID_REUSE_SLACK_S:
        return f"pid {pid} now belongs to a process started after the run (pid reused)"
    return None


def dead_runs(instance) -> list[DeadRun]:
    """STARTED runs of the DefaultRunLauncher whose worker process on this host is dead."""
    import dagster as dg
    from dagster._core.launcher.default_run_launcher import DefaultRunLauncher

    from perf_assets.lib.build import RUN_PID_TAG

    if instance.is_ephemeral or not isinstance(instance.run_launcher, DefaultRunLauncher):
        return []
    records = instance.get_run_records(filters=dg.RunsFilter(statuses=[dg.DagsterRunStatus.STARTED]))
    found = []
    for record in records:
        run = record.dagster_run
        if RUN_PID_TAG in run.tags:  # a `perfwh build`: the next build releases it (build.release_abandoned_builds)
            continue
        pid = run_worker_pid(instance, run.run_id)
        if pid is None:
            continue  # no worker recorded (an in-process run of another tool): not ours to judge
        why = worker_gone(pid, record.start_time)
        if why is not None:
            found.append(DeadRun(run.run_id, run.job_name, pid, why))
    return found


def release_dead_runs(instance) -> list[DeadRun]:
    """Mark each dead run failed (with the reason) and free its concurrency pool slots."""
    released = []
    for dead in dead_runs(instance):
        run = instance.get_run_by_id(dead.run_id)
        if run is None or run.status.value != "STARTED":  # ended meanwhile
            continue
        instance.report_run_failed(
            run,
            message=f"run worker {dead.why} on {socket.gethostname()}: marked failed by the dead_run_watchdog "
            "sensor, which freed the run's concurrency pool slots (rerun it from the UI)",
        )
        instance.event_log_storage.free_concurrency_slots_for_run(run.run_id)
        released.append(dead)
    return released
