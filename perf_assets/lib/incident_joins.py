"""Join rules beyond nested scopes: pieces of one incident that grouping.py's time-and-scope links leave apart.

Each rule is a plain function over rows of `regressions` as grouping.py prepares them (``_link_day`` the split
day, ``_before_start`` the first day of its before window or None, ``_after_end`` the last of its after window or
None, ``_node``, ``_factor``, ``_own_cause``,
``_rollout_nodes``, ``_rollout_day``: ``rollout_day``); each returns the reason the alert shows
for the join (column ``joined_because``), or None. grouping.py applies them after its own links.

* **A rollout's step seen late** (``late_rollout_step``). A node whose metric moved days after a configuration change
  rolled out on it, with no change of that metric detected on the node in between, is that rollout's step: its
  comparison's before window holds the rollout day, so the effect it measures is (at least in part) the rollout's.
  The incident of the rollout is already a group (the rows that came with the change: its cluster, its other nodes,
  the node's own companions); the late row joins it. Seen on `incidents` seed 1 (h200-n01's program goodput +14 %
  split on 10-26, three days after its torch 2.5.1 -> 2.6.0 of 10-23; the upgrade's group held the cluster and two
  other nodes) and fleet-1k seed 1 (h100-west-n06..n08's program goodput -10 to -11 % on 10-27, five days after
  their power limit 700 -> 500 W of 10-22: the cap's clock and power drops on 10-22 were one group, the program
  goodput fell only when the work came back after the mix shift's end on 10-26). Conditions, each needed: the same
  direction and factor (a spine factor's change, or unknown); the late row has no configuration change of its own
  within a day (``own_cause`` None: else it is its own rollout); the rollout's rows list the late row's node among
  the nodes that changed (``_rollout_nodes``: cause candidates' nodes, or the row's own node), and is not itself of
  a metric no rollout moves (``HARDWARE_METRICS``); the rollout's day (``rollout_day``: its first node's change)
  lies inside the late row's before window, more than ``GROUP_WINDOW_DAYS`` and at most ``LATE_DAYS`` before its
  split (a week: beyond it the level before the split is the rollout's level already). The caller adds the last
  two conditions: no change of that metric on the node between the two days (``first_change_since``), so a second
  drop after a rollout that was itself detected on the node stays its own incident; and the late row's group (as
  the nested links formed it) has no explanation of its own (``explained_apart``): no row of a metric no rollout
  moves (``hardware_evidence``: a thermal throttle, HBM decay, faults), so a hardware incident days after a rollout
  on its node stays its own, and no row that came with a configuration change of its own (a power cap on its job
  peers that day).
* **A goodput change ahead of its largest factor** (``factor_moved_later``). A goodput change splits where the
  product of its factors moved most; when a smaller factor stepped first (a node left idle with no demand) and its
  largest factor days later (a rollout slowing its jobs), the goodput split falls on the first and its comparison
  measures mostly the second. Then it is the factor's incident, seen early: fleet-1k seed 3, h200-east-n09-n11 idle
  with no eligible work from 10-13 (allocation 0.95-1.0 before, 0.70-0.80 after), their goodput split there at -15
  to -20 % with program goodput the largest factor (-16 % in log terms against allocation's -5 %), while their
  program goodput fell on 10-16 with the driver rollout to half the cluster; seed 1 the same on n10. Conditions,
  each needed: the same entity and direction; the goodput row's top factor (LMDI) is the other row's metric; it has
  no configuration change of its own; the factor's split lies more than ``GROUP_WINDOW_DAYS`` and at most
  ``LATE_DAYS`` after the goodput's, inside its after window; the caller adds that the factor has no row of its own
  from ``GROUP_WINDOW_DAYS`` before the goodput's split up to that one (``factor_still_before``: the factor did not
  move with its parent), and that the goodput row's group has no explanation of its own (``explained_apart``).
* **A goodput change behind its largest factor** (``factor_moved_earlier``), the same seen from the other side. A
  factor that steps while another factor of the same entity moves the other way for a few days (a cluster more
  allocated than usual just then) leaves goodput level at first; goodput splits days later, when the other factor
  comes back, and its comparison's before window holds the days before the factor's step: it measures mostly that
  step. Then it is the factor's incident, seen late: fleet-1k seed 107, h100-east's NCCL rollout moved program
  goodput on 10-13 (-10.5 %) while allocation ran at 0.87-0.90 on 10-13..10-15 (0.80-0.84 before), and the
  cluster's goodput split on 10-16 at -9.4 % with program goodput its largest factor: a group of its own, counted
  as an alert inside a noise-burst decoy's scope. Conditions, each needed: the same entity and direction; the
  goodput row's top factor (LMDI) is the other row's metric; it has no configuration change of its own; the
  factor's split lies more than ``GROUP_WINDOW_DAYS`` and at most ``LATE_DAYS`` before the goodput's, inside its
  before window; the caller adds that goodput has no other row on that entity from ``GROUP_WINDOW_DAYS`` before the
  factor's split up to this one (``goodput_still_until``: goodput did not move with its factor, so this is not a
  second change), and that the goodput row's group has no explanation of its own (``explained_apart``).
* **Progress lost to a node's faults, or its job peers'** (``lost_to_faults``). A node that faults kills the jobs on it; they restart
  from their last checkpoint, so the steps since then are done again and the restart (fault detection, requeue,
  restore) costs time: the job's runtime goodput falls, on every node of the job. An excess fault rate (shape
  'rate', ``xid_node_faults``) is a condition from its onset to its window's end, and a runtime goodput regression
  of the same node inside it is that condition's cost, not a second incident; the time-and-scope links keep them
  apart only because their factors differ (availability, runtime goodput). fleet-1k seed 119: the a100-west bad
  batch's n26 and n27 (fault rates from 10-11 and 10-12) lost 6.5 % and 5.2 % of runtime goodput on 10-16, two rows
  of their own (job peers) inside the noise-burst decoy. Conditions, each needed: the late row is a node's
  ``runtime_goodput`` (or its goodput whose largest factor that is) regression with no configuration change of its
  own; the condition is the fault-rate regression of the same node or of one of its job peers (``job_peer_nodes``:
  in one allocation with it around the late row's split, s30); the late row splits from ``GROUP_WINDOW_DAYS``
  before the rate's onset to its window's end. The job peers' part, fleet-1k seed 126: a100-west-n13, n14 and n22,
  no faults of their own, lost 3.1-3.4 % of runtime goodput from 10-17 for three days while their jobs ran with the
  bad batch's n25-n28 (fault rates from 10-11 to 10-14): three of their jobs ended at the second a batch node went
  down (n28 on 10-17 22:50, n25 on 10-18 08:59, n26 on 10-19 13:47); a group of their own inside the noise-burst
  decoy of 10-17. The caller adds that every row of the late row's group (as the
  nested links formed it) is such a cost of a fault rate in the condition's group, so a cluster's runtime goodput
  change (a checkpoint storage slowdown) is never pulled into a bad batch through one of its nodes, and that the
  group has no explanation of its own (``explained_apart``).
* **A mix shift's two sides** (``mix_shift_sides``). Work moving from one cluster to another lowers the allocation
  of one and raises the other's, on the same days, by about as many GPUs: opposite directions, so the time-and-scope
  links kept them apart, and the evaluation counted the receiving side aside (docs/evaluation.md) and the other
  as the incident. They are one incident with both sides as children (its root by grouping.py's rule: the
  broadest entity, goodput first). A side is a cluster allocation row, or a cluster goodput row whose factor is
  allocation and that carries the cluster's allocation levels (``allocation_side``; detection.ALLOCATION_SIDE_OF).
* **A fleet change and the incident that shares its cause** (``shared_cause``). A fleet row joins the group among
  those near it in time with the largest effect (grouping.py); a group with a row that came with the same rollout
  as the fleet row (the same component, from, to and first day: ``rollout_events``; the rollout that changed more
  nodes first) and has its factor is preferred over a larger effect without one: the
  fleet's torch-upgrade improvement of `incidents` seed 3 (10-24) went to h100-n04's improvement of 10-25, a
  job-peer knock-on, and was a false alarm next to the upgrade's own group. A group every row of which is a
  known knock-on (`expected_because`) claims a fleet row only when no other group does: a knock-on moves a node
  because of its peers, not the fleet.
"""

from __future__ import annotations

import json
from datetime import date, timedelta

from perf_assets.lib.causes import SOFTWARE_DIMENSIONS
from perf_assets.lib.established import expected_reason
from perf_assets.lib.rollout_canary import COHORT_GRAIN
from perf_assets.lib.topology import cohort_nodes

GROUP_WINDOW_DAYS = 2  # grouping.GROUP_WINDOW_DAYS (not imported: grouping imports this module)
LATE_DAYS = 7  # a rollout's step is seen late at most this many days after the rollout


def rollout_nodes(row: dict, node: str | None) -> set[str]:
    """The nodes on which the row's own configuration change (``grouping.own_cause``) happened, as the row lists
    them: the nodes of its cause candidates of a ``SOFTWARE_DIMENSIONS`` dimension, and its own node (node or GPU
    grain) when the row came with a change. Empty: the row lists none (a cluster row without candidates)."""
    try:
        candidates = (
            json.loads(row.get("cause_candidates") or "[]") if isinstance(row.get("cause_candidates"), str) else []
        )
    except ValueError:
        candidates = []
    nodes = {
        str(name)
        for candidate in candidates
        if isinstance(candidate, dict) and candidate.get("dimension") in SOFTWARE_DIMENSIONS
        for name in candidate.get("nodes") or []
    }
    return nodes | ({node} if node is not None else set())


def rollout_day(row: dict, link_day: date) -> date:
    """The day the row's own rollout began: the earliest first day of its ``rollout_events``, else its split day
    (``link_day``). A row whose metric moves days after the rollout (an HBM probe that came with a driver) splits
    later than the rollout it came with."""
    days = sorted(event[3] for event in rollout_events(row) if event[3] and event[3] != "None")
    return date.fromisoformat(days[0]) if days else link_day


def late_rollout_step(late: dict, rollout: dict) -> str | None:
    """The reason ``late`` is ``rollout``'s step seen late (module docstring), or None. Both rows prepared by
    grouping.py; the caller checks ``first_change_since`` as well. A knock-on that detection already explained
    (``expected_because``: a job peer's pace, down time, no demand) is not a step of the rollout: fleet-1k seed 1,
    h200-east-n25's program goodput of 10-14 came as it joined the jobs of rack r8's power-capped nodes, a week
    after n25's image rollout."""
    node = late["_node"]
    if node is None or late["_own_cause"] is not None or rollout["_own_cause"] is None:
        return None
    if expected_reason(late):
        return None
    if late["change_kind"] != rollout["change_kind"]:
        return None
    if late["_factor"] is not None and rollout["_factor"] is not None and late["_factor"] != rollout["_factor"]:
        return None
    if node not in rollout["_rollout_nodes"] or str(rollout.get("metric")) in HARDWARE_METRICS:
        return None
    day = rollout["_rollout_day"]
    gap = (late["_link_day"] - day).days
    in_window = late["_before_start"] is None or day >= late["_before_start"]
    if not (GROUP_WINDOW_DAYS < gap <= LATE_DAYS and in_window):
        return None
    return (
        f"{node}'s {rollout['_own_cause']} on {day} lies in this change's before window, {gap} days "
        f"before its split, with no change of {late['metric']} on {node} in between: the rollout's step, seen late"
    )


def _largest_factor_of(goodput: dict, factor_row: dict) -> str | None:
    """The factor ``factor_row`` is of ``goodput``, a goodput change with no configuration change of its own: the same
    entity and direction, and the goodput row's largest factor (LMDI) is ``factor_row``'s metric; else None."""
    if str(goodput.get("metric")) != "goodput" or goodput["_own_cause"] is not None:
        return None
    if (goodput["grain"], goodput["entity_id"]) != (factor_row["grain"], factor_row["entity_id"]):
        return None
    factor = goodput["_factor"]
    if factor in (None, "goodput") or factor_row["metric"] != factor:
        return None
    return factor if goodput["change_kind"] == factor_row["change_kind"] else None


def factor_moved_later(early: dict, factor_row: dict) -> str | None:
    """The reason ``early``, a goodput change, is the change of its largest factor that ``factor_row`` (the same
    entity's row of that factor) shows days later, or None (module docstring: a goodput change ahead of its largest
    factor). Both rows prepared by grouping.py; the caller checks ``factor_still_before`` and the early row's group."""
    factor = _largest_factor_of(early, factor_row)
    if factor is None:
        return None
    gap = (factor_row["_link_day"] - early["_link_day"]).days
    inside = early["_after_end"] is None or factor_row["_link_day"] <= early["_after_end"]
    if not (GROUP_WINDOW_DAYS < gap <= LATE_DAYS and inside):
        return None
    return (
        f"its largest factor, {factor}, split on {factor_row['_link_day']}, {gap} days after this change's split and "
        f"inside its after window, with no change of {factor} on {early['entity_id']} near this split: the factor's "
        f"step, seen early in its parent"
    )


def factor_still_before(early: dict, factor_row: dict, rows: list[dict]) -> bool:
    """No row of the factor on the early row's grain and entity split from ``GROUP_WINDOW_DAYS`` before the early
    row's split up to the factor row's: the factor did not move when its parent did."""
    return no_change_since(factor_row, early["_link_day"] - timedelta(days=GROUP_WINDOW_DAYS), rows)


def factor_moved_earlier(late: dict, factor_row: dict) -> str | None:
    """The reason ``late``, a goodput change, is the change of its largest factor that ``factor_row`` (the same
    entity's row of that factor) showed days before, or None (module docstring: a goodput change behind its largest
    factor). Both rows prepared by grouping.py; the caller checks ``goodput_still_until`` and the late row's group."""
    factor = _largest_factor_of(late, factor_row)
    if factor is None:
        return None
    gap = (late["_link_day"] - factor_row["_link_day"]).days
    inside = late["_before_start"] is None or factor_row["_link_day"] >= late["_before_start"]
    if not (GROUP_WINDOW_DAYS < gap <= LATE_DAYS and inside):
        return None
    return (
        f"its largest factor, {factor}, split on {factor_row['_link_day']}, {gap} days before this change's split and "
        f"inside its before window, with no change of goodput on {late['entity_id']} since: the factor's step, seen "
        f"late in its parent"
    )


FAULT_RATE_METRICS = ("xid_node_faults",)  # an excess fault rate whose faults restart the node's jobs


def lost_to_faults(late: dict, condition: dict) -> str | None:
    """The reason ``late``, a node's runtime goodput regression, is progress lost to the faults of ``condition``, the
    excess fault rate of the same node or of one of its job peers, or None (module docstring: progress lost to a
    node's faults). Both rows prepared by grouping.py; the caller checks the late row's group."""
    runtime = str(late.get("metric")) in ("runtime_goodput", "goodput") and late["_factor"] == "runtime_goodput"
    if not runtime or late["grain"] != "node" or late["_own_cause"] is not None:
        return None
    if condition.get("shape") != "rate" or str(condition.get("metric")) not in FAULT_RATE_METRICS:
        return None
    if condition["grain"] != "node":
        return None
    own = condition["entity_id"] == late["entity_id"]
    if not own and str(condition["entity_id"]) not in late["_job_peers"]:
        return None  # neither its own node's faults nor a job peer's
    if late["change_kind"] != "regression" or condition["change_kind"] != "regression":
        return None
    end_day = condition["_after_end"] or condition["_link_day"]
    if not condition["_link_day"] - timedelta(days=GROUP_WINDOW_DAYS) <= late["_link_day"] <= end_day:
        return None
    rose = (
        f"fault rate rose from {condition['_link_day']} ({condition['metric']} "
        f"{float(condition['relative_effect']):+.0%})"
    )
    if own:
        return f"progress lost to faults: {late['entity_id']}'s {rose}, and a fault restarts its jobs from their last checkpoint"
    return (
        f"progress lost to a job peer's faults: {late['entity_id']} ran jobs with {condition['entity_id']}, whose {rose}; "
        "a fault restarts the whole job from its last checkpoint"
    )


def goodput_still_until(late: dict, factor_row: dict, rows: list[dict]) -> bool:
    """No other goodput row of the late row's grain and entity split from ``GROUP_WINDOW_DAYS`` before the factor
    row's split up to the late row's: the goodput did not move when its factor did."""
    return no_change_since(late, factor_row["_link_day"] - timedelta(days=GROUP_WINDOW_DAYS), rows)


def first_change_since(late: dict, rollout: dict, rows: list[dict]) -> bool:
    """No other row of the late row's grain, entity and metric split between ``GROUP_WINDOW_DAYS`` before the
    rollout and the late row's split: the late row is the first change of that metric there since the rollout."""
    return no_change_since(late, rollout["_rollout_day"] - timedelta(days=GROUP_WINDOW_DAYS), rows)


def no_change_since(row: dict, since: date, rows: list[dict]) -> bool:
    """No other row of ``row``'s grain, entity and metric split on or after ``since`` and before ``row``'s split."""
    key = (row["grain"], row["entity_id"], row["metric"])
    return not any(
        other is not row
        and (other["grain"], other["entity_id"], other["metric"]) == key
        and since <= other["_link_day"] < row["_link_day"]
        for other in rows
    )


def rollout_sizes(row: dict) -> dict[tuple[str, str, str, str], int]:
    """The configuration changes a row came with (``coinciding_changes``), each as (component, from, to, the day of
    its first node's change), with the number of nodes it changed: one rollout is one event; the same versions rolled
    out on another cluster on another day are another (fleet-1k rolls cuda 12.4 -> 12.6 out on h200-east on 10-16 and
    on a100-west on 10-21). ``coinciding_changes`` as `regressions` stores it (JSON), or parsed, as an incident or an
    alert holds it (alerts.py)."""
    changes = row.get("coinciding_changes")
    try:
        listed = json.loads(changes) if isinstance(changes, str) and changes else changes
    except ValueError:
        listed = []
    sizes = {}
    for change in listed if isinstance(listed, list) else []:
        if isinstance(change, dict) and change.get("component") in SOFTWARE_DIMENSIONS:
            event = (
                str(change["component"]),
                str(change.get("from")),
                str(change.get("to")),
                str(change.get("first_at"))[:10],
            )
            sizes[event] = int(change.get("nodes") or 0)
    return sizes


def rollout_events(row: dict) -> set[tuple[str, str, str, str]]:
    """The rollouts a row came with (``rollout_sizes`` without the sizes)."""
    return set(rollout_sizes(row))


def shared_cause(fleet_row: dict, rows: list[dict]) -> tuple[int, str] | None:
    """Why a fleet row belongs with ``rows`` (a group's): one of them came with the same rollout (component, versions
    and first day: ``rollout_events``) and has the same factor (or one unknown). Returns (the nodes that rollout
    changed as the fleet row counts them, the reason), or None when no row shares one: a fleet change that coincides
    with a 40-node rollout and a 24-node one belongs with the larger first (fleet-1k seed 1, 10-13: h100-east's NCCL
    and image rollout on 40 nodes, a null firmware rollout on 24 nodes of h100-west)."""
    sizes = rollout_sizes(fleet_row)
    best = None
    for other in rows:
        if (
            fleet_row["_factor"] is not None
            and other["_factor"] is not None
            and fleet_row["_factor"] != other["_factor"]
        ):
            continue
        for event in sorted(set(sizes) & rollout_events(other)):
            if best is None or sizes[event] > best[0]:
                component, old, new, day = event
                best = (
                    sizes[event],
                    f"the fleet's change came with {component} {old} -> {new} (from {day}, {sizes[event]} nodes), as "
                    f"{other['grain']} {other['entity_id']}'s {other['metric']} of {other['_link_day']} in this incident",
                )
    return best


MIX_BALANCE = 1 / 3  # the smaller side of a mix shift moves at least this share of the larger side's GPUs


def allocation_side(row: dict) -> tuple[float, float] | None:
    """The allocation levels (before, after) of a row that is a cluster's allocation side, or None when it is not one.

    A cluster ``allocation`` row is (its levels); so is a cluster ``goodput`` row whose factor is allocation and whose
    `fleet_split` carries the cluster's allocation over the row's windows (detection.ALLOCATION_SIDE_OF: the scan found
    the drop in goodput while the unevenly drained allocation series itself was no change)."""
    if row.get("grain") != "cluster":
        return None
    if row.get("metric") == "allocation":
        return row.get("before_level"), row.get("after_level")
    text = row.get("fleet_split")
    if row.get("metric") != "goodput" or row.get("top_factor") != "allocation" or not isinstance(text, str) or not text:
        return None
    split = json.loads(text)
    if "allocation_before" not in split or "allocation_after" not in split:
        return None
    return split["allocation_before"], split["allocation_after"]


def mix_shift_sides(a: dict, b: dict, gpus_a: int | None, gpus_b: int | None) -> str | None:
    """The reason two cluster allocation sides (``allocation_side``) are a mix shift's sending and receiving sides,
    or None.

    Work that moves from one cluster to another at about constant demand lowers the allocation of one and raises
    the other's on the same days: opposite directions, splits within ``GROUP_WINDOW_DAYS``, two clusters, and about the
    same number of GPUs moving (a rollout on a few nodes that coincides does not matter: a rollout does not move
    allocation; fleet-1k's shift began with a driver rollout on a100-west and a power cap on four h100-west nodes): the allocated GPUs each
    side gained or lost, (after - before level) x the cluster's GPUs (``gpus_a``, ``gpus_b``, from the inventory;
    the allocation level is over available capacity, so this is exact when nothing is down and a little low when
    GPUs are), the smaller at least ``MIX_BALANCE`` of the larger. `incidents` seeds 1 and 3: h100 -11.4 and -13.9
    GPUs, a100b +12.2 and +11.2 on 10-20/10-21; fleet-1k seed 1: h100-west -76.7, a100-west +40.7 at the shift's
    start (a100-west was 82 % allocated already: it took what it had room for), -41.4 and +86.2 at its end on 10-26.
    Unknown GPU counts or levels: no join (unknown is not a balance)."""
    if a["grain"] != "cluster" or b["grain"] != "cluster" or a["entity_id"] == b["entity_id"]:
        return None
    levels = {id(row): allocation_side(row) for row in (a, b)}
    if None in levels.values() or a["change_kind"] == b["change_kind"]:
        return None
    if abs((a["_link_day"] - b["_link_day"]).days) > GROUP_WINDOW_DAYS or not gpus_a or not gpus_b:
        return None
    moved = []
    for row, gpus in ((a, gpus_a), (b, gpus_b)):
        before, after = levels[id(row)]
        if before is None or after is None or before != before or after != after:
            return None
        moved.append((after - before) * gpus)
    small, large = sorted(abs(value) for value in moved)
    if large <= 0 or small < MIX_BALANCE * large:
        return None
    sides = sorted(zip(moved, (a, b)), key=lambda item: item[0])
    (lost, sender), (gained, receiver) = sides
    return (
        f"work moved from {sender['entity_id']} to {receiver['entity_id']}: {sender['entity_id']} allocated "
        f"{-lost:.1f} fewer GPUs on average from {sender['_link_day']}, {receiver['entity_id']} {gained:.1f} more "
        f"from {receiver['_link_day']} (a mix shift's sending and receiving sides)"
    )


def mix_shift_fleet_split(rows: list[dict]) -> tuple[dict, dict] | None:
    """The fleet's split of a mix shift's group: (the side's row, its `fleet_split`), or None when no cluster
    allocation row of the group carries one.

    Each cluster allocation change carries the fleet goodput's split over a week either side of its own change day
    (detection.FLEET_SPLIT). The shift's is that of the side that moved first (the onset of the move; the later
    side's split day is a late view of the same move, with other clusters' changes since then in its after window:
    fleet-1k seed 1, a100-west's rise split on 10-20, the shift's start, mix -3.9 % vs rate -3.3 % and occupancy
    -3.1 %, as the simulator's ground truth; h100-west's fall split on 10-22, in the trough, occupancy -5.4 %),
    then the larger fleet change."""
    sides = []
    for row in rows:
        text = row.get("fleet_split")
        if allocation_side(row) is not None and isinstance(text, str) and text:
            split = json.loads(text)
            if split.get("attribution"):
                sides.append((row, split))
    if not sides:
        return None
    row, split = min(
        sides, key=lambda side: (side[1]["change_date"], -abs(float(side[1].get("relative_change") or 0.0)))
    )
    clusters = {str(r["entity_id"]) for r in rows if allocation_side(r) is not None}
    return row, pair_split(split, sorted(clusters))


SPLIT_PARTS = ("mix_effect", "rate_effect", "occupancy_effect")


def pair_split(split: dict, clusters: list[str]) -> dict:
    """The fleet split with the shift's own part: the sums of the mix, rate and occupancy contributions of the
    group's clusters (``pair_*``, relative to the fleet's level before, like the fleet's own) and the attribution
    they give; the fleet-wide figures stay under their names, the fleet-wide attribution as
    ``fleet_attribution``. The other clusters' contributions over the same windows are other incidents' (fleet-1k
    seed 3: h200-east's driver rollout of 10-16 fell in the shift's before window, rate -2.9 % of the fleet's -5.3 %;
    over h100-west and a100-west, mix -3.4 %, rate -1.5 %, occupancy -1.6 %). Unchanged when fewer than two
    clusters, or a cluster the split does not list (``segments`` keeps the largest contributors)."""
    segments = split.get("segments")
    segments = json.loads(segments) if isinstance(segments, str) else segments or []
    mine = [segment for segment in segments if str(segment.get("segment")) in clusters]
    if len(clusters) < 2 or len(mine) != len(clusters):
        return split
    parts = {}
    for part in SPLIT_PARTS:
        values = [segment.get(part) for segment in mine]
        if all(isinstance(value, (int, float)) and value == value for value in values):
            parts[part] = float(sum(values))
    if "mix_effect" not in parts or "rate_effect" not in parts:
        return split
    attribution = max(parts, key=lambda part: abs(parts[part])).removesuffix("_effect")
    return split | {
        "pair": clusters,
        **{f"pair_{part}": value for part, value in parts.items()},
        "fleet_attribution": split.get("attribution"),
        "attribution": attribution,
    }


HARDWARE_METRICS = ("thermal_ok", "probe_hbm_bw_ratio", "xid_node_faults", "xid_count")


def explained_apart(rows: list[dict]) -> str | None:
    """Why the late row's group (as the nested links formed it) is an incident with an explanation of its own, or
    None: hardware evidence (``hardware_evidence``), or a row that came with a configuration change of its own
    (fleet-1k seed 2: h100-west-n13's power draw fell on 10-22 with its job peers n05-n08, whose power limit was cut
    that day; n13's image rollout of 10-18 lies in its before window, but the power cap explains it)."""
    if hardware_evidence(rows):
        return "hardware evidence"
    caused = sorted({row["_own_cause"] for row in rows if row["_own_cause"] is not None})
    return f"its own configuration change ({caused[0]})" if caused else None


def hardware_evidence(rows: list[dict]) -> bool:
    """A regression or improvement of a metric that a configuration rollout does not move among ``rows``: a thermal
    throttle (``thermal_ok``), HBM bandwidth (``probe_hbm_bw_ratio``), faults (``xid_*``). A late change with such
    evidence is a hardware incident of its own, not a rollout's step seen late (fleet-1k seed 1: a100-west-n05's
    thermal throttle of 10-26, five days after the node's driver rollout, came with its GPU's ``thermal_ok``)."""
    return any(str(row.get("metric")) in HARDWARE_METRICS for row in rows)


JOB_PEER_DAYS = 1  # a job's peers slow with the node on the same days: splits at most this far apart
OWN_MEASUREMENTS = HARDWARE_METRICS + ("clock_ratio", "probe_gemm_ratio", "down_share")


def _row_nodes(row: dict) -> set[str]:
    """The nodes a row stands for in job co-membership: its node (a node's, a GPU's), a cohort's nodes, else none."""
    if row["_node"] is not None:
        return {row["_node"]}
    return cohort_nodes(str(row["entity_id"])) if row["grain"] == COHORT_GRAIN else set()


def job_peer_link(a: dict, b: dict) -> bool:
    """Job co-membership joins two node (or GPU) rows only when one of them is of a metric the job's pace moves.

    A synchronous job runs at its slowest node's pace, so a node's change shows on its job peers' goodput, program
    goodput and power draw (their GPUs wait): that is the knock-on the link is for. What a node measures of its own
    hardware (``OWN_MEASUREMENTS``: thermal state, SM clock, the GEMM and HBM probes, faults, down time) its peers'
    jobs do not move, so two such rows on two nodes are two nodes' own changes, not one job's: fleet-1k seed 1,
    h200-east-n20's thermal throttle (its GPUs' ``thermal_ok``, SM clock and GEMM probe fell on 10-19) and
    h200-east-n10's HBM decay (its HBM probe, split 10-19) shared jobs and were one group, which matched neither.

    The peers' change comes on the same days as the node's: splits more than ``JOB_PEER_DAYS`` apart are not one
    job's pace (the ± 2 days of ``GROUP_WINDOW_DAYS`` let a chain of job peers walk from one incident to the next).

    A rollout cohort's row (``rollout_canary``: the nodes that took one configuration change, against their untouched
    peers) stands for its nodes: a node whose job peers include one of them is linked to it (fleet-1k seed 116: the
    image stall on h200-east-n25..n28 of 10-07, seen only by its cohort's canary, -3.9 %; h200-east-n29, n30 and n31
    ran jobs with those nodes and lost 4.4-6.0 % of program goodput that day, a group of their own inside the
    diurnal decoy)."""
    a_nodes, b_nodes = _row_nodes(a), _row_nodes(b)
    if not a_nodes or not b_nodes or a_nodes & b_nodes:
        return False
    if not (b_nodes & a["_job_peers"]) and not (a_nodes & b["_job_peers"]):
        return False
    if abs((a["_link_day"] - b["_link_day"]).days) > JOB_PEER_DAYS:
        return False
    return str(a.get("metric")) not in OWN_MEASUREMENTS or str(b.get("metric")) not in OWN_MEASUREMENTS


# a node's own measurements that say where an incident began; fault counts are not among them: a batch's faults
# spread over nodes and racks are one condition (grouping's rate and rack links), not one origin per node
MEASURED_ORIGINS = ("thermal_ok", "probe_hbm_bw_ratio")


def origins(row: dict) -> set[str]:
    """What a row says an incident began with: the configuration change its cause analysis ranks first (a
    ``SOFTWARE_DIMENSIONS`` top cause, e.g. "driver 560.35.03"; a change that only coincides, like a null firmware
    rollout on the day a job peer's pace fell, is none) or its node's own hardware measurement (a ``MEASURED_ORIGINS``
    row: thermal state, HBM probe). A job peer's pace (goodput, program goodput, power) is none: it is a knock-on of
    whatever its job's slowest node had."""
    top = row.get("top_cause_dimension")
    found = {f"config {row['_rollout_day']}"} if isinstance(top, str) and top in SOFTWARE_DIMENSIONS else set()
    if str(row.get("metric")) in MEASURED_ORIGINS and row.get("_node"):
        found.add(f"hardware {row['_node']}")
    return found


def peer_link_order(a: dict, b: dict) -> tuple:
    """The order in which links between entities (containment, job co-membership, sibling fault rates) are applied:
    nearest split days first, then in time (a knock-on follows its cause)."""
    return (abs((a["_link_day"] - b["_link_day"]).days), min(a["_link_day"], b["_link_day"]), a["_pos"], b["_pos"])


def separate_origins(first: set[str], second: set[str]) -> bool:
    """True when two groups each began with something of their own and with nothing in common (``origins``): a link
    between entities (containment, job co-membership) does not merge them. A node runs one job after another, and its peers of two jobs change with
    two incidents a day or two apart: single linkage through it chained both into one group. fleet-1k seed 2:
    h200-east-n29's program goodput fell on 10-17 with its job peers n05..n08 of the driver rollout of 10-16, and
    h200-east-n28, its peer in a later job, fell on 10-18 with h200-east-n20's thermal throttle; the link n29-n28 made
    the throttle a child of the rollout, and it matched no label. Knock-ons without an origin of their own still join
    the first group they link to (seed 1: h100-west-n10, n13..n15's program goodput of 10-28, peers of the nodes of
    rack r2 whose power limit fell on 10-22)."""
    return bool(first) and bool(second) and not (first & second)


def outside_rollout(broad: dict, narrow: dict) -> bool:
    """True when ``narrow`` (a node or GPU row inside ``broad``'s cluster or rack) is no part of ``broad``'s rollout:
    ``broad`` came with a configuration change (``_own_cause``) whose changed nodes it lists (``_rollout_nodes``),
    ``narrow``'s node is not among them, ``narrow`` came with no change of its own, and it split on another day.
    Such a row is a change of its own node that only happens to lie inside the rolled-out cluster within
    ``GROUP_WINDOW_DAYS``, and the containment link would make the cluster row a hub that absorbs every such change:
    fleet-1k seed 2, h200-east's driver rollout of 10-16 (h200-east-n01..n16) took h200-east-n17..n20's and
    n25..n28's program goodput fall of 10-18, and with it h200-east-n20's thermal throttle of 10-19."""
    if broad["_own_cause"] is None or not broad["_rollout_nodes"] or narrow["_own_cause"] is not None:
        return False
    node = narrow["_node"]
    return node is not None and node not in broad["_rollout_nodes"] and narrow["_link_day"] != broad["_link_day"]


def ramp_continued(a: dict, b: dict) -> bool:
    """Two ramps (a row whose fitted onset, ``as_day``, lies before its split, ``_link_day``) of one entity and metric,
    the same direction, the later's onset within ``GROUP_WINDOW_DAYS`` of the earlier's split: one decay the scan saw
    as successive pieces. fleet-1k seed 1: h100-west-n03's HBM probe fell from 10-05 (split 10-10) and again from
    10-11 (split 10-13); the second piece was a false alarm of its own (or, before the job-peer day rule, part of the
    NCCL subset's group)."""
    if (a["grain"], a["entity_id"], a["metric"], a["change_kind"]) != (
        b["grain"],
        b["entity_id"],
        b["metric"],
        b["change_kind"],
    ):
        return False
    if a["as_day"] == a["_link_day"] or b["as_day"] == b["_link_day"]:
        return False
    first, later = sorted((a, b), key=lambda row: row["_link_day"])
    return 0 <= (later["as_day"] - first["_link_day"]).days <= GROUP_WINDOW_DAYS
