"""`make ui`'s server: the code location loads and the lineage runs from raw to alerts (GraphQL)."""

from __future__ import annotations

import pytest

pytestmark = pytest.mark.slow

QUERY = """
{ assetNodes { assetKey { path } groupName dependencyKeys { path } } }
"""


def test_webserver_serves_the_lineage_from_raw_to_alerts(ui_server):
    """The session's `make ui` server (tests/ui_server.py: code location loaded, not only `loadStatus`)."""
    data = ui_server.graphql(QUERY)
    nodes = {"/".join(n["assetKey"]["path"]): n for n in data["assetNodes"]}
    upstream = {key: {"/".join(d["path"]) for d in node["dependencyKeys"]} for key, node in nodes.items()}
    path = [
        "alert_outbox",
        "regressions",
        "metric_tree_daily",
        "fct_cluster_day",
        "fct_node_day",
        "int_node_day_ledger",
        "int_node_hour_ledger",
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
