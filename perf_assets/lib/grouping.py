"""One incident, one group: the changes an incident causes across grains and metrics, grouped.

Rows of `regressions` (any grain: fleet, cluster, rack, node, gpu; any metric: goodput, its factors,
companions) belong to one group when they are linked by a chain of pairs that each have

* the same direction (`change_kind`: regression or improvement),
* change days within ± 2 days (``GROUP_WINDOW_DAYS``); the day compared is the scan's split (`split_date`)
  when the row has one: a ramp's `change_date` is its fitted onset (detection.py), days before the level
  moved, and single linkage on onsets chained a ramp to an earlier incident of the same cluster through the
  changes between them; the splits of one incident's rows coincide; a ramp and a step that came with a
  configuration change of its own (a rollout, a power limit: ``own_cause``) link only when the ramp's onset is
  within ± 2 days of the step as well (``onsets_near``: a rollout that begins inside a ramp splits near the
  ramp's split, not near its onset), and

  (an excess fault rate, `shape` 'rate', is a condition from its onset to the window's end: a row within
  that span, or up to 2 days before it, is near it, and an availability row the other way too, the node back
  up after its faults; two excess fault rates of one metric on racks or nodes of
  the same cluster are nested: one batch of hardware spans racks), and
* the same spine factor (``factor_of``): a spine factor row is its own factor, a goodput row that of its
  `top_factor`, a companion (SM clock, power, thermal, probes: how fast the GPUs compute) program goodput,
  a leaf share the factor it belongs to (idle shares allocation, fault counts availability); a row whose
  factor is unknown links to any. Two incidents of one cluster within two days (a checkpoint storage
  slowdown, runtime goodput, and a mix shift that idles the cluster, allocation) are two groups, and
* nested scopes: one entity inside the other (a node in its cluster, a GPU in its node, the same entity
  with another metric), by the inventory topology, or job co-membership: two node (or GPU) rows whose nodes
  ran in one allocation around the change day (column `job_peer_nodes`, written by detection.py when it
  has the allocations), a rollout cohort's row standing for its nodes. A synchronous job runs at its slowest
  node's pace, so an incident on one node changes its job peers the same way on the same days; without this
  link they were separate groups, i.e. false alarms next to the incident.

Three rules keep these links from chaining separate incidents into one (incident_joins.py): job co-membership links
two rows only when one of them is of a metric the job's pace moves (not two nodes' own hardware measurements: thermal
state, SM clock, probes, faults) and their splits are at most a day apart (``job_peer_link``); a cluster or rack row
that came with a rollout does not contain a node row of a node it did not change, without a change of its own, split
on another day (``outside_rollout``); and two ramps of one entity and metric, the later's onset within 2 days of the
earlier's split, are one decay (``ramp_continued``), as are two ramps of nested entities whose onsets lie within 2
days (``ramps_begin_together``).

Links between two entities (containment, job co-membership, sibling fault rates) are applied after the links within
one entity, nearest split days first and then in time (``incident_joins.peer_link_order``), and never between two
groups that each began with something of their own and with nothing in common (``incident_joins.separate_origins``):
a configuration change the cause analysis ranks first, or a node's own thermal state or HBM probe
(``incident_joins.origins``). A row with no origin (a job peer's pace, a cluster's aggregate) joins the first group
it links to, so it no longer bridges a rollout and a throttle on the next day. A group whose only origin is one node's
hardware is headed by that node (``_hardware_origin``): the cluster's and the peers' rows are its knock-ons.

The fleet contains everything, so a fleet row would chain independent incidents of several clusters into
one. It therefore never links groups: the groups are formed without fleet rows, then the fleet rows chain to each
other (near in time, same factor), and each fleet group joins the one group (among those with a row within ± 2 days,
same direction, same factor) whose rows carry the largest absolute relative effect, or stays a group of its own when
there is none. The factor matters here as it does below the fleet: fleet-1k seed 107's fleet allocation and goodput
of 10-21 (-10.6 %, -16.2 %, allocation the largest factor: h100-west drained by the mix shift) chained to the fleet's
power draw of 10-23 and with it joined h100-west's power cap of 10-22; the shift was scored as not detected.

Beyond nested scopes, six join rules (perf_assets/lib/incident_joins.py, each a plain function with the reason
the alert shows, column `joined_because`): a rollout's step seen late (a node's change days after a rollout on it,
the first of that metric there since, with no hardware evidence of its own) joins the rollout's group; a goodput
change whose largest factor moved on the same entity days later, inside its after window, joins that factor's
group, and so does one whose largest factor moved days earlier, inside its before window, while goodput did not; a
node's runtime goodput regression inside its own excess fault rate joins the rate's group (progress lost to the
faults: ``lost_to_faults``, when its whole group is such losses); a mix
shift's two sides (two clusters' allocation moving opposite ways by about as many GPUs) are one group; and a fleet
row prefers the group that came with its rollout (then one that is not all knock-ons) over the largest effect.

Root (the row that heads the group and its alert): the broadest entity below the fleet in the group,
because a broad change whose narrower children changed the same way is explained by them and is what an
owner acts on (a rollout on two nodes of h100: the h100 cluster, children the nodes; the fleet row a
child too). A fleet row is the root only of a group without narrower rows. When the row that would be
root is marked a mix effect (column `attribution` = 'mix', when a producer sets it), its change is a
composition effect and not explained by its children: the root is then the most specific entity of the
group instead. Node roots prefer a node with hardware evidence of its own (``_origin_nodes``). Within the root entity the headline metric is goodput when it moved, else a spine factor, else a companion; ties by the smallest p-value, then the largest effect.
"""

from __future__ import annotations

import hashlib
import json
from datetime import date, datetime

import pandas as pd

from perf_assets.lib.causes import SOFTWARE_DIMENSIONS
from perf_assets.lib.established import all_expected
from perf_assets.lib.incident_joins import (
    HARDWARE_METRICS,
    allocation_side,
    explained_apart,
    factor_moved_earlier,
    factor_moved_later,
    factor_still_before,
    first_change_since,
    goodput_still_until,
    job_peer_link,
    late_rollout_step,
    lost_to_faults,
    mix_shift_sides,
    origins,
    outside_rollout,
    peer_link_order,
    ramp_continued,
    rollout_day,
    rollout_nodes,
    separate_origins,
    shared_cause,
)
from perf_assets.lib.topology import GRAIN_RANK, Topology

GROUP_WINDOW_DAYS = 2
# Under an elevated fault rate its entities' availability falls and comes back as faults come and go: a change of
# these metrics in either direction inside the rate's span is explained by it (``ongoing``)
FAULT_RETURN_METRICS = ("availability",)
GROUP_COLUMNS = ["group_id", "root_regression_id", "is_root", "children", "joined_because"]


def as_day(value: object) -> date:
    """A date from a date, a datetime or an ISO text (its first 10 characters)."""
    if isinstance(value, datetime):
        return value.date()
    if isinstance(value, date):
        return value
    return date.fromisoformat(str(value)[:10])


SPINE = ("availability", "allocation", "runtime_goodput", "program_goodput")
# leaves and companions -> the spine factor they describe (anything else not named: program goodput when it is
# a companion of the GPUs' speed, else unknown)
FACTOR_OF_METRIC = {
    "down_share": "availability",
    "xid_node_faults": "availability",
    "xid_count": "availability",
    "idle_share": "allocation",
    "idle_fragmented_share": "allocation",
    "badput_share": "runtime_goodput",
    "checkpoint_save_share": "runtime_goodput",
    "clock_ratio": "program_goodput",
    "power_ratio": "program_goodput",
    "thermal_ok": "program_goodput",
    "probe_gemm_ratio": "program_goodput",
    "probe_hbm_bw_ratio": "program_goodput",
    "dcgm_tensor_active": "program_goodput",
}


def factor_of(row: dict) -> str | None:
    """The spine factor a row's change is a change of (None: unknown, links to any)."""
    metric = str(row.get("metric"))
    if metric in SPINE:
        return metric
    if metric == "goodput":
        top = row.get("top_factor")
        return str(top) if isinstance(top, str) and top in SPINE else None
    return FACTOR_OF_METRIC.get(metric)


def own_cause(row: dict) -> str | None:
    """The configuration change of the row's own entity that coincides with it (a component of
    ``SOFTWARE_DIMENSIONS`` in ``coinciding_changes``, else its top cause candidate when that is one), or None."""
    changes = row.get("coinciding_changes")
    try:
        listed = json.loads(changes) if isinstance(changes, str) and changes else []
    except ValueError:
        listed = []
    for change in listed:
        if isinstance(change, dict) and change.get("component") in SOFTWARE_DIMENSIONS:
            return f"{change['component']} {change.get('from')} -> {change.get('to')}"
    top = row.get("top_cause_dimension")
    if isinstance(top, str) and top in SOFTWARE_DIMENSIONS:
        return f"{top} {row.get('top_cause_value')}"
    return None


def onsets_near(a: dict, b: dict) -> bool:
    """False for a ramp and a step with a configuration change of its own (``own_cause``) whose change days (the
    ramp's onset, the step's split) are more than ``GROUP_WINDOW_DAYS`` apart: two incidents.

    A ramp's split lies days after its onset, and a step of another incident that begins inside the ramp splits
    near the ramp's split (fleet-1k: h100-west-n03's HBM decay from 10-05, split 10-09, and the NCCL rollout on
    eight nodes of its cluster, n03 among them, on 10-09). The steps a ramp causes itself (its node's pace, its
    cluster's power) also split near the ramp's split, days after its onset, but nothing was rolled out with them."""
    if a["as_day"] != a["_link_day"] and b["as_day"] == b["_link_day"]:
        ramp, step = a, b
    elif b["as_day"] != b["_link_day"] and a["as_day"] == a["_link_day"]:
        ramp, step = b, a
    else:
        return True
    return abs((ramp["as_day"] - step["as_day"]).days) <= GROUP_WINDOW_DAYS or step["_own_cause"] is None


def ramps_begin_together(a: dict, b: dict) -> bool:
    """Two ramps (each fitted onset, ``as_day``, before its split) whose onsets lie within ``GROUP_WINDOW_DAYS``: one
    decay, though the scans split them days apart (fleet-1k seed 2: h100-west-n03's HBM probe fell from 10-05, split
    10-11 on the node and 10-06 on one of its GPUs, which became a false alarm of its own)."""
    ramps = a["as_day"] != a["_link_day"] and b["as_day"] != b["_link_day"]
    return ramps and abs((a["as_day"] - b["as_day"]).days) <= GROUP_WINDOW_DAYS


def _headline_rank(row: dict) -> int:
    """Goodput first, then its spine factors, then the rest (companions: SM clock, power, probes): what an
    owner acts on is the loss of goodput, and a companion is evidence for it."""
    metric = str(row["metric"])
    return 0 if metric == "goodput" else 1 if metric in SPINE else 2


def _headline(rows: list[dict]) -> dict:
    """The row that speaks for rows of one entity: by `_headline_rank`, then the smallest p-value, then
    the largest |relative effect|, then the id (deterministic)."""
    return min(
        rows,
        key=lambda row: (
            _headline_rank(row),
            row.get("p_value") is None,
            row.get("p_value") or 0.0,
            -abs(row.get("relative_effect") or 0.0),
            row["regression_id"],
        ),
    )


def _origin_nodes(candidates: list[dict], members: list[dict]) -> list[dict]:
    """The node-grain root candidates of a group narrowed to the nodes with hardware evidence of their own (a row
    of ``HARDWARE_METRICS`` on the node or its GPUs: thermal state, HBM probe, faults), when some have it and some
    do not: a job runs at its slowest node's pace, so the node whose own measurements moved is the incident's origin
    and its job peers' slowdowns are its children (fleet-1k seed 1: h100-west-n03's HBM probe fell 11 % from 10-05;
    the group's root was job peer n06's program goodput of 10-13 and its cause "node n06")."""
    if not candidates or any(row["grain"] != "node" for row in candidates):
        return candidates
    evidence = {row["_node"] for row in members if str(row.get("metric")) in HARDWARE_METRICS and row["_node"]}
    origin = [row for row in candidates if row["_node"] in evidence]
    return origin if origin and len(origin) < len(candidates) else candidates


def _hardware_origin(members: list[dict]) -> list[dict]:
    """The rows of the one node a group began with, when all it began with is that node's own hardware measurement
    (``incident_joins.origins``: its thermal state or HBM probe, no configuration change): the cluster's and the job
    peers' rows are that node's knock-ons, and the node is what its owner acts on (fleet-1k seed 3: the cluster's
    program goodput of 10-19 headed h200-east-n20's thermal throttle, and the node carrying most of the cluster's
    fall was a job peer, h200-east-n22). Its node-grain rows, else its GPUs'; empty otherwise."""
    began = set().union(*(row["_origins"] for row in members if row["grain"] != "fleet"))  # fleet rows join later
    if len(began) != 1 or not next(iter(began)).startswith("hardware "):
        return []
    node = next(iter(began)).removeprefix("hardware ")
    own = [row for row in members if row["_node"] == node and row["grain"] == "node"]
    return own or [row for row in members if row["_node"] == node and row["grain"] == "gpu"]


def group_regressions(regressions: pd.DataFrame, topology: Topology | None = None) -> pd.DataFrame:
    """Per row of `regressions` (same index): group_id, root_regression_id, is_root, children (the
    group's other regression ids, sorted). Needs regression_id, grain, entity_id, metric, change_date,
    change_kind; uses p_value, relative_effect and attribution when present."""
    if regressions.empty:
        return pd.DataFrame(columns=GROUP_COLUMNS, index=regressions.index)
    topology = topology or Topology()
    rows = regressions.to_dict("records")
    index = list(regressions.index)
    for position, row in enumerate(rows):
        row["_pos"] = position
        row["as_day"] = as_day(row["change_date"])
        split = row.get("split_date")
        row["_link_day"] = as_day(split) if split is not None and not pd.isna(split) else row["as_day"]
        row["_factor"] = factor_of(row)
        row["_own_cause"] = own_cause(row)
        row["_node"] = (
            str(row["entity_id"])
            if row["grain"] == "node"
            else topology.gpu_node.get(str(row["entity_id"]))
            if row["grain"] == "gpu"
            else None
        )
        peers = row.get("job_peer_nodes")
        row["_job_peers"] = set(json.loads(peers)) if isinstance(peers, str) and peers else set()
        before = row.get("before_start_date")
        row["_before_start"] = as_day(before) if before is not None and not pd.isna(before) else None
        after = row.get("after_end_date")
        row["_after_end"] = as_day(after) if after is not None and not pd.isna(after) else None
        row["_rollout_nodes"] = rollout_nodes(row, row["_node"]) if row["_own_cause"] is not None else set()
        row["_rollout_day"] = rollout_day(row, row["_link_day"])
        row["_origins"] = origins(row)
    parent = list(range(len(rows)))

    def find(i: int) -> int:
        while parent[i] != i:
            parent[i] = parent[parent[i]]
            i = parent[i]
        return i

    def ongoing(condition: dict, other: dict) -> bool:
        """An elevated fault rate (shape 'rate') lasts from its onset to its window's end: a change of the other
        row inside that span in the rate's direction is explained by it (the availability dips of a bad batch's
        faults), and so is a ``FAULT_RETURN_METRICS`` change the other way (the node back up after them: fleet-1k
        seed 112's h100-east-n36, down on 10-11 to 10-13 in the bad batch of racks r9 and r10, availability +22 %
        on 10-14, an alert of its own inside the noise-burst decoy of that day)."""
        if condition.get("shape") != "rate":
            return False
        if other["change_kind"] != condition["change_kind"] and other["metric"] not in FAULT_RETURN_METRICS:
            return False
        end_day = condition["_after_end"] or condition["as_day"]
        return (condition["as_day"] - other["_link_day"]).days <= GROUP_WINDOW_DAYS and other["_link_day"] <= end_day

    def sibling_rate_conditions(a: dict, b: dict) -> bool:
        """Two excess fault rates (shape 'rate') of one metric on racks or nodes of the same cluster: one batch of
        hardware delivered to a cluster spans racks (fleet-1k's h100-east bad batch: racks r9 and r10)."""
        if a.get("shape") != "rate" or b.get("shape") != "rate" or a["metric"] != b["metric"]:
            return False
        cluster = topology.cluster_of(str(a["grain"]), str(a["entity_id"]))
        return cluster is not None and cluster == topology.cluster_of(str(b["grain"]), str(b["entity_id"]))

    def near(a: dict, b: dict) -> bool:
        """Same direction, and splits within the window with a ramp's onset near a step with a rollout of its own, or
        two ramps' onsets within the window (``ramps_begin_together``)."""
        return a["change_kind"] == b["change_kind"] and (
            (abs((a["_link_day"] - b["_link_day"]).days) <= GROUP_WINDOW_DAYS and onsets_near(a, b))
            or ramps_begin_together(a, b)
        )

    def linked_in_time(a: dict, b: dict) -> bool:  # between rows below the fleet: near, or inside a condition
        return near(a, b) or ongoing(a, b) or ongoing(b, a)

    def same_factor(a: dict, b: dict) -> bool:
        return a["_factor"] is None or b["_factor"] is None or a["_factor"] == b["_factor"]

    def nested(a: dict, b: dict) -> bool:
        sa, sb = (str(a["grain"]), str(a["entity_id"])), (str(b["grain"]), str(b["entity_id"]))
        if topology.contains(sa, sb):
            return not outside_rollout(a, b)
        if topology.contains(sb, sa):
            return not outside_rollout(b, a)
        return sibling_rate_conditions(a, b)

    local = [row for row in rows if row["grain"] != "fleet"]
    deferred_links: list[tuple[dict, dict]] = []
    for i, a in enumerate(local):
        for b in local[i + 1 :]:
            if ramp_continued(a, b) or (
                (a["grain"], a["entity_id"]) == (b["grain"], b["entity_id"])
                and linked_in_time(a, b)
                and same_factor(a, b)
            ):
                parent[find(a["_pos"])] = find(b["_pos"])
            elif linked_in_time(a, b) and same_factor(a, b) and (nested(a, b) or job_peer_link(a, b)):
                deferred_links.append((a, b))
    began_with: dict[int, set[str]] = {}  # per group (its root position): what it began with (incident_joins.origins)
    for row in local:
        began_with.setdefault(find(row["_pos"]), set()).update(row["_origins"])
    for a, b in sorted(deferred_links, key=lambda link: peer_link_order(*link)):
        first, second = find(a["_pos"]), find(b["_pos"])
        if first == second or separate_origins(began_with.get(first, set()), began_with.get(second, set())):
            continue
        parent[first] = second
        began_with[second] = began_with.get(second, set()) | began_with.pop(first, set())
    joined: dict[int, str] = {}  # position -> why a join rule of incident_joins.py put the row in its group
    rollouts = [row for row in local if row["_rollout_nodes"]]
    nested_of = {row["_pos"]: find(row["_pos"]) for row in local}  # the groups the links above formed
    nested_groups: dict[int, list[dict]] = {}
    for row in local:
        nested_groups.setdefault(nested_of[row["_pos"]], []).append(row)

    def join_by_rule(row: dict, candidates: list[dict], rule, unchanged, day_of, pick) -> None:
        """Join ``row`` to the group of the candidate a join rule of incident_joins.py accepts (``rule`` gives the
        reason, ``unchanged`` the no-change-between guard), ``pick`` (min or max) by ``day_of`` then position; not
        when the row's group, as the nested links formed it, has an explanation of its own."""
        if explained_apart(nested_groups[nested_of[row["_pos"]]]):
            return
        found = [(day_of(c), reason, c) for c in candidates if (reason := rule(row, c)) and unchanged(row, c, local)]
        if found:
            _, reason, target = pick(found, key=lambda item: (item[0], item[2]["_pos"]))
            parent[find(row["_pos"])] = find(target["_pos"])
            joined[row["_pos"]] = reason

    for late in local:  # a rollout's step seen late joins the rollout's incident (the latest such rollout)
        if late["_node"] is not None and late["_own_cause"] is None:
            join_by_rule(late, rollouts, late_rollout_step, first_change_since, lambda r: r["_rollout_day"], max)
    for early in local:  # a goodput change ahead of its largest factor's joins that factor's incident
        if str(early["metric"]) == "goodput" and early["_own_cause"] is None:
            join_by_rule(early, local, factor_moved_later, factor_still_before, lambda r: r["_link_day"], min)
    for late in local:  # a goodput change behind its largest factor's joins that factor's incident
        if str(late["metric"]) == "goodput" and late["_own_cause"] is None and late["_pos"] not in joined:
            join_by_rule(late, local, factor_moved_earlier, goodput_still_until, lambda r: r["_link_day"], max)
    fault_rates = [row for row in local if row.get("shape") == "rate" and row["grain"] == "node"]

    def all_lost_to_faults(late: dict, condition: dict, _rows: list[dict]) -> bool:
        """Every row of the late row's group is progress lost to a fault rate in the condition's group."""
        target = find(condition["_pos"])
        return all(
            any(lost_to_faults(member, rate) and find(rate["_pos"]) == target for rate in fault_rates)
            for member in nested_groups[nested_of[late["_pos"]]]
        )

    for late in local:  # progress lost to a node's faults joins the fault rate's incident (not yet joined elsewhere)
        if fault_rates and late["grain"] == "node" and late["_factor"] == "runtime_goodput":
            if late["_pos"] not in joined and find(late["_pos"]) == nested_of[late["_pos"]]:
                join_by_rule(late, fault_rates, lost_to_faults, all_lost_to_faults, lambda r: r["_link_day"], min)
    gpus = topology.gpus_per_cluster()  # for the mix shift's balance
    allocations = [row for row in local if allocation_side(row) is not None]
    for a in allocations:  # a mix shift's sending side joins its receiving side (the best balanced one)
        if a["change_kind"] != "regression":
            continue
        sides = [
            (reason, b)
            for b in allocations
            if (reason := mix_shift_sides(a, b, gpus.get(str(a["entity_id"])), gpus.get(str(b["entity_id"]))))
        ]
        if sides:
            reason, b = sides[0]
            parent[find(b["_pos"])] = find(a["_pos"])
            joined[b["_pos"]] = reason
    fleet = [row for row in rows if row["grain"] == "fleet"]
    for i, a in enumerate(fleet):  # fleet rows of one factor chain to each other first
        for b in fleet[i + 1 :]:
            if near(a, b) and same_factor(a, b):
                parent[find(a["_pos"])] = find(b["_pos"])
    fleet_roots = {find(row["_pos"]) for row in fleet}
    local_groups: dict[int, list[dict]] = {}
    for row in local:
        local_groups.setdefault(find(row["_pos"]), []).append(row)
    for root in sorted(fleet_roots):
        members = [row for row in fleet if find(row["_pos"]) == root]
        scores: dict[int, float] = {}
        for row in local:
            if any(near(row, member) and same_factor(row, member) for member in members):
                effect = abs(float(row.get("relative_effect") or 0.0))
                effect = effect if effect == effect else 0.0  # unknown (NaN) effect: no claim on the fleet row
                key = find(row["_pos"])
                scores[key] = max(scores.get(key, 0.0), effect)
        if scores:
            # a group that came with the fleet row's configuration change first, then one that is not all knock-ons,
            # then the largest effect (incident_joins.shared_cause)
            causes = {key: [shared_cause(member, local_groups[key]) for member in members] for key in scores}
            target = max(
                sorted(scores),
                key=lambda key: (
                    max((cause[0] for cause in causes[key] if cause), default=0),
                    not all_expected(local_groups[key]),
                    scores[key],
                ),
            )
            parent[find(root)] = target
            for member, cause in zip(members, causes[target]):
                if cause:
                    joined[member["_pos"]] = cause[1]
    groups: dict[int, list[dict]] = {}
    for row in rows:
        groups.setdefault(find(row["_pos"]), []).append(row)
    out = {}
    for members in groups.values():
        ids = sorted(str(row["regression_id"]) for row in members)
        group_id = hashlib.sha256("|".join(ids).encode()).hexdigest()[:12]
        below_fleet = [row for row in members if row["grain"] != "fleet"] or members
        broadest = min(GRAIN_RANK.get(str(row["grain"]), 9) for row in below_fleet)
        candidates = [row for row in below_fleet if GRAIN_RANK.get(str(row["grain"]), 9) == broadest]
        candidates = _origin_nodes(candidates, members)
        candidates = _hardware_origin(members) or candidates
        root = _headline(candidates)
        if str(root.get("attribution") or "") == "mix":
            finest = max(GRAIN_RANK.get(str(row["grain"]), 9) for row in members)
            root = _headline([row for row in members if GRAIN_RANK.get(str(row["grain"]), 9) == finest])
        root_entity = (root["grain"], root["entity_id"])
        root_rows = [row for row in members if (row["grain"], row["entity_id"]) == root_entity]
        root = _headline(root_rows) if str(root.get("attribution") or "") != "mix" else root
        root_id = str(root["regression_id"])
        for row in members:
            out[index[row["_pos"]]] = (
                group_id,
                root_id,
                str(row["regression_id"]) == root_id,
                [other for other in ids if other != root_id],
                joined.get(row["_pos"]),
            )
    return pd.DataFrame([out[i] for i in index], columns=GROUP_COLUMNS, index=regressions.index)
