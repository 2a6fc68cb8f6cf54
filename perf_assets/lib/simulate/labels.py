"""Ground truth of what the simulator injected (`landing/labels.json`, docs/contracts.md, docs/simulator.md).

One label per incident inside the window, rollouts first, then the catalogue in its order. Every label
has the same keys: `incident_id, kind, decoy, direction (regression|improvement|none), start, end`
(null: still on at the window end), `cluster` (the main one) and `nodes` (affected), `scope`
(`clusters, nodes, gpus, jobs, versions` and kind extras such as `rack` or `batch`), `grain` (the
smallest entity that carries it: gpu|node|cluster|fleet), `magnitude` (the injected parameters),
`factor` (the metric-tree node it should be attributed to) and `moves` (every tree node it moves),
`expected_relative_change` (of `factor` at `grain`, approximate where noted; null where it is not a
rate change), `attribution` (`rate` or `mix`) and `cause` (`dimension`, `value`; rollouts keep
`component, from, to`). Decoys have `decoy: true`, `direction: none`, `moves: []`, `factor: null`.
"""

from __future__ import annotations

import dataclasses

import numpy as np

from perf_assets.lib.simulate.catalogue import (
    BadBatch,
    CheckpointSlowdown,
    DiurnalSwing,
    Fragmentation,
    HbmDecay,
    ImageStall,
    MaintenanceDecoy,
    MixShift,
    NoiseBurst,
    PowerCap,
    ThermalThrottle,
    VersionChange,
)
from perf_assets.lib.simulate.clock import DAY_S, rfc3339
from perf_assets.lib.simulate.fleet import Fleet
from perf_assets.lib.simulate.ground_truth import shift_truth
from perf_assets.lib.simulate.ids import gpu_uuid
from perf_assets.lib.simulate.incidents import Applied
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


KINDS = {
    "node_rollouts": "node_rollout_slowdown",
    "thermal_throttles": "thermal_throttle",
    "image_stalls": "image_dataloader_stall",
    "checkpoint_slowdowns": "checkpoint_storage_slowdown",
    "fragmentations": "scheduler_fragmentation",
    "bad_batches": "bad_hardware_batch",
    "power_caps": "rack_power_cap",
    "hbm_decays": "hbm_bandwidth_decay",
    "mix_shifts": "workload_mix_shift",
    "framework_upgrades": "framework_upgrade",
    "noise_bursts": "noise_burst",
    "diurnal_swings": "diurnal_swing",
    "null_rollouts": "null_rollout",
    "maintenance_decoys": "maintenance_window",
}
SLOWER = ["goodput", "program_goodput"]
MIX_WINDOW_S = 7 * DAY_S  # a mix shift's ground truth: its first 7 days against the 7 days before
MOVES_AT = 0.01  # a capacity-lens factor is listed in a mix shift's `moves` when |Δln| reaches this


def jobs_on(fleet: Fleet, nodes: tuple[str, ...], start: int, end: int) -> list[str]:
    """Jobs with an attempt on any of `nodes` that overlaps [start, end)."""
    wanted = set(nodes)
    found = {
        attempt.job_id
        for attempt in fleet.attempts
        if attempt.start is not None
        and attempt.start < end
        and (attempt.end is None or attempt.end > start)
        and wanted & set(attempt.nodes)
    }
    return sorted(found)


def node_state_before(fleet: Fleet, cluster: str, node: str, at: int) -> tuple[SoftwareStack, float]:
    """A node's stack and power limit just before `at`."""
    state = None
    for when, stack, limit in software_history(fleet, cluster)[node]:
        if when < at or state is None:
            state = (stack, limit)
    return state


def _label(
    fleet: Fleet,
    *,
    incident_id: str,
    kind: str,
    cluster: str,
    nodes: tuple[str, ...],
    start: int,
    end: int | None,
    grain: str,
    magnitude: dict,
    factor: str | None,
    moves: list[str],
    expected: float | None,
    cause: dict,
    direction: str = "regression",
    attribution: str = "rate",
    mix_basis: str | None = None,
    decoy: bool = False,
    scope: dict | None = None,
    jobs: bool = True,
) -> dict:
    until = fleet.t1 if end is None else end
    return {
        "incident_id": incident_id,
        "kind": kind,
        "decoy": decoy,
        "direction": direction,
        "cluster": cluster,
        "nodes": list(nodes),
        "start": rfc3339(start),
        "end": None if end is None else rfc3339(end),
        "grain": grain,
        "scope": {
            "clusters": [cluster],
            "nodes": list(nodes),
            "gpus": [],
            "jobs": jobs_on(fleet, nodes, start, until) if jobs else None,
            "versions": {},
            **(scope or {}),
        },
        "magnitude": magnitude,
        "factor": factor,
        "moves": moves,
        "expected_relative_change": expected,
        "attribution": attribution,
        "mix_basis": mix_basis,
        "cause": cause,
    }


def _rollout_labels(fleet: Fleet) -> list[dict]:
    labelled = []
    for rollout in fleet.rollouts:
        before = software_before(fleet, rollout.cluster, rollout.at)
        component = rollout.cause_component
        to = dict(rollout.changes)[component]
        versions = {name: {"from": getattr(before, name), "to": value} for name, value in rollout.changes}
        labelled.append(
            _label(
                fleet,
                incident_id=rollout.incident_id,
                kind="software_rollout_slowdown",
                cluster=rollout.cluster,
                nodes=fleet.scenario.cluster(rollout.cluster).nodes,
                start=rollout.at,
                end=None,
                grain="cluster",
                magnitude={"step_time_factor": rollout.step_time_factor},
                factor="program_goodput",
                moves=SLOWER,
                expected=round(1.0 / rollout.step_time_factor - 1.0, 4),
                cause={
                    "dimension": component,
                    "value": to,
                    "component": component,
                    "from": getattr(before, component),
                    "to": to,
                },
                scope={"versions": versions},
            )
        )
    return labelled


def _catalogue_label(fleet: Fleet, a: Applied) -> dict:
    spec, scenario = a.spec, fleet.scenario
    kind = KINDS[a.kind]
    end = None if a.open_ended else a.end
    cluster = spec.to_cluster if isinstance(spec, MixShift) else spec.cluster
    all_nodes = scenario.cluster(cluster).nodes
    common = dict(incident_id=spec.incident_id, kind=kind, cluster=cluster, nodes=a.nodes, start=a.start, end=end)
    whole = set(a.nodes) == set(all_nodes)
    if isinstance(spec, VersionChange):
        stack, _ = node_state_before(fleet, cluster, a.nodes[0], a.start)
        versions = {name: {"from": getattr(stack, name), "to": value} for name, value in spec.changes}
        component, factor = spec.cause_component, spec.step_time_factor
        cause = {
            "dimension": component,
            "value": versions[component]["to"],
            "component": component,
            **versions[component],
        }
        decoy = a.kind == "null_rollouts"
        return _label(
            fleet,
            **common,
            grain="cluster" if whole else "node",
            magnitude={"step_time_factor": factor},
            factor=None if decoy else "program_goodput",
            moves=[] if decoy else SLOWER,
            expected=round(1.0 / factor - 1.0, 4),
            cause=cause,
            direction="none" if decoy else "improvement" if factor < 1 else "regression",
            decoy=decoy,
            scope={"versions": versions},
        )
    if isinstance(spec, ThermalThrottle):
        uuids = [gpu_uuid(fleet.seed, spec.node, gpu) for gpu in spec.gpus]
        return _label(
            fleet,
            **common,
            grain="gpu",
            magnitude={
                "step_time_factor": spec.step_time_factor,
                "sm_clock_factor": round(1 / spec.step_time_factor, 4),
            },
            factor="program_goodput",
            moves=SLOWER,
            expected=round(1.0 / spec.step_time_factor - 1.0, 4),
            cause={"dimension": "node", "value": spec.node, "gpus": uuids, "gpu_indices": list(spec.gpus)},
            scope={"gpus": uuids},
        )
    if isinstance(spec, ImageStall):
        stack, _ = node_state_before(fleet, cluster, a.nodes[0], a.start)
        return _label(
            fleet,
            **common,
            grain="cluster" if whole else "node",
            magnitude={"step_time_factor": spec.step_time_factor, "stall_probability": spec.stall_probability},
            factor="program_goodput",
            moves=SLOWER,
            expected=round(1.0 / spec.step_time_factor - 1.0, 4),
            cause={
                "dimension": "image",
                "value": spec.image,
                "component": "image",
                "from": stack.image,
                "to": spec.image,
            },
            scope={"versions": {"image": {"from": stack.image, "to": spec.image}}},
        )
    if isinstance(spec, CheckpointSlowdown):
        mix = scenario.jobs
        save_share = float(np.mean(mix.ckpt_save_s)) / (float(np.mean(mix.ckpt_interval_min)) * 60.0)
        return _label(
            fleet,
            **common,
            grain="cluster",
            magnitude={"save_time_factor": spec.save_time_factor},
            factor="runtime_goodput",
            moves=["goodput", "runtime_goodput", "badput_share", "checkpoint_save_share"],
            expected=round(-(spec.save_time_factor - 1.0) * save_share, 4),  # approximate: from the mean save share
            cause={"dimension": "badput", "value": "checkpoint_save_share"},
        )
    if isinstance(spec, Fragmentation):
        return _label(
            fleet,
            **common,
            grain="cluster",
            magnitude={"stranded_nodes": spec.stranded_nodes},
            factor="allocation",
            moves=["goodput", "allocation", "idle_share"],
            expected=round(-spec.stranded_nodes / len(all_nodes), 4),  # approximate: at most this
            cause={"dimension": "scheduler", "value": "fragmentation"},
        )
    if isinstance(spec, BadBatch):
        faults = scenario.faults
        out_h = float(np.mean(faults.down_h) + np.mean(faults.repair_h))
        share = len(a.nodes) / len(all_nodes)
        return _label(
            fleet,
            **common,
            grain="node",
            magnitude={"fault_rate_per_node_day": spec.fault_rate_per_node_day},
            factor="availability",
            moves=["goodput", "availability", "down_share", "runtime_goodput"],
            expected=round(-share * spec.fault_rate_per_node_day * out_h / 24.0, 4),  # approximate, on the cluster
            cause={"dimension": "node", "value": list(a.nodes), "batch": spec.batch},
            scope={"batch": spec.batch},
        )
    if isinstance(spec, PowerCap):
        _, limit = node_state_before(fleet, cluster, a.nodes[0], a.start)
        return _label(
            fleet,
            **common,
            grain="node",
            magnitude={"step_time_factor": spec.step_time_factor, "power_limit_w": spec.power_limit_w},
            factor="program_goodput",
            moves=SLOWER,
            expected=round(1.0 / spec.step_time_factor - 1.0, 4),
            cause={"dimension": "power_limit_w", "value": spec.power_limit_w, "from": limit, "to": spec.power_limit_w},
            scope={"rack": spec.rack, "versions": {"power_limit_w": {"from": limit, "to": spec.power_limit_w}}},
        )
    if isinstance(spec, HbmDecay):
        return _label(
            fleet,
            **common,
            grain="node",
            magnitude={
                "step_time_factor": spec.step_time_factor,
                "bandwidth_factor": spec.bandwidth_factor,
                "ramp_h": spec.ramp_h,
            },
            factor="program_goodput",
            moves=SLOWER,
            expected=round(1.0 / spec.step_time_factor - 1.0, 4),  # once the ramp is done
            cause={"dimension": "node", "value": spec.node},
        )
    if isinstance(spec, MixShift):
        return _mix_shift_label(fleet, a, common)
    decoy = dict(direction="none", decoy=True, factor=None, moves=[], expected=0.0)
    if isinstance(spec, NoiseBurst):
        return _label(
            fleet,
            **common,
            **decoy,
            grain="cluster",
            magnitude={"sigma": spec.sigma},
            cause={"dimension": "noise", "value": None},
        )
    if isinstance(spec, DiurnalSwing):
        return _label(
            fleet,
            **common,
            **decoy,
            grain="cluster",
            magnitude={"amplitude": spec.amplitude, "peak_hour_utc": spec.peak_hour_utc},
            cause={"dimension": "time_of_day", "value": None},
        )
    if isinstance(spec, MaintenanceDecoy):
        return _label(
            fleet,
            **common,
            **decoy,
            grain="node",
            magnitude={"duration_h": spec.duration_h},
            cause={"dimension": "maintenance", "value": spec.reason},
        )
    raise TypeError(f"no label for {type(spec).__name__}")  # pragma: no cover - a new kind


def _mix_shift_label(fleet: Fleet, a: Applied, common: dict) -> dict:
    """A mix shift's label from what the simulation did (ground_truth.shift_truth), not from its parameters.

    The lens it names is metric_tree.md §6's: running goodput per allocated GPU-hour, H100-equivalent, weights =
    shares of allocated GPU-hours (`mix_basis: allocated_gs`). `direction` and the figures in `magnitude` are the
    fleet's running goodput before and after in that lens. `factor` is the capacity-lens factor (own peak) that
    carries the fleet goodput's change: `allocation` when |Δln O| (allocated over installed peak-FLOP-seconds) is
    the larger, else `program_goodput` (Δln RG, useful FLOPs over allocated peak-FLOP-seconds, where the SKUs'
    own-peak MFU bands weigh in); `moves` lists goodput and each of the two whose |Δln| reaches MOVES_AT, with
    allocation always (each cluster's allocation moves), and `expected_relative_change` is the factor's change.
    """
    spec, scenario = a.spec, fleet.scenario
    truth = shift_truth(fleet, a.start, a.end, MIX_WINDOW_S)
    dln = {"allocation": truth["dln_occupancy_pfs"], "program_goodput": truth["dln_running_pfs"]}
    factor = max(dln, key=lambda name: abs(dln[name]) if np.isfinite(dln[name]) else -1.0)
    moves = ["goodput", "allocation"] + (["program_goodput"] if abs(dln["program_goodput"]) >= MOVES_AT else [])
    clusters = [spec.to_cluster, *spec.from_clusters]
    return _label(
        fleet,
        **common,
        grain="fleet",
        magnitude={"gap_h": spec.gap_h, "spare_gap_h": spec.spare_gap_h, "ground_truth": truth},
        factor=factor,
        moves=moves,
        expected=round(float(np.expm1(dln[factor])), 4),
        cause={"dimension": "sku", "value": scenario.cluster(spec.to_cluster).sku.name},
        direction="regression" if truth["relative_change"] < 0 else "improvement",
        attribution="mix",
        mix_basis=truth["mix_basis"],
        scope={"clusters": clusters},
        jobs=False,
    )


def incidents(fleet: Fleet) -> list[dict]:
    """One label per injected incident inside the window (rollouts, then the catalogue). Node faults and
    ordinary maintenance are not labels: they are availability events, recorded in node_events (and in
    SimulationResult.faults); a maintenance listed as a decoy is labelled."""
    return _rollout_labels(fleet) + [_catalogue_label(fleet, a) for a in fleet.effects.applied]


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
