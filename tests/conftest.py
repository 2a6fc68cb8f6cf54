"""Shared fixtures, built once per test session: the demo fleet simulated, ingested and built."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from perf_assets.lib.paths import DataHome, data_home, samples_dir


@pytest.fixture(scope="session", autouse=True)
def _isolated_environment(tmp_path_factory: pytest.TempPathFactory):
    """Tests never touch ./data or a developer's Dagster instance. Full refreshes build their incremental models in
    month batches (PERFWH_BACKFILL_BATCH_SIZE; the default, auto, takes them for lakes under its bound, as here):
    about half the model time of the 28-day fixture (the Spark equivalence run takes month batches as well), and the
    late-file test (day batches, then a month-batch full refresh) shows the batch size changes no row."""
    saved = {name: os.environ.get(name) for name in ("PERFWH_HOME", "DAGSTER_HOME", "PERFWH_BACKFILL_BATCH_SIZE")}
    os.environ.pop("DAGSTER_HOME", None)
    os.environ["PERFWH_HOME"] = str(tmp_path_factory.mktemp("default_home"))
    os.environ["PERFWH_BACKFILL_BATCH_SIZE"] = "month"
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
    """dbt_project/target/manifest.json parsed once per test run: under pytest-xdist the first worker parses (holding
    a lock, so no worker reads a half-written manifest) and the others find it done for this run."""
    import fcntl

    from perf_assets.lib.build import prepare_dbt_manifest
    from perf_assets.lib.paths import DBT_PROJECT_DIR

    run = os.environ.get("PYTEST_XDIST_TESTRUNUID")
    if run is None:
        return prepare_dbt_manifest(force=True)
    target = DBT_PROJECT_DIR / "target"
    target.mkdir(exist_ok=True)
    with open(target / ".pytest-parse.lock", "a+") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        lock.seek(0)
        done = lock.read() == run
        manifest = prepare_dbt_manifest(force=not done)
        lock.seek(0)
        lock.truncate()
        lock.write(run)
    return manifest


def pytest_itemcollected(item: pytest.Item) -> None:
    """`make test` runs two pytest-xdist workers with --dist loadgroup: the tests of each session-built fleet go to one
    worker (so it is built once) and every other module's tests stay together (their module fixtures too). Marked as
    each test is collected, before xdist reads the groups into the test ids."""
    if not getattr(item.config.option, "loadgroup", False):  # what xdist sets in each worker under --dist loadgroup
        return
    fixtures = set(getattr(item, "fixturenames", ()))
    if "incidents_home" in fixtures:
        group = "incidents"
    elif "demo_home" in fixtures:
        group = "demo"
    else:
        group = item.path.stem
    item.add_marker(pytest.mark.xdist_group(group))


@pytest.hookimpl(trylast=True)
def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """xdist writes each test's group into its id (`...@demo`), which is what it schedules by: a test id without one
    would let two workers build the same fleet, so stop instead (as pytest 9.2 with pytest-xdist 3.8 would)."""
    if getattr(config.option, "loadgroup", False) and items and "@" not in items[0].nodeid:
        raise pytest.UsageError(f"pytest-xdist did not group the tests (--dist loadgroup): {items[0].nodeid}")


@pytest.fixture(scope="session")
def dagster_home_factory(tmp_path_factory: pytest.TempPathFactory):
    """make(name) -> a new, empty folder for a persistent Dagster instance (DAGSTER_HOME: sqlite storage).

    Dagster commits to sqlite at least once per event, and a demo build has ~1,400 (each model's output, each data
    test's check): on a disk that waits for every fsync (12.7 ms a commit on the 2-core VM) that was ~70 s of a build
    spent storing its events. So the folders are in /dev/shm (tmpfs) when the machine has one, else under the
    session's tmp folder; what is stored and read is the same. Those in /dev/shm are removed when the session ends."""
    import shutil
    import tempfile

    shm = Path("/dev/shm")
    made: list[Path] = []

    def make(name: str) -> Path:
        if not (shm.is_dir() and os.access(shm, os.W_OK)):
            return tmp_path_factory.mktemp(name)
        made.append(Path(tempfile.mkdtemp(prefix=f"perfwh-test-{name}-", dir=shm)))
        return made[-1]

    yield make
    for path in made:
        shutil.rmtree(path, ignore_errors=True)


@pytest.fixture(scope="session")
def demo_dagster_home(dagster_home_factory) -> Path:
    """The Dagster instance (sqlite) that records the demo build's run: the UI tests show a copy of it."""
    path = dagster_home_factory("demo_dagster_home")
    (path / "dagster.yaml").write_text("telemetry:\n  enabled: false\n")
    return path


@pytest.fixture(scope="session")
def demo_home(
    request: pytest.FixtureRequest,
    tmp_path_factory: pytest.TempPathFactory,
    dbt_manifest: Path,
    demo_dagster_home: Path,
) -> DataHome:
    """The demo scenario (seed 7) simulated, then `perfwh build` once: ingest, dbt, detection, alerts.

    When the session runs the Spark equivalence test, the demo's dbt run on Spark starts right after, in the
    background at the lowest CPU priority (`spark_demo_build`), so that it uses the cycles the other tests leave
    idle instead of adding its ~4 minutes to the session."""
    from perf_assets.lib.build import build
    from perf_assets.lib.simulate import simulate

    home = data_home(tmp_path_factory.mktemp("demo")).ensure()
    simulate(home, scenario="demo", seed=7)
    os.environ["DAGSTER_HOME"] = str(demo_dagster_home)  # build() records its run in this instance
    try:
        assert build(home), "the first build of the demo fleet failed"
    finally:
        os.environ.pop("DAGSTER_HOME", None)
    if any(item.get_closest_marker("spark") for item in request.session.items):
        _start_spark_demo_build(request, home, tmp_path_factory)
    return home


SPARK_DEMO_RUN = pytest.StashKey[tuple]()


def _start_spark_demo_build(request: pytest.FixtureRequest, home: DataHome, factory: pytest.TempPathFactory) -> None:
    """dbt seed + run on Spark over a copy of the demo's lake (tests never change it, but a copy makes sure), as a
    deployment fills a warehouse and then adds a day: every lake day in month batches (the DuckDB side's full
    refresh in this session takes month batches too), then the incremental models' last day again in a day batch,
    an `insert overwrite` of that one date partition that must leave the others as they were. 5.5 min on an idle
    2-core machine (3.7 + 1.8), where day batches over all 14 days took 8.7 min (14 batches per incremental model);
    the batch size changing no row is shown on DuckDB by the late-file test (test_incremental_build)."""
    import shutil
    import signal
    from datetime import date, timedelta

    from perf_assets.lib.engine_equivalence import spark_available, start_dbt_run_on_spark
    from perf_assets.lib.incremental import every_lake_day_args

    if spark_available():
        return  # spark_demo_build says why, where it is asked for
    spark_dir = factory.mktemp("spark")
    lake_copy = data_home(spark_dir / "home")
    shutil.copytree(home.root / "lake", lake_copy.root / "lake")
    target = spark_dir / "dbt_target"
    every_day = every_lake_day_args(home)  # --event-time-start FIRST --event-time-end DAY_AFTER_LAST
    end = date.fromisoformat(every_day[3])
    runs = (
        (*every_day, "--vars", json.dumps({"microbatch_batch_size": "month"})),
        (
            *("--select", "config.incremental_strategy:microbatch"),
            *("--event-time-start", (end - timedelta(days=1)).isoformat(), "--event-time-end", end.isoformat()),
        ),
    )
    process = start_dbt_run_on_spark(lake_copy.root, spark_dir, target, runs)
    request.config.stash[SPARK_DEMO_RUN] = (process, spark_dir, target)

    def stop() -> None:
        if process.poll() is None:
            os.killpg(process.pid, signal.SIGKILL)
            process.wait()

    request.addfinalizer(stop)


@pytest.fixture(scope="session")
def spark_demo_build(request: pytest.FixtureRequest, demo_home: DataHome, tmp_path_factory: pytest.TempPathFactory):
    """(spark_dir, dbt target path) of the demo's models built on Spark: the background run started with the demo
    fixture, waited for here; without Java or pyspark a skip (a failure under CI)."""
    from perf_assets.lib.engine_equivalence import spark_available, wait_dbt_run_on_spark

    why_not = spark_available()
    if why_not:
        if os.environ.get("CI") == "true":
            pytest.fail(f"Spark cannot run under CI: {why_not}")
        pytest.skip(why_not)
    if SPARK_DEMO_RUN not in request.config.stash:  # asked for by a test without the spark marker
        _start_spark_demo_build(request, demo_home, tmp_path_factory)
    process, spark_dir, target = request.config.stash[SPARK_DEMO_RUN]
    wait_dbt_run_on_spark(process, spark_dir)
    return spark_dir, target


@pytest.fixture(scope="session")
def ui_server(
    tmp_path_factory: pytest.TempPathFactory, demo_home: DataHome, demo_dagster_home: Path, dagster_home_factory
):
    """One `make ui` server per session on a copy of the built demo (data and Dagster instance).

    The landing sensor's cursor is set to the newest landed file before the start (the build has ingested
    them all; else its first tick would start a second full build) and then reset to its default state.
    """
    import shutil
    import subprocess
    import sys

    from perf_assets.lib.ingest import landed_files
    from perf_assets.lib.paths import REPO_ROOT
    from tests.ui_server import LOCATION, REPOSITORY, start_ui_server

    root = tmp_path_factory.mktemp("ui")
    perfwh_home = root / "data"
    dagster_home = dagster_home_factory("ui_dagster_home")
    shutil.copytree(demo_home.root, perfwh_home)
    shutil.copytree(demo_dagster_home, dagster_home, dirs_exist_ok=True)
    (dagster_home / "dagster.yaml").write_text((REPO_ROOT / "dagster.yaml").read_text())
    newest = max(path.stat().st_mtime_ns for path in landed_files(perfwh_home / "landing"))
    env = dict(os.environ, DAGSTER_HOME=str(dagster_home), PERFWH_HOME=str(perfwh_home))
    dagster = str(Path(sys.executable).parent / "dagster")
    subprocess.run(
        [dagster, "sensor", "cursor", "landing_sensor", "--set", str(newest), "-w", "workspace.yaml"],
        cwd=REPO_ROOT,
        env=env,
        check=True,
        capture_output=True,
    )
    server = start_ui_server(dagster_home, perfwh_home, root / "dagster_dev.log")
    try:
        server.wait_ready()
        selector = {"repositoryLocationName": LOCATION, "repositoryName": REPOSITORY, "sensorName": "landing_sensor"}
        reset = server.graphql(
            "mutation($s: SensorSelector!) { resetSensor(sensorSelector: $s) { __typename } }", {"s": selector}
        )
        assert reset["resetSensor"]["__typename"] == "Sensor", reset
        server.graphql("mutation { setNuxSeen }")  # no first-visit modal over the pages
        yield server
    finally:
        server.stop()


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
