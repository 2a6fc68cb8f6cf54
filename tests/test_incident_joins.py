"""Issue 7's "one alert per real change": the join rules of perf_assets/lib/incident_joins.py, on literal rows shaped
like the cases they were built on (`incidents` seed 1's torch upgrade seen late on h200-n01, seed 3's fleet
improvement, fleet-1k seed 1's power cap seen late and the thermal throttle five days after a driver rollout)."""

from __future__ import annotations

import json
from datetime import timedelta

import pandas as pd
from test_attribution_evaluation import START, TOPOLOGY, frame, label, row

from perf_assets.lib.alerts import build_incidents
from perf_assets.lib.evaluation import evaluate
from perf_assets.lib.grouping import GROUP_WINDOW_DAYS, group_regressions
from perf_assets.lib.incident_joins import GROUP_WINDOW_DAYS as JOIN_WINDOW_DAYS
from perf_assets.lib.incident_joins import LATE_DAYS, allocation_side, mix_shift_sides, rollout_day, shared_cause


def torch(day: int, nodes: int) -> str:
    first = (START + timedelta(days=day)).isoformat() + "T00:00:00+00:00"
    return json.dumps(
        [{"component": "torch", "from": "2.5.1", "to": "2.6.0", "nodes": nodes, "of_nodes": 4, "first_at": first}]
    )


def candidates(*nodes: str) -> str:
    return json.dumps([{"dimension": "torch", "value": "2.6.0", "nodes": list(nodes), "did_effect": 0.04}])


def upgrade(day: int = 22) -> list[dict]:
    """The torch upgrade's own rows: the cluster (its candidates list the nodes that changed) and one node."""
    return [
        row(
            "h100",
            metric="program_goodput",
            day=day,
            kind="improvement",
            effect=0.089,
            coinciding_changes=torch(day, 3),
            cause_candidates=candidates("h100-n1", "h100-n2", "h100-n3"),
        ),
        row(
            "h100-n3",
            grain="node",
            metric="program_goodput",
            day=day,
            kind="improvement",
            effect=0.076,
            coinciding_changes=torch(day, 1),
        ),
    ]


def late(entity: str = "h100-n1", day: int = 25, **extra) -> dict:
    """h200-n01 on seed 1: +14 % split three days after its torch upgrade, nothing rolled out with it."""
    fields = {"grain": "node", "metric": "program_goodput", "day": day, "kind": "improvement", "effect": 0.14}
    return row(entity, **(fields | extra))


def test_the_join_window_is_groupings():
    assert JOIN_WINDOW_DAYS == GROUP_WINDOW_DAYS


def test_a_rollouts_step_seen_late_joins_the_rollouts_incident_with_the_reason():
    rows = frame(*upgrade(), late())
    grouped = group_regressions(rows, TOPOLOGY)
    assert grouped["group_id"].nunique() == 1
    assert grouped["is_root"].tolist() == [True, False, False]  # the cluster heads it
    reason = grouped["joined_because"].iloc[2]
    assert "torch 2.5.1 -> 2.6.0" in reason and "3 days before its split" in reason
    assert grouped["joined_because"].iloc[:2].isna().all()  # nested links need no reason of their own
    # three days apart: the time window alone (GROUP_WINDOW_DAYS) would not link them; nothing rolled out: two groups
    plain = frame(*(record | {"coinciding_changes": "[]", "cause_candidates": None} for record in upgrade()), late())
    assert group_regressions(plain, TOPOLOGY)["group_id"].nunique() == 2


def test_a_late_change_stays_apart_without_the_evidence():
    def apart(*rows: dict) -> bool:
        grouped = group_regressions(frame(*upgrade(), *rows), TOPOLOGY)
        return grouped["group_id"].iloc[-1] != grouped["group_id"].iloc[0] and grouped["joined_because"].isna().all()

    assert apart(late("h100-n4"))  # the rollout's rows do not list n4 among the nodes that changed
    assert apart(late(kind="regression", effect=-0.14))  # the other direction
    assert apart(late(day=22 + LATE_DAYS + 1, before_start_date=START))  # more than a week after the rollout
    assert apart(late(before_start_date=START + timedelta(days=23)))  # the rollout is outside its before window
    assert apart(late(coinciding_changes=torch(25, 1)))  # a rollout of its own
    assert apart(late(metric="allocation", top_factor="allocation"))  # another factor
    # a knock-on that detection explained (its job peers' pace) is not the rollout's step
    assert apart(late(expected_because="job peers: joined allocations with nodes whose program_goodput was lower"))
    # the node's program goodput changed at the rollout already: a second change days later is another incident
    own_step = late(day=22, effect=0.07, coinciding_changes=torch(22, 1))
    grouped = group_regressions(frame(*upgrade(), own_step, late()), TOPOLOGY)
    assert grouped["group_id"].iloc[2] == grouped["group_id"].iloc[0] != grouped["group_id"].iloc[3]


def test_a_hardware_incident_days_after_a_rollout_on_its_node_is_its_own():
    """fleet-1k seed 1: a100-west-n05's thermal throttle on 10-26, five days after the node's driver rollout; its
    GPU's thermal_ok fell with it, which no rollout does."""
    throttle = [
        late(kind="regression", effect=-0.128),
        row("GPU-h100-1", grain="gpu", metric="thermal_ok", day=25, effect=-0.885),
    ]
    grouped = group_regressions(frame(*(r | {"change_kind": "regression"} for r in upgrade()), *throttle), TOPOLOGY)
    assert grouped["group_id"].iloc[2] == grouped["group_id"].iloc[3] != grouped["group_id"].iloc[0]
    # without the thermal evidence the same node change is the rollout's step seen late
    alone = group_regressions(frame(*(r | {"change_kind": "regression"} for r in upgrade()), throttle[0]), TOPOLOGY)
    assert alone["group_id"].nunique() == 1


def test_a_late_change_whose_incident_came_with_a_rollout_of_its_own_stays_with_it():
    """fleet-1k seed 2: h100-west-n13's power draw fell on 10-22 with its job peers, whose power limit was cut that
    day; n13's own image rollout of 10-18 lay in its before window. The cap explains it: no join to the image's."""
    cap = json.dumps([{"component": "power_limit_w", "from": "700.0", "to": "500.0", "nodes": 1, "of_nodes": 1}])
    peer_power = late(kind="regression", effect=-0.04, metric="power_ratio", job_peer_nodes=json.dumps(["h100-n2"]))
    capped = row("h100-n2", grain="node", metric="clock_ratio", day=25, coinciding_changes=cap)
    capped["job_peer_nodes"] = json.dumps(["h100-n1"])
    rollout = [r | {"change_kind": "regression", "relative_effect": -0.08} for r in upgrade()]
    grouped = group_regressions(frame(*rollout, peer_power, capped), TOPOLOGY)
    assert grouped["group_id"].iloc[2] == grouped["group_id"].iloc[3] != grouped["group_id"].iloc[0]
    assert grouped["joined_because"].isna().all()
    # the same late change without the capped peer is the rollout's step seen late
    assert group_regressions(frame(*rollout, peer_power), TOPOLOGY)["group_id"].nunique() == 1


def test_a_rollouts_day_is_its_first_nodes_change_not_a_later_split():
    probe = row("h100-n1", grain="node", metric="probe_hbm_bw_ratio", day=18, coinciding_changes=torch(15, 1))
    probe["split_date"] = START + timedelta(days=18)
    assert rollout_day(probe, probe["split_date"]) == START + timedelta(days=15)
    assert rollout_day(row("h100"), START) == START  # no rollout listed: its split day


def fleet(day: int = 23, **extra) -> dict:
    fields = {"grain": "fleet", "metric": "program_goodput", "day": day, "kind": "improvement", "effect": 0.05}
    return row("fleet", **(fields | extra))


def test_a_fleet_change_joins_the_incident_that_came_with_its_rollout():
    """`incidents` seed 3: the fleet's +5 % of 10-24 came with the torch upgrade; a job-peer knock-on with a larger
    effect a day later (h100-n04 leaving jobs with a slowed node) took it, and the upgrade's group stayed apart."""
    upgrade_rows = upgrade()
    knock_on = row(
        "a100-n2",
        grain="node",
        metric="program_goodput",
        day=24,
        kind="improvement",
        effect=0.12,
        expected_because="job peers: left allocations with nodes whose program_goodput was already lower",
    )
    grouped = group_regressions(frame(*upgrade_rows, knock_on, fleet(coinciding_changes=torch(22, 3))), TOPOLOGY)
    assert grouped["group_id"].iloc[3] == grouped["group_id"].iloc[0] != grouped["group_id"].iloc[2]
    assert "torch 2.5.1 -> 2.6.0 (from 2026-10-23, 3 nodes)" in grouped["joined_because"].iloc[3]
    # nothing rolled out with the fleet change: the group that is not all knock-ons still comes first
    plain = group_regressions(frame(*upgrade_rows, knock_on, fleet()), TOPOLOGY)
    assert plain["group_id"].iloc[3] == plain["group_id"].iloc[0] and plain["joined_because"].isna().all()
    # a knock-on that nothing explains is an incident of its own: the largest effect takes the fleet row, as before
    unexplained = group_regressions(frame(*upgrade_rows, knock_on | {"expected_because": None}, fleet()), TOPOLOGY)
    assert unexplained["group_id"].iloc[3] == unexplained["group_id"].iloc[2]


def test_the_same_versions_rolled_out_another_day_are_another_rollout_and_the_larger_rollout_comes_first():
    prepared = {"_factor": "program_goodput", "grain": "cluster", "metric": "program_goodput"}
    fleet_row = prepared | {
        "grain": "fleet",
        "coinciding_changes": json.dumps(
            [
                {"component": "image", "from": "a", "to": "b", "nodes": 40, "first_at": "2026-10-13T00:00:00+00:00"},
                {"component": "firmware", "from": "x", "to": "y", "nodes": 24, "first_at": "2026-10-13T00:00:00+00:00"},
            ]
        ),
    }
    firmware = prepared | {
        "entity_id": "h100-west",
        "_link_day": START,
        "coinciding_changes": fleet_row["coinciding_changes"].replace('"image"', '"nccl"'),
    }
    image = prepared | {
        "entity_id": "h100-east",
        "_link_day": START,
        "coinciding_changes": fleet_row["coinciding_changes"],
    }
    assert shared_cause(fleet_row, [firmware])[0] == 24
    assert shared_cause(fleet_row, [image])[0] == 40
    other_day = image | {"coinciding_changes": fleet_row["coinciding_changes"].replace("10-13", "10-16")}
    assert shared_cause(fleet_row, [other_day]) is None
    assert shared_cause(fleet_row, [image | {"_factor": "allocation"}]) is None  # another factor


def test_the_alert_shows_one_incident_with_the_late_child_and_why_it_joined():
    rows = frame(
        *(r | {"change_kind": "regression", "relative_effect": -0.1} for r in upgrade()),
        late(kind="regression", effect=-0.11),
    )
    incidents = build_incidents(rows, TOPOLOGY)
    assert len(incidents) == 1
    children = {child["entity_id"]: child for child in incidents[0]["children"]}
    assert set(children) == {"h100-n3", "h100-n1"}
    assert "the rollout's step, seen late" in children["h100-n1"]["joined_because"]
    assert "joined_because" not in children["h100-n3"]


def allocation(entity: str, day: int, before: float, after: float) -> dict:
    kind = "regression" if after < before else "improvement"
    fields = {"metric": "allocation", "top_factor": "allocation", "before_level": before, "after_level": after}
    return row(entity, day=day, kind=kind, effect=after / before - 1, **fields)


def prepared(record: dict) -> dict:
    return record | {"_link_day": record["change_date"], "_own_cause": None}


def test_a_mix_shifts_sides_move_about_as_many_gpus_the_opposite_way():
    """`incidents` seed 1, 10-21: h100 (40 GPUs) from 89.4 % to 60.9 % allocated, a100b (24 GPUs) from 48.5 % to
    99.2 %: 11.4 GPUs left one, 12.2 arrived on the other."""
    h100, a100b = prepared(allocation("h100", 20, 0.894, 0.609)), prepared(allocation("a100b", 20, 0.485, 0.992))
    reason = mix_shift_sides(h100, a100b, 40, 24)
    assert "work moved from h100 to a100b" in reason and "11.4 fewer" in reason and "12.2 more" in reason
    assert mix_shift_sides(a100b, h100, 24, 40) == reason
    # fleet-1k seed 1's start: h100-west lost 76.7 GPUs, a100-west (82 % allocated already) took 40.7
    west = prepared(allocation("h100-west", 21, 0.813, 0.414)), prepared(allocation("a100-west", 19, 0.82, 0.979))
    assert mix_shift_sides(*west, 192, 256) is not None
    assert mix_shift_sides(h100, prepared(allocation("a100b", 20, 0.485, 0.55)), 40, 24) is None  # 1.6 of 11.4 GPUs
    assert mix_shift_sides(h100, prepared(allocation("a100b", 23, 0.485, 0.992)), 40, 24) is None  # 3 days apart
    assert mix_shift_sides(h100, prepared(allocation("a100b", 20, 0.992, 0.485)), 40, 24) is None  # the same way
    assert mix_shift_sides(h100, prepared(allocation("h100", 20, 0.485, 0.992)), 40, 40) is None  # one cluster
    assert mix_shift_sides(h100, a100b, 40, None) is None  # GPUs unknown: no balance
    assert mix_shift_sides(h100, a100b | {"metric": "goodput"}, 40, 24) is None  # levels of another ratio
    assert mix_shift_sides(h100, a100b | {"before_level": float("nan")}, 40, 24) is None


def test_a_clusters_goodput_change_through_its_allocation_is_an_allocation_side():
    """detection.ALLOCATION_SIDE_OF: seed 126, h100-west's goodput -30.8 % from 10-21 (allocation its factor), its
    allocation 0.857 -> 0.687 over the row's windows in `fleet_split`; a100-west's partner row +26.9 % from 10-20."""
    split = json.dumps({"metric": "goodput_ref", "allocation_before": 0.857, "allocation_after": 0.687})
    goodput = prepared(
        row("h100-west", day=20, metric="goodput", top_factor="allocation", effect=-0.308, fleet_split=split)
        | {"before_level": 0.34, "after_level": 0.235}
    )
    assert allocation_side(goodput) == (0.857, 0.687)  # the allocation's levels, not the goodput's
    partner = prepared(allocation("a100-west", 19, 0.763, 0.968))
    reason = mix_shift_sides(goodput, partner, 192, 256)
    assert "work moved from h100-west to a100-west" in reason and "32.6 fewer" in reason
    assert allocation_side(goodput | {"top_factor": "program_goodput"}) is None  # its goodput fell for another reason
    assert allocation_side(goodput | {"fleet_split": None}) is None  # no allocation levels: unknown, no balance
    assert mix_shift_sides(goodput | {"fleet_split": None}, partner, 192, 256) is None
    assert allocation_side(goodput | {"grain": "node"}) is None


def test_a_mix_shifts_two_sides_are_one_incident_rooted_where_goodput_moved():
    rows = frame(
        allocation("h100", 20, 0.894, 0.609),
        row("h100", day=20, metric="goodput", top_factor="allocation", effect=-0.36),
        row("h100-n1", grain="node", day=20, metric="goodput", top_factor="allocation", effect=-0.4),
        allocation("a100", 20, 0.485, 0.992),  # TOPOLOGY: 4 GPUs a cluster, 1.14 and 2.03 GPUs moved
    )
    grouped = group_regressions(rows, TOPOLOGY)
    assert grouped["group_id"].nunique() == 1
    assert grouped["is_root"].tolist() == [False, True, False, False]
    assert "work moved from h100 to a100" in grouped["joined_because"].iloc[3]
    # without the balance (the a100 side barely moved) the two sides stay two groups
    apart = group_regressions(frame(*rows.to_dict("records")[:3], allocation("a100", 20, 0.485, 0.55)), TOPOLOGY)
    assert apart["group_id"].nunique() == 2


def mart(period1_start: int, fleet_mix: float, fleet_rate: float) -> pd.DataFrame:
    """fct_attribution_mix_rate's sku split of running_goodput_ref (basis allocated_gs), fixed periods of 7 days;
    `incidents` seed 1: fleet_mix -0.0251 vs fleet_rate +0.0015 over 10-15..10-21 vs 10-22..10-28."""
    p1 = pd.Timestamp(START + timedelta(days=period1_start))
    return pd.DataFrame(
        [
            {
                "metric": "running_goodput_ref",
                "segment_type": "sku",
                "fleet_mix": fleet_mix,
                "fleet_rate": fleet_rate,
                "period0_start": p1 - pd.Timedelta(days=7),
                "period1_start": p1,
                "period1_end": p1 + pd.Timedelta(days=6),
            }
        ]
    )


def test_a_mix_shifts_pair_of_clusters_is_assessed_with_the_marts_split_when_its_periods_line_up():
    shift = label(kind="workload_mix_shift", grain="fleet", clusters=("a100", "h100"), day=20, attribution="mix")
    shift |= {"factor": "allocation", "mix_basis": "allocated_gs", "cause": {"dimension": "sku", "value": "A100"}}
    pair = frame(
        allocation("h100", 20, 0.894, 0.609),
        row("h100", day=20, metric="goodput", top_factor="allocation", effect=-0.36),
        allocation("a100", 20, 0.485, 0.992),
    )
    item = evaluate(pair, [shift], TOPOLOGY, mix_rate=mart(21, -0.0251, 0.0015))["mix_attribution"]["items"][0]
    assert item["assessed"] and item["correct"] and "the pair of clusters' group" in item["reason"]
    item = evaluate(pair, [shift], TOPOLOGY, mix_rate=mart(21, -0.001, 0.02))["mix_attribution"]["items"][0]
    assert item["assessed"] and item["correct"] is False  # the mart says rate: a wrong verdict, not a skipped one
    # fixed periods four days off the change (fleet-1k: p1 from 10-24, the shift from 10-20): not assessed
    item = evaluate(pair, [shift], TOPOLOGY, mix_rate=mart(24, -0.0251, 0.0015))["mix_attribution"]["items"][0]
    assert not item["assessed"] and "not assessed per change" in item["reason"]
    # one side only (no pair, no fleet row): not assessed, as before
    one = evaluate(pair.iloc[:2], [shift], TOPOLOGY, mix_rate=mart(21, -0.0251, 0.0015))
    assert one["mix_attribution"]["items"][0]["reason"] == "no fleet-grain change in the group"


def fleet_split(day: int, mix: float, rate: float, occupancy: float) -> str:
    """A cluster allocation row's `fleet_split` (detection.FLEET_SPLIT): the fleet's goodput_ref over its windows."""
    change = START + timedelta(days=day)
    return json.dumps(
        {
            "metric": "goodput_ref",
            "before_start_date": str(change - timedelta(days=7)),
            "change_date": str(change),
            "after_end_date": str(change + timedelta(days=5)),
            "relative_change": mix + rate + occupancy,
            "mix_effect": mix,
            "rate_effect": rate,
            "occupancy_effect": occupancy,
            "attribution": max(
                {"mix": mix, "rate": rate, "occupancy": occupancy}.items(), key=lambda item: abs(item[1])
            )[0],
            "mix_basis": "allocated_gs",
            "segment_type": "cluster",
            "segments": [],
        }
    )


def test_a_mix_shifts_pair_is_assessed_on_the_fleet_split_of_the_side_that_moved_first():
    """fleet-1k seed 1: a100-west's rise split on 10-20 (the shift's start: fleet mix -3.9 % vs rate -3.3 %,
    occupancy -3.1 %), h100-west's fall on 10-22 (in the trough: occupancy -5.4 % the largest); the mart's fixed
    periods (p1 from 10-24) do not line up."""
    shift = label(kind="workload_mix_shift", grain="fleet", clusters=("a100", "h100"), day=20, attribution="mix")
    shift |= {"factor": "allocation", "mix_basis": "allocated_gs", "cause": {"dimension": "sku", "value": "A100"}}
    sending = allocation("h100", 21, 0.894, 0.609) | {"fleet_split": fleet_split(21, -0.035, -0.025, -0.054)}
    receiving = allocation("a100", 20, 0.485, 0.992) | {"fleet_split": fleet_split(20, -0.039, -0.033, -0.031)}
    report = evaluate(frame(sending, receiving), [shift], TOPOLOGY, mix_rate=mart(24, -0.0251, 0.0015))
    (item,) = report["mix_attribution"]["items"]
    assert item["assessed"] and item["correct"]
    assert "a100's allocation change" in item["reason"] and "mix -3.9% vs rate -3.3%" in item["reason"]
    # the first side's split says occupancy: a wrong verdict, not a skipped one
    receiving["fleet_split"] = fleet_split(20, -0.02, -0.01, -0.05)
    (item,) = evaluate(frame(sending, receiving), [shift], TOPOLOGY)["mix_attribution"]["items"]
    assert item["assessed"] and item["correct"] is False
    # a split in another lens does not answer the label (mix is relative to the denominator)
    receiving["fleet_split"] = fleet_split(20, -0.039, -0.033, -0.031).replace("allocated_gs", "allocated_pfs")
    (item,) = evaluate(frame(sending, receiving), [shift], TOPOLOGY)["mix_attribution"]["items"]
    assert not item["assessed"] and "mix_basis" in item["reason"]


def test_two_nodes_own_hardware_changes_are_not_joined_by_shared_jobs():
    """fleet-1k seed 1: h200-east-n20's thermal throttle (SM clock, thermal state) and h200-east-n10's HBM decay
    (its HBM probe) split the same day on two nodes that shared jobs; only a metric the job's pace moves (program
    goodput, power) links job peers, so the two nodes' own measurements are two incidents."""
    n10, n20 = json.dumps(["h100-n2"]), json.dumps(["h100-n1"])
    thermal = row("h100-n2", grain="node", metric="thermal_ok", day=18, effect=-0.22, job_peer_nodes=n20)
    clock = row("h100-n2", grain="node", metric="clock_ratio", day=18, effect=-0.04, job_peer_nodes=n20)
    hbm = row("h100-n1", grain="node", metric="probe_hbm_bw_ratio", day=18, effect=-0.07, job_peer_nodes=n10)
    groups = group_regressions(frame(thermal, clock, hbm), TOPOLOGY)["group_id"]
    assert groups[0] == groups[1] and groups[2] != groups[0]
    # the peer's pace (its program goodput waits for the throttled node) still joins the throttle
    pace = row("h100-n1", grain="node", metric="program_goodput", day=18, effect=-0.05, job_peer_nodes=n10)
    groups = group_regressions(frame(thermal, clock, pace), TOPOLOGY)["group_id"]
    assert groups.nunique() == 1


def test_the_node_with_hardware_evidence_heads_its_job_peers_slowdowns():
    """fleet-1k seed 1: h100-west-n03's HBM probe fell 11 % (a decay); job peers slowed with it. The root was a
    peer's program goodput (goodput first among node rows) and the incident's cause "node <the peer>"; the node whose
    own measurement moved is the origin."""
    peers, origin = json.dumps(["h100-n1"]), json.dumps(["h100-n2", "h100-n3"])
    hbm = row("h100-n1", grain="node", metric="probe_hbm_bw_ratio", day=18, effect=-0.11, job_peer_nodes=origin)
    slow = [
        row(node, grain="node", metric="program_goodput", day=18, effect=-0.12, job_peer_nodes=peers)
        for node in ("h100-n2", "h100-n3")
    ]
    grouped = group_regressions(frame(*slow, hbm), TOPOLOGY)
    assert grouped["group_id"].nunique() == 1 and grouped["is_root"].tolist() == [False, False, True]
    # without hardware evidence the rule is the former one: goodput first
    pace = row("h100-n1", grain="node", metric="program_goodput", day=18, effect=-0.05, job_peer_nodes=origin)
    assert group_regressions(frame(*slow, pace), TOPOLOGY)["is_root"].tolist() == [True, False, False]


def test_job_peers_changes_days_apart_are_not_one_jobs_pace():
    """A chain of job peers each within the ± 2 day window walked from one incident to the next (fleet-1k seed 2:
    the NCCL subset of 10-09 and the image stall of 10-18 on h100-west were one group of 81 rows); a peer's
    knock-on splits on the node's day, or the next."""
    first = row("h100-n1", grain="node", metric="program_goodput", day=10, job_peer_nodes=json.dumps(["h100-n2"]))
    for gap, together in ((0, True), (1, True), (2, False)):
        peer = row("h100-n2", grain="node", metric="program_goodput", day=10 + gap, job_peer_nodes=json.dumps([]))
        assert (group_regressions(frame(first, peer), TOPOLOGY)["group_id"].nunique() == 1) is together


def test_a_change_of_a_node_the_rollout_did_not_touch_is_not_absorbed_by_the_rolled_out_cluster():
    """fleet-1k seed 2: h200-east's driver rollout of 10-16 on n01..n16 (the cluster row lists them) took the
    program goodput fall of n17..n20 of 10-18 through the cluster's containment, and with it n20's thermal throttle.
    A node the rollout changed, a change the same day, or a cluster row without a rollout still contain it."""
    rollout = upgrade(day=22)[0] | {"change_kind": "regression", "relative_effect": -0.09}
    other = row("h100-n4", grain="node", metric="program_goodput", day=24, effect=-0.12)
    assert group_regressions(frame(rollout, other), TOPOLOGY)["group_id"].nunique() == 2
    changed = row("h100-n2", grain="node", metric="program_goodput", day=24, effect=-0.12)
    same_day = row("h100-n4", grain="node", metric="program_goodput", day=22, effect=-0.12)
    plain = row("h100", metric="program_goodput", day=22, effect=-0.09)
    for pair in ((rollout, changed), (rollout, same_day), (plain, other)):
        assert group_regressions(frame(*pair), TOPOLOGY)["group_id"].nunique() == 1


def test_a_ramp_seen_as_two_successive_pieces_is_one_incident():
    """fleet-1k seed 1: h100-west-n03's HBM probe fell from 10-05 (split 10-10) and again from 10-11 (split 10-13)."""
    onset = START + timedelta(days=4)
    first = row("h100-n1", grain="node", metric="probe_hbm_bw_ratio", day=4, split_date=onset + timedelta(days=5))
    later = row("h100-n1", grain="node", metric="probe_hbm_bw_ratio", day=10, split_date=onset + timedelta(days=8))
    assert group_regressions(frame(first, later), TOPOLOGY)["group_id"].nunique() == 1
    # a later step (no onset before its split) or a ramp starting days after the first split: separate changes
    step = row("h100-n1", grain="node", metric="probe_hbm_bw_ratio", day=12)
    apart = row("h100-n1", grain="node", metric="probe_hbm_bw_ratio", day=13, split_date=onset + timedelta(days=12))
    for other in (step, apart):
        assert group_regressions(frame(first, other), TOPOLOGY)["group_id"].nunique() == 2


def test_a_job_peer_between_two_incidents_does_not_chain_them():
    """fleet-1k seed 2: h200-east-n29's program goodput fell on 10-17 with its job peers of the driver rollout of 10-16;
    h200-east-n28, its peer in a later job, fell on 10-18 with h200-east-n20's thermal throttle. The links n16-n29 and
    n29-n28 chained the throttle into the rollout's group. Here: the rollout on h100-n1, the bridge h100-n2 a day
    later, h100-n3 the day after with h100-n4's thermal state."""
    rollout = row(
        "h100-n1", grain="node", metric="program_goodput", day=16, effect=-0.13, job_peer_nodes=json.dumps(["h100-n2"]),
        coinciding_changes=torch(16, 1), top_cause_dimension="torch", top_cause_value="2.6.0",
    )  # fmt: skip
    bridge = row(
        "h100-n2", grain="node", metric="program_goodput", day=17, effect=-0.06,
        job_peer_nodes=json.dumps(["h100-n1", "h100-n3"]),
    )  # fmt: skip
    peer = row(
        "h100-n3", grain="node", metric="program_goodput", day=18, effect=-0.12,
        job_peer_nodes=json.dumps(["h100-n2", "h100-n4"]),
    )  # fmt: skip
    thermal = row("h100-n4", grain="node", metric="thermal_ok", day=18, effect=-0.2, job_peer_nodes=json.dumps([]))
    grouped = group_regressions(frame(rollout, bridge, peer, thermal), TOPOLOGY)
    groups = grouped["group_id"].tolist()
    assert groups[0] == groups[1] and groups[2] == groups[3] and groups[0] != groups[2]  # the bridge joins the earlier
    assert grouped["is_root"].tolist() == [True, False, False, True]  # the throttled node heads its peers' knock-ons
    # knock-ons with no origin of their own still join the one they link to (without the throttle: one group)
    assert group_regressions(frame(rollout, bridge, peer), TOPOLOGY)["group_id"].nunique() == 1


def test_a_null_rollout_on_the_day_of_a_knock_on_is_no_origin():
    """fleet-1k seed 1: h100-west-n05..n08's program goodput fell on 10-13, job peers of h100-west-n03's HBM decay, on
    the day a firmware with no effect was rolled out on them. The firmware coincides (``coinciding_changes``) but the
    cause analysis does not rank it first, so the knock-ons stay with the decay instead of alerting in the decoy."""
    hbm = row("h100-n1", grain="node", metric="probe_hbm_bw_ratio", day=12, effect=-0.07, job_peer_nodes="[]")
    knock_on = row(
        "h100-n2", grain="node", metric="program_goodput", day=12, effect=-0.1, job_peer_nodes=json.dumps(["h100-n1"]),
        coinciding_changes=torch(12, 1), top_cause_dimension="node", top_cause_value="h100-n2",
    )  # fmt: skip
    assert group_regressions(frame(hbm, knock_on), TOPOLOGY)["group_id"].nunique() == 1
    ranked = knock_on | {"top_cause_dimension": "torch", "top_cause_value": "2.6.0"}  # the analysis names the rollout
    assert group_regressions(frame(hbm, ranked), TOPOLOGY)["group_id"].nunique() == 2


def test_a_cluster_row_does_not_carry_a_nodes_throttle_into_a_rollout():
    """fleet-1k seed 3: h200-east's program goodput of 10-19 (no cause of its own) contained both a job peer of the
    driver rollout (10-17) and h200-east-n20's throttle (10-19): the cluster row joined them. Containment links wait
    like job co-membership: nearest days first, and never between two groups that began with different things."""
    rollout = row(
        "h100-n1", grain="node", metric="program_goodput", day=16, effect=-0.13, coinciding_changes=torch(16, 1),
        top_cause_dimension="torch", top_cause_value="2.6.0", job_peer_nodes=json.dumps(["h100-n2"]),
    )  # fmt: skip
    peer = row("h100-n2", grain="node", metric="program_goodput", day=17, effect=-0.1, job_peer_nodes="[]")
    cluster = row("h100", metric="program_goodput", day=19, effect=-0.04)
    thermal = row("h100-n4", grain="node", metric="thermal_ok", day=19, effect=-0.2)
    grouped = group_regressions(frame(rollout, peer, cluster, thermal), TOPOLOGY)
    groups = grouped["group_id"].tolist()
    assert groups[0] == groups[1] and groups[2] == groups[3] and groups[0] != groups[2]
    assert grouped["is_root"].tolist() == [True, False, False, True]  # the node, not the cluster, heads the throttle
    # a fleet row joins a group after it formed (its top cause a firmware): the node still heads the throttle
    fleet = row("fleet", grain="fleet", metric="thermal_ok", day=19, effect=-0.01, top_cause_dimension="firmware")
    grouped = group_regressions(frame(rollout, peer, cluster, thermal, fleet), TOPOLOGY)
    assert grouped["group_id"].iloc[4] == grouped["group_id"].iloc[3] and grouped["is_root"].iloc[3]


def test_two_ramps_that_begin_together_are_one_decay():
    """fleet-1k seed 2: h100-west-n03's HBM probe fell from 10-05; the node's scan split it on 10-11, one of its GPUs'
    on 10-06, and the GPU's row was a false alarm of its own."""
    onset = START + timedelta(days=4)
    node = row("h100-n1", grain="node", metric="probe_hbm_bw_ratio", day=4, split_date=onset + timedelta(days=6))
    gpu = row("GPU-h100-1", grain="gpu", metric="probe_hbm_bw_ratio", day=4, split_date=onset + timedelta(days=1))
    assert group_regressions(frame(node, gpu), TOPOLOGY)["group_id"].nunique() == 1
    later = row("GPU-h100-1", grain="gpu", metric="probe_hbm_bw_ratio", day=13, split_date=onset + timedelta(days=10))
    assert group_regressions(frame(node, later), TOPOLOGY)["group_id"].nunique() == 2  # began 9 days apart


def test_a_goodput_change_ahead_of_its_largest_factor_joins_that_factors_incident():
    """fleet-1k seed 3: h200-east-n09 idle with no eligible work from 10-13, its goodput split there (-20 %, program
    goodput the largest factor), its program goodput on 10-16 with the driver rollout to half the cluster."""
    driver = json.dumps(
        [{"component": "driver", "from": "550", "to": "560", "nodes": 1, "of_nodes": 1, "first_at": "2026-10-16"}]
    )
    goodput = row("h100-n1", grain="node", day=12, effect=-0.2, top_factor="program_goodput")
    goodput["after_end_date"] = START + timedelta(days=29)
    rollout = [
        row("h100-n1", grain="node", metric="program_goodput", day=15, effect=-0.165, coinciding_changes=driver),
        row("h100", metric="program_goodput", day=15, effect=-0.08, coinciding_changes=driver),
    ]
    grouped = group_regressions(frame(goodput, *rollout), TOPOLOGY)
    assert grouped["group_id"].nunique() == 1
    reason = grouped["joined_because"].iloc[0]
    assert reason.startswith("its largest factor, program_goodput, split on 2026-10-16, 3 days after this change's")

    def apart(early: dict, *extra: dict) -> bool:
        grouped = group_regressions(frame(early, *rollout, *extra), TOPOLOGY)
        return grouped["group_id"].iloc[0] != grouped["group_id"].iloc[1]

    assert apart(goodput | {"top_factor": "allocation"})  # its largest factor is not the one that moved later
    assert apart(goodput | {"after_end_date": START + timedelta(days=14)})  # the factor's split is not in its window
    assert apart(goodput | {"change_kind": "improvement", "relative_effect": 0.2})  # the other direction
    assert apart(goodput, row("h100-n1", grain="node", metric="program_goodput", day=12, effect=-0.05))  # moved too
    late = dict(rollout[0], change_date=START + timedelta(days=12 + LATE_DAYS + 1))
    grouped = group_regressions(frame(goodput, late), TOPOLOGY)
    assert grouped["group_id"].nunique() == 2  # more than LATE_DAYS later
    assert apart(goodput | {"coinciding_changes": driver})  # a configuration change of its own


def test_a_mix_shifts_pair_is_judged_on_its_own_clusters_not_on_other_incidents_rates():
    """fleet-1k seed 3: over all clusters the fleet's goodput_ref fell 12.4 % on a100-west's windows, rate -5.3 % the
    largest, -2.9 % of it h200-east's driver rollout of 10-16 in the before window; the pair's own clusters: mix
    -3.4 %, rate -1.5 %, occupancy -1.6 %."""
    from perf_assets.lib.incident_joins import mix_shift_fleet_split

    segments = [
        {"segment": "h100-west", "mix_effect": -0.0579, "rate_effect": -0.0086, "occupancy_effect": -0.0555},
        {"segment": "a100-west", "mix_effect": 0.0237, "rate_effect": -0.0063, "occupancy_effect": 0.0390},
        {"segment": "h200-east", "mix_effect": -0.0032, "rate_effect": -0.0289, "occupancy_effect": -0.0116},
        {"segment": "h100-east", "mix_effect": 0.0038, "rate_effect": -0.0093, "occupancy_effect": -0.0087},
    ]
    split = json.loads(fleet_split(18, -0.0336, -0.0531, -0.0368)) | {"segments": segments}
    assert split["attribution"] == "rate"
    receiving = allocation("a100-west", 18, 0.485, 0.992) | {"fleet_split": json.dumps(split)}
    sending = allocation("h100-west", 19, 0.894, 0.609)
    side, judged = mix_shift_fleet_split([sending, receiving])
    assert side is receiving and judged["pair"] == ["a100-west", "h100-west"]
    assert judged["attribution"] == "mix" and judged["fleet_attribution"] == "rate"
    assert round(judged["pair_mix_effect"], 4) == -0.0342 and round(judged["pair_rate_effect"], 4) == -0.0149
    assert judged["mix_effect"] == split["mix_effect"]  # the fleet's own figures stay
    # a side whose cluster the split does not list (only the largest contributors are): the fleet's verdict
    _, unlisted = mix_shift_fleet_split([allocation("a100", 19, 0.894, 0.609), receiving])
    assert unlisted["attribution"] == "rate" and "pair" not in unlisted


def test_a_goodput_change_behind_its_largest_factor_joins_that_factors_incident():
    """fleet-1k seed 107: h100-east's NCCL rollout moved program goodput on 10-13 while the cluster ran more allocated
    than usual for three days; its goodput split on 10-16 (-9.4 %, program goodput the largest factor), alone, and
    was counted as an alert inside a noise-burst decoy's scope."""
    nccl = json.dumps(
        [{"component": "nccl", "from": "2.21", "to": "2.22", "nodes": 4, "of_nodes": 4, "first_at": "2026-10-13"}]
    )
    rollout = [
        row("h100", metric="program_goodput", day=12, effect=-0.105, coinciding_changes=nccl),
        row("h100-n1", grain="node", metric="program_goodput", day=12, effect=-0.1, coinciding_changes=nccl),
    ]
    goodput = row("h100", day=15, effect=-0.094, top_factor="program_goodput")
    goodput["before_start_date"] = START
    grouped = group_regressions(frame(goodput, *rollout), TOPOLOGY)
    assert grouped["group_id"].nunique() == 1
    reason = grouped["joined_because"].iloc[0]
    assert reason.startswith("its largest factor, program_goodput, split on 2026-10-13, 3 days before this change's")

    def apart(late: dict, *extra: dict) -> bool:
        grouped = group_regressions(frame(late, *rollout, *extra), TOPOLOGY)
        return grouped["group_id"].iloc[0] != grouped["group_id"].iloc[1]

    assert apart(goodput | {"top_factor": "allocation"})  # its largest factor is not the one that moved earlier
    assert apart(goodput | {"before_start_date": START + timedelta(days=13)})  # the factor's split is not in its window
    assert apart(goodput | {"change_kind": "improvement", "relative_effect": 0.094})  # the other direction
    assert apart(goodput, row("h100", day=12, effect=-0.03, regression_id="earlier goodput"))  # goodput moved then too
    assert apart(goodput | {"change_date": START + timedelta(days=12 + LATE_DAYS + 1)})  # more than LATE_DAYS later
    assert apart(goodput | {"change_date": START + timedelta(days=12 + JOIN_WINDOW_DAYS)}) is False  # near: linked
    assert apart(
        goodput | {"coinciding_changes": nccl, "cause_candidates": candidates("h100-n1")}
    )  # a cause of its own


def test_fleet_rows_join_only_an_incident_of_their_own_factor():
    """fleet-1k seed 107: the fleet's allocation (-10.6 %) and goodput (-16.2 %, allocation the largest factor) of
    10-21, h100-west drained by the mix shift, chained to the fleet's power draw of 10-23 and with it to h100-west's
    power cap of 10-22: the shift was scored as not detected."""
    cap = row("h100", metric="power_ratio", day=21, effect=-0.062, top_factor="program_goodput")
    fleet_rows = [
        row("fleet", grain="fleet", metric="allocation", day=20, effect=-0.106, top_factor="allocation"),
        row("fleet", grain="fleet", metric="goodput", day=20, effect=-0.162, top_factor="allocation"),
        row("fleet", grain="fleet", metric="power_ratio", day=22, effect=-0.015, top_factor="program_goodput"),
    ]
    grouped = group_regressions(frame(cap, *fleet_rows), TOPOLOGY)
    ids = list(grouped["group_id"])
    assert ids[0] == ids[3] != ids[1] == ids[2]  # the power draw with the cap; allocation and goodput apart
    assert grouped["is_root"].iloc[2]  # a fleet group's root is its goodput
    # a drained node of the same factor is where the fleet's allocation change goes
    drained = row("h100-n2", grain="node", metric="allocation", day=20, effect=-0.5, top_factor="allocation")
    grouped = group_regressions(frame(cap, *fleet_rows, drained), TOPOLOGY)
    assert grouped["group_id"].iloc[1] == grouped["group_id"].iloc[2] == grouped["group_id"].iloc[4]
    assert grouped["group_id"].iloc[3] == grouped["group_id"].iloc[0]


def test_a_mix_shifts_pair_is_judged_on_its_own_clusters_also_when_a_fleet_row_joined_it():
    """fleet-1k seed 107: the fleet's goodput of 10-21 (-16.2 %) joined the pair; over all clusters and its 20-day
    before window, with three rollouts in it, rate -8.0 % led mix -3.2 %. The pair's own split says mix."""
    shift = label(kind="workload_mix_shift", grain="fleet", clusters=("a100", "h100"), day=20, attribution="mix")
    shift |= {"factor": "allocation", "mix_basis": "allocated_gs", "cause": {"dimension": "sku", "value": "A100"}}
    sending = allocation("h100", 21, 0.894, 0.609)
    receiving = allocation("a100", 20, 0.485, 0.992) | {"fleet_split": fleet_split(20, -0.039, -0.033, -0.031)}
    fleet_row = row(
        "fleet", grain="fleet", metric="goodput", day=21, effect=-0.162, top_factor="allocation", attribution="rate"
    )
    fleet_row |= {"mix_effect": -0.032, "rate_effect": -0.080, "occupancy_effect": -0.051, "mix_basis": "allocated_gs"}
    report = evaluate(frame(sending, receiving, fleet_row), [shift], TOPOLOGY)
    assert report["groups"] == 1
    (item,) = report["mix_attribution"]["items"]
    assert item["assessed"] and item["correct"] and "the pair of clusters' group" in item["reason"]
    # without the pair, the fleet row's own split answers, as before
    (item,) = evaluate(frame(sending, fleet_row), [shift], TOPOLOGY)["mix_attribution"]["items"]
    assert item["assessed"] and item["correct"] is False and "mix -3.2% vs rate -8.0%" in item["reason"]


def test_the_work_moving_back_when_a_mix_shift_ends_is_neither_a_detection_nor_a_false_alarm():
    """fleet-1k seed 107: when the shift ended on 10-26, a100-west's allocation fell and h100-west's came back, one
    group of both sides (the partner test found h100-west's); it was counted as a false alarm."""
    shift = label(kind="workload_mix_shift", grain="fleet", clusters=("a100", "h100"), day=20, attribution="mix")
    shift |= {"cluster": "a100", "end": f"{START + timedelta(days=26)}T00:00:00Z", "factor": "allocation"}
    start_sides = [allocation("h100", 20, 0.894, 0.609), allocation("a100", 20, 0.485, 0.992)]
    back = [allocation("a100", 26, 0.992, 0.485), allocation("h100", 26, 0.609, 0.894)]
    report = evaluate(frame(*start_sides, *back), [shift], TOPOLOGY)
    assert report["groups"] == 2 and report["detected_labels"] == 1
    assert report["false_alarms"]["count"] == 0 and len(report["receiving_groups"]) == 1
    # the same pair moving a week later is not the shift's end
    late = [allocation("a100", 33, 0.992, 0.485), allocation("h100", 33, 0.609, 0.894)]
    assert evaluate(frame(*start_sides, *late), [shift], TOPOLOGY)["false_alarms"]["count"] == 1


def seed_119_bad_batch() -> list[dict]:
    """fleet-1k seed 119's a100-west bad batch, as two nodes of it: n26's and n27's fault rates (from 10-11 and 10-12,
    shape 'rate', to the window's end) and n26 down more (availability -37 % on 10-15)."""
    rates = [
        row(node, grain="node", metric="xid_node_faults", day=day, effect=effect, shape="rate")
        | {"after_end_date": START + timedelta(days=29)}
        for node, day, effect in (("a100-n2", 10, 21.9), ("a100-n3", 11, 12.7))
    ]
    down = row("a100-n2", grain="node", metric="availability", day=14, effect=-0.37)
    return [*rates, down]


def runtime(node: str, day: int = 15, effect: float = -0.065, peers: list[str] | None = None, **extra) -> dict:
    """n26's runtime goodput of 10-16 (-6.5 %): work since the last checkpoint lost to the faults, its job peer n27's
    with it (``peers``: the row's job peers, by default the other node of the two)."""
    peers = json.dumps(peers if peers is not None else ["a100-n3" if node == "a100-n2" else "a100-n2"])
    return row(node, grain="node", metric="runtime_goodput", day=day, effect=effect, job_peer_nodes=peers, **extra)


def test_progress_lost_to_a_nodes_faults_joins_its_fault_rates_incident():
    rows = frame(*seed_119_bad_batch(), runtime("a100-n2"), runtime("a100-n3", effect=-0.052))
    grouped = group_regressions(rows, TOPOLOGY)
    assert grouped["group_id"].nunique() == 1  # was two: the batch, and the lost progress (a false alarm)
    reasons = grouped["joined_because"].dropna().tolist()
    assert len(reasons) == 1 and reasons[0].startswith("progress lost to faults: a100-n2's fault rate rose from")
    # a runtime change on a node without a fault rate of its own, none of whose job peers faults, stays apart
    apart = frame(*seed_119_bad_batch()[1:2], runtime("a100-n2", peers=["a100-n4"]))
    assert group_regressions(apart, TOPOLOGY)["group_id"].nunique() == 2
    # before the rate's onset (beyond the window) or an improvement: not the faults' cost
    early = frame(*seed_119_bad_batch(), runtime("a100-n2", day=7))
    assert group_regressions(early, TOPOLOGY)["group_id"].nunique() == 2
    better = frame(*seed_119_bad_batch(), runtime("a100-n2", kind="improvement", effect=0.07))
    assert group_regressions(better, TOPOLOGY)["group_id"].nunique() == 2


def test_progress_a_job_peer_lost_to_the_batchs_faults_joins_the_batchs_incident():
    """fleet-1k seed 126: a100-west-n13, n14 and n22, without faults of their own, lost 3.1-3.4 % of runtime goodput
    from 10-17 while their jobs ran with the bad batch's faulting nodes: a group of their own inside a noise-burst
    decoy. Here a100-n1 and a100-n4, job peers of faulting n2 and n3."""
    peers = [
        runtime(node, day=16, effect=-0.031, peers=[peer])
        for node, peer in (("a100-n1", "a100-n2"), ("a100-n4", "a100-n3"))
    ]
    grouped = group_regressions(frame(*seed_119_bad_batch(), *peers), TOPOLOGY)
    assert grouped["group_id"].nunique() == 1  # was two: the batch, and its job peers' lost progress
    reasons = grouped["joined_because"].dropna().tolist()
    assert reasons and all(r.startswith("progress lost to a job peer's faults: a100-n") for r in reasons)
    # job peers that do not fault: their own change, apart
    unfaulted = [runtime("a100-n1", day=16, effect=-0.031, peers=["a100-n4"])]
    assert group_regressions(frame(*seed_119_bad_batch(), *unfaulted), TOPOLOGY)["group_id"].nunique() == 2
    # a job peer of a faulting node whose runtime fell before the faults began: not their cost
    early = [runtime("a100-n1", day=6, effect=-0.031, peers=["a100-n2"])]
    assert group_regressions(frame(*seed_119_bad_batch(), *early), TOPOLOGY)["group_id"].nunique() == 2


def test_a_clusters_runtime_change_is_not_pulled_into_a_bad_batch_through_a_faulting_node():
    """A checkpoint storage slowdown (the cluster's runtime goodput and its nodes') on the days of the batch's faults:
    its row of faulting a100-n2 is not progress lost to the faults alone, so the two incidents stay two."""
    storage = [row("a100", metric="runtime_goodput", day=15, effect=-0.03)] + [
        row(node, grain="node", metric="runtime_goodput", day=15, effect=-0.03) for node in ("a100-n1", "a100-n2")
    ]
    grouped = group_regressions(frame(*seed_119_bad_batch(), *storage), TOPOLOGY)
    assert grouped["group_id"].nunique() == 2
    assert grouped["joined_because"].isna().all()
