"""A `perfwh build` killed while it holds the `warehouse_writer` pool slot of a persistent Dagster instance:
the next build marks the dead run failed and frees the slot instead of waiting for it forever.

A tiny pooled asset stands in for the warehouse writers (the whole build, killed in dbt: tests/test_faults_build.py).
"""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys

import dagster as dg
import pytest

from perf_assets.lib.build import RUN_HOST_TAG, RUN_PID_TAG, release_abandoned_builds
from perf_assets.lib.paths import REPO_ROOT

HOLDER = """
import os, socket, sys, time
import dagster as dg
from perf_assets.lib.build import RUN_HOST_TAG, RUN_PID_TAG

@dg.asset(pool="warehouse_writer")
def writer():
    print("holding", flush=True)
    time.sleep(600)

dg.materialize([writer], instance=dg.DagsterInstance.get(),
               tags={RUN_PID_TAG: str(os.getpid()), RUN_HOST_TAG: socket.gethostname()})
"""


@dg.asset(pool="warehouse_writer")
def next_writer() -> None:
    """What the next build's writer does once it has the slot."""


@pytest.mark.timeout(300)  # before the fix, the second materialize waited for the slot forever
def test_the_slot_of_a_killed_build_is_released_by_the_next_build(tmp_path, monkeypatch):
    dagster_home = tmp_path / "dagster_home"
    dagster_home.mkdir()
    (dagster_home / "dagster.yaml").write_text((REPO_ROOT / "dagster.yaml").read_text())  # pool limit 1
    monkeypatch.setenv("DAGSTER_HOME", str(dagster_home))
    holder = subprocess.Popen(
        [sys.executable, "-c", HOLDER],
        env=dict(os.environ, PYTHONPATH=str(REPO_ROOT)),
        stdout=subprocess.PIPE,
        text=True,
        start_new_session=True,
    )
    try:
        assert holder.stdout.readline().strip() == "holding"
        with dg.DagsterInstance.get() as instance:
            assert release_abandoned_builds(instance) == []  # a build whose process lives is never touched
    finally:
        os.killpg(holder.pid, signal.SIGKILL)
        holder.wait(timeout=60)

    with dg.DagsterInstance.get() as instance:
        held = instance.event_log_storage.get_concurrency_info("warehouse_writer")
        assert held.active_slot_count == 1  # the dead run still holds it
        (dead,) = held.active_run_ids
        assert instance.get_run_by_id(dead).status == dg.DagsterRunStatus.STARTED
        assert instance.get_run_by_id(dead).tags[RUN_HOST_TAG] == socket.gethostname()
        assert instance.get_run_by_id(dead).tags[RUN_PID_TAG] == str(holder.pid)

        assert release_abandoned_builds(instance) == [dead]
        assert release_abandoned_builds(instance) == []
        assert instance.get_run_by_id(dead).status == dg.DagsterRunStatus.FAILURE
        assert instance.event_log_storage.get_concurrency_info("warehouse_writer").active_slot_count == 0

        result = dg.materialize([next_writer], instance=instance)
        assert result.success


DAEMON_RUN = """
import os, time
import dagster as dg
from dagster._core.events import EngineEventData

@dg.asset(pool="warehouse_writer")
def writer(context):
    # what the DefaultRunLauncher's worker records when the daemon or the UI launches a run
    context.instance.report_engine_event(
        f"Started process for run (pid: {os.getpid()}).", context.dagster_run, EngineEventData.in_process(os.getpid())
    )
    print("holding", flush=True)
    time.sleep(600)

dg.materialize([writer], instance=dg.DagsterInstance.get())
"""


@pytest.mark.timeout(300)
def test_the_watchdog_sensor_frees_the_slot_of_a_run_whose_worker_died(tmp_path, monkeypatch):
    from perf_assets.defs.transform.watchdog import dead_run_watchdog
    from perf_assets.lib.run_watchdog import dead_runs, worker_gone

    dagster_home = tmp_path / "dagster_home"
    dagster_home.mkdir()
    (dagster_home / "dagster.yaml").write_text((REPO_ROOT / "dagster.yaml").read_text())
    monkeypatch.setenv("DAGSTER_HOME", str(dagster_home))
    worker = subprocess.Popen(
        [sys.executable, "-c", DAEMON_RUN],
        env=dict(os.environ, PYTHONPATH=str(REPO_ROOT)),
        stdout=subprocess.PIPE,
        text=True,
        start_new_session=True,
    )
    try:
        assert worker.stdout.readline().strip() == "holding"
        with dg.DagsterInstance.get() as instance:
            assert dead_runs(instance) == []  # a live worker is never touched
    finally:
        os.killpg(worker.pid, signal.SIGKILL)
        worker.wait(timeout=60)
    assert worker_gone(os.getpid(), 0.0) is not None  # our own pid, "reused" by a process younger than the run

    with dg.DagsterInstance.get() as instance:
        (dead,) = instance.event_log_storage.get_concurrency_info("warehouse_writer").active_run_ids
        assert instance.get_run_by_id(dead).status == dg.DagsterRunStatus.STARTED
        (found,) = dead_runs(instance)
        assert (found.run_id, found.pid, found.why) == (dead, worker.pid, f"process {worker.pid} is gone")

        skip = dead_run_watchdog(dg.build_sensor_context(instance=instance))
        assert "freed the pool slots of 1 run(s)" in skip.skip_message
        assert instance.get_run_by_id(dead).status == dg.DagsterRunStatus.FAILURE
        assert instance.event_log_storage.get_concurrency_info("warehouse_writer").active_slot_count == 0
        assert dg.materialize([next_writer], instance=instance).success
        assert dead_run_watchdog(dg.build_sensor_context(instance=instance)).skip_message == "no run with a dead worker"
