"""Ground truth of what the simulator injected (`landing/labels.json`, docs/contracts.md)."""

from __future__ import annotations

import dataclasses

from perf_assets.lib.simulate.clock import rfc3339
from perf_assets.lib.simulate.fleet import Fleet
from perf_assets.lib.simulate.scenario import SoftwareStack


def software_before(fleet: Fleet, cluster: str, at: int) -> SoftwareStack:
    """The stack of a cluster's nodes just before `at` (base stack plus the earlier rollouts)."""
    stack = fleet.scenario.software
    for rollout in sorted(fleet.rollouts, key=lambda r: r.at):
        if rollout.cluster == cluster and rollout.at < at:
            stack = dataclasses.replace(stack, **dict(rollout.changes))
    return stack


def software_history(fleet: Fleet, cluster: str) -> dict[str, list[tuple[int, SoftwareStack, float]]]:
    """Per node of a cluster: (from, stack, power limit) at the window start and at every instant a
    rollout or an incident changed it (several changes at one instant make one row)."""
    spec = fleet.scenario.cluster(cluster)
    changes = [
        (r.at, spec.nodes, r.changes, None) for r in sorted(fleet.rollouts, key=lambda r: r.at) if r.cluster == cluster
    ]
    changes += [
        (c.at, c.nodes, c.changes, c.power_limit_w) for c in fleet.effects.software_changes() if c.cluster == cluster
    ]
    state = {node: (fleet.scenario.software, spec.sku.power_limit_w) for node in spec.nodes}
    history = {node: [(fleet.t0, *state[node])] for node in spec.nodes}
    for at in sorted({change[0] for change in changes}):
        touched = []
        for when, nodes, versions, limit in changes:
            if when != at:
                continue
            for node in nodes:
                stack, old_limit = state[node]
                state[node] = (dataclasses.replace(stack, **dict(versions)), old_limit if limit is None else limit)
                touched.append(node)
        for node in spec.nodes:
            if node in touched:
                history[node].append((at, *state[node]))
    return history


def incidents(fleet: Fleet) -> list[dict]:
    """One label per injected incident inside the window. Node faults and maintenance are not labels:
    they are ordinary availability events, recorded in node_events (and in SimulationResult.faults)."""
    labelled = []
    for rollout in fleet.rollouts:
        before = software_before(fleet, rollout.cluster, rollout.at)
        component = rollout.cause_component
        labelled.append(
            {
                "incident_id": rollout.incident_id,
                "kind": "software_rollout_slowdown",
                "cluster": rollout.cluster,
                "nodes": list(fleet.scenario.cluster(rollout.cluster).nodes),
                "start": rfc3339(rollout.at),
                "end": None,
                "factor": "program_goodput",
                "expected_relative_change": round(1.0 / rollout.step_time_factor - 1.0, 4),
                "cause": {
                    "component": component,
                    "from": getattr(before, component),
                    "to": dict(rollout.changes)[component],
                },
            }
        )
    return labelled


def labels_document(fleet: Fleet) -> dict:
    scenario = fleet.scenario
    return {
        "version": 1,
        "scenario": scenario.name,
        "seed": fleet.seed,
        "start": scenario.start.isoformat(),
        "days": scenario.days,
        "incidents": incidents(fleet),
    }
