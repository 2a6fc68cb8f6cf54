"""The Dagster UI for tests, started as `make ui` starts it: `dagster dev -w workspace.yaml -h 127.0.0.1 -p PORT`
with its own DAGSTER_HOME and PERFWH_HOME, in a process group of its own (stopped as a whole)."""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import time
import urllib.request
from dataclasses import dataclass
from pathlib import Path

from perf_assets.lib.paths import REPO_ROOT

LOCATION = "perf_assets"
REPOSITORY = "__repository__"
READY_QUERY = """
{ workspaceOrError { ... on Workspace { locationEntries { name
    locationOrLoadError { __typename ... on PythonError { message } } } } } }
"""
RUN_QUERY = """
query Run($runId: ID!) { runOrError(runId: $runId) { __typename ... on Run { runId status parentRunId
    rootRunId stepKeysToExecute tags { key value } stepStats { stepKey status } } } }
"""
FINISHED = {"SUCCESS", "FAILURE", "CANCELED"}


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def graphql(port: int, query: str, variables: dict | None = None, timeout_s: float = 30) -> dict:
    """POST one query to the webserver; GraphQL errors raise (a test must not read a partial answer)."""
    request = urllib.request.Request(
        f"http://127.0.0.1:{port}/graphql",
        data=json.dumps({"query": query, "variables": variables or {}}).encode(),
        headers={"content-type": "application/json"},
    )
    with urllib.request.urlopen(request, timeout=timeout_s) as response:
        answer = json.loads(response.read())
    if answer.get("errors"):
        raise RuntimeError(f"GraphQL errors: {answer['errors']}")
    return answer["data"]


def _default_signals() -> None:
    """In the child: a process group of its own, and SIGINT/SIGTERM handled by dagster again (a shell that
    started pytest in the background leaves SIGINT ignored, and dagster dev maps SIGTERM onto it)."""
    os.setsid()
    signal.signal(signal.SIGINT, signal.SIG_DFL)
    signal.signal(signal.SIGTERM, signal.SIG_DFL)


@dataclass
class UiServer:
    port: int
    process: subprocess.Popen
    dagster_home: Path
    perfwh_home: Path
    log_path: Path

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def graphql(self, query: str, variables: dict | None = None) -> dict:
        return graphql(self.port, query, variables)

    def log_tail(self, chars: int = 4000) -> str:
        return self.log_path.read_text(errors="replace")[-chars:] if self.log_path.exists() else ""

    def wait_ready(self, timeout_s: float = 240) -> None:
        """Until the code location has really loaded (`loadStatus` alone says LOADED for a failed load)."""
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                raise RuntimeError(f"dagster dev exited with {self.process.returncode}:\n{self.log_tail()}")
            try:
                entries = self.graphql(READY_QUERY)["workspaceOrError"]["locationEntries"]
            except (OSError, RuntimeError, KeyError):
                entries = []
            loaded = entries[0]["locationOrLoadError"] if entries else None
            if loaded is not None:
                if loaded["__typename"] != "RepositoryLocation":
                    raise RuntimeError(f"the code location failed to load: {loaded}")
                return
            time.sleep(1)
        raise TimeoutError(f"the UI was not ready after {timeout_s} s:\n{self.log_tail()}")

    def run(self, run_id: str) -> dict:
        return self.graphql(RUN_QUERY, {"runId": run_id})["runOrError"]

    def wait_run(self, run_id: str, timeout_s: float = 300) -> dict:
        """Poll a run until it has finished; returns its last state."""
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            run = self.run(run_id)
            if run.get("status") in FINISHED:
                return run
            time.sleep(1)
        raise TimeoutError(f"run {run_id} not finished after {timeout_s} s: {self.run(run_id)}")

    def stop(self, timeout_s: float = 30) -> None:
        """SIGTERM to the whole process group (webserver, daemon, code servers), SIGKILL if still there."""
        try:
            os.killpg(self.process.pid, signal.SIGTERM)
        except ProcessLookupError:
            return
        try:
            self.process.wait(timeout=timeout_s)
        except subprocess.TimeoutExpired:
            pass
        try:
            os.killpg(self.process.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
        self.process.wait(timeout=10)


def start_ui_server(dagster_home: Path, perfwh_home: Path, log_path: Path, port: int | None = None) -> UiServer:
    """`make ui`: DAGSTER_HOME holds dagster.yaml (copied from the project), the dbt manifest is parsed."""
    dagster_home.mkdir(parents=True, exist_ok=True)
    (dagster_home / "dagster.yaml").write_text((REPO_ROOT / "dagster.yaml").read_text())
    port = port or free_port()
    env = dict(os.environ, DAGSTER_HOME=str(dagster_home), PERFWH_HOME=str(perfwh_home))
    log = log_path.open("wb")
    process = subprocess.Popen(
        [str(Path(sys.executable).parent / "dagster"), "dev", "-w", "workspace.yaml", "-h", "127.0.0.1"]
        + ["-p", str(port)],
        cwd=REPO_ROOT,
        env=env,
        stdin=subprocess.DEVNULL,
        stdout=log,
        stderr=subprocess.STDOUT,
        preexec_fn=_default_signals,
    )
    log.close()
    return UiServer(port, process, dagster_home, perfwh_home, log_path)
