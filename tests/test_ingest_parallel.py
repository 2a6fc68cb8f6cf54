"""Ingest in worker processes: the same lake and manifest as one process, crash leftovers replaced, manifest batches."""

from __future__ import annotations

import shutil

import pytest

from perf_assets.lib.contracts import RAW_TABLES
from perf_assets.lib.ingest import landed_files
from perf_assets.lib.ingest.formats import prometheus_text
from perf_assets.lib.ingest.lake import CompactionPolicy
from perf_assets.lib.ingest.manifest import manifest_files, read_manifest
from perf_assets.lib.ingest.run import ingest
from perf_assets.lib.paths import data_home
from perf_assets.lib.simulate import simulate
from tests.test_compaction import assert_each_landed_file_in_one_place, snapshot

NEVER = CompactionPolicy(min_files=10**9)
ALWAYS = CompactionPolicy(min_files=0)


@pytest.fixture(scope="module")
def landing(tmp_path_factory):
    """A day of the demo fleet, landed (not ingested)."""
    home = data_home(tmp_path_factory.mktemp("landed")).ensure()
    simulate(home, scenario="demo", seed=3, days=1)
    return home.landing


def fresh_home(tmp_path, landing, name: str):
    home = data_home(tmp_path / name).ensure()
    shutil.copytree(landing, home.landing, dirs_exist_ok=True)
    return home


def manifest_rows(home) -> list[tuple]:
    columns = [name for name in read_manifest(home.manifest_dir).column_names if name != "ingested_at"]
    return sorted(
        tuple(map(repr, row.values())) for row in read_manifest(home.manifest_dir).select(columns).to_pylist()
    )


def test_two_workers_write_the_lake_and_manifest_one_process_writes(landing, tmp_path, monkeypatch):
    serial, parallel = fresh_home(tmp_path, landing, "serial"), fresh_home(tmp_path, landing, "parallel")
    monkeypatch.setenv("PERFWH_MANIFEST_BATCH", "1")  # the serial home's manifest: a file per entry, as before
    one = ingest(serial, workers=1)
    monkeypatch.delenv("PERFWH_MANIFEST_BATCH")
    two = ingest(parallel, workers=2)

    assert len(one) > 40 and [o.line() for o in two] == [o.line() for o in one]  # same outcomes, same order
    assert {o.status for o in two} == {"ok"}
    lake = snapshot(serial)
    assert sum(len(rows) for rows in lake.values()) > 10_000 and snapshot(parallel) == lake
    assert manifest_rows(parallel) == manifest_rows(serial)
    # one manifest file per entry (more than 32) was compacted at the end of the run; the workers' run wrote a batch
    for home, kind in ((serial, "compacted"), (parallel, "entries")):
        names = sorted(path.name.split("-")[0] for path in manifest_files(home.manifest_dir))
        assert names == ["_schema.parquet", kind], names

    again = ingest(parallel, workers=2, paths=landed_files(parallel.landing) * 2)
    assert {o.status for o in again} == {"already_ingested"} and snapshot(parallel) == lake


def test_a_file_listed_twice_in_one_run_is_ingested_once(landing, tmp_path):
    home = fresh_home(tmp_path, landing, "twice")
    paths = landed_files(home.landing)[:6]
    outcomes = ingest(home, workers=2, paths=paths + paths[:3])
    assert [o.status for o in outcomes] == ["ok"] * 6 + ["already_ingested"] * 3
    assert read_manifest(home.manifest_dir).num_rows == 6


def test_rows_of_a_killed_run_without_manifest_rows_are_replaced_not_doubled(landing, tmp_path):
    """A run killed between its lake writes and its manifest batch leaves rows the manifest does not know: some in
    small files (written by workers), some already compacted (rewritten by the ingest process)."""
    home = fresh_home(tmp_path, landing, "killed")
    paths = [path for path in landed_files(home.landing) if path.parts[-4] in ("dcgm", "step_events")]
    compacted = paths[:: len(paths) // 8]  # a few files in compacted files (each re-ingest rewrites a day)
    ingest(home, workers=2, paths=compacted, compaction=ALWAYS)
    ingest(home, workers=2, paths=[path for path in paths if path not in compacted], compaction=NEVER)
    expected = snapshot(home)
    shutil.rmtree(home.manifest_dir)  # as if the run had died before writing any manifest batch

    outcomes = ingest(home, workers=2, paths=paths, compaction=NEVER)

    assert {o.status for o in outcomes} == {"ok"} and len(outcomes) == len(paths)
    assert snapshot(home) == expected  # every row once
    assert_each_landed_file_in_one_place(home)
    assert {table.name for table in RAW_TABLES.values() if expected[table.name]} == {"raw_dcgm", "raw_step_events"}


@pytest.mark.parametrize(
    "line",
    [
        'm{a="1",b="2"} 3',
        'm{a="1" b="2",} 3',
        "m{} 1",
        "m{,,} 1",
        'm{a="x}y",b="{"} 2',
        'm{a="1",a="2"} 1',
        'm{a="x\\"y"} 1',
        'm{a="1"',
        'm{a="1",9b="2"} 1',
        "m{a=1} 1",
    ],
)
def test_label_sets_read_by_regex_read_as_the_character_reader_reads_them(line, monkeypatch):
    def read(text: str):
        try:
            return prometheus_text._labels(text, 1)
        except ValueError as error:
            return f"error: {error}"

    fast = read(line)
    monkeypatch.setattr(prometheus_text, "_PLAIN_LABEL_SET", prometheus_text.re.compile(r"(?!)"))  # never matches
    assert fast == read(line)
