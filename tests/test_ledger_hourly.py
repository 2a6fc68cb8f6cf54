"""The hour ledger (docs/ledger.md): node x UTC hour, every installed GPU-second in one down_* / idle_* / badput /
productive leaf, on the demo fleet (and the incidents scenario for fragmentation)."""

from __future__ import annotations

import json
from datetime import datetime, timedelta, timezone

import pandas as pd
import pytest

from perf_assets.lib.simulate.scenario import get_scenario

DOWN_LEAVES = (
    "down_hw_fault",
    "down_repair",
    "down_probe_quarantine",
    "down_maintenance",
    "down_drain",
    "down_unknown",
)
IDLE_LEAVES = ("idle_requeue_gap", "idle_fragmented", "idle_no_demand")
HOUR = timedelta(hours=1)


def _hour_ledger(demo_snapshot, node: str) -> pd.DataFrame:
    frame = demo_snapshot(f"select * from fct_node_hour where node = '{node}' order by hour_start_at")
    frame["hour_start_at"] = pd.to_datetime(frame["hour_start_at"], utc=True)
    return frame.set_index("hour_start_at")


def _overlap_s(start: datetime, end: datetime, hour: datetime) -> float:
    return max(0.0, (min(end, hour + HOUR) - max(start, hour)).total_seconds())


def _node_events(home, node: str) -> list[dict]:
    """The node's state intervals as delivered (the landing files, not the warehouse)."""
    rows = []
    for path in sorted((home.landing / "node_events").rglob("*.jsonl")):
        rows += [json.loads(line) for line in path.read_text().splitlines() if line.strip()]
    return [row for row in rows if row["node"] == node]


def _ts(text: str) -> datetime:
    return datetime.fromisoformat(text.replace("Z", "+00:00")).astimezone(timezone.utc)


def test_every_node_hour_closes_and_sums_to_its_node_day(demo_snapshot):
    hours = demo_snapshot("select * from fct_node_hour")
    assert len(hours) == 8 * 14 * 24  # 8 nodes, 14 days, every hour
    down = hours[[f"{leaf}_gs" for leaf in DOWN_LEAVES]].sum(axis=1)
    idle = hours[[f"{leaf}_gs" for leaf in IDLE_LEAVES]].sum(axis=1)
    assert list(down + idle + hours["allocated_gs"]) == pytest.approx(list(hours["installed_gs"]), rel=1e-12, abs=1e-6)
    assert list(hours["installed_gs"]) == pytest.approx([8 * 3600.0] * len(hours))  # 8 GPUs in service all hour
    days = demo_snapshot("select * from fct_node_day").set_index(["node", "metric_date"]).sort_index()
    additive = [c for c in days.columns if c.endswith(("_gs", "_pfs")) and c in hours.columns] + ["useful_flop_known"]
    assert {"down_maintenance_pfs", "idle_fragmented_gs", "productive_pfs"} <= set(additive)
    summed = hours.groupby(["node", "metric_date"])[additive].sum().sort_index()
    for column in additive:
        assert list(summed[column]) == pytest.approx(list(days[column]), rel=1e-9, abs=1e-6), column


def test_the_demo_maintenance_is_down_maintenance_for_exactly_its_hours(demo_snapshot):
    scenario = get_scenario("demo")
    (window,) = scenario.maintenances  # beta-n03, day 4 08:00, 6 h
    start = datetime.combine(scenario.start, datetime.min.time(), tzinfo=timezone.utc) + timedelta(
        hours=window.offset_h
    )
    expected = {start + i * HOUR for i in range(int(window.duration_h))}
    ledger = _hour_ledger(demo_snapshot, window.node)
    maintained = ledger[ledger["down_maintenance_gs"] > 0]
    assert set(maintained.index) == expected
    assert list(maintained["down_maintenance_gs"]) == [8 * 3600.0] * 6  # 6 h x 8 GPUs x 3600 s
    assert ledger["down_maintenance_gs"].sum() == 6 * 8 * 3600.0
    others = [f"{leaf}_gs" for leaf in (*DOWN_LEAVES, *IDLE_LEAVES) if leaf != "down_maintenance"] + ["allocated_gs"]
    assert (maintained[others] == 0).all().all()
    # the cluster-day and the tree carry it: maintenance share of beta's installed time that day
    share = demo_snapshot(
        "select value from metric_tree_daily where grain = 'cluster' and entity_id = 'beta' "
        f"and node_id = 'down_maintenance_share' and metric_date = '{start.date()}'"
    )["value"][0]
    assert share == pytest.approx(6 / (24 * 4))


def test_the_forced_xid_79_fault_is_hw_fault_then_repair_as_the_state_history_says(demo_home, demo_snapshot):
    events = _node_events(demo_home, "beta-n04")
    (fault,) = [row for row in events if row["state"] == "down" and row["reason"] == "xid 79"]
    (repair,) = [row for row in events if row["state"] == "repair"]
    fault_start, fault_end = _ts(fault["start"]), _ts(fault["end"])
    repair_start, repair_end = _ts(repair["start"]), _ts(repair["end"])
    assert fault_end == repair_start  # the repair follows the fault
    ledger = _hour_ledger(demo_snapshot, "beta-n04")
    hw = [8 * _overlap_s(fault_start, fault_end, hour) for hour in ledger.index]
    rep = [8 * _overlap_s(repair_start, repair_end, hour) for hour in ledger.index]
    assert sum(hw) > 0 and sum(rep) > 0
    assert list(ledger["down_hw_fault_gs"]) == pytest.approx(hw, abs=1e-6)
    assert list(ledger["down_repair_gs"]) == pytest.approx(rep, abs=1e-6)
    # the hour the fault starts in is split: the job ran until the fault, the rest is down (down wins)
    first = ledger.loc[fault_start.replace(minute=0, second=0, microsecond=0)]
    assert 0 < first["down_hw_fault_gs"] < 8 * 3600 and first["allocated_gs"] > 0
    # the job on the failed node was requeued: its other node idles as idle_requeue_gap until the next attempt
    # (and beta-n04 too once repaired, until the job restarts; never while it is down: down wins)
    gap = demo_snapshot(
        "select node, sum(idle_requeue_gap_gs) as gs from fct_node_hour "
        f"where hour_start_at >= '{fault_start.isoformat()}' and hour_start_at < '{repair_end.isoformat()}' "
        "group by node having sum(idle_requeue_gap_gs) > 0"
    )
    assert set(gap["node"]) - {"beta-n04"} and set(gap["node"]) <= {f"beta-n0{i}" for i in range(1, 5)}
    down_hours = ledger[ledger["down_hw_fault_gs"] + ledger["down_repair_gs"] == 8 * 3600]
    assert len(down_hours) >= 5 and (down_hours["idle_requeue_gap_gs"] == 0).all()


def test_hourly_allocation_pooled_is_not_the_mean_of_hourly_ratios(demo_snapshot):
    """The cluster-day allocation is Σ allocated / Σ available over its node-hours, not the mean of the hours'
    ratios: the two differ where availability varies (down hours weigh nothing)."""
    compared = demo_snapshot(
        "select h.entity_id as cluster, h.metric_date, sum(h.numerator) / sum(h.denominator) as pooled, "
        "avg(h.value) as mean_of_ratios, any_value(d.value) as daily "
        "from metric_tree_hourly h join metric_tree_daily d on d.grain = h.grain and d.entity_id = h.entity_id "
        "  and d.metric_date = h.metric_date and d.node_id = h.node_id "
        "where h.grain = 'cluster' and h.node_id = 'allocation' group by all order by all"
    )
    assert len(compared) == 2 * 14
    assert list(compared["pooled"]) == pytest.approx(list(compared["daily"]), rel=1e-12)
    gap = (compared["mean_of_ratios"] - compared["pooled"]).abs()
    # the maintenance and fault day on beta (2026-11-05): the hours with a node down have a smaller denominator
    worst = compared.loc[gap.idxmax()]
    assert (worst["cluster"], str(worst["metric_date"])[:10]) == ("beta", "2026-11-05")
    assert gap.max() > 0.01


def test_fragmented_idle_time_in_the_incidents_scenario(incidents_home):
    """The incidents scenario (seed 1) has pending-queue snapshots while GPUs sit idle: idle_fragmented > 0, never
    more than the cluster's pending demand in an hour, and the idle leaves close. The labelled scheduler
    fragmentation incident is idle_fragmented on its days, and the labelled maintenance window is
    down_maintenance for exactly its hours."""
    from perf_assets.lib.warehouse import published_frame

    hours = published_frame(
        incidents_home,
        "select cluster, hour_start_at, sum(idle_fragmented_gs) as fragmented, any_value(cluster_pending_gs) as pending, "
        "sum(idle_gs) as idle, sum(idle_requeue_gap_gs + idle_fragmented_gs + idle_no_demand_gs) as leaves "
        "from fct_node_hour group by all",
    )
    assert hours["fragmented"].sum() > 0
    assert (hours["fragmented"] <= hours["pending"] + 1e-6).all()
    assert list(hours["leaves"]) == pytest.approx(list(hours["idle"]), abs=1e-6)
    assert (hours.loc[hours["pending"] == 0, "fragmented"] == 0).all()  # no pending demand: nothing fragmented

    labels = json.loads(incidents_home.labels_file.read_text())["incidents"]
    (incident,) = [label for label in labels if label["kind"] == "scheduler_fragmentation"]
    days = published_frame(
        incidents_home,
        "select metric_date, idle_fragmented_pfs / installed_pfs as share from fct_cluster_day "
        f"where cluster = '{incident['cluster']}'",
    )
    days["metric_date"] = pd.to_datetime(days["metric_date"]).dt.date
    start, end = _ts(incident["start"]), _ts(incident["end"])
    during = days["metric_date"].between(start.date(), (end - timedelta(seconds=1)).date())
    assert during.sum() == 2
    assert days.loc[during, "share"].min() > 0.2  # 47.9 % and 37.5 % of installed time
    assert days.loc[during, "share"].min() > 5 * days.loc[~during, "share"].max()

    (window,) = [label for label in labels if label["kind"] == "maintenance_window"]
    maintained = published_frame(
        incidents_home,
        "select node, hour_start_at, down_maintenance_gs, installed_gs from fct_node_hour where down_maintenance_gs > 0",
    )
    start, end = _ts(window["start"]), _ts(window["end"])
    expected = {start + i * HOUR for i in range(int((end - start) / HOUR))}
    assert set(maintained["node"]) == set(window["nodes"])
    assert set(pd.to_datetime(maintained["hour_start_at"], utc=True)) == expected
    assert list(maintained["down_maintenance_gs"]) == list(maintained["installed_gs"])
