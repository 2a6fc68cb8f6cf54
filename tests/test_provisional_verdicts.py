"""Detection confirms a change only with settled days: metric_tree_daily's provisional days (is_provisional, the days
the next build rebuilds) do not count towards `confirm_points` (perf_assets/lib/provisional.py)."""

from __future__ import annotations

from datetime import date, timedelta

import numpy as np
import pandas as pd
from test_detection import FACTORS, START, spine_rows

from perf_assets.lib.changepoint import DetectorConfig
from perf_assets.lib.detection import detect_regressions
from perf_assets.lib.provisional import provisional_days, settled_verdicts

CONFIG = DetectorConfig(n_permutations=199, max_pvalue=0.01, confirm_points=7)


def cluster_tree(days: int = 16, change_day: int = 8, provisional: int = 0) -> pd.DataFrame:
    """Cluster alpha's program goodput drops 12 % on `change_day` (beta does not); the last `provisional` days carry
    is_provisional like metric_tree_daily's rows."""
    rng = np.random.default_rng(3)
    rows = []
    for cluster in ("alpha", "beta"):
        for day in range(days):
            levels = {name: value * (1 + rng.normal(0, 0.005)) for name, value in FACTORS.items()}
            if cluster == "alpha" and day >= change_day:
                levels["program_goodput"] *= 0.88
            rows += spine_rows(cluster, day, levels, 32 * 86400 * 989e12, is_provisional=day >= days - provisional)
    return pd.DataFrame(rows)


def alpha_goodput(tree: pd.DataFrame) -> pd.Series:
    found = detect_regressions(tree, pd.DataFrame(), {"alpha": ["a1"], "beta": ["b1"]}, CONFIG)
    rows = found[(found["entity_id"] == "alpha") & (found["metric"] == "goodput")]
    assert len(rows) == 1, found[["entity_id", "metric", "change_date"]]
    return rows.iloc[0]


def test_a_change_confirmed_only_by_provisional_days_stays_provisional():
    # 8 days after the change: confirmed with 7 confirm points when every day is settled
    settled = alpha_goodput(cluster_tree(provisional=0))
    assert settled["change_date"] == START + timedelta(days=8) and settled["n_after"] == 8
    assert settled["verdict"] == "confirmed"
    # the last 2 of them provisional: 6 settled days, fewer than 7
    unsettled = alpha_goodput(cluster_tree(provisional=2))
    assert unsettled["n_after"] == 8 and unsettled["verdict"] == "provisional"
    # the effect itself still uses every day: only the verdict waits
    assert unsettled["relative_effect"] == settled["relative_effect"]
    # one provisional day leaves 7 settled days: confirmed
    assert alpha_goodput(cluster_tree(provisional=1))["verdict"] == "confirmed"


def test_a_burst_whose_return_to_base_is_provisional_stays_provisional():
    tree = cluster_tree(days=10, provisional=2)  # provisional: 2026-11-09 and 2026-11-10
    assert provisional_days(tree) == {date(2026, 11, 9), date(2026, 11, 10)}
    found = pd.DataFrame(
        [
            # back to base on 11-09 (provisional)
            {"verdict": "confirmed", "shape": "burst", "change_date": date(2026, 11, 7), "split_date": None}
            | {"after_end_date": date(2026, 11, 8), "n_after": 2},
            # back to base on 11-08 (settled)
            {"verdict": "confirmed", "shape": "burst", "change_date": date(2026, 11, 6), "split_date": None}
            | {"after_end_date": date(2026, 11, 7), "n_after": 2},
            # a fault rate over days 11-01..11-10, 10 points of which 8 settled
            {"verdict": "confirmed", "shape": "rate", "change_date": date(2026, 11, 1), "split_date": date(2026, 11, 1)}
            | {"after_end_date": date(2026, 11, 10), "n_after": 10},
            # already provisional: stays so
            {"verdict": "provisional", "shape": "step", "change_date": date(2026, 11, 1), "split_date": None}
            | {"after_end_date": date(2026, 11, 3), "n_after": 3},
        ]
    )
    assert list(settled_verdicts(found, tree, confirm_points=7)) == [
        "provisional",
        "confirmed",
        "confirmed",
        "provisional",
    ]
    assert list(settled_verdicts(found, tree, confirm_points=9))[2] == "provisional"
    # a metric tree without the flag (an older warehouse) changes nothing
    assert settled_verdicts(found, tree.drop(columns="is_provisional"), 7).equals(found["verdict"])


def test_the_demo_build_confirms_no_change_with_provisional_days(demo_snapshot):
    """The demo build's regressions (detection on its metric_tree_daily) obey the rule, and the rule had rows to
    act on: changes whose after-window reaches the demo's provisional days."""
    days = set(demo_snapshot("select distinct metric_date from metric_tree_daily where is_provisional")["metric_date"])
    days = {pd.Timestamp(day).date() for day in days}
    assert len(days) == 2
    found = demo_snapshot("select * from regressions")
    first = min(days)
    reaching = found[pd.to_datetime(found["after_end_date"]).dt.date >= first]
    assert len(reaching) > 0
    for row in found.itertuples():
        if row.verdict != "confirmed" or row.shape == "burst":
            continue
        start = pd.Timestamp(row.split_date if pd.notna(row.split_date) else row.change_date).date()
        end = pd.Timestamp(row.after_end_date).date()
        assert row.n_after - sum(start <= day <= end for day in days) >= 7, row
