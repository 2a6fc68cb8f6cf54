"""The Dagster code location: groups, descriptions, the writer pool, dbt checks, automation."""

from __future__ import annotations

import dagster as dg
import pytest

from perf_assets.lib.contracts import ASSET_GROUPS, RAW_TABLES, WRITER_POOL


@pytest.fixture(scope="module")
def definitions(dbt_manifest):
    from perf_assets.definitions import defs

    return defs()


@pytest.fixture(scope="module")
def specs(definitions):
    return {spec.key.to_user_string(): spec for spec in definitions.resolve_all_asset_specs()}


def test_every_asset_has_a_description_and_a_contract_group(specs):
    assert specs
    for key, spec in specs.items():
        assert spec.description, key
        assert spec.owners == ["team:perf-warehouse"], key
        assert spec.group_name in ASSET_GROUPS, (key, spec.group_name)


def test_lineage_runs_from_raw_to_alerts(specs):
    for table in RAW_TABLES.values():
        assert specs[table.name].group_name == "raw"
    assert specs["stg_step_events__events"].group_name == "staging"
    assert specs["int_node_day_ledger"].group_name == "intermediate"
    assert specs["fct_cluster_day"].group_name == "marts"
    staged = {dep.asset_key.to_user_string() for dep in specs["stg_sacct__allocations"].deps}
    assert staged == {"raw_sacct"}  # the dbt source is the ingest asset: one node, one edge
    assert {dep.asset_key.to_user_string() for dep in specs["regressions"].deps} >= {"metric_tree_daily"}
    assert {dep.asset_key.to_user_string() for dep in specs["alert_outbox"].deps} == {"regressions", "dim_gpus"}
    assert specs["detection_evaluation"].group_name == "evaluation"


def test_warehouse_writers_share_one_pool(definitions):
    by_key = {}
    for assets_def in definitions.assets:
        if isinstance(assets_def, dg.AssetsDefinition):
            for key in assets_def.keys:
                by_key[key.to_user_string()] = assets_def
    for writer in ("fct_cluster_day", "regressions"):
        pools = {op.pool for op in by_key[writer].node_def.iterate_op_defs()}
        assert pools == {WRITER_POOL}, writer


def test_dbt_data_tests_are_asset_checks(definitions):
    checks = {key.name for key in definitions.resolve_asset_graph().asset_check_keys}
    assert any(name.startswith("product_identity_fct_cluster_day") for name in checks)
    assert "fct_cluster_day_ledger_closes" in checks


def test_sensor_schedules_and_jobs_exist(definitions, specs):
    build_job = definitions.resolve_job_def("ingest_and_build")
    built = {key.to_user_string() for key in build_job.asset_layer.executable_asset_keys}
    assert (
        not {"local_probe_suite", "remote_probe_suite"} & built
        and {"raw_dcgm", "fct_fleet_day", "alert_outbox"} <= built
    )
    assert definitions.resolve_schedule_def("daily_build").cron_schedule == "0 6 * * *"
    probes = definitions.resolve_schedule_def("daily_probes")
    assert probes.job.name == "probe_local_host" and probes.default_status == dg.DefaultScheduleStatus.STOPPED
    assert specs["local_probe_suite"].group_name == specs["remote_probe_suite"].group_name == "probes"
    assert definitions.resolve_sensor_def("landing_sensor")
    detection = definitions.resolve_schedule_def("daily_detection")
    assert detection.cron_schedule == "0 7 * * *" and detection.default_status == dg.DefaultScheduleStatus.RUNNING
    detect_job = definitions.resolve_job_def("detect_and_alert")
    assert {key.to_user_string() for key in detect_job.asset_layer.executable_asset_keys} >= {
        "regressions",
        "alert_outbox",
    }
    delivery = definitions.resolve_sensor_def("alert_delivery")
    assert delivery.default_status == dg.DefaultSensorStatus.RUNNING


def test_alert_delivery_sensor_sends_pending_alerts(tmp_path, monkeypatch):
    from perf_assets.defs.alerts.automation import alert_delivery
    from perf_assets.lib.alerts import read_alerts, upsert_incidents

    monkeypatch.setenv("PERFWH_HOME", str(tmp_path))
    incident = {
        "grain": "cluster",
        "entity_id": "alpha",
        "metric_group": "goodput",
        "direction": "regression",
        "change_date": "2026-11-09",
        "headline_metric": "goodput",
        "summary": "regression: goodput of cluster alpha",
        "regression_ids": ["r1"],
        "metrics": {
            "goodput": {
                "change_date": "2026-11-09",
                "before_start_date": "2026-11-01",
                "after_end_date": "2026-11-14",
                "relative_effect": -0.1,
            }
        },
        "top_factor": None,
        "coinciding_changes": [],
    }
    upsert_incidents(tmp_path / "alerts", [incident])

    result = alert_delivery(dg.build_sensor_context())

    assert isinstance(result, dg.SkipReason) and "delivered 1" in result.skip_message
    assert read_alerts(tmp_path / "alerts")[0]["status"] == "notified"
    assert "delivered 0" in alert_delivery(dg.build_sensor_context()).skip_message


def test_landing_sensor_requests_one_run_for_new_files(tmp_path, monkeypatch):
    from perf_assets.defs.ingest.sensors import landing_sensor

    monkeypatch.setenv("PERFWH_HOME", str(tmp_path))
    context = dg.build_sensor_context()
    assert isinstance(landing_sensor(context), dg.SkipReason)
    landed = tmp_path / "landing" / "node_events" / "alpha" / "2026-11-01" / "a.jsonl"
    landed.parent.mkdir(parents=True)
    landed.write_text("{}\n")
    (landed.parent / "b.jsonl").write_text("{}\n")

    result = landing_sensor(dg.build_sensor_context())

    assert len(result.run_requests) == 1 and result.run_requests[0].tags["perfwh/new_files"] == "2"
    assert isinstance(landing_sensor(dg.build_sensor_context(cursor=result.cursor)), dg.SkipReason)


def test_the_dbt_resource_knows_its_dbt_version_without_running_dbt(definitions, tmp_path, monkeypatch):
    """The warehouse's dbt resource takes dbt Core's version from the package of its own environment, which is
    what `dbt --version` of that environment's script prints; any other executable is still asked."""
    import os
    import subprocess
    import sys
    from pathlib import Path

    from perf_assets.defs.resources import WarehouseDbtCliResource
    from perf_assets.lib.dbt_project import dbt_project

    resource = definitions.resources["dbt"]
    assert isinstance(resource, WarehouseDbtCliResource)
    printed = subprocess.run(
        [str(Path(sys.executable).parent / "dbt"), "--version"], capture_output=True, text=True, check=True
    ).stdout
    assert f"installed: {resource._cli_version}" in printed  # e.g. "installed: 1.11.16"
    assert resource._initialize_dbt_core_adapter(["build"]) is None  # no adapter: no column metadata fetched

    elsewhere = tmp_path / "dbt"  # a dbt outside this environment, found first on PATH
    elsewhere.write_text("#!/bin/sh\necho 'Core:\n  - installed: 2.0.0-preview.1'\n")
    elsewhere.chmod(0o755)
    monkeypatch.setenv("PATH", f"{tmp_path}{os.pathsep}{os.environ['PATH']}")
    other = WarehouseDbtCliResource(project_dir=dbt_project)
    assert str(other._cli_version) == "2.0.0"
