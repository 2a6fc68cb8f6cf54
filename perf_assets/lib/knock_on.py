"""Changes that something already known explains: knock-on effects, marked so that they are not paged as incidents.

Five kinds, each a plain function over the rows of `regressions` (detection.py writes the reason in the column
`expected_because`; grouping, alerts and the evaluation read it):

* **Job peers.** A synchronous job runs at its slowest node's pace. A node that starts sharing allocations with a
  node whose ``program_goodput`` has been lower for days (an earlier incident, more than ``GROUP_WINDOW_DAYS``
  before, so not the same incident's first days) slows down with it, and speeds up again when it stops sharing
  them; neither is a new incident (nor is the node's and its GPUs' power draw moving with that pace:
  ``pace_companions``). A node-grain ``program_goodput`` row is expected when the pace its job peers set predicts
  it. "Slowed": the product of ``1 + relative_effect`` of the peer's own rows of that metric that split before the
  window is at most ``1 - min_effect`` (the grain's minimum effect). The prediction (``_paced_hours``): over the
  change's own before and after windows (at most ``JOB_WINDOW`` each), the node's job time weighted at each
  instant by the largest slowdown among the slowed peers in an allocation with it then (0 with none), per hour of
  job time; the change from before to after must be in the row's direction and at least ``MIN_EXPLAINED_SHARE`` of
  the node's own change (a framework upgrade that speeds up a node's new jobs while it happens to share a little
  less with slowed peers is not explained away). Two more conditions make the explanation evidence and not a
  coincidence (``incidents`` seed 103: a torch upgrade's improvement on h200-n03 was set aside because n03 stopped
  sharing jobs with h200-n04, which an image stall had slowed, but n03 as well): a peer's earlier change that the
  node shares (its own change of that metric, the same direction, within ``GROUP_WINDOW_DAYS`` of the peer's: one
  incident that hit both) makes the peer slower than the node only by what it took beyond the node's
  (``excess_over_shared``), and only when that is at least the minimum effect; and a change whose own node had a
  configuration change within a day (``coinciding_changes`` of a ``SOFTWARE_DIMENSIONS`` component: a driver,
  torch, image ... rollout, a power limit) or whose top cause candidate is one has a cause of its own and is not
  set aside, unless the rollout's other nodes contradict it (``unsupported_rollout``: it reached at least
  ``MIN_ROLLOUT_NODES`` nodes, fewer than half of them moved, its cluster did not, and the cause analysis does not
  rank it first: fleet-1k seed 3's null firmware rollout to h100-west, which landed on n07 and n08 as they joined
  jobs with HBM-decayed n03).
* **Planned maintenance.** Before a node's planned maintenance (node state ``maintenance``: the tree's
  ``down_maintenance_share``) the scheduler drains it, so its allocation drops on the day before and the day of the
  maintenance, and it is refilled after. A node-grain ``allocation`` change (either direction) whose split day is
  within ``DRAIN_DAYS`` of a day with planned maintenance on that node (from the day before its first maintenance day
  to the day after its last) is expected (``maintenance_knock_ons``; incidents seeds 1-3: h200-n01's maintenance of
  10-04 with its allocation 0.05-0.70 on 10-03 and 0.41-0.50 on 10-04, 0.72-0.87 on 10-05). Unplanned down time
  (faults, repair, drain for another reason) does not count: it is what incidents cause.
* **No demand.** A node's allocation also moves when the cluster simply has no eligible work waiting for it: the
  ledger books that idle time as ``idle_no_demand`` (nothing pending that fits), apart from ``idle_fragmented``
  (work pending, capacity stranded) and down time. A node-grain ``allocation`` change, or a node ``goodput`` change
  whose top factor is allocation, is expected when the node's ``idle_no_demand_share`` moved the other way by at
  least ``MIN_EXPLAINED_SHARE`` of the allocation's change over the change's own before and after windows (Σ/Σ)
  (``no_demand_knock_ons``), also when a configuration change landed on the node that day: a rollout changes how
  fast work runs, not whether eligible work waits (fleet-1k seed 2: h100-east-n25 idle with no demand from 10-12,
  its NCCL rollout on 10-13). Demand that leaves a whole cluster is
  seen at the cluster's grain, where it is not set aside (a mix shift, a fragmentation). fleet-1k seeds 1-2: five
  node groups of 3-5 idle days (allocation 0.27-0.50 against 0.8-1.0, idle with no demand 0.40-0.72), four of them
  inside decoy windows.
* **Down time.** When a node goes down (a fault, a maintenance), the jobs on it are requeued and a job waiting
  for its node count keeps other nodes idle while eligible work pends: the scheduler's idle-fragmented share
  rises for a day or two. A cluster ``idle_fragmented_share`` burst is expected when the cluster lost capacity
  to down time on the day before the burst or during it, and the burst's idle-fragmented capacity is at most
  ``DOWN_TIME_FACTOR`` times that down capacity (the demo: 1.3 times after beta-n03's fault and maintenance;
  an injected fragmentation strands whole nodes for days, 10 times or more its cluster's down time, or with
  no down time at all).

* **Power alone.** A GPU's ``power_ratio`` (its draw over busy samples, per TDP) follows what its jobs run: the
  draw of a busy GPU rises with the arithmetic intensity of the kernels, so a node whose next jobs are a
  denser model draws a few per cent more at the same clock, for as long as such jobs run there. A hardware or
  configuration cause moves something else with it: a power cap or a throttle lowers the clock (``clock_ratio``,
  the GEMM probe) by about as much, a slower pace shows in ``program_goodput``, a decaying HBM in its probe. A
  node- or GPU-grain ``power_ratio`` row is expected (``power_alone``) when, within ``GROUP_WINDOW_DAYS`` of its
  split, no row of another metric of its node or of that node's GPUs changed (but ``JOB_MIX_METRICS``: a node
  the scheduler drained or refilled runs other jobs, which is the job mix itself), none of its node's power rows
  moved by ``POWER_ALONE_MAX_EFFECT`` or more, and its own node had no configuration change with it (``own_cause``:
  a lowered power limit is a cause of its own), or only one that its rollout's other nodes do not support
  (``unsupported_rollout``, as for job peers: fleet-1k seed 111's null firmware rollout to h100-west, on whose
  10-14 h100-west-n12 alone drew 3.0 % more). fleet-1k seeds 1, 2 and 107-112 (docs/detection.md, "Power
  alone"): 8 of the 18 false alarms were groups of only power rows, each move 3.0-4.0 %; every labelled
  incident whose group held power rows moved another metric too (the power caps' clocks -9 % with power
  -23 to -30 %, the NCCL rollouts' program goodput, the HBM decays' probe). A GPU whose node is unknown is not
  set aside (unknown is not evidence).

Nothing is dropped: an expected row stays in `regressions` with its evidence and the reason.
"""

from __future__ import annotations

import math
from datetime import date, datetime, timedelta, timezone

import pandas as pd

from perf_assets.lib.causes import SOFTWARE_DIMENSIONS
from perf_assets.lib.grouping import as_day, own_cause
from perf_assets.lib.incident_joins import rollout_events

GROUP_WINDOW_DAYS = 2  # grouping.GROUP_WINDOW_DAYS: a peer's change nearer than this is the same incident
JOB_WINDOW = timedelta(days=3)  # exposure compared over the change's own windows, at most this long each side
MIN_EXPLAINED_SHARE = 0.5  # the exposure change must predict at least half of the node's change
KNOCK_ON_METRICS = ("program_goodput",)  # the pace of a synchronous job: what its nodes share
PACE_COMPANIONS = ("power_ratio",)  # follow the pace of the job: a GPU waiting for a slower peer draws less power
POWER_ALONE_METRICS = ("power_ratio",)  # a GPU's draw over busy samples: what its jobs run as much as its hardware
POWER_ALONE_MAX_EFFECT = 0.05  # below this, a node's power draw moving alone is its job mix (module docstring)
JOB_MIX_METRICS = ("allocation",)  # what the scheduler moves: which jobs run on a node, so its job mix too
BURST_METRICS = ("idle_fragmented_share",)
DOWN_TIME_FACTOR = 2.0
DRAIN_METRICS = ("allocation",)  # what the scheduler's drain before a planned maintenance and the refill after move
NO_DEMAND_METRICS = ("allocation", "goodput")  # a node's allocation, and its goodput when allocation moved it
DRAIN_DAYS = 1  # a node's allocation change this many days before its maintenance to as many after it is its drain


def _split_day(row: dict) -> date:
    split = row.get("split_date")
    return as_day(split) if split is not None and not pd.isna(split) else as_day(row["change_date"])


def _midnight(day: date) -> pd.Timestamp:
    return pd.Timestamp(datetime.combine(day, datetime.min.time(), tzinfo=timezone.utc))


def _shared_spans(
    allocations: pd.DataFrame, node: str, peers, lo: pd.Timestamp, hi: pd.Timestamp
) -> tuple[pd.Series, pd.Series, pd.Series]:
    """(starts, ends, peer) of the spans within [lo, hi) that ``node`` ran in one allocation with one of ``peers``,
    one per allocation and peer (empty when there is none)."""
    window = allocations[(allocations["start_at"] < hi) & (allocations["end_at"] > lo)]
    mine = window[window["node"] == node]
    theirs = window[window["node"].isin(peers)]
    if mine.empty or theirs.empty:
        empty = pd.Series([], dtype=object)
        return empty, empty, empty
    pairs = mine.merge(theirs, on="slurm_job_id", suffixes=("", "_peer"))
    starts = pairs[["start_at", "start_at_peer"]].max(axis=1).clip(lower=lo)
    ends = pairs[["end_at", "end_at_peer"]].min(axis=1).clip(upper=hi)
    return starts, ends, pairs["node_peer"]


def _exposed_hours(allocations: pd.DataFrame, node: str, peers: set[str], lo: pd.Timestamp, hi: pd.Timestamp) -> float:
    """Hours within [lo, hi) that ``node`` ran in one allocation with at least one of ``peers`` (a union of
    intervals: two slowed peers in one job count once)."""
    starts, ends, _ = _shared_spans(allocations, node, peers, lo, hi)
    return _union_hours(starts, ends)


def _paced_hours(
    allocations: pd.DataFrame, node: str, slowdowns: dict[str, float], lo: pd.Timestamp, hi: pd.Timestamp
) -> float:
    """The integral over [lo, hi), in hours, of the slowdown ``node`` ran at: at each instant, the largest slowdown
    (``slowdowns``: peer -> fraction) among the peers in an allocation with it then, else 0 (a synchronous job runs
    at its slowest node's pace)."""
    starts, ends, peers = _shared_spans(allocations, node, set(slowdowns), lo, hi)
    spans = [(start, end, slowdowns[peer]) for start, end, peer in zip(starts, ends, peers) if end > start]
    edges = sorted({edge for start, end, _ in spans for edge in (start, end)})
    total = 0.0
    for left, right in zip(edges, edges[1:]):
        pace = max((slowdown for start, end, slowdown in spans if start <= left and end >= right), default=0.0)
        total += pace * (right - left).total_seconds()
    return total / 3600.0


def _busy_hours(allocations: pd.DataFrame, node: str, lo: pd.Timestamp, hi: pd.Timestamp) -> float:
    """Hours within [lo, hi) that ``node`` ran in any allocation (a union of intervals)."""
    mine = allocations[(allocations["node"] == node) & (allocations["start_at"] < hi) & (allocations["end_at"] > lo)]
    return _union_hours(mine["start_at"].clip(lower=lo), mine["end_at"].clip(upper=hi))


def _union_hours(starts: pd.Series, ends: pd.Series) -> float:
    total, reach = 0.0, None
    for start, end in sorted(zip(starts, ends)):
        if end <= start:
            continue
        if reach is None or start > reach:
            total += (end - start).total_seconds()
            reach = end
        elif end > reach:
            total += (end - reach).total_seconds()
            reach = end
    return total / 3600.0


def shared_incident(own: list[tuple[date, float]], when: date, effect: float) -> bool:
    """A peer's change on ``when`` that the node's own changes (``own``: day, effect) share: the same direction
    within ``GROUP_WINDOW_DAYS`` (one incident that hit both nodes does not make the peer slower than the node)."""
    return any(
        abs((day - when).days) <= GROUP_WINDOW_DAYS and (own_effect < 0) == (effect < 0) for day, own_effect in own
    )


MIN_ROLLOUT_NODES = 4  # a rollout to fewer nodes is not judged by how many of them moved


def _rollout_events(row: dict) -> set[tuple[str, str, str]]:
    """(component, from, to) of the configuration changes a row came with (``incident_joins.rollout_events``)."""
    return {event[:3] for event in rollout_events(row)}


def _rollout_rows(regressions: pd.DataFrame) -> list[dict]:
    """The node and cluster rows that came with a configuration change, with their events and split days."""
    rows = []
    for row in regressions[regressions["grain"].isin(("node", "cluster"))].to_dict("records"):
        events = _rollout_events(row)
        if events:
            rows.append(dict(row, _events=events, _day=_split_day(row)))
    return rows


def rollout_wave(rollouts: pd.DataFrame, component: str, old: str, new: str, when: pd.Timestamp) -> set[str]:
    """The nodes of ``rollouts`` (``detection.software_changes``) that got ``component`` from ``old`` to ``new``
    within a day of ``when``: one rollout's wave."""
    same = rollouts[
        (rollouts["component"] == component) & (rollouts["from_version"] == old) & (rollouts["to_version"] == new)
    ]
    return set(same.loc[(same["changed_at"] - when).abs() <= pd.Timedelta(days=1), "node"])


def unsupported_rollout(row: dict, events: list[dict], rollouts: pd.DataFrame | None) -> bool:
    """Whether every configuration change the node row came with is one its peers' data do not support: it reached
    at least ``MIN_ROLLOUT_NODES`` nodes (those that got the same component versions within a day of this node),
    fewer than half of them moved the row's metric the same way within ``GROUP_WINDOW_DAYS`` of the row's split, no
    cluster row of that metric moved that way with it, and the cause analysis does not rank a configuration change
    first. Such a change landed with the row by coincidence (fleet-1k seed 3: a firmware rollout to all 24 nodes of
    h100-west on 10-13, without effect, as h100-west-n07 and n08 joined jobs with nodes that HBM decay had slowed;
    2 of the 24 moved, n07 and n08). Unknown (no ``rollouts``): supported."""
    if rollouts is None or rollouts.empty or row.get("top_cause_dimension") in SOFTWARE_DIMENSIONS:
        return False
    mine = _rollout_events(row)
    if not mine:
        return False
    node, metric, kind, day = str(row["entity_id"]), row["metric"], row["change_kind"], _split_day(row)
    for component, old, new in mine:
        same = rollouts[
            (rollouts["component"] == component) & (rollouts["from_version"] == old) & (rollouts["to_version"] == new)
        ]
        own = same.loc[same["node"] == node, "changed_at"]
        if own.empty:
            return False
        wave = rollout_wave(same, component, old, new, own.min())
        if len(wave) < MIN_ROLLOUT_NODES:
            return False
        moved = set()
        for other in events:
            if (
                other["metric"] == metric
                and other["change_kind"] == kind
                and (component, old, new) in other["_events"]
                and abs((other["_day"] - day).days) <= GROUP_WINDOW_DAYS
            ):
                if other["grain"] == "cluster":
                    return False  # the cluster moved with it
                moved.add(str(other["entity_id"]))
        if 2 * len(moved & wave) >= len(wave):
            return False
    return True


def excess_over_shared(own: list[tuple[date, float]], when: date, effect: float) -> float:
    """A peer's change on ``when`` relative to the node's own change of the same incident (``shared_incident``: the
    same direction within ``GROUP_WINDOW_DAYS``), else as it is: one incident that hit both nodes makes the peer
    slower than the node only by what it took from the peer beyond the node (fleet-1k seed 3: an NCCL rollout took
    5.5 % from h100-west-n07 and 11.6 % from n03, whose HBM was decaying: n03 was 6.5 % slower than n07)."""
    shared = [
        own_effect
        for day, own_effect in own
        if abs((day - when).days) <= GROUP_WINDOW_DAYS and (own_effect < 0) == (effect < 0) and own_effect > -1.0
    ]
    return (1.0 + effect) / (1.0 + shared[0]) - 1.0 if shared else effect


def job_peer_knock_ons(
    regressions: pd.DataFrame,
    allocations: pd.DataFrame | None,
    min_effect: float,
    rollouts: pd.DataFrame | None = None,
) -> dict:
    """``{index: reason}`` for the node rows of ``regressions`` that joining (or leaving) jobs with nodes slowed
    days earlier explains (module docstring). ``allocations``: slurm_job_id, node, start_at, end_at. ``rollouts``
    (``detection.software_changes``: node, changed_at, component, from_version, to_version; None: unknown) tells
    which configuration changes the data do not support (``unsupported_rollout``)."""
    if allocations is None or allocations.empty or regressions.empty:
        return {}
    allocations = allocations.assign(
        node=allocations["node"].astype(str),
        start_at=pd.to_datetime(allocations["start_at"], utc=True),
        end_at=pd.to_datetime(allocations["end_at"], utc=True),
    )
    by_node = dict(tuple(allocations.groupby("node", sort=False)))

    def of_nodes(*names: str) -> pd.DataFrame:
        """The allocation rows of these nodes: all that `_exposed_hours` and `_busy_hours` read of them (a fleet's
        whole allocation table filtered again for every peer of every change was most of detection's time)."""
        parts = [by_node[name] for name in names if name in by_node]
        return pd.concat(parts) if parts else allocations.iloc[:0]

    nodes = regressions[(regressions["grain"] == "node") & regressions["metric"].isin(KNOCK_ON_METRICS)]
    events = _rollout_rows(regressions)
    if rollouts is not None and not rollouts.empty:  # typed once here, not per row (unsupported_rollout)
        rollouts = rollouts.assign(
            changed_at=pd.to_datetime(rollouts["changed_at"], utc=True),
            node=rollouts["node"].astype(str),
            from_version=rollouts["from_version"].astype(str),
            to_version=rollouts["to_version"].astype(str),
        )
    history: dict[tuple[str, str], list[tuple[date, float]]] = {}
    for row in nodes.to_dict("records"):
        effect = row.get("relative_effect")
        if effect is not None and math.isfinite(effect):
            history.setdefault((str(row["metric"]), str(row["entity_id"])), []).append((_split_day(row), effect))
    out = {}
    for index, row in nodes.iterrows():
        row = row.to_dict()
        metric, node, day = str(row["metric"]), str(row["entity_id"]), _split_day(row)
        if own_cause(row) is not None and not unsupported_rollout(row, events, rollouts):
            continue  # its own node's configuration changed with it: a cause of its own, never set aside
        own = history.get((metric, node), [])
        slowed = {}
        for (other_metric, peer), changes in history.items():
            if other_metric != metric or peer == node:
                continue
            earlier = []
            for when, effect in changes:
                if (day - when).days <= GROUP_WINDOW_DAYS:
                    continue
                if shared_incident(own, when, effect):
                    effect = excess_over_shared(own, when, effect)
                    if effect > -min_effect:
                        continue  # an incident that hit both nodes about alike does not make the peer slower
                earlier.append((when, effect))
            level = math.prod(1.0 + effect for _, effect in earlier)
            if earlier and level <= 1.0 - min_effect:
                slowed[peer] = (min(when for when, _ in earlier), level - 1.0)
        if not slowed:
            continue
        # the change's own windows (its before and after segments, as its effect was measured), at most JOB_WINDOW
        at = _midnight(day)
        lo = max(_midnight(as_day(row["before_start_date"])), at - JOB_WINDOW)
        hi = min(_midnight(as_day(row["after_end_date"]) + timedelta(days=1)), at + JOB_WINDOW)
        if not lo < at < hi:
            continue
        shared = {peer for peer in slowed if _exposed_hours(of_nodes(node, peer), node, {peer}, lo, hi) > 0.0}
        if not shared:
            continue
        mine = of_nodes(node)
        busy_before, busy_after = _busy_hours(mine, node, lo, at), _busy_hours(mine, node, at, hi)
        if not (busy_before > 0 and busy_after > 0):
            continue  # no job on one side: its pace there is unknown
        around = of_nodes(node, *sorted(shared))
        before = _exposed_hours(around, node, shared, lo, at) / busy_before
        after = _exposed_hours(around, node, shared, at, hi) / busy_after
        # the pace change that the change of exposure predicts: a job runs at its slowest node's pace
        slowdowns = {peer: -slowed[peer][1] for peer in shared}
        paced_before = _paced_hours(around, node, slowdowns, lo, at) / busy_before
        paced_after = _paced_hours(around, node, slowdowns, at, hi) / busy_after
        explained = abs(paced_after - paced_before)
        effect = abs(float(row["relative_effect"])) if row["relative_effect"] is not None else math.nan
        joined = row["change_kind"] == "regression" and paced_after > paced_before
        left = row["change_kind"] == "improvement" and paced_before > paced_after
        if (joined or left) and explained >= MIN_EXPLAINED_SHARE * effect:
            peers = ", ".join(f"{peer} ({slowed[peer][1]:+.1%} since {slowed[peer][0]})" for peer in sorted(shared))
            out[index] = (
                f"job peers: {'joined' if joined else 'left'} allocations with nodes whose {metric} was already lower "
                f"({peers}): {before:.0%} of its job time before {day} in their allocations, {after:.0%} after, which "
                f"predicts {explained:.1%} of the {effect:.1%} change"
            )
    return out


def pace_companions(regressions: pd.DataFrame, expected: dict, gpu_nodes: dict[str, str]) -> dict:
    """``{index: reason}`` for the ``PACE_COMPANIONS`` rows (node or GPU grain) that an expected job-peer change of
    their node explains: the same direction within ``GROUP_WINDOW_DAYS`` and an effect no larger than the pace's
    (a GPU that waits for a slower peer draws less power; a power cap lowers power more than it lowers the pace)."""
    paces: dict[str, list[tuple[date, str, float, object]]] = {}
    for index, reason in expected.items():
        row = regressions.loc[index]
        if row["grain"] == "node" and row["metric"] in KNOCK_ON_METRICS and str(reason).startswith("job peers"):
            paces.setdefault(str(row["entity_id"]), []).append(
                (_split_day(row.to_dict()), str(row["change_kind"]), abs(float(row["relative_effect"])), index)
            )
    if not paces:
        return {}
    out = {}
    rows = regressions[regressions["grain"].isin(("node", "gpu")) & regressions["metric"].isin(PACE_COMPANIONS)]
    for index, row in rows.iterrows():
        entity = str(row["entity_id"])
        node = entity if row["grain"] == "node" else gpu_nodes.get(entity)
        effect = abs(float(row["relative_effect"])) if row["relative_effect"] is not None else math.nan
        day = _split_day(row.to_dict())
        for pace_day, kind, pace_effect, source in paces.get(node, []):
            if kind == row["change_kind"] and abs((day - pace_day).days) <= GROUP_WINDOW_DAYS and effect <= pace_effect:
                out[index] = (
                    f"pace: {row['metric']} {float(row['relative_effect']):+.1%} follows node {node}'s program_goodput "
                    f"({pace_effect:.1%}, {kind}) on {pace_day}, a job-peer knock-on"
                )
                break
    return out


def power_alone(regressions: pd.DataFrame, gpu_nodes: dict[str, str], rollouts: pd.DataFrame | None = None) -> dict:
    """``{index: reason}`` for the node- and GPU-grain ``POWER_ALONE_METRICS`` rows whose node moved nothing else
    (module docstring, "Power alone"): no row of another metric of the node or of its GPUs within
    ``GROUP_WINDOW_DAYS`` of the row's split (``JOB_MIX_METRICS`` aside), no power row of the node's moving by
    ``POWER_ALONE_MAX_EFFECT`` or more there, and no configuration change of the row's own (``own_cause``) that its
    rollout's other nodes support (``unsupported_rollout``, as for job peers; ``rollouts`` as there)."""
    local = regressions[regressions["grain"].isin(("node", "gpu"))]
    if local.empty:
        return {}
    events = _rollout_rows(regressions)
    nodes = [
        str(entity) if grain == "node" else gpu_nodes.get(str(entity))
        for grain, entity in zip(local["grain"], local["entity_id"])
    ]
    moves: dict[str, list[tuple[date, bool]]] = {}  # node -> (split day, whether the move rules out "alone")
    for node, row in zip(nodes, local.to_dict("records")):
        if node is None:
            continue
        effect = row["relative_effect"]
        if row["metric"] in JOB_MIX_METRICS or (row["metric"] == "goodput" and row["top_factor"] in JOB_MIX_METRICS):
            decisive = False  # the node drained or refilled: other jobs run there, which is the job mix itself
        elif row["metric"] in POWER_ALONE_METRICS:
            decisive = effect is None or not math.isfinite(effect) or abs(effect) >= POWER_ALONE_MAX_EFFECT
        else:
            decisive = True
        moves.setdefault(node, []).append((_split_day(row), decisive))
    out = {}
    for index, node, row in zip(local.index, nodes, local.to_dict("records")):
        if node is None or row["metric"] not in POWER_ALONE_METRICS:
            continue
        if own_cause(row) is not None and not unsupported_rollout(dict(row, entity_id=node), events, rollouts):
            continue  # a configuration change of its node's came with it (a lowered power limit): a cause of its own
        effect = row["relative_effect"]
        if effect is None or not math.isfinite(effect) or abs(effect) >= POWER_ALONE_MAX_EFFECT:
            continue
        day = _split_day(row)
        if any(decisive and abs((when - day).days) <= GROUP_WINDOW_DAYS for when, decisive in moves[node]):
            continue
        out[index] = (
            f"power alone: {row['metric']} {effect:+.1%} with no other metric of node {node} or its GPUs changing "
            f"within {GROUP_WINDOW_DAYS} days of {day} and no configuration change that its rollout supports; below "
            f"{POWER_ALONE_MAX_EFFECT:.0%}, a busy GPU's draw moving at the same clock follows its jobs' arithmetic "
            f"intensity (the job mix), not the hardware"
        )
    return out


def down_time_knock_ons(regressions: pd.DataFrame, metric_tree: pd.DataFrame) -> dict:
    """``{index: reason}`` for the cluster bursts of ``BURST_METRICS`` that down time on the day before or during
    them explains (idle-fragmented capacity at most ``DOWN_TIME_FACTOR`` times the capacity lost to down time)."""
    bursts = regressions[
        (regressions["grain"] == "cluster")
        & regressions["metric"].isin(BURST_METRICS)
        & (regressions["shape"] == "burst")
        & (regressions["change_kind"] == "regression")
    ]
    if bursts.empty or metric_tree.empty:
        return {}
    availability = metric_tree[(metric_tree["grain"] == "cluster") & (metric_tree["node_id"] == "availability")]
    availability = availability.assign(
        day=pd.to_datetime(availability["metric_date"]).dt.date,
        down=availability["denominator"] - availability["numerator"],  # installed less available capacity
    )
    out = {}
    for index, row in bursts.iterrows():
        first, last = as_day(row["change_date"]), as_day(row["after_end_date"])
        days = availability[
            (availability["entity_id"] == row["entity_id"])
            & (availability["day"] >= first - timedelta(days=1))
            & (availability["day"] <= last)
        ]
        down = float(days["down"].sum(min_count=1)) if not days.empty else math.nan
        stranded = float(row["after_numerator"]) if row["after_numerator"] is not None else math.nan
        if not (down > 0 and math.isfinite(stranded)):
            continue  # no down time known around the burst: nothing explains it
        ratio = stranded / down
        if ratio <= DOWN_TIME_FACTOR:
            out[index] = (
                f"down time: cluster {row['entity_id']} lost capacity to down time from {first - timedelta(days=1)} "
                f"to {last}; the burst's idle-fragmented capacity is {ratio:.2f} times that "
                f"(at most {DOWN_TIME_FACTOR:g}: requeued jobs waiting for their node count)"
            )
    return out


def maintenance_knock_ons(regressions: pd.DataFrame, metric_tree: pd.DataFrame) -> dict:
    """``{index: reason}`` for the node ``DRAIN_METRICS`` changes that split within ``DRAIN_DAYS`` of the node's
    planned maintenance (days with ``down_maintenance_share`` above 0 in the node's metric tree rows)."""
    rows = regressions[(regressions["grain"] == "node") & regressions["metric"].isin(DRAIN_METRICS)]
    if rows.empty or metric_tree.empty:
        return {}
    planned = metric_tree[
        (metric_tree["grain"] == "node")
        & (metric_tree["node_id"] == "down_maintenance_share")
        & (metric_tree["numerator"] > 0)
        & metric_tree["entity_id"].isin(set(rows["entity_id"]))
    ]
    if planned.empty:
        return {}
    days_of = planned.groupby("entity_id")["metric_date"].apply(lambda d: sorted({as_day(x) for x in d})).to_dict()
    out = {}
    for index, row in rows.iterrows():
        split = _split_day(row)
        near = [d for d in days_of.get(row["entity_id"], []) if abs((split - d).days) <= DRAIN_DAYS]
        if near:
            out[index] = (
                f"planned maintenance: node {row['entity_id']} was down for maintenance on "
                f"{', '.join(str(d) for d in near)}; its allocation moves with the drain before it and the refill "
                f"after (split {split}, within {DRAIN_DAYS} day)"
            )
    return out


def _window_share(tree: pd.DataFrame, lo: date, hi: date) -> float | None:
    """Σ numerator / Σ denominator of ``tree``'s rows with ``lo <= metric_date <= hi``; None without a denominator."""
    rows = tree[(tree["_day"] >= lo) & (tree["_day"] <= hi)]
    denominator = float(rows["denominator"].sum())
    return float(rows["numerator"].sum()) / denominator if denominator > 0 else None


def no_demand_knock_ons(regressions: pd.DataFrame, metric_tree: pd.DataFrame) -> dict:
    """``{index: reason}`` for the node ``NO_DEMAND_METRICS`` rows (goodput only when its top factor is allocation)
    whose allocation change is mostly idle time with no demand: over the row's before window
    (``before_start_date`` to the day before its split) and after window (the split to ``after_end_date``), the node's
    ``idle_no_demand_share`` moved against its ``allocation`` by at least ``MIN_EXPLAINED_SHARE`` of it, whatever
    configuration change came with it (a rollout does not make eligible work stop waiting)."""
    rows = regressions[
        (regressions["grain"] == "node")
        & regressions["metric"].isin(NO_DEMAND_METRICS)
        & ((regressions["metric"] == "allocation") | (regressions["top_factor"] == "allocation"))
    ]
    if rows.empty or metric_tree.empty:
        return {}
    tree = metric_tree[
        (metric_tree["grain"] == "node")
        & metric_tree["node_id"].isin(["allocation", "idle_no_demand_share"])
        & metric_tree["entity_id"].isin(set(rows["entity_id"]))
    ].copy()
    if tree.empty:
        return {}
    tree["_day"] = [as_day(d) for d in tree["metric_date"]]
    by_entity = {key: part for key, part in tree.groupby(["entity_id", "node_id"])}
    out = {}
    for index, row in rows.iterrows():
        if pd.isna(row.get("before_start_date")) or pd.isna(row.get("after_end_date")):
            continue
        allocation = by_entity.get((row["entity_id"], "allocation"))
        no_demand = by_entity.get((row["entity_id"], "idle_no_demand_share"))
        if allocation is None or no_demand is None:
            continue
        split = _split_day(row)
        before = (as_day(row["before_start_date"]), split - timedelta(days=1))
        after = (split, as_day(row["after_end_date"]))
        levels = [_window_share(series, *window) for series in (allocation, no_demand) for window in (before, after)]
        if any(level is None for level in levels):
            continue  # unknown is not evidence
        allocation_before, allocation_after, idle_before, idle_after = levels
        moved = allocation_after - allocation_before
        if moved == 0 or -(idle_after - idle_before) / moved < MIN_EXPLAINED_SHARE:
            continue
        out[index] = (
            f"no demand: node {row['entity_id']}'s allocation {allocation_before:.2f} -> {allocation_after:.2f} "
            f"(split {split}) moved with its idle time with no eligible work pending, {idle_before:.2f} -> "
            f"{idle_after:.2f}: the scheduler had nothing to place there, not a change of the node"
        )
    return out
