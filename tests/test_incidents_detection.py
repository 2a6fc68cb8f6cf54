"""Issue 7 on the `incidents` scenario (seed 1, built once per session: a few minutes): node- and
GPU-level incidents are found at their entity and day, and no decoy is flagged."""

from __future__ import annotations

import json

import pytest

from perf_assets.lib.warehouse import published_frame


@pytest.fixture(scope="module")
def found(incidents_home):
    return published_frame(incidents_home, "select * from regressions")


@pytest.fixture(scope="module")
def labels(incidents_home):
    return {label["incident_id"]: label for label in json.loads(incidents_home.labels_file.read_text())["incidents"]}


def _at(found, grain: str, entities: list[str], day: str, kind: str = "regression"):
    rows = found[(found["grain"] == grain) & found["entity_id"].isin(entities) & (found["change_kind"] == kind)]
    return rows[rows["change_date"].astype(str) == day]


def test_thermal_throttle_of_one_gpu_is_found_on_that_gpu(found, labels):
    label = labels["inc-thermal-h100-n04-gpu3"]
    gpu = label["scope"]["gpus"]
    hits = _at(found, "gpu", gpu, label["start"][:10])
    assert {"clock_ratio", "thermal_ok"} <= set(hits["metric"])
    clock = hits[hits["metric"] == "clock_ratio"].iloc[0]
    assert clock["relative_effect"] == pytest.approx(label["magnitude"]["sm_clock_factor"] - 1, abs=0.02)
    # it ended: the return to normal is an improvement on the label's end day
    back = _at(found, "gpu", gpu, label["end"][:10], kind="improvement")
    assert "clock_ratio" in set(back["metric"])


def test_node_rollout_and_rack_power_cap_are_found_on_their_nodes(found, labels):
    rollout = labels["inc-nccl-h100-n01-n02"]
    hits = _at(found, "node", rollout["scope"]["nodes"], rollout["start"][:10])
    assert set(hits[hits["metric"] == "program_goodput"]["entity_id"]) == set(rollout["scope"]["nodes"])
    cap = labels["inc-power-cap-h200-r1"]
    hits = _at(found, "node", cap["scope"]["nodes"], cap["start"][:10])
    assert set(hits[hits["metric"] == "clock_ratio"]["entity_id"]) == set(cap["scope"]["nodes"])


def test_no_decoy_is_flagged(found, labels):
    for label in labels.values():
        if not label.get("decoy"):
            continue
        start = label["start"][:10]
        scope = label["scope"]
        near = found[
            (
                ((found["grain"] == "node") & found["entity_id"].isin(scope["nodes"]))
                | ((found["grain"] == "cluster") & found["entity_id"].isin(scope["clusters"]))
            )
            & (found["change_date"].astype(str) == start)
        ]
        assert near.empty, (label["incident_id"], near[["grain", "entity_id", "metric"]].to_dict("records"))
