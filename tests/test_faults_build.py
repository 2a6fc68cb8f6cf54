"""Faults around real processes: `perfwh ingest` and `perfwh build` killed with SIGKILL part-way, readers held
open on the published snapshot while a build runs, a file delivered twice under two names counted once, and secrets
from the environment absent from all a build leaves.

The kill points are made deterministic by watching what the process does, not by sleeping: the ingest is
killed once the manifest holds N entries, the build once its dbt subprocess has logged N models done (dbt's JSON log
in the run's target folder; dbt is still running then, and holds the warehouse and the write lock). SIGKILL goes to
the whole process group (the build's dbt subprocess with it), like the OOM killer or a lost host.
"""

from __future__ import annotations

import os
import queue
import re
import shutil
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import duckdb
import pyarrow.parquet as pq
import pytest
import yaml

from perf_assets.lib.contracts import RAW_TABLES
from perf_assets.lib.incremental import every_lake_day_args, lake_files, read_state
from perf_assets.lib.ingest import ingest, landed_files
from perf_assets.lib.ingest.lake import table_glob
from perf_assets.lib.ingest.manifest import read_manifest
from perf_assets.lib.paths import REPO_ROOT, DataHome, data_home
from perf_assets.lib.simulate import simulate

pytestmark = pytest.mark.slow

BIN = Path(sys.executable).parent
SECRETS = {"PERFWH_WEBHOOK_SECRET": "whsec-0b7e44c1f2a95d36", "SLACK_TOKEN": "xoxb-31337-5e6f7a8b9c0d"}
DBT_MODELS_BEFORE_KILL = 20


def _env(home: Path, **extra: str) -> dict[str, str]:
    env = dict(os.environ, PERFWH_HOME=str(home), PYTHONUNBUFFERED="1")
    env.pop("DAGSTER_HOME", None)
    return env | extra


def _start(args: list[str], env: dict, **kwargs) -> subprocess.Popen:
    return subprocess.Popen([str(BIN / "perfwh"), *args], env=env, start_new_session=True, **kwargs)


def _kill(process: subprocess.Popen) -> int:
    os.killpg(process.pid, signal.SIGKILL)
    return process.wait(timeout=60)


def visible_parquet(lake: Path) -> list[Path]:
    """What a reader's `**/*.parquet` glob sees; each must have a whole footer (pq.read_metadata raises if not)."""
    files = sorted(lake.rglob("*.parquet"))
    for path in files:
        pq.read_metadata(path)
    return files


def _manifest_rows(home: DataHome) -> int:
    """Manifest rows now, read while an ingest writes (and may swap in the compacted manifest: then read again)."""
    try:
        return read_manifest(home.manifest_dir).num_rows
    except FileNotFoundError:
        return _manifest_rows(home)


def raw_counts(home: DataHome) -> dict[str, tuple[int, int]]:
    """(rows, landed files) per raw table, as dbt's sources read them."""
    counts = {}
    for table in RAW_TABLES.values():
        sql = f"select count(*), count(distinct landed_file_id) from read_parquet('{table_glob(home.lake_raw, table)}', union_by_name = true)"
        counts[table.name] = tuple(duckdb.sql(sql).fetchone())
    return counts


def dbt_run_folders(home: DataHome) -> set[Path]:
    """The run folders each dbt invocation of the dbt asset gets in the home (dbt's JSON log, run_results.json)."""
    return set(home.dbt_runs.glob("warehouse_dbt_models-*"))


def dbt_models_done(folders: set[Path]) -> int:
    """Models dbt has logged done (a LogModelResult line each, views and tables) in these run folders so far; its
    log rotates to dbt.log.1 at 10 MB: both are read, the older first, so a rotation in between makes this look count
    fewer lines, never more."""
    done = 0
    for path in (path for folder in folders for path in sorted(folder.glob("dbt.log*"), reverse=True)):
        try:
            done += path.read_bytes().count(b'"name": "LogModelResult"')
        except FileNotFoundError:
            pass
    return done


def table_counts(database: Path) -> dict[str, int]:
    """Rows of every table of a DuckDB file (the published snapshot: marts, intermediate, regressions...)."""
    connection = duckdb.connect(str(database), read_only=True)
    try:
        names = connection.execute("select schema_name, table_name from duckdb_tables() order by 1, 2").fetchall()
        return {
            f"{schema}.{name}": connection.execute(f'select count(*) from "{schema}"."{name}"').fetchone()[0]
            for schema, name in names
        }
    finally:
        connection.close()


# --------------------------------------------------------------------------- ingest


def test_sigkill_during_ingest_leaves_whole_files_and_the_rerun_counts_each_row_once(tmp_path):
    simulated = data_home(tmp_path / "simulated").ensure()
    simulate(simulated, scenario="demo", seed=3, days=3)
    clean = data_home(tmp_path / "clean").ensure()
    shutil.copytree(simulated.landing, clean.landing, dirs_exist_ok=True)
    landed = len(ingest(clean))
    expected = raw_counts(clean)
    assert landed > 40 and sum(rows for rows, _ in expected.values()) > 10_000

    home = data_home(tmp_path / "killed").ensure()
    shutil.copytree(simulated.landing, home.landing, dirs_exist_ok=True)
    # manifest rows written 4 files at a time: a kill finds files whose rows are in the lake and not in the manifest
    env = _env(home.root, PERFWH_MANIFEST_BATCH="4", PERFWH_INGEST_WORKERS="2")
    for entries in (1, landed // 2):  # killed just after the first manifest rows, then half-way through the rest
        process = _start(["ingest", str(home.landing)], env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
        deadline = time.monotonic() + 600
        while _manifest_rows(home) < entries and process.poll() is None:
            assert time.monotonic() < deadline, "the ingest never got there"
            time.sleep(0.005)
        assert _kill(process) == -signal.SIGKILL, "the ingest ended before it was killed"
        visible_parquet(home.root / "lake")  # no half-written file where readers look
        # the raw layer opens for dbt's sources at every kill point
        assert all(rows >= 0 for rows, _ in raw_counts(home).values())

    rerun = subprocess.run(
        [str(BIN / "perfwh"), "ingest", str(home.landing)], env=env, capture_output=True, text=True, timeout=600
    )
    assert rerun.returncode == 0, rerun.stdout[-2000:] + rerun.stderr[-2000:]
    assert "Traceback" not in rerun.stderr
    assert raw_counts(home) == expected  # every row once: nothing lost, nothing counted twice
    manifest = read_manifest(home.manifest_dir).to_pylist()
    assert len(manifest) == landed and len({row["path"] for row in manifest}) == landed
    assert not list((home.root / "lake").rglob(".tmp-*"))  # what the killed writers left is cleaned up


# --------------------------------------------------------------------------- build, readers, secrets


class Reader:
    """An interactive SQL session kept open on the published snapshot; asks one question every `every_s`."""

    QUESTION = "select 'answer' as tag, count(*) as n from fct_cluster_day;\n"
    ANSWER = re.compile(r"^answer[\t,](\d+)$")

    def __init__(self, name: str, command: list[str], env: dict, every_s: float = 2.0):
        self.name, self.every_s = name, every_s
        self.answers: list[int] = []
        self.missed = 0
        self.process = subprocess.Popen(
            command,
            env=env,
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
            bufsize=1,
            start_new_session=True,
        )
        self.lines: queue.Queue[str] = queue.Queue()
        self.output: list[str] = []
        self.stop = threading.Event()
        threading.Thread(target=self._read, daemon=True).start()
        self.asker = threading.Thread(target=self._ask, daemon=True)
        self.asker.start()

    def _read(self) -> None:
        for line in self.process.stdout:
            self.output.append(line)
            self.lines.put(line)

    def _ask(self) -> None:
        while not self.stop.is_set():
            self.process.stdin.write(self.QUESTION)
            self.process.stdin.flush()
            deadline = time.monotonic() + 60
            while True:
                try:
                    line = self.lines.get(timeout=max(deadline - time.monotonic(), 0.01))
                except queue.Empty:
                    self.missed += 1
                    break
                match = self.ANSWER.match(line.strip().removeprefix("perfwh> ").removeprefix("D "))
                if match:
                    self.answers.append(int(match.group(1)))
                    break
            self.stop.wait(self.every_s)

    def close(self) -> int | None:
        self.stop.set()
        self.asker.join(timeout=90)
        self.process.stdin.close()
        try:
            return self.process.wait(timeout=30)
        except subprocess.TimeoutExpired:
            os.killpg(self.process.pid, signal.SIGKILL)
            return None


def _ctime(path: Path) -> int:
    return path.stat().st_ctime_ns


@pytest.fixture(scope="module")
def build_faults(demo_home: DataHome, tmp_path_factory: pytest.TempPathFactory, dagster_home_factory) -> dict:
    """A copy of the built demo; `perfwh build` killed while its dbt runs (DBT_MODELS_BEFORE_KILL models done); then
    a whole build while `perfwh sql` and the duckdb CLI keep querying the published snapshot; secrets in the
    environment all along."""
    root = tmp_path_factory.mktemp("faults_build")
    home = data_home(root / "home")
    shutil.copytree(demo_home.root, home.root, symlinks=True)
    sinks = {
        "hook": {"type": "webhook", "url": "http://127.0.0.1:9/hook", "secret_env": "PERFWH_WEBHOOK_SECRET"},
        "slack": {"type": "slack", "channel": "#perf"},
        "file": {"type": "jsonl"},
    }
    (home.root / "alerts.yaml").write_text(yaml.safe_dump({"sinks": sinks, "default_route": list(sinks)}))
    # a persistent instance (sqlite, in memory where the machine has /dev/shm): its event log is searched
    dagster_home = dagster_home_factory("faults_dagster_home")
    shutil.copyfile(REPO_ROOT / "dagster.yaml", dagster_home / "dagster.yaml")
    env = _env(home.root, DAGSTER_HOME=str(dagster_home), **SECRETS)
    seen: dict = {"reference": table_counts(home.published_db), "started": time.time()}
    # the last day's step-events file delivered again under a new name: the killed build ingests it, the next one
    # counts it once (and, as a day's delivery does, rebuilds the incremental models over the lookback's days only)
    original = [path for path in landed_files(home.landing) if "/step_events/" in path.as_posix()][-1]
    shutil.copyfile(original, original.with_name("redelivered__" + original.name))
    seen["manifest_rows"] = read_manifest(home.manifest_dir).num_rows

    earlier_runs = dbt_run_folders(home)
    killed = _start(
        ["build", "--quiet", "--log-level", "DEBUG"], env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True
    )
    log: list[str] = []
    drain = threading.Thread(target=lambda: log.extend(killed.stdout), daemon=True)  # the pipe never fills
    drain.start()
    deadline, done, runs = time.monotonic() + 600, 0, set()
    while done < DBT_MODELS_BEFORE_KILL and killed.poll() is None:
        assert time.monotonic() < deadline, "the build's dbt never got there"
        time.sleep(0.2)
        runs = dbt_run_folders(home) - earlier_runs
        done = dbt_models_done(runs)
    seen["killed_code"] = _kill(killed)
    drain.join(timeout=60)
    seen["killed_after_models"] = done
    # dbt writes run_results.json when an invocation ends: the last one (of one or two) had not
    seen["dbt_invocations_finished"] = [(run / "run_results.json").exists() for run in sorted(runs, key=_ctime)]
    seen["log"] = "".join(log)
    seen["visible_parquet"] = len(visible_parquet(home.root / "lake"))
    seen["warehouse_after_kill"] = table_counts(home.warehouse_db)  # opens (WAL replayed read-only)
    seen["published_after_kill"] = table_counts(home.published_db)

    readers = [
        Reader("perfwh sql", [str(BIN / "perfwh"), "sql"], env),
        Reader("duckdb CLI", [str(BIN / "duckdb"), "-readonly", "-csv", str(home.published_db)], env),
    ]
    try:
        time.sleep(3)  # both answer before the build starts
        seen["answers_before"] = {reader.name: len(reader.answers) for reader in readers}
        rebuild = subprocess.run(
            [str(BIN / "perfwh"), "build", "--log-level", "DEBUG"],
            env=env,
            capture_output=True,
            text=True,
            timeout=600,  # a rebuild that waits for a dead run's pool slot fails here instead of hanging
        )
        seen["answers_during"] = {reader.name: len(reader.answers) for reader in readers}
        time.sleep(3)
    finally:
        seen["reader_codes"] = {reader.name: reader.close() for reader in readers}
    seen["readers"] = {reader.name: reader for reader in readers}
    seen["rebuild"] = rebuild
    seen["after"] = table_counts(home.published_db)
    report = subprocess.run(
        [str(BIN / "perfwh"), "report", "--fleet"], env=env, capture_output=True, text=True, timeout=300
    )
    seen["report"] = report
    seen["home"], seen["dagster_home"] = home, dagster_home
    return seen


def test_a_build_killed_in_its_dbt_step_leaves_a_warehouse_that_opens_and_the_next_build_counts_once(build_faults):
    seen = build_faults
    assert seen["killed_code"] == -signal.SIGKILL and seen["killed_after_models"] >= DBT_MODELS_BEFORE_KILL
    assert seen["dbt_invocations_finished"][-1:] == [False]  # killed while dbt ran, not after
    assert "Running dbt command" in seen["log"] and "RUN_SUCCESS" not in seen["log"]
    assert seen["visible_parquet"] > 0
    assert "main.fct_cluster_day" in seen["warehouse_after_kill"]  # the half-built warehouse opens
    assert seen["published_after_kill"] == seen["reference"]  # readers still see the last good snapshot
    rebuild = seen["rebuild"]
    assert rebuild.returncode == 0, rebuild.stdout[-3000:] + rebuild.stderr[-3000:]
    assert "build succeeded" in rebuild.stdout
    # the killed run held the warehouse_writer pool slot of the persistent instance: released, not waited for
    assert "was killed part-way: marked failed, its pool slot freed" in rebuild.stdout
    # a day's delivery: the incremental models rebuilt the last days, not every day (nor from the killed build's)
    state = read_state(seen["home"])
    assert state["full_refresh"] is False and state["lake_files"] == lake_files(seen["home"].lake_raw)
    first_day = every_lake_day_args(seen["home"])[1]  # --event-time-start FIRST ...
    assert state["window"][0] > first_day, (state["window"], first_day)
    # every table of the snapshot has the rows of the clean build; the redelivered copy is one manifest row more
    # and, below staging, not one row more
    changed = {name: (seen["reference"].get(name), rows) for name, rows in seen["after"].items()}
    changed = {name: counts for name, counts in changed.items() if counts[0] != counts[1]}
    manifest = seen["reference"]["main.ingest_manifest"]
    assert changed.pop("main.ingest_manifest") == (manifest, manifest + 1)
    # the data-quality mart's rows of the delivery's own day (its source's quarantine rate and late files that day)
    quality = changed.pop("main.data_quality", None)
    assert quality is None or 0 < quality[1] - quality[0] <= 2, quality
    assert not [name for name in changed if not name.startswith(("raw.", "staging."))], changed


def test_a_redelivered_copy_is_counted_once_and_changes_no_fact(build_faults, demo_home, demo_snapshot):
    """The same bytes under a new name add a manifest row (a file of its own) and no fact: the facts of the build
    after the kill equal the clean demo build's, value for value."""
    seen = build_faults
    home = seen["home"]
    assert read_manifest(home.manifest_dir).num_rows == seen["manifest_rows"] + 1
    assert seen["manifest_rows"] == read_manifest(demo_home.manifest_dir).num_rows
    query = "select * from fct_cluster_day order by cluster, metric_date"
    before = demo_snapshot(query)
    with duckdb.connect(str(home.published_db), read_only=True) as connection:
        after = connection.execute(query).df()
        steps = connection.execute("select count(*) from intermediate.int_job_steps").fetchone()[0]
    assert list(after.columns) == list(before.columns) and len(after) == len(before)
    for column in before.select_dtypes("number").columns:  # re-summed floats may differ in the last bits
        scale = float(before[column].abs().max() or 1.0)
        assert list(after[column]) == pytest.approx(list(before[column]), rel=1e-12, abs=1e-9 * scale, nan_ok=True), (
            column
        )
    assert steps == demo_snapshot("select count(*) as n from intermediate.int_job_steps")["n"][0]


def test_readers_on_the_published_snapshot_keep_answering_while_a_build_runs(build_faults):
    seen = build_faults
    assert seen["rebuild"].returncode == 0
    expected = seen["reference"]["main.fct_cluster_day"]
    for name, reader in seen["readers"].items():
        assert seen["answers_before"][name] >= 1, (name, "".join(reader.output)[-2000:])
        # answers kept coming during the build (it runs for a minute or more; one question every 2 s)
        assert seen["answers_during"][name] - seen["answers_before"][name] >= 5, (name, "".join(reader.output)[-2000:])
        assert reader.missed == 0 and set(reader.answers) == {expected}, (name, reader.answers)
        assert seen["reader_codes"][name] == 0, name
        assert "rror" not in "".join(reader.output), "".join(reader.output)[-2000:]


def test_secrets_from_the_environment_are_nowhere_a_build_writes(build_faults):
    """Build logs (DEBUG), the Dagster event log (metadata, logs), the data home (alerts store, reports, warehouse,
    snapshot) and the dbt run folders of this build: neither the webhook secret nor the Slack token."""
    seen = build_faults
    assert seen["rebuild"].returncode == 0 and seen["report"].returncode == 0, seen["report"].stderr
    texts = [seen["log"], seen["rebuild"].stdout, seen["rebuild"].stderr, seen["report"].stdout, seen["report"].stderr]
    blobs = [text.encode() for text in texts]
    searched = 0
    dbt_runs = [
        path for path in seen["home"].dbt_runs.glob("warehouse_dbt_models-*") if path.stat().st_mtime >= seen["started"]
    ]
    for folder in (seen["home"].root, seen["dagster_home"]):  # the build's dbt run folders are in its home
        for path in folder.rglob("*"):
            if path.is_file():
                blobs.append(path.read_bytes())
                searched += 1
    assert searched > 50 and dbt_runs
    assert any(b"alert_outbox" in blob for blob in blobs)  # the event log of the build is among them
    for secret in SECRETS.values():
        for blob in blobs:
            assert secret.encode() not in blob
