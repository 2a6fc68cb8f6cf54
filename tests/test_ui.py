"""`make ui`'s server: the code location loads and the lineage runs from raw to alerts (GraphQL)."""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import pytest

from perf_assets.lib.paths import REPO_ROOT

pytestmark = pytest.mark.slow

QUERY = """
{ workspaceOrError { ... on Workspace { locationEntries { name
    locationOrLoadError { __typename ... on PythonError { message } } } } }
  assetNodes { assetKey { path } groupName dependencyKeys { path } } }
"""


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def _graphql(port: int, query: str) -> dict:
    request = urllib.request.Request(
        f"http://127.0.0.1:{port}/graphql",
        data=json.dumps({"query": query}).encode(),
        headers={"content-type": "application/json"},
    )
    with urllib.request.urlopen(request, timeout=10) as response:
        return json.loads(response.read())["data"]


def test_webserver_serves_the_lineage_from_raw_to_alerts(tmp_path, dbt_manifest):
    port = _free_port()
    dagster_home = tmp_path / "dagster_home"
    dagster_home.mkdir()
    (dagster_home / "dagster.yaml").write_text((REPO_ROOT / "dagster.yaml").read_text())
    env = dict(os.environ, DAGSTER_HOME=str(dagster_home), PERFWH_HOME=str(tmp_path / "data"))
    server = subprocess.Popen(
        [
            str(Path(sys.executable).parent / "dagster-webserver"),
            "-w",
            "workspace.yaml",
            "-h",
            "127.0.0.1",
            "-p",
            str(port),
        ],
        cwd=REPO_ROOT,
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        start_new_session=True,
    )
    try:
        deadline = time.monotonic() + 120
        data = None
        while time.monotonic() < deadline:
            try:
                data = _graphql(port, QUERY)
                entries = data["workspaceOrError"]["locationEntries"]
                if entries and entries[0]["locationOrLoadError"] is not None:
                    break
            except OSError:
                pass
            time.sleep(1)
        assert data is not None, "the webserver never answered"
        location = data["workspaceOrError"]["locationEntries"][0]["locationOrLoadError"]
        assert location["__typename"] == "RepositoryLocation", location  # loadStatus alone lies
        nodes = {"/".join(n["assetKey"]["path"]): n for n in data["assetNodes"]}
        upstream = {key: {"/".join(d["path"]) for d in node["dependencyKeys"]} for key, node in nodes.items()}
        path = [
            "alert_outbox",
            "regressions",
            "metric_tree_daily",
            "fct_cluster_day",
            "fct_node_day",
            "int_node_day_ledger",
            "int_job_steps",
            "stg_step_events__events",
            "raw_step_events",
        ]
        for child, parent in zip(path, path[1:]):
            assert parent in upstream[child], (child, parent)
        assert {node["groupName"] for node in nodes.values()} >= {
            "raw",
            "staging",
            "intermediate",
            "marts",
            "detection",
            "alerts",
            "evaluation",
        }
    finally:
        os.killpg(server.pid, signal.SIGTERM)
        try:
            server.wait(timeout=30)
        except subprocess.TimeoutExpired:
            os.killpg(server.pid, signal.SIGKILL)
