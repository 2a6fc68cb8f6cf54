"""Score detection and attribution against the simulator's labeled incidents (labels.json).

The protocol is docs/evaluation.md. In short: the rows of `regressions` are grouped into incident
groups (perf_assets/lib/grouping.py); a group matches a real (non-decoy) label when one of its rows'
scope overlaps the label's scope and that row's change day is within 2 days of the label's start;
one group matches at most one label and one label at most one group (greedy, nearest day first);
every group that matches no label is a false alarm. Unknown is never zero: a figure without a
denominator is null with a reason.
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass
from datetime import date, datetime, timedelta
from pathlib import Path

import pandas as pd

from perf_assets.lib.causes import CANDIDATE_DIMENSIONS
from perf_assets.lib.detection import SPINE_FACTORS
from perf_assets.lib.established import all_expected, expected_reason, not_established
from perf_assets.lib.grouping import group_regressions
from perf_assets.lib.incident_joins import mix_shift_fleet_split
from perf_assets.lib.topology import Topology

MATCH_DAYS = 2
OPPOSITE = {"regression": "improvement", "improvement": "regression"}
Z95 = 1.959963984540054
MAGNITUDE_BUCKETS = ((0.05, "<5%"), (0.10, "5-10%"), (math.inf, ">=10%"))


def load_labels(path: Path) -> list[dict]:
    if not path.exists():
        return []
    return json.loads(path.read_text(encoding="utf-8")).get("incidents", [])


def load_label_file(path: Path) -> dict:
    if not path.exists():
        return {}
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except json.JSONDecodeError as error:
        raise ValueError(f"labels file {path} is not valid JSON: {error}") from error


def wilson(successes: int, n: int, z: float = Z95) -> list[float] | None:
    """Wilson score interval of successes/n (None when n = 0: no denominator)."""
    if n <= 0:
        return None
    p = successes / n
    denominator = 1 + z * z / n
    centre = (p + z * z / (2 * n)) / denominator
    half = z * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n)) / denominator
    return [max(0.0, centre - half), min(1.0, centre + half)]


def proportion(successes: int, n: int, reason: str) -> dict:
    if n <= 0:
        return {"value": None, "successes": successes, "n": n, "ci95": None, "reason": reason}
    return {"value": successes / n, "successes": successes, "n": n, "ci95": wilson(successes, n)}


def f1(precision: dict, recall: dict) -> dict:
    p, r = precision["value"], recall["value"]
    if p is None or r is None:
        return {"value": None, "ci95": None, "reason": "precision or recall has no denominator"}
    value = 0.0 if p + r == 0 else 2 * p * r / (p + r)
    return {"value": value, "ci95": None, "reason_ci": "F1 is not a binomial proportion: no Wilson interval"}


def _day(value: object) -> date:
    """A date from a date, a datetime or a Timestamp (a Timestamp is a date too: it becomes its date, so that days
    subtract), or an ISO text."""
    if isinstance(value, datetime):
        return value.date()
    return value if isinstance(value, date) else pd.Timestamp(value).date()


def _label_day(text: str | None) -> date | None:
    return date.fromisoformat(text[:10]) if text else None


def is_recovery(label: dict, direction: str, grain: str, entity: str, day: date, topology: Topology) -> bool:
    """A change of ``direction`` on (grain, entity) on ``day`` is the label's recovery: the other direction than the
    label's, in its scope, within MATCH_DAYS of its `end` (a throttled GPU cooling down)."""
    end = _label_day(label.get("end"))
    return (
        end is not None
        and label.get("direction") in OPPOSITE
        and direction == OPPOSITE[label["direction"]]
        and overlaps(grain, entity, label, topology)
        and abs((day - end).days) <= MATCH_DAYS
    )


def receiving_day(label: dict, direction: str) -> date | None:
    """The day near which a change of ``direction`` on a mix shift's receiving cluster (its `cluster`) is its
    receiving side: its start for the other direction (the work arriving), its end for its own (the work leaving);
    None for a label that is no mix shift, or without that day."""
    if label.get("attribution") != "mix" or label.get("direction") not in OPPOSITE:
        return None
    return _label_day(
        {OPPOSITE[label["direction"]]: label["start"], label["direction"]: label.get("end")}.get(direction)
    )


def magnitude_bucket(label: dict) -> str:
    if label.get("decoy"):
        return "decoy"
    change = label.get("expected_relative_change")
    if change is None:
        return "unknown"
    size = abs(float(change))
    return next(name for limit, name in MAGNITUDE_BUCKETS if size < limit)


def _scope(label: dict) -> tuple[set[str], set[str], set[str]]:
    scope = label.get("scope") or {}
    clusters = set(scope.get("clusters") or ([label["cluster"]] if label.get("cluster") else []))
    nodes = set(scope.get("nodes") or label.get("nodes") or [])
    gpus = set(scope.get("gpus") or [])
    return clusters, nodes, gpus


def overlaps(grain: str, entity: str, label: dict, topology: Topology) -> bool:
    """Does a detected entity's scope overlap the label's? A fleet row overlaps only a fleet-grain label
    (the fleet contains everything: it would overlap every label)."""
    clusters, nodes, gpus = _scope(label)
    if grain == "fleet":
        return label.get("grain") == "fleet"
    if grain == "cluster":
        return entity in clusters
    if grain in ("rack", "cohort"):  # a set of nodes: a rack, or the nodes that took one rollout
        members = topology.nodes_of(grain, entity)
        return bool(members & nodes) if nodes else topology.cluster_of(grain, entity) in clusters
    if grain == "node":
        return entity in nodes if nodes else topology.node_cluster.get(entity) in clusters
    if grain == "gpu":
        if gpus:
            return entity in gpus
        node = topology.gpu_node.get(entity)
        return node in nodes if nodes else topology.node_cluster.get(node) in clusters
    return False


@dataclass
class Group:
    group_id: str
    direction: str
    root: dict
    rows: list[dict]

    @property
    def change_date(self) -> date:
        return self.root["_day"]

    def top_factor(self) -> str | None:
        root_rows = [
            r for r in self.rows if (r["grain"], r["entity_id"]) == (self.root["grain"], self.root["entity_id"])
        ]
        goodput = [r for r in root_rows if r["metric"] == "goodput" and r.get("top_factor")]
        if goodput:
            return goodput[0]["top_factor"]
        if self.root["metric"] in SPINE_FACTORS:
            return self.root["metric"]
        return self.root.get("top_factor")

    def top_cause(self) -> dict | None:
        ordered = [self.root] + sorted(
            (r for r in self.rows if r is not self.root),
            key=lambda r: (r.get("p_value") is None, r.get("p_value") or 0),
        )
        for row in ordered:
            candidates = json.loads(row.get("cause_candidates") or "[]") if row.get("cause_candidates") else []
            if candidates:
                top = dict(candidates[0])
                top["tied"] = len(candidates) > 1 and candidates[1].get("did_effect") == top.get("did_effect")
                return top
        return None

    def candidates(self) -> list[dict]:
        out = []
        for row in self.rows:
            out.extend(json.loads(row.get("cause_candidates") or "[]") if row.get("cause_candidates") else [])
        return out

    def summary(self) -> dict:
        return {
            "group_id": self.group_id,
            "direction": self.direction,
            "root": f"{self.root['grain']}/{self.root['entity_id']}/{self.root['metric']}",
            "change_date": self.change_date.isoformat(),
            "rows": len(self.rows),
        }


def detected_groups(regressions: pd.DataFrame, topology: Topology) -> list[Group]:
    if regressions.empty:
        return []
    frame = regressions.reset_index(drop=True)
    grouped = frame.join(group_regressions(frame, topology))
    groups = []
    for group_id, part in grouped.groupby("group_id", sort=False):
        rows = part.to_dict("records")
        for row in rows:
            row["_day"] = _day(row["change_date"])
        root = next(row for row in rows if row["is_root"])
        groups.append(Group(str(group_id), str(root["change_kind"]), root, rows))
    return sorted(groups, key=lambda g: (g.change_date, g.group_id))


def scope_fit(group_nodes: set[str], label: dict) -> float:
    """How well a group's nodes fit a label's: |common| / |either| (Jaccard), 0 when either is unknown. Orders
    (group, label) pairs at the same |delay| (docs/evaluation.md, Matching, step 3): fleet-1k seed 2, rack
    a100-west-r7's excess fault rate (its 4 nodes, the bad batch's) split a day after the checkpoint slowdown of the
    whole cluster began and a day before the bad batch did; a 2-row node group and the 30-row cluster group of the
    torch upgrade split on the upgrade's day."""
    nodes = set((label.get("scope") or {}).get("nodes") or label.get("nodes") or [])
    if not group_nodes or not nodes:
        return 0.0
    return len(group_nodes & nodes) / len(group_nodes | nodes)


def _same_value(found: object, expected: object) -> bool:
    if isinstance(expected, list):
        return any(_same_value(found, item) for item in expected)
    try:
        return math.isclose(float(found), float(expected))  # power_limit_w "600" vs 600
    except (TypeError, ValueError):
        return str(found) == str(expected)


MART_METRIC_OF_BASIS = {"allocated_gs": "running_goodput_ref", "allocated": "running_goodput", "installed": "goodput"}


def pair_text(fleet_split: dict) -> str:
    """The shift's own part of a fleet split (``incident_joins.pair_split``), as text; empty without one."""
    if not fleet_split.get("pair"):
        return ""
    parts = ", ".join(
        f"{part} {float(fleet_split[f'pair_{part}_effect']):+.1%}"
        for part in ("mix", "rate", "occupancy")
        if f"pair_{part}_effect" in fleet_split
    )
    return (
        f"; over the pair's clusters ({', '.join(fleet_split['pair'])}): {parts}, reported as "
        f"{fleet_split['attribution']} (all clusters: {fleet_split.get('fleet_attribution')})"
    )


def _mix_reported(group: Group, mix_rate: pd.DataFrame | None, basis: str | None = None) -> tuple[bool | None, str]:
    """Whether the fleet change of a group is reported as a mix effect; None when that cannot be assessed.

    A group that holds a mix shift's two sides (cluster rows of two clusters going opposite ways, joined by grouping:
    incident_joins.mix_shift_sides) is assessed on the fleet goodput's split that its cluster allocation rows carry
    over their own windows (regressions.fleet_split; incident_joins.mix_shift_fleet_split: the side that moved
    first), summed over the pair's clusters (incident_joins.pair_split): a fleet row's split over all clusters holds
    the other clusters' incidents of those days as rate (fleet-1k seed 107: fleet goodput of 10-21, rate -8.0 % over
    a 20-day before window with three rollouts in it; the pair, mix -5.4 %).
    Else per change: the `attribution` of the group's fleet row with the largest |effect| among those
    that have one (regressions.mix_effect vs rate_effect over the clusters, on that change's own windows).
    With the label's `mix_basis` (``basis``), only splits on that basis count: mix is relative to the
    chosen denominator (metric_tree.md §6), so a split in another lens does not answer the label.
    Else fct_attribution_mix_rate (its metric in that basis), when its fixed periods line up with the change: the
    fleet row's day, or, for a group without a fleet row that holds a mix shift's two sides (cluster rows of two
    clusters going opposite ways, joined by grouping: incident_joins.mix_shift_sides), the group's change day.
    """
    fleet = [r for r in group.rows if r["grain"] == "fleet"]
    sides = {(str(r["entity_id"]), str(r["change_kind"])) for r in group.rows if r["grain"] == "cluster"}
    pair = len({cluster for cluster, _ in sides}) >= 2 and len({kind for _, kind in sides}) == 2
    if not fleet and not pair:
        return None, "no fleet-grain change in the group"
    change_day = fleet[0]["_day"] if fleet else group.change_date
    side = mix_shift_fleet_split(group.rows) if pair else None
    if side:
        row, fleet_split = side
        if basis and fleet_split.get("mix_basis") != basis:
            return None, f"the pair's fleet split is not on the label's mix_basis {basis!r}"
        occupancy = fleet_split.get("occupancy_effect")
        return fleet_split["attribution"] == "mix", (
            f"per change: the fleet's {fleet_split['metric']} over the windows of cluster "
            f"{row['entity_id']}'s allocation change ({fleet_split['before_start_date']}.. vs "
            f"{fleet_split['change_date']}..{fleet_split['after_end_date']}): "
            f"{float(fleet_split['relative_change']):+.1%}, mix {float(fleet_split['mix_effect']):+.1%} vs rate "
            f"{float(fleet_split['rate_effect']):+.1%}"
            + (
                f", occupancy {float(occupancy):+.1%}"
                if isinstance(occupancy, (int, float)) and math.isfinite(occupancy)
                else ""
            )
            + f" over clusters (weights: {fleet_split.get('mix_basis')}; the pair of clusters' group)"
            + pair_text(fleet_split)
        )
    split = [r for r in fleet if str(r.get("attribution") or "") in ("mix", "rate", "occupancy")]
    if basis and split:
        split = [r for r in split if r.get("mix_basis") == basis]
        if not split:
            return None, f"no fleet split on the label's mix_basis {basis!r}"
    if split:
        row = max(split, key=lambda r: abs(float(r.get("relative_effect") or 0.0)))
        occupancy = row.get("occupancy_effect")
        occupancy_text = (
            f", occupancy {float(occupancy):+.1%}"
            if isinstance(occupancy, (int, float)) and math.isfinite(float(occupancy))
            else ""
        )
        return row["attribution"] == "mix", (
            f"per change: fleet {row['metric']} on {row['_day']}: mix {float(row['mix_effect']):+.1%} vs rate "
            f"{float(row['rate_effect']):+.1%}{occupancy_text} over {row.get('segment_type')}s"
            f" (weights: {row.get('mix_basis') or 'denominator'})"
        )
    if mix_rate is None or mix_rate.empty:
        return None, "no per-change split and fct_attribution_mix_rate not available"
    metric = MART_METRIC_OF_BASIS.get(basis or "installed", "goodput")
    rows = mix_rate[(mix_rate["metric"] == metric) & (mix_rate["segment_type"] == "sku")]
    if rows.empty:
        return None, f"fct_attribution_mix_rate has no sku split of {metric}"
    first = rows.iloc[0]
    p1_start = _day(first["period1_start"])
    if abs((p1_start - change_day).days) > MATCH_DAYS:
        return None, (
            f"fct_attribution_mix_rate splits fixed periods (p1 from {p1_start}), "
            f"not this change's windows (change {change_day}): not assessed per change"
        )
    return abs(float(first["fleet_mix"])) > abs(float(first["fleet_rate"])), (
        f"fleet_mix {float(first['fleet_mix']):+.4f} vs fleet_rate {float(first['fleet_rate']):+.4f} of the sku split"
        f" of {metric} ({_day(first['period0_start'])}.. vs {p1_start}..; change {change_day}"
        + (", the pair of clusters' group)" if not fleet else ")")
    )


def evaluate(
    regressions: pd.DataFrame,
    labels: list[dict],
    topology: Topology | None = None,
    series_days: int | None = None,
    mix_rate: pd.DataFrame | None = None,
    window_end: date | None = None,
) -> dict:
    """The evaluation report (docs/evaluation.md, "Output")."""
    topology = topology or Topology()
    groups = detected_groups(regressions, topology)
    # expected groups: every row explained by a known cause (regressions.expected_because, knock_on.py): not paged,
    # neither a detection nor a false alarm; they leave the precision's denominator, as recoveries do
    expected_groups = [group for group in groups if all_expected(group.rows)]
    groups = [group for group in groups if not all_expected(group.rows)]
    # not established: every change nothing explains has an interval that includes zero (established.py); opens no
    # alert, so it is neither a detection nor a false alarm either
    reasons = [not_established(group.rows) for group in groups]
    unestablished = [(group, reason) for group, reason in zip(groups, reasons) if reason]
    groups = [group for group, reason in zip(groups, reasons) if not reason]
    real = [label for label in labels if not label.get("decoy")]
    decoys = [label for label in labels if label.get("decoy")]

    pairs = []
    for g_index, group in enumerate(groups):
        group_nodes = set().union(
            *(
                topology.nodes_of(str(row["grain"]), str(row["entity_id"]))
                for row in group.rows
                if row["grain"] != "fleet"
            )
        )
        root = group.root
        root_nodes = (
            set(topology.nodes_of(str(root["grain"]), str(root["entity_id"]))) if root["grain"] != "fleet" else set()
        )
        factor = group.top_factor()
        for l_index, label in enumerate(real):
            start = _label_day(label["start"])
            # the matching row moves the label's way: an improvement does not detect a regression (a throttle's
            # recovery is not a fragmentation); a mix shift's pair holds both ways, its sending side matches
            near = [
                (abs((row["_day"] - start).days), (row["_day"] - start).days, row)
                for row in group.rows
                if overlaps(str(row["grain"]), str(row["entity_id"]), label, topology)
                and abs((row["_day"] - start).days) <= MATCH_DAYS
                and (label.get("direction") not in OPPOSITE or row["change_kind"] == label["direction"])
            ]
            if near:
                distance, delay, row = min(near, key=lambda item: (item[0], item[1]))
                pairs.append(
                    (
                        distance,
                        # a tie: the label whose factor the group names (its top factor, as "right factor" reads it)
                        not (label.get("factor") and factor == label["factor"]),
                        -scope_fit(group_nodes, label),  # then the label whose scope the group fits best
                        -scope_fit(root_nodes, label),  # then the group whose root (what its alert names) fits best
                        start,
                        group.change_date,
                        group.group_id,
                        label["incident_id"],
                        g_index,
                        l_index,
                        delay,
                        row,
                    )
                )
    pairs.sort(key=lambda item: item[:8])
    matched_groups: dict[int, tuple[int, int, dict]] = {}
    matched_labels: set[int] = set()
    for *_, g_index, l_index, delay, row in pairs:
        if g_index in matched_groups or l_index in matched_labels:
            continue
        matched_groups[g_index] = (l_index, delay, row)
        matched_labels.add(l_index)

    # recoveries: the end of a real incident is a real change back, in the opposite direction (a throttled GPU
    # cooling down): a group in the label's scope within 2 days of its `end`, of the other direction, is that
    # label's recovery. It neither matches the label nor counts as a false alarm.
    recoveries = []
    for g_index, group in enumerate(groups):
        if g_index in matched_groups:
            continue
        for label in real:
            if any(
                is_recovery(label, group.direction, str(row["grain"]), str(row["entity_id"]), row["_day"], topology)
                for row in group.rows
            ):
                recoveries.append((g_index, group.summary() | {"recovery_of": label["incident_id"]}))
                break
    recovered = {g_index for g_index, _ in recoveries}
    # the receiving side of a mix shift (`attribution: mix`): the work that left the label's other clusters arrives
    # on its `cluster` (the receiving one), a real change of the opposite direction within 2 days of its start. A
    # group whose rows below the fleet all lie on that cluster (fleet rows join the group of the largest effect in
    # their direction, grouping.py) is that label's receiving side: like a recovery, neither a match nor a false
    # alarm. When the shift ends the work leaves that cluster again: a change of the label's own direction there within 2
    # days of its `end` is the receiving side's end, counted the same way
    receiving = []
    for g_index, group in enumerate(groups):
        if g_index in matched_groups or g_index in recovered:
            continue
        below = [row for row in group.rows if row["grain"] != "fleet"]
        clusters = {topology.cluster_of(str(row["grain"]), str(row["entity_id"])) for row in below}
        for label in real:
            if label.get("attribution") != "mix" or label.get("direction") not in OPPOSITE:
                continue
            day = receiving_day(label, group.direction)
            side = label | {"grain": "cluster", "nodes": [], "scope": {"clusters": [label["cluster"]], "nodes": []}}
            on_side = bool(below) and all(
                overlaps(str(row["grain"]), str(row["entity_id"]), side, topology) for row in below
            )
            # the work moving back when the shift ends: both sides in one group (incident_joins.mix_shift_sides)
            end = _label_day(label.get("end"))
            back = (
                end is not None
                and label["cluster"] in clusters
                and len(clusters) >= 2
                and clusters <= set((label.get("scope") or {}).get("clusters") or [])
                and any(abs((row["_day"] - end).days) <= MATCH_DAYS for row in below)
            )
            if back or (
                day is not None and on_side and any(abs((row["_day"] - day).days) <= MATCH_DAYS for row in below)
            ):
                receiving.append((g_index, group.summary() | {"receiving_side_of": label["incident_id"]}))
                break
    recovered |= {g_index for g_index, _ in receiving}

    # false alarms, attributed to the label (real or decoy) whose scope and window [start - 2 d, end + 2 d] hold
    # them and whose start is nearest (a tie: the real label), else unattributed
    false_alarms = []
    for g_index, group in enumerate(groups):
        if g_index in matched_groups or g_index in recovered:
            continue
        holders = []
        for order, (label, role) in enumerate([(r, "label_window") for r in real] + [(d, "decoy") for d in decoys]):
            start = _label_day(label["start"])
            end = _label_day(label.get("end")) or window_end or date.max - timedelta(days=MATCH_DAYS + 1)
            days = [
                abs((row["_day"] - start).days)
                for row in group.rows
                if overlaps(str(row["grain"]), str(row["entity_id"]), label, topology)
                and start - timedelta(days=MATCH_DAYS) <= row["_day"] <= end + timedelta(days=MATCH_DAYS)
            ]
            if days:
                holders.append((min(days), role != "label_window", order, label, role))
        attributed = min(holders, key=lambda item: item[:3])[3:] if holders else None
        false_alarms.append(
            group.summary()
            | {
                "attributed_to": attributed[0]["incident_id"] if attributed else None,
                "attributed_kind": attributed[0].get("kind", "unknown") if attributed else None,
                "why": attributed[1] if attributed else "no label or decoy in scope and window",
                "_label": attributed[0] if attributed else None,
            }
        )

    matches, factor_ok, factor_n, cause_ok, cause_n, cause_ties, rollout_ok = [], 0, 0, 0, 0, 0, 0
    cause_not_assessed, mix_items = [], []
    for g_index, (l_index, delay, row) in sorted(matched_groups.items()):
        group, label = groups[g_index], real[l_index]
        factor = group.top_factor()
        factor_correct = None
        if label.get("factor"):
            factor_n += 1
            factor_correct = factor == label["factor"]
            factor_ok += factor_correct
        cause = group.top_cause()
        expected = label.get("cause") or {}
        cause_correct = None
        if expected.get("dimension") in CANDIDATE_DIMENSIONS:
            cause_n += 1
            cause_correct = bool(
                cause and cause["dimension"] == expected["dimension"] and _same_value(cause["value"], expected["value"])
            )
            cause_ok += cause_correct
            cause_ties += bool(cause and cause.get("tied"))
        elif expected:
            cause_not_assessed.append(
                {
                    "incident_id": label["incident_id"],
                    "reason": f"cause dimension {expected.get('dimension')!r} is not a candidate dimension",
                }
            )
        component = expected.get("component") or expected.get("dimension")
        rollout_correct = any(c.get("dimension") == component for c in group.candidates())
        rollout_ok += rollout_correct
        match = group.summary() | {
            "incident_id": label["incident_id"],
            "kind": label.get("kind", "unknown"),
            "magnitude_bucket": magnitude_bucket(label),
            "matched_row": f"{row['grain']}/{row['entity_id']}/{row['metric']}",
            "delay_days": delay,
            "direction_agrees": label.get("direction") == group.direction,
            "top_factor": factor,
            "factor_expected": label.get("factor"),
            "factor_correct": factor_correct,
            "top_cause": None
            if cause is None
            else {"dimension": cause["dimension"], "value": cause["value"], "tied": cause["tied"]},
            "cause_expected": {"dimension": expected.get("dimension"), "value": expected.get("value")}
            if expected
            else None,
            "cause_correct": cause_correct,
        }
        if label.get("attribution") == "mix":
            reported, reason = _mix_reported(group, mix_rate, label.get("mix_basis"))
            match["mix_reported"] = reported
            mix_items.append(
                {
                    "incident_id": label["incident_id"],
                    "assessed": reported is not None,
                    "correct": reported,
                    "reason": reason,
                }
            )
        matches.append(match)
    for label in real:
        if label.get("attribution") == "mix" and not any(m["incident_id"] == label["incident_id"] for m in matches):
            mix_items.append(
                {"incident_id": label["incident_id"], "assessed": False, "correct": None, "reason": "not detected"}
            )

    def block(label_filter) -> dict:
        targets = [label for label in real if label_filter(label)]
        tp_labels = sum(1 for i, label in enumerate(real) if label_filter(label) and i in matched_labels)
        tp_groups = sum(1 for l_index, _, _ in matched_groups.values() if label_filter(real[l_index]))
        fp = sum(1 for alarm in false_alarms if alarm["_label"] is not None and label_filter(alarm["_label"]))
        precision = proportion(tp_groups, tp_groups + fp, "no detection attributed here")
        recall = proportion(tp_labels, len(targets), "no labels (decoys are not targets)")
        return {
            "labels": len(targets),
            "detected": tp_labels,
            "false_alarms": fp,
            "precision": precision,
            "recall": recall,
            "f1": f1(precision, recall),
        }

    kinds = sorted({label.get("kind", "unknown") for label in labels})
    by_kind = {kind: block(lambda label, kind=kind: label.get("kind", "unknown") == kind) for kind in kinds}
    for kind in kinds:
        if all(label.get("decoy") for label in labels if label.get("kind", "unknown") == kind):
            by_kind[kind]["decoy"] = True
            by_kind[kind]["false_alarms"] = sum(1 for alarm in false_alarms if alarm["attributed_kind"] == kind)
    buckets = sorted({magnitude_bucket(label) for label in labels})
    by_magnitude = {bucket: block(lambda label, bucket=bucket: magnitude_bucket(label) == bucket) for bucket in buckets}
    for bucket in buckets:
        if bucket == "decoy":
            by_magnitude[bucket]["false_alarms"] = sum(
                1 for alarm in false_alarms if alarm["_label"] and alarm["_label"].get("decoy")
            )

    tp = len(matched_groups)
    overall_precision = proportion(tp, len(groups) - len(recovered), "no incident group detected")
    overall_recall = proportion(len(matched_labels), len(real), "no labels")
    delays = sorted(m["delay_days"] for m in matches)
    fa_rate = {
        "count": len(false_alarms),
        "series_days": series_days,
        "per_1000_series_days": None if not series_days else 1000 * len(false_alarms) / series_days,
    }
    if not series_days:
        fa_rate["reason"] = "series-days unknown (no detection_runs row): no denominator"
    mix_assessed = [item for item in mix_items if item["assessed"]]
    for alarm in false_alarms:
        alarm.pop("_label")
    return {
        "version": 2,
        "protocol": "docs/evaluation.md",
        "labels": len(real),
        "decoys": len(decoys),
        "groups": len(groups),
        "true_positive_groups": tp,
        "recovery_groups": [summary for _, summary in recoveries],
        "receiving_groups": [summary for _, summary in receiving],
        "expected_groups": [
            group.summary() | {"expected_because": expected_reason(group.root)} for group in expected_groups
        ],
        "unestablished_groups": [group.summary() | {"not_established": reason} for group, reason in unestablished],
        "overall": {
            "precision": overall_precision,
            "recall": overall_recall,
            "f1": f1(overall_precision, overall_recall),
        },
        "by_kind": by_kind,
        "by_magnitude": by_magnitude,
        "delay_days": {
            "n": len(delays),
            "median": float(pd.Series(delays).median()) if delays else None,
            "max": max(delays) if delays else None,
            "min": min(delays) if delays else None,
            **({} if delays else {"reason": "no matched label"}),
        },
        "false_alarms": fa_rate,
        "factor_accuracy": proportion(factor_ok, factor_n, "no matched label with a factor"),
        "cause_accuracy": proportion(cause_ok, cause_n, "no matched label with a candidate-dimension cause")
        | {"ties_at_top": cause_ties, "not_assessed": cause_not_assessed},
        "mix_attribution": proportion(
            sum(1 for item in mix_assessed if item["correct"]),
            len(mix_assessed),
            "no mix label could be assessed per change",
        )
        | {"items": mix_items},
        "matches": matches,
        "missed": [
            {"incident_id": label["incident_id"], "kind": label.get("kind", "unknown"), "start": label["start"]}
            for i, label in enumerate(real)
            if i not in matched_labels
        ],
        "false_alarm_groups": false_alarms,
        # former keys (report line, older readers)
        "detected_labels": len(matched_labels),
        "recall": overall_recall["value"],
        "precision": overall_precision["value"],
        "factor_correct": factor_ok,
        "cause_correct": cause_ok,
        "rollout_correct": rollout_ok,
    }


def _fmt(block: dict) -> str:
    if block["value"] is None:
        return "n/a"
    ci = block.get("ci95")
    return (
        f"{block['value']:.2f} [{ci[0]:.2f}, {ci[1]:.2f}] ({block['successes']}/{block['n']})"
        if ci
        else f"{block['value']:.2f}"
    )


def table_markdown(report: dict) -> str:
    """The evaluation as a markdown table (UI metadata and `perfwh evaluate`)."""
    lines = [
        "| slice | labels | detected | false alarms | precision [95% CI] | recall [95% CI] | F1 |",
        "|---|---|---|---|---|---|---|",
    ]

    def row(name: str, block: dict) -> str:
        value = block["f1"]["value"]
        return (
            f"| {name} | {block['labels']} | {block['detected']} | {block['false_alarms']} | {_fmt(block['precision'])} | "
            f"{_fmt(block['recall'])} | {'n/a' if value is None else f'{value:.2f}'} |"
        )

    overall = report["overall"]
    lines.append(
        f"| **overall** | {report['labels']} | {report['detected_labels']} | {report['false_alarms']['count']} | "
        f"{_fmt(overall['precision'])} | {_fmt(overall['recall'])} | "
        f"{'n/a' if overall['f1']['value'] is None else format(overall['f1']['value'], '.2f')} |"
    )
    lines.extend(row(f"kind {kind}", block) for kind, block in report["by_kind"].items())
    lines.extend(row(f"magnitude {bucket}", block) for bucket, block in report["by_magnitude"].items())
    delay, fa = report["delay_days"], report["false_alarms"]
    lines += [
        "",
        f"- delay (days, change day − label start): median {delay['median']}, max {delay['max']} (n={delay['n']})",
        f"- false alarms: {fa['count']} in {fa['series_days']} series-days = "
        + (
            "n/a (" + fa.get("reason", "") + ")"
            if fa["per_1000_series_days"] is None
            else f"{fa['per_1000_series_days']:.3f} per 1,000"
        ),
        "- recoveries (a change back at an incident's end; neither a detection nor a false alarm): "
        + (
            ", ".join(f"{g['root']} {g['change_date']} ({g['recovery_of']})" for g in report.get("recovery_groups", []))
            or "none"
        ),
        "- receiving sides of mix shifts (the work arriving on the receiving cluster, or leaving it when the shift ends;"
        " neither a detection nor a false alarm): "
        + (
            ", ".join(
                f"{g['root']} {g['change_date']} ({g['receiving_side_of']})" for g in report.get("receiving_groups", [])
            )
            or "none"
        ),
        "- expected (every change explained by a known cause, regressions.expected_because; not scored): "
        + (", ".join(f"{g['root']} {g['change_date']}" for g in report.get("expected_groups", [])) or "none"),
        "- not established (every unexplained change's 95% interval includes zero; opens no alert; not scored): "
        + (", ".join(f"{g['root']} {g['change_date']}" for g in report.get("unestablished_groups", [])) or "none"),
        f"- factor accuracy: {_fmt(report['factor_accuracy'])}",
        f"- cause accuracy (top candidate): {_fmt(report['cause_accuracy'])}, ties at the top {report['cause_accuracy']['ties_at_top']}, "
        f"not assessed {len(report['cause_accuracy']['not_assessed'])}",
        f"- mix attribution: {_fmt(report['mix_attribution'])}"
        + "".join(
            f"; {item['incident_id']}: {item['reason']}"
            for item in report["mix_attribution"]["items"]
            if not item["assessed"]
        ),
    ]
    return "\n".join(lines)


def line(report: dict) -> str:
    overall = report["overall"]
    return (
        f"recall {_fmt(overall['recall'])}, precision {_fmt(overall['precision'])} over {report['groups']} incident groups, "
        f"factor {_fmt(report['factor_accuracy'])}, cause {_fmt(report['cause_accuracy'])}"
    )


def _optional_frame(home, sql: str) -> pd.DataFrame | None:
    from perf_assets.lib.warehouse import published_frame

    try:
        return published_frame(home, sql)
    except Exception:  # noqa: BLE001 - a table this snapshot does not have: unknown, handled by the caller
        return None


def evaluate_home(home, labels_path: Path | None = None) -> dict:
    """The evaluation of a data home's published warehouse against its labels (or `labels_path`)."""
    from perf_assets.lib.contracts import REGRESSIONS_TABLE
    from perf_assets.lib.topology import read_topology
    from perf_assets.lib.warehouse import published_frame

    label_file = load_label_file(labels_path or home.labels_file)
    labels = label_file.get("incidents", [])
    found = published_frame(home, f"select * from {REGRESSIONS_TABLE}")
    runs = _optional_frame(home, "select series_days from detection_runs")
    series_days = int(runs["series_days"].iloc[0]) if runs is not None and len(runs) else None
    mix_rate = _optional_frame(home, "select * from fct_attribution_mix_rate")
    window_end = None
    if label_file.get("start") and label_file.get("days"):
        window_end = date.fromisoformat(str(label_file["start"])[:10]) + timedelta(days=int(label_file["days"]) - 1)
    topology = read_topology(lambda sql: published_frame(home, sql))
    report = evaluate(found, labels, topology, series_days=series_days, mix_rate=mix_rate, window_end=window_end)
    return {"scenario": label_file.get("scenario"), "seed": label_file.get("seed")} | report
