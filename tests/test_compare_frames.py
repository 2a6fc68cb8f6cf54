"""compare_frames (perf_assets/lib/engine_equivalence.py), the row-by-row comparison behind the Spark equivalence and
the incremental-vs-full-refresh tests, on literal frames: rows in any order and nulls match, and one changed value of
any kind (text, integer, instant, float beyond the tolerance) is found."""

from __future__ import annotations

import pandas as pd

from perf_assets.lib.engine_equivalence import compare_frames


def _frame() -> pd.DataFrame:
    return pd.DataFrame(
        {
            "node": ["n01", "n02", None, "n01"],
            "gpus": [8, 8, 4, 8],
            "at": pd.to_datetime(["2026-11-01 00:00", "2026-11-01 01:00", None, "2026-11-02 00:00"], utc=True),
            "share": [0.25, float("nan"), 0.5, 1.0 / 3.0],
            "ranks": [[0, 1], [2], None, [0, 1]],
        }
    )


def test_the_same_rows_in_another_order_with_nulls_and_rounding_noise_are_equal():
    left = _frame()
    right = left.iloc[[3, 1, 0, 2]].reset_index(drop=True)
    right["share"] = right["share"] * (1 + 1e-12)  # re-summed floats differ in the last bits
    right["at"] = right["at"].dt.tz_convert("Europe/Berlin")  # the same instants in another zone
    right["gpus"] = right["gpus"].astype("float64")  # an engine that returns a count as a double
    assert compare_frames("t", left, right).problems == []


def test_one_changed_value_of_each_kind_is_found():
    left = _frame()
    changes = {
        "node": lambda f: f.loc.__setitem__((1, "node"), "n03"),
        "gpus": lambda f: f.loc.__setitem__((0, "gpus"), 7),
        "at": lambda f: f.loc.__setitem__((3, "at"), pd.Timestamp("2026-11-02 00:00:01", tz="UTC")),
        "share": lambda f: f.loc.__setitem__((0, "share"), 0.25 * (1 + 1e-7)),
        "ranks": lambda f: f.loc.__setitem__((1, "ranks"), [3]),
    }
    for column, change in changes.items():
        right = _frame()
        change(right)
        problems = compare_frames("t", left, right).problems
        assert problems and all(problem.startswith(column) for problem in problems), (column, problems)
    null = _frame()
    null.loc[0, "node"] = None
    assert compare_frames("t", left, null).problems  # a null where a value was
    assert compare_frames("t", left, _frame().iloc[:3]).problems == ["row counts differ: DuckDB 4, Spark 3"]
