"""Data quality as data: the data_quality table on the demo fleet and on a fleet with known problems."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import duckdb
import pytest

from perf_assets.lib.contracts import RAW_TABLES
from perf_assets.lib.incremental import every_lake_day_args
from perf_assets.lib.ingest import landed_files
from perf_assets.lib.ingest.run import ingest
from perf_assets.lib.paths import DBT_PROJECT_DIR, data_home
from perf_assets.lib.quality.lake_checks import freshness_lag_days, quarantine_rate
from perf_assets.lib.simulate import simulate


def test_demo_dcgm_coverage_is_full_in_service_and_down_time_is_known_missing(demo_snapshot):
    coverage = demo_snapshot(
        "select status, count(*) as n, min(ratio) as lo, max(ratio) as hi from data_quality "
        "where check_name = 'dcgm_coverage' and expected > 0 group by all"
    )
    assert coverage.to_dict("records") == [{"status": "ok", "n": coverage.n[0], "lo": 1.0, "hi": 1.0}]
    down = demo_snapshot(
        "select count(*) as n from data_quality where check_name = 'dcgm_coverage' "
        "and detail not like '%; 0 out-of-service samples known-missing'"
    )
    assert down.n[0] > 0  # the down node's GPU-days: the gap is known-missing, not missing telemetry


def test_demo_quarantine_rate_is_zero_and_nothing_fails(demo_snapshot):
    statuses = demo_snapshot(
        "select check_name, status, count(*) as n, max(ratio) as hi from data_quality group by all"
    )
    quarantine = statuses[statuses.check_name == "quarantine_rate"]
    assert list(quarantine.status) == ["ok"] and quarantine.hi.iloc[0] == 0.0
    assert "fail" not in set(statuses.status)
    silent = statuses[statuses.check_name == "exporter_silent"]
    assert list(silent.status) == ["ok"]
    traces = demo_snapshot("select observed, ratio, status from data_quality where check_name = 'trace_coverage'")
    # the demo traces two jobs, each on one day (docs/simulator.md, exports); other days have none: a fact
    assert traces.observed.sum() == 2 and set(traces.status) == {"ok", "warn"}
    assert ((traces.ratio > 0) == (traces.status == "ok")).all()


def _dbt_build(home, target: Path) -> None:
    dbt = Path(sys.executable).parent / "dbt"
    env = {**os.environ, "PERFWH_HOME": str(home.root)}
    command = [str(dbt), "build", "--quiet", "--select", "+data_quality", "--indirect-selection", "cautious"]
    command += ["--project-dir", ".", "--profiles-dir", "."]  # cautious: no test of an unselected model
    command += every_lake_day_args(home)  # the incremental models' days (docs/incremental.md)
    result = subprocess.run(
        [*command, "--target-path", str(target)], cwd=DBT_PROJECT_DIR, env=env, capture_output=True, text=True
    )
    assert result.returncode == 0, result.stdout[-3000:]


@pytest.fixture(scope="module")
def troubled(tmp_path_factory):
    """Two days of a fleet where one node's exporter went silent on day 2 and one file is quarantined."""
    home = data_home(tmp_path_factory.mktemp("troubled")).ensure()
    simulate(home, scenario="demo", seed=3, days=2)
    files = landed_files(home.landing)
    silent = next(path for path in files if "/dcgm/" in path.as_posix() and "2026-11-02" in path.as_posix())
    for path in silent.parent.glob(f"{silent.name.split('__')[0]}__*"):  # its range JSON and exporter scrapes
        path.unlink()
    bad = next(path for path in files if "/sacct/" in path.as_posix())
    bad.write_bytes(b"")  # an empty delivery is quarantined
    ingest(home)
    _dbt_build(home, tmp_path_factory.mktemp("dbt_target"))
    return home, silent


def test_a_silent_exporter_and_a_quarantined_file_show_as_fail_rows(troubled):
    home, silent = troubled
    with duckdb.connect(str(home.warehouse_db), read_only=True) as db:
        rows = db.sql(
            "select check_name, entity_id, cast(metric_date as varchar), observed, ratio, status, detail "
            "from data_quality where status != 'ok' order by all"
        ).fetchall()
    by_check: dict[str, list] = {}
    for row in rows:
        by_check.setdefault(row[0], []).append(row)
    node = silent.name.split("__")[0]
    coverage = by_check["dcgm_coverage"]
    assert len(coverage) == 8 and all(r[4] == 0.0 and r[5] == "fail" and node in r[6] for r in coverage)
    silent_rows = by_check["exporter_silent"]
    assert len(silent_rows) == 8 and all(r[3] == 24.0 and "still silent at the window end" in r[6] for r in silent_rows)
    (quarantine,) = by_check["quarantine_rate"]
    assert quarantine[1] == "sacct" and quarantine[5] == "fail" and 0 < quarantine[4] <= 1
    figures = quarantine_rate(home, RAW_TABLES["sacct"])
    assert (figures.files, figures.quarantined) == (4, 1) and quarantine[4] == 0.5  # 1 of 2 that day


def test_unknown_stays_none():
    assert freshness_lag_days(None, None) is None
    from perf_assets.lib.quality.lake_checks import QuarantineRate

    assert QuarantineRate(0, 0).rate is None


def test_data_quality_is_in_the_lineage():
    from perf_assets.definitions import defs

    keys = {key.to_user_string() for key in defs().resolve_asset_graph().get_all_asset_keys()}
    assert "data_quality" in keys
    checks = {key.name for key in defs().resolve_asset_graph().asset_check_keys}
    assert {"quarantine_rate", "freshness"} <= checks
