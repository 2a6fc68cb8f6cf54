"""Incremental dbt models (docs/incremental.md): which days a build rebuilds, and that a late file for an old day ends
in the same warehouse as a full rebuild."""

from __future__ import annotations

import dataclasses
import json
import shutil
from datetime import date, timedelta
from pathlib import Path

import dagster as dg
import duckdb
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from perf_assets.lib.build import WAREHOUSE_ASSETS
from perf_assets.lib.engine_equivalence import ABS_TOL, REL_TOL, compare_frames, duckdb_table_frame
from perf_assets.lib.incremental import (
    BACKFILL_BATCH_SIZE_ENV,
    every_lake_day_args,
    lake_files,
    plan_window,
    project_fingerprint,
    read_state,
    record_build,
)
from perf_assets.lib.paths import DataHome

# The same assets without their checks: dbt then runs the models and no data test (the demo fixture's build runs
# them all); for tests that compare tables between builds.
WAREHOUSE_MODELS = dg.AssetSelection.from_string(WAREHOUSE_ASSETS).without_checks()


def _lake(root: Path, days_by_table: dict[str, list[str]]) -> DataHome:
    home = DataHome(root).ensure()
    for table, days in days_by_table.items():
        for day in days:
            folder = home.lake_raw / table / f"event_date={day}"
            folder.mkdir(parents=True, exist_ok=True)
            (folder / f"{table}-{day}.parquet").write_bytes(b"PAR1")
    (home.lake_raw / "raw_dcgm" / "_schema").mkdir(parents=True, exist_ok=True)
    (home.lake_raw / "raw_dcgm" / "_schema" / "empty.parquet").write_bytes(b"PAR1")  # not a day: ignored
    home.warehouse_db.write_bytes(b"")
    return home


def test_first_build_is_a_full_refresh_over_every_lake_day(tmp_path, monkeypatch):
    monkeypatch.delenv(BACKFILL_BATCH_SIZE_ENV, raising=False)
    home = _lake(tmp_path, {"raw_dcgm": ["2026-11-01", "2026-11-02"], "raw_sacct": ["2026-10-30"]})
    window = plan_window(home, "v1", lookback=2)
    assert (window.start, window.end, window.full_refresh) == (date(2026, 10, 30), date(2026, 11, 3), True)
    assert window.dbt_args() == ["--event-time-start", "2026-10-30", "--event-time-end", "2026-11-03", "--full-refresh"]
    assert len(window.lake_files) == 3  # the _schema file is no day


def test_a_full_refresh_takes_the_backfill_batch_size_and_an_incremental_build_days(tmp_path, monkeypatch):
    home = _lake(tmp_path, {"raw_dcgm": ["2026-11-01", "2026-11-02"]})
    monkeypatch.setenv(BACKFILL_BATCH_SIZE_ENV, "Month")
    window = plan_window(home, "v1", lookback=2)
    assert window.full_refresh and window.batch_size == "month" and "month batches" in window.describe()
    assert window.dbt_args()[4:] == ["--vars", '{"microbatch_batch_size": "month"}', "--full-refresh"]
    record_build(home, window, "v1")
    incremental = plan_window(home, "v1", lookback=2)
    assert not incremental.full_refresh and incremental.batch_size == "day" and "--vars" not in incremental.dbt_args()
    monkeypatch.setenv(BACKFILL_BATCH_SIZE_ENV, "hour")  # an hour batch would split the day-grain models
    with pytest.raises(ValueError, match="PERFWH_BACKFILL_BATCH_SIZE must be one of day, month, year"):
        plan_window(home, "v2", lookback=2)


def test_an_incremental_build_takes_the_lookback_and_every_day_a_file_landed_for(tmp_path):
    days = [f"2026-11-{d:02d}" for d in range(1, 11)]
    home = _lake(tmp_path, {"raw_dcgm": days, "raw_sacct": days})
    record_build(home, plan_window(home, "v1", lookback=2), "v1")

    nothing_new = plan_window(home, "v1", lookback=2)
    assert (nothing_new.start, nothing_new.end, nothing_new.full_refresh) == (
        date(2026, 11, 8),
        date(2026, 11, 11),
        False,
    )

    # a new day, and a late file for a day far behind the lookback
    for table, day in (("raw_dcgm", "2026-11-11"), ("raw_sacct", "2026-11-03")):
        (home.lake_raw / table / f"event_date={day}").mkdir(exist_ok=True)
        (home.lake_raw / table / f"event_date={day}" / "late.parquet").write_bytes(b"PAR1")
    window = plan_window(home, "v1", lookback=2)
    assert (window.start, window.end, window.full_refresh) == (date(2026, 11, 3), date(2026, 11, 12), False)
    assert "late files for 2026-11-03" in window.reason

    assert plan_window(home, "v2", lookback=2).full_refresh  # the dbt project changed: its tables may be stale
    assert plan_window(home, "v1", full_refresh=True, lookback=2).full_refresh
    home.warehouse_db.unlink()
    assert plan_window(home, "v1", lookback=2).full_refresh  # the warehouse is gone


def test_the_last_builds_provisional_days_are_rebuilt(tmp_path):
    """Days a build left provisional (after its last day − its lookback) are rebuilt by the next one, even when two days
    land at once or the lookback shrinks, so is_provisional never stays true on a day no build will revisit."""
    home = _lake(tmp_path, {"raw_dcgm": [f"2026-11-{d:02d}" for d in range(1, 11)]})
    record_build(home, plan_window(home, "v1", lookback=2), "v1")  # provisional: 11-09 and 11-10
    assert read_state(home)["lookback"] == 2

    for day in ("2026-11-11", "2026-11-12"):  # two days at once: the lookback alone would start at 11-10
        (home.lake_raw / "raw_dcgm" / f"event_date={day}").mkdir()
        (home.lake_raw / "raw_dcgm" / f"event_date={day}" / "new.parquet").write_bytes(b"PAR1")
    window = plan_window(home, "v1", lookback=2)
    assert (window.start, window.end) == (date(2026, 11, 9), date(2026, 11, 13))
    assert "provisional days from 2026-11-09" in window.reason

    record_build(home, window, "v1")  # provisional: 11-11 and 11-12
    shorter = plan_window(home, "v1", lookback=0)  # nothing new, lookback 0: still the days left provisional
    assert (shorter.start, shorter.end) == (date(2026, 11, 11), date(2026, 11, 13))
    record_build(home, shorter, "v1")  # lookback 0 leaves no day provisional
    assert plan_window(home, "v1", lookback=0).start == date(2026, 11, 12)


def test_a_rewritten_file_counts_as_late(tmp_path):
    home = _lake(tmp_path, {"raw_dcgm": [f"2026-11-{d:02d}" for d in range(1, 11)]})
    record_build(home, plan_window(home, "v1", lookback=0), "v1")
    (home.lake_raw / "raw_dcgm" / "event_date=2026-11-02" / "raw_dcgm-2026-11-02.parquet").write_bytes(
        b"PAR1 compacted"
    )
    window = plan_window(home, "v1", lookback=0)
    assert (window.start, window.end) == (date(2026, 11, 2), date(2026, 11, 11))


def test_the_fingerprint_follows_the_models(tmp_path, dbt_manifest):
    manifest = json.loads(dbt_manifest.read_text())
    assert project_fingerprint(dbt_manifest) == project_fingerprint(dbt_manifest)
    node = next(n for n in manifest["nodes"].values() if n["name"] == "int_dcgm_node_days")
    node["checksum"]["checksum"] = "changed"
    changed = tmp_path / "manifest.json"
    changed.write_text(json.dumps(manifest))
    assert project_fingerprint(changed) != project_fingerprint(dbt_manifest)


def _copy_landing(source: DataHome, target: DataHome, keep) -> list[Path]:
    copied = []
    for path in sorted(source.landing.rglob("*")):
        relative = path.relative_to(source.landing)
        if path.is_file() and keep(relative):
            (target.landing / relative).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(path, target.landing / relative)
            copied.append(relative)
    return copied


def _dbt_tables(home: DataHome) -> dict[tuple[str, str], object]:
    with duckdb.connect(str(home.warehouse_db), read_only=True) as con:
        names = con.execute(
            "select table_schema, table_name from information_schema.tables "
            "where table_type = 'BASE TABLE' and table_schema in ('intermediate', 'main') order by all"
        ).fetchall()
    return {name: duckdb_table_frame(home.warehouse_db, *name) for name in names}


def _node_day_samples(home: DataHome, node: str, day: str) -> int:
    with duckdb.connect(str(home.warehouse_db), read_only=True) as con:
        row = con.execute(
            "select coalesce(sum(dcgm_gpu_util_samples), 0) from intermediate.int_dcgm_node_days "
            "where node = ? and metric_date = ?",
            [node, day],
        ).fetchone()
    return int(row[0])


@pytest.mark.slow
def test_a_new_day_splits_the_build_and_a_late_file_rebuilds_its_day_and_both_equal_a_full_refresh(
    tmp_path, dbt_manifest, monkeypatch
):
    """Land day 1 of the demo fleet without one node's DCGM export, build. Land day 2 (lookback 1): the Dagster asset
    runs two dbt builds, the day-local models over day 2 alone and the rest over days 1-2 (a sentinel row of day 1 in
    a day-local table survives). Land the late day-1 file: every model rebuilds from day 1 (the sentinel goes, the
    late samples are in; its dbt starts from the parse the day-2 build left in the home). Then a full refresh of the
    same lake: every intermediate and mart table is the same.
    3.4 min on 2 cores at load 5 (5 min before the home kept dbt's parse and compare_frames was vectorized): four
    builds of a 2-day, 64-GPU fleet, one of them with its data tests."""
    from perf_assets.lib.build import build
    from perf_assets.lib.simulate import simulate
    from perf_assets.lib.simulate.scenario import DCGM_EXTRA_FIELDS, get_scenario

    monkeypatch.setenv("PERFWH_INCREMENTAL_LOOKBACK_DAYS", "1")
    simulated = DataHome(tmp_path / "simulated").ensure()
    demo = get_scenario("demo")  # with every DCGM field the simulator knows: the THERMAL_VIOLATION counter too
    simulate(simulated, scenario=dataclasses.replace(demo, dcgm_fields=demo.dcgm_fields + DCGM_EXTRA_FIELDS), days=2)
    late_file = Path("dcgm/alpha/2026-11-01/alpha-n02__-__-__20261101T000000Z.json")
    assert (simulated.landing / late_file).is_file()

    home = DataHome(tmp_path / "home").ensure()
    first = _copy_landing(simulated, home, lambda p: p != late_file and "2026-11-02" not in str(p))
    assert first and build(home, selection=WAREHOUSE_MODELS)
    assert read_state(home)["full_refresh"] is True
    without_late = _node_day_samples(home, "alpha-n02", "2026-11-01")

    def sentinels() -> list[tuple[str]]:
        with duckdb.connect(str(home.warehouse_db), read_only=True) as con:
            return con.execute(
                "select metric_date::varchar from intermediate.int_dcgm_node_days where node = 'sentinel-node'"
            ).fetchall()

    with duckdb.connect(str(home.warehouse_db)) as con:  # fct_node_day joins it to the ledger's nodes: no effect
        con.execute(
            "insert into intermediate.int_dcgm_node_days by name "
            "select 'sentinel-node' as node, date '2026-11-01' as metric_date"
        )
    second = _copy_landing(simulated, home, lambda p: "2026-11-02" in str(p))
    assert second and late_file not in second
    assert build(home, selection=WAREHOUSE_ASSETS)  # models and their checks: the asset takes the split
    state = read_state(home)
    assert state["window"] == ["2026-11-01", "2026-11-03"] and state["full_refresh"] is False
    assert sentinels() == [("2026-11-01",)]  # the day-local models rebuilt day 2 alone, not the lookback's day 1

    rest = _copy_landing(simulated, home, lambda p: p == late_file)
    assert rest == [late_file]
    earlier_runs = set(home.dbt_runs.glob("warehouse_dbt_models-*"))
    assert build(home, selection=WAREHOUSE_MODELS)  # a late file behind the lookback: one build from its day
    (run,) = set(home.dbt_runs.glob("warehouse_dbt_models-*")) - earlier_runs
    dbt_log = b"".join(path.read_bytes() for path in run.glob("dbt.log*"))
    # dbt started from the parse the last build left in this home (lib.dbt_parse_cache), no full parse
    assert b'"name": "PartialParsingEnabled"' in dbt_log and b'"name": "UnableToPartialParse"' not in dbt_log
    state = read_state(home)
    assert state["window"] == ["2026-11-01", "2026-11-03"] and state["full_refresh"] is False
    assert state["lake_files"] == lake_files(home.lake_raw)
    assert sentinels() == []  # the late file moved the day-local window back to its day
    assert _node_day_samples(home, "alpha-n02", "2026-11-01") > without_late  # the late file's samples are in
    with duckdb.connect(str(home.warehouse_db), read_only=True) as con:  # counter deltas cross the day boundary
        assert (
            con.execute(
                "select count(*) from intermediate.int_dcgm_counter_deltas "
                "where sampled_date = date '2026-11-02' and previous_sampled_at < timestamptz '2026-11-02 00:00:00+00'"
            ).fetchone()[0]
            > 0
        )
    incremental = _dbt_tables(home)

    assert build(home, selection=WAREHOUSE_MODELS, full_refresh=True)
    assert read_state(home)["full_refresh"] is True
    rebuilt = _dbt_tables(home)
    assert incremental.keys() == rebuilt.keys() and ("intermediate", "int_dcgm_samples") in rebuilt
    problems = []
    for name, frame in rebuilt.items():
        problems += compare_frames(".".join(name), incremental[name], frame, rel_tol=REL_TOL, abs_tol=ABS_TOL).problems
    assert not problems, "\n".join(problems[:20])
    assert sum(len(frame) for frame in rebuilt.values()) > 10_000


def test_full_refresh_is_asked_of_the_dbt_assets_only_when_they_run(dbt_manifest):
    from perf_assets.definitions import defs
    from perf_assets.lib.build import _full_refresh_config

    definitions = defs()
    assert _full_refresh_config(definitions, WAREHOUSE_ASSETS) == {
        "ops": {"warehouse_dbt_models": {"config": {"full_refresh": True}}}
    }
    assert _full_refresh_config(definitions, "group:raw") is None  # ingest only: no dbt op to configure


def test_an_empty_lake_builds_today_only(tmp_path):
    home = DataHome(tmp_path).ensure()
    window = plan_window(home, "v1", lookback=2)
    assert window.days == 1 and window.full_refresh  # never from `begin` (2024-01-01) to now
    assert every_lake_day_args(home) == window.dbt_args()[:4]


def test_the_days_inside_the_lookback_are_provisional(demo_snapshot):
    """is_provisional on the demo fleet (14 days, lookback PERFWH_INCREMENTAL_LOOKBACK_DAYS, default 2): true on
    exactly the days after (the calendar's last day − the lookback), on every row of the day, in the day marts and both
    metric trees."""
    from perf_assets.lib.incremental import lookback_days

    last = demo_snapshot("select max(day) as day from intermediate.int_calendar_days")["day"][0]
    last = last.date() if hasattr(last, "date") else last
    lookback = lookback_days()
    for table in ("fct_node_day", "fct_cluster_day", "fct_fleet_day", "metric_tree_daily", "metric_tree_hourly"):
        flags = demo_snapshot(
            f"select metric_date, bool_and(is_provisional) as every_row, bool_or(is_provisional) as any_row, "
            f"count(*) as row_count from main.{table} group by metric_date order by metric_date"
        )
        assert len(flags) == 14 and (flags["row_count"] > 0).all(), table
        assert (flags["every_row"] == flags["any_row"]).all(), f"{table}: a day with both flags"
        provisional = {
            (day.date() if hasattr(day, "date") else day)
            for day, flag in zip(flags["metric_date"], flags["every_row"], strict=True)
            if flag
        }
        assert provisional == {last - timedelta(days=n) for n in range(lookback)}, table


def _sample_files(root: Path, rows_by_day: dict[str, int]) -> DataHome:
    """A lake whose raw_dcgm day folders hold real Parquet files of the given row counts."""
    home = DataHome(root).ensure()
    for day, rows in rows_by_day.items():
        folder = home.lake_raw / "raw_dcgm" / f"event_date={day}"
        folder.mkdir(parents=True, exist_ok=True)
        pq.write_table(pa.table({"value": [1.0] * rows}), folder / "part.parquet")
    return home


def test_auto_batch_size_takes_months_while_the_largest_month_fits_the_bound(tmp_path, monkeypatch):
    """The default (auto) counts the telemetry samples of each calendar month from the footers: month batches while
    the largest month (October here, 3 + 3 rows; the whole lake has 10, November 4) fits the bound, day above it."""
    import perf_assets.lib.incremental as incremental

    monkeypatch.delenv(BACKFILL_BATCH_SIZE_ENV, raising=False)
    home = _sample_files(tmp_path, {"2026-10-30": 3, "2026-10-31": 3, "2026-11-01": 4})
    assert incremental.samples_by_month(home.lake_raw, lake_files(home.lake_raw)) == {"2026-10": 6, "2026-11": 4}
    monkeypatch.setattr(incremental, "AUTO_MONTH_MAX_SAMPLES", 6)
    window = plan_window(home, "v1", lookback=2)
    assert window.full_refresh and window.batch_size == "month", window.describe()
    assert "auto: largest month 6 telemetry samples <= 6" in window.describe()
    monkeypatch.setattr(incremental, "AUTO_MONTH_MAX_SAMPLES", 5)
    assert plan_window(home, "v1", lookback=2).batch_size == "day"
    monkeypatch.setenv(BACKFILL_BATCH_SIZE_ENV, "month")  # a size that is set is taken as it is
    assert plan_window(home, "v1", lookback=2).batch_size == "month"


def test_auto_batch_size_is_day_when_a_footer_cannot_be_read(tmp_path, monkeypatch):
    monkeypatch.delenv(BACKFILL_BATCH_SIZE_ENV, raising=False)
    home = _lake(tmp_path, {"raw_dcgm": ["2026-11-01"]})  # 4 bytes: no footer
    window = plan_window(home, "v1", lookback=2)
    assert window.batch_size == "day" and "could not be read" in window.describe()


def test_day_local_models_rebuild_from_the_first_changed_day_and_the_rest_over_the_lookback(tmp_path):
    """The split of an incremental build (docs/incremental.md, "Day-local models"): the day-local models (selector
    day_local) rebuild from the earliest day a new or rewritten lake file belongs to, everything else (selector
    after_day_local) over the lookback window, first the former; a late file behind the lookback moves both."""
    days = [f"2026-11-{d:02d}" for d in range(1, 11)]
    home = _lake(tmp_path, {"raw_dcgm": days, "raw_sacct": days})
    full = plan_window(home, "v1", lookback=2)
    assert not full.split and full.dbt_invocations() == [full.dbt_args()]  # a full refresh is one build
    record_build(home, full, "v1")

    for table in ("raw_dcgm", "raw_sacct"):  # one new day
        (home.lake_raw / table / "event_date=2026-11-11").mkdir()
        (home.lake_raw / table / "event_date=2026-11-11" / "new.parquet").write_bytes(b"PAR1")
    day = plan_window(home, "v1", lookback=2)
    assert (day.start, day.day_local_start, day.end) == (date(2026, 11, 9), date(2026, 11, 11), date(2026, 11, 12))
    assert day.split and "day-local models from 2026-11-11 (1 day(s))" in day.describe()
    assert day.dbt_invocations() == [
        ["--selector", "day_local", "--event-time-start", "2026-11-11", "--event-time-end", "2026-11-12"],
        ["--selector", "after_day_local", "--event-time-start", "2026-11-09", "--event-time-end", "2026-11-12"],
    ]
    record_build(home, day, "v1")
    assert read_state(home)["window"] == ["2026-11-09", "2026-11-12"]  # the lookback window: provisional days follow it

    # a late file for a day far behind the lookback, and a rewritten one inside it: both windows start at the late day
    (home.lake_raw / "raw_dcgm" / "event_date=2026-11-03" / "late.parquet").write_bytes(b"PAR1")
    (home.lake_raw / "raw_dcgm" / "event_date=2026-11-10" / "raw_dcgm-2026-11-10.parquet").write_bytes(b"PAR1 again")
    late = plan_window(home, "v1", lookback=2)
    assert (late.start, late.day_local_start) == (date(2026, 11, 3), date(2026, 11, 3))
    assert not late.split and late.dbt_invocations() == [late.dbt_args()]
    record_build(home, late, "v1")

    # a late file inside the lookback and no new day: the day-local models from that day, the rest from the lookback
    (home.lake_raw / "raw_sacct" / "event_date=2026-11-10" / "late.parquet").write_bytes(b"PAR1")
    inside = plan_window(home, "v1", lookback=2)
    assert (inside.start, inside.day_local_start, inside.end) == (
        date(2026, 11, 9),
        date(2026, 11, 10),
        date(2026, 11, 12),
    )
    record_build(home, inside, "v1")

    nothing_new = plan_window(home, "v1", lookback=2)  # the last day alone: a build is never empty
    assert (nothing_new.start, nothing_new.day_local_start) == (date(2026, 11, 9), date(2026, 11, 11))

    no_lookback = plan_window(home, "v1", lookback=0)  # the last build left 11-10 and 11-11 provisional
    assert (no_lookback.start, no_lookback.day_local_start) == (date(2026, 11, 10), date(2026, 11, 11))


def test_day_local_models_read_only_day_local_models_views_of_the_lake_and_seeds(dbt_manifest):
    """A model tagged day_local is rebuilt only from the first changed lake day (no lookback): its day's rows must come
    from that day's lake files and earlier ones. So it may read only other day-local models, seeds and staging views of
    the lake, never a table (e.g. int_calendar_days, whose range grows with later days) or a lookback model, and it
    carries no is_provisional (that flag changes when later days arrive)."""
    nodes = json.loads(dbt_manifest.read_text())["nodes"]
    day_local = {uid for uid, node in nodes.items() if "day_local" in node.get("tags", [])}
    assert {nodes[uid]["name"] for uid in day_local} >= {"int_dcgm_samples", "int_dcgm_counter_deltas"}
    problems = []
    for uid in sorted(day_local):
        node = nodes[uid]
        if node["config"].get("incremental_strategy") != "microbatch" or "is_provisional" in node["columns"]:
            problems.append(f"{node['name']}: not a microbatch model, or has is_provisional")
        for parent in node["depends_on"]["nodes"]:
            kind = parent.split(".")[0]
            if kind in ("seed", "source") or parent in day_local:
                continue
            upstream = nodes.get(parent, {})
            view_of_lake = upstream.get("config", {}).get("materialized") in ("view", "table") and all(
                p.split(".")[0] in ("source", "seed") for p in upstream.get("depends_on", {}).get("nodes", [])
            )
            if not (view_of_lake and upstream.get("name", "").startswith("stg_")):
                problems.append(f"{node['name']} reads {parent}")
    assert not problems, problems


def test_only_the_lake_tables_the_day_local_models_read_move_their_window(tmp_path, dbt_manifest):
    """A new day's sacct export rewrites the day before (jobs running across midnight): that moves the lookback
    window's start, not the day-local models', which read no sacct (their tables come from the manifest)."""
    from perf_assets.lib.incremental import day_local_lake_tables

    tables = day_local_lake_tables(dbt_manifest)
    assert {"raw_dcgm", "raw_nvidia_smi", "raw_probe_results"} <= tables and "raw_sacct" not in tables
    days = [f"2026-11-{d:02d}" for d in range(1, 11)]
    home = _lake(tmp_path, {"raw_dcgm": days, "raw_sacct": days})
    record_build(home, plan_window(home, "v1", lookback=2, day_local_tables=tables), "v1")
    for table in ("raw_dcgm", "raw_sacct"):
        (home.lake_raw / table / "event_date=2026-11-11").mkdir()
        (home.lake_raw / table / "event_date=2026-11-11" / "new.parquet").write_bytes(b"PAR1")
    (home.lake_raw / "raw_sacct" / "event_date=2026-11-10" / "compacted.parquet").write_bytes(b"PAR1")
    window = plan_window(home, "v1", lookback=2, day_local_tables=tables)
    assert (window.start, window.day_local_start) == (date(2026, 11, 9), date(2026, 11, 11))
    every_table = plan_window(home, "v1", lookback=2)  # without the manifest's tables: every changed file counts
    assert (every_table.start, every_table.day_local_start) == (date(2026, 11, 9), date(2026, 11, 10))
