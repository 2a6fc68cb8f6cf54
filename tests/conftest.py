"""Shared fixtures, built once per test session: the demo fleet simulated, ingested and built."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from perf_assets.lib.paths import DataHome, data_home, samples_dir


@pytest.fixture(scope="session", autouse=True)
def _isolated_environment(tmp_path_factory: pytest.TempPathFactory):
    """Tests never touch ./data or a developer's Dagster instance."""
    saved = {name: os.environ.get(name) for name in ("PERFWH_HOME", "DAGSTER_HOME")}
    os.environ.pop("DAGSTER_HOME", None)
    os.environ["PERFWH_HOME"] = str(tmp_path_factory.mktemp("default_home"))
    yield
    for name, value in saved.items():
        if value is None:
            os.environ.pop(name, None)
        else:
            os.environ[name] = value


@pytest.fixture(scope="session")
def samples() -> Path:
    """The real export files of ../shared/samples (PERFWH_SAMPLES); required under CI."""
    root = samples_dir()
    if not root.is_dir():
        message = f"samples not found at {root} (set PERFWH_SAMPLES)"
        if os.environ.get("CI") == "true":
            pytest.fail(message)
        pytest.skip(message)
    return root


@pytest.fixture(scope="session")
def dbt_manifest() -> Path:
    from perf_assets.lib.build import prepare_dbt_manifest

    return prepare_dbt_manifest(force=True)


@pytest.fixture(scope="session")
def demo_home(tmp_path_factory: pytest.TempPathFactory, dbt_manifest: Path) -> DataHome:
    """The demo scenario (seed 7) simulated, then `perfwh build` once: ingest, dbt, detection, alerts."""
    from perf_assets.lib.build import build
    from perf_assets.lib.simulate import simulate

    home = data_home(tmp_path_factory.mktemp("demo")).ensure()
    simulate(home, scenario="demo", seed=7)
    assert build(home), "the first build of the demo fleet failed"
    return home


@pytest.fixture(scope="session")
def demo_snapshot(demo_home: DataHome):
    """Run SQL on the demo's published snapshot."""
    from perf_assets.lib.warehouse import published_frame

    def run(sql: str):
        return published_frame(demo_home, sql)

    return run


@pytest.fixture(scope="session")
def incidents_home(tmp_path_factory: pytest.TempPathFactory, dbt_manifest: Path) -> DataHome:
    """The `incidents` scenario (seed 1) simulated and built once per session (~2-4 min: use sparingly)."""
    from perf_assets.lib.build import build
    from perf_assets.lib.simulate import simulate

    home = data_home(tmp_path_factory.mktemp("incidents")).ensure()
    simulate(home, scenario="incidents", seed=1)
    assert build(home), "the build of the incidents scenario failed"
    return home
