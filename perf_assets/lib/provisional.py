"""Verdicts that do not rest on provisional days.

The days after (the latest data day − the lookback) carry ``is_provisional`` in ``metric_tree_daily``
(docs/incremental.md): the next build rebuilds them, and their figures can still move (a restart turns steps into
wasted progress, a late file adds samples). A change is ``confirmed`` only by settled days:

- a change-point or fault-rate row (``confirmed`` when at least ``confirm_points`` points follow the change) counts
  only the points of its after-window that are not provisional;
- a burst (``confirmed`` when the series returned to its base after it) stays ``provisional`` when that return, the
  day after the burst, is a provisional day.

Provisional days still enter the tests and the effect sizes: they are the best figures there are, and an alert on
them is marked ``provisional`` (docs/alerts.md). One thing does not rest on them alone: a burst whose days are all
provisional is not tested until its first day settles (bursts.py), because on the daily path the latest days'
allocations are incomplete and a spare cluster that has filled up reads fragmented on exactly those days.
"""

from __future__ import annotations

from datetime import date, timedelta

import pandas as pd


def provisional_days(metric_tree: pd.DataFrame) -> set[date]:
    """The days with a provisional row in ``metric_tree`` (none when the frame has no ``is_provisional``)."""
    if "is_provisional" not in metric_tree or metric_tree.empty:
        return set()
    flagged = metric_tree.loc[metric_tree["is_provisional"].fillna(False).astype(bool), "metric_date"]
    return set(pd.to_datetime(flagged).dt.date)


def settled_verdicts(found: pd.DataFrame, metric_tree: pd.DataFrame, confirm_points: int) -> pd.Series:
    """``found``'s verdicts with every confirmation that needs a provisional day turned ``provisional``.

    ``found``: regression rows (``verdict``, ``shape``, ``change_date``, ``split_date``, ``after_end_date``,
    ``n_after``). A provisional day inside an after-window is assumed to be one of its points (the window may skip
    unknown days), so the count of settled points is a lower bound and never confirms too early.
    """
    verdicts = found["verdict"].copy()
    days = provisional_days(metric_tree)
    if not days or found.empty:
        return verdicts
    for index, row in found.iterrows():
        if row["verdict"] != "confirmed":
            continue
        first = _as_date(row["split_date"]) or _as_date(row["change_date"])
        last = _as_date(row["after_end_date"])
        if first is None or last is None:
            continue
        if row["shape"] == "burst":
            if last + timedelta(days=1) in days:
                verdicts.at[index] = "provisional"
            continue
        unsettled = sum(1 for day in days if first <= day <= last)
        if int(row["n_after"]) - unsettled < confirm_points:
            verdicts.at[index] = "provisional"
    return verdicts


def _as_date(value: object) -> date | None:
    if value is None or (not isinstance(value, date) and pd.isna(value)):
        return None
    return pd.Timestamp(value).date()
