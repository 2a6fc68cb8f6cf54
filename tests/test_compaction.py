"""Lake compaction: few files per table-day, the same rows, re-ingest through compacted files, crash safety."""

from __future__ import annotations

import shutil
from collections import Counter

import duckdb
import pyarrow.compute as pc
import pytest

from perf_assets.lib.contracts import RAW_TABLES
from perf_assets.lib.ingest import lake as lake_module
from perf_assets.lib.ingest import landed_files
from perf_assets.lib.ingest.lake import CompactionPolicy, is_compacted, landed_ids_in, table_glob
from perf_assets.lib.ingest.landing import describe
from perf_assets.lib.ingest.run import compact, ingest
from perf_assets.lib.paths import data_home
from perf_assets.lib.simulate import simulate

NEVER = CompactionPolicy(min_files=10**9)
ALWAYS = CompactionPolicy(min_files=0)


def data_files(home, table) -> list:
    return sorted(path for path in (home.lake_raw / table.name).glob("event_date=*/*.parquet"))


def sorted_rows(home, table) -> list[tuple]:
    """Every row of a raw table as a reader's glob sees it, sorted (NULLs made comparable)."""
    glob = table_glob(home.lake_raw, table)
    relation = duckdb.sql(f"select * from read_parquet('{glob}', union_by_name = true)")
    return sorted(tuple(repr(value) for value in row) for row in relation.fetchall())


def rows_per_landed_file(home, table) -> dict[str, int]:
    glob = table_glob(home.lake_raw, table)
    return dict(duckdb.sql(f"select landed_file_id, count(*) from read_parquet('{glob}') group by all").fetchall())


def snapshot(home) -> dict[str, list[tuple]]:
    return {table.name: sorted_rows(home, table) for table in RAW_TABLES.values()}


def assert_each_landed_file_in_one_place(home) -> None:
    """At any instant a landed file's rows of one day live in exactly one Parquet file."""
    for table in RAW_TABLES.values():
        for day_dir in lake_module.day_dirs(home.lake_raw, table):
            holders = Counter(landed for path in day_dir.glob("*.parquet") for landed in landed_ids_in(path))
            assert all(count == 1 for count in holders.values()), (day_dir, holders)


@pytest.fixture(scope="module")
def uncompacted(tmp_path_factory):
    """Two days of the demo fleet ingested without compaction: one Parquet per landed file and day."""
    home = data_home(tmp_path_factory.mktemp("uncompacted")).ensure()
    simulate(home, scenario="demo", seed=3, days=2)
    ingest(home, compaction=NEVER)
    return home


@pytest.fixture
def home(uncompacted, tmp_path):
    copy = data_home(tmp_path / "home")
    shutil.copytree(uncompacted.root, copy.root)
    return copy


def test_many_small_files_become_few_with_identical_rows(home):
    dcgm = RAW_TABLES["dcgm"]
    before_files = len(data_files(home, dcgm))
    before = snapshot(home)

    done = compact(home, policy=ALWAYS)

    assert {result.table for result in done} >= {"raw_dcgm", "raw_step_events", "raw_probe_results"}
    days = lake_module.day_dirs(home.lake_raw, dcgm)
    assert before_files >= 4 * len(days) and len(data_files(home, dcgm)) == len(days)  # one file per day
    assert all(is_compacted(path) for path in data_files(home, dcgm))
    assert snapshot(home) == before
    assert_each_landed_file_in_one_place(home)
    assert not any((home.root / "lake" / ".staging").glob("*/*"))


def test_target_size_splits_a_day_into_several_files_and_threshold_is_respected(home):
    dcgm = RAW_TABLES["dcgm"]
    day = lake_module.day_dirs(home.lake_raw, dcgm)[0]
    small = sorted(day.glob("*.parquet"))
    before = snapshot(home)

    assert compact(home, table="dcgm", policy=CompactionPolicy(min_files=len(small))) == []  # not more than K
    sizes = sorted(path.stat().st_size for path in small)
    (result, *_) = compact(home, table="raw_dcgm", policy=CompactionPolicy(min_files=1, target_bytes=sum(sizes) // 2))

    assert result.files_before == len(small) and 2 <= result.files_after < len(small)
    assert snapshot(home) == before
    with pytest.raises(ValueError, match="no raw table"):
        compact(home, table="nope")


def test_ingestion_compacts_table_days_over_the_threshold(uncompacted, tmp_path):
    home = data_home(tmp_path / "fresh").ensure()
    shutil.copytree(uncompacted.landing, home.landing, dirs_exist_ok=True)

    ingest(home, compaction=CompactionPolicy(min_files=4))

    for day in lake_module.day_dirs(home.lake_raw, RAW_TABLES["dcgm"]):
        assert [is_compacted(path) for path in day.glob("*.parquet")] == [True]
    assert snapshot(home) == snapshot(uncompacted)


def test_reingest_after_compaction_replaces_exactly_that_files_rows(home, monkeypatch):
    dcgm = RAW_TABLES["dcgm"]
    compact(home, policy=ALWAYS)
    victim = next(path for path in landed_files(home.landing) if "/dcgm/" in path.as_posix())
    before = sorted_rows(home, dcgm)

    # the same parser again: the rows leave the compacted file and come back, none lost or duplicated
    ingest(home, [victim], force=True, compaction=NEVER)
    assert sorted_rows(home, dcgm) == before
    assert_each_landed_file_in_one_place(home)

    # an "improved" parser that reads only the first 10 rows: exactly that file's rows change
    from perf_assets.lib.ingest import run as run_module

    real = run_module.find_format

    class Fewer:
        def __init__(self, fmt):
            self.fmt, self.name, self.parser_version, self.source = fmt, fmt.name, fmt.parser_version + 1, fmt.source

        def parse(self, landed):
            return self.fmt.parse(landed).slice(0, 10)

    monkeypatch.setattr(run_module, "find_format", lambda landed: Fewer(real(landed)))
    counts_before = rows_per_landed_file(home, dcgm)
    outcome = ingest(home, [victim], force=True, compaction=ALWAYS)[0]

    victim_id = describe(home.landing, victim).file_id
    counts_after = rows_per_landed_file(home, dcgm)
    assert outcome.status == "ok" and outcome.rows == 10 and counts_after.pop(victim_id) == 10
    assert counts_before.pop(victim_id) > 10 and counts_after == counts_before
    assert_each_landed_file_in_one_place(home)


@pytest.mark.parametrize("step", ["staged", "swapped", "cleaned"])
def test_a_crash_at_any_step_leaves_a_consistent_lake(home, monkeypatch, step):
    before = snapshot(home)

    def crash(at: str) -> None:
        if at == step:
            raise RuntimeError(f"crash after {at}")

    monkeypatch.setattr(lake_module, "_checkpoint", crash)
    with pytest.raises(RuntimeError, match="crash"):
        compact(home, policy=ALWAYS)
    assert snapshot(home) == before  # readers see every row exactly once
    assert_each_landed_file_in_one_place(home)

    monkeypatch.setattr(lake_module, "_checkpoint", lambda at: None)
    compact(home, policy=ALWAYS)  # recovery: leftovers removed, compaction completes
    assert snapshot(home) == before
    assert not any((home.root / "lake" / ".staging").glob("*/*"))
    for table in ("dcgm", "step_events"):
        assert all(is_compacted(path) for path in data_files(home, RAW_TABLES[table]))


def test_a_crash_while_reingest_rewrites_a_compacted_file_keeps_the_old_rows(home, monkeypatch):
    compact(home, policy=ALWAYS)
    before = snapshot(home)
    victim = next(path for path in landed_files(home.landing) if "/step_events/" in path.as_posix())

    def crash(at: str) -> None:
        if at == "staged":
            raise RuntimeError("crash")

    monkeypatch.setattr(lake_module, "_checkpoint", crash)
    with pytest.raises(RuntimeError):
        ingest(home, [victim], force=True, compaction=NEVER)
    assert snapshot(home) == before
    assert_each_landed_file_in_one_place(home)


def test_compacted_files_read_back_in_each_tables_own_schema_with_their_landed_files(home):
    """Compaction holds strings as dictionaries in memory and stores them without an Arrow schema: a pyarrow reader
    still gets each table's plain schema, and the footer still lists the landed files."""
    import pyarrow.parquet as pq

    small = {table.name: {path.stem for path in data_files(home, table)} for table in RAW_TABLES.values()}
    compact(home, policy=ALWAYS)
    checked = 0
    for table in RAW_TABLES.values():
        compacted = [path for path in data_files(home, table) if is_compacted(path)]
        for path in compacted:
            assert pq.read_table(path).schema.remove_metadata() == table.full_schema, path
        assert {landed for path in compacted for landed in landed_ids_in(path)} <= small[table.name]
        checked += len(compacted)
    assert checked >= 3


def test_a_small_file_written_before_a_column_existed_compacts_with_that_column_null(home):
    """A small file without a column of today's schema (written by an older parser) is read as read_table(schema=)
    reads it: the column is NULL on its rows, the other rows keep their values."""
    import pyarrow.parquet as pq

    dcgm = RAW_TABLES["dcgm"]
    day = lake_module.day_dirs(home.lake_raw, dcgm)[0]
    old = sorted(day.glob("*.parquet"))[0]
    rows = pq.read_table(old)
    pq.write_table(rows.drop_columns(["labels_json"]), old)
    others = duckdb.sql(
        f"select count(labels_json) from read_parquet('{day}/*.parquet', union_by_name = true) "
        f"where landed_file_id <> '{old.stem}'"
    ).fetchone()[0]

    compact(home, table="dcgm", policy=ALWAYS)

    (compacted,) = day.glob("*.parquet")
    after = pq.read_table(compacted)
    mine = after.filter(pc.equal(after["landed_file_id"], old.stem))
    assert mine.num_rows == rows.num_rows and mine["labels_json"].null_count == rows.num_rows
    assert after.num_rows - mine.num_rows > 0 and pc.count(after["labels_json"]).as_py() == others > 0
