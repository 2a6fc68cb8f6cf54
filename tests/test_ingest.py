"""Ingestion: manifest idempotency, quarantine of bad files, parsers on real samples."""

from __future__ import annotations

import json
import shutil

import duckdb
import pyarrow.parquet as pq
import pytest

from perf_assets.lib.contracts import RAW_TABLES
from perf_assets.lib.ingest import deliver, ingest, landed_files
from perf_assets.lib.ingest.formats.prometheus_range import sample_value
from perf_assets.lib.ingest.formats.sacct import expand_nodelist, gpus_in_tres
from perf_assets.lib.ingest.manifest import read_manifest
from perf_assets.lib.paths import data_home
from perf_assets.lib.simulate import simulate


def raw_count(home, source: str) -> int:
    glob = home.lake_raw / RAW_TABLES[source].name / "**" / "*.parquet"
    return duckdb.sql(f"select count(*) from read_parquet('{glob}', union_by_name = true)").fetchone()[0]


@pytest.fixture(scope="module")
def small_fleet(tmp_path_factory):
    """Three days of the demo fleet: enough of every format, fast to ingest."""
    home = data_home(tmp_path_factory.mktemp("small")).ensure()
    simulate(home, scenario="demo", seed=3, days=3)
    return home


def test_second_ingest_adds_no_manifest_rows_and_no_raw_rows(small_fleet):
    first = ingest(small_fleet)
    assert first and all(outcome.status == "ok" for outcome in first), [o.line() for o in first if o.status != "ok"]
    manifest_rows = read_manifest(small_fleet.manifest_dir).num_rows
    counts = {source: raw_count(small_fleet, source) for source in RAW_TABLES}
    assert counts["step_events"] > 1000 and counts["dcgm"] > 1000 and counts["sacct"] > 0

    second = ingest(small_fleet)

    assert {outcome.status for outcome in second} == {"already_ingested"}
    assert read_manifest(small_fleet.manifest_dir).num_rows == manifest_rows
    assert {source: raw_count(small_fleet, source) for source in RAW_TABLES} == counts


def test_truncated_file_is_quarantined_with_its_reason_while_the_batch_ingests(small_fleet, tmp_path):
    home = data_home(tmp_path / "home").ensure()
    shutil.copytree(small_fleet.landing, home.landing, dirs_exist_ok=True)
    victim = next(path for path in landed_files(home.landing) if "/dcgm/" in path.as_posix())
    victim.write_bytes(victim.read_bytes()[: victim.stat().st_size // 2])  # cut mid-document

    outcomes = ingest(home)

    by_path = {outcome.path: outcome for outcome in outcomes}
    bad = by_path[victim.relative_to(home.landing).as_posix()]
    assert bad.status == "quarantined" and "invalid JSON" in bad.reason
    others = [outcome for outcome in outcomes if outcome is not bad]
    assert others and all(outcome.status == "ok" for outcome in others)
    manifest = read_manifest(home.manifest_dir).to_pylist()
    recorded = [row for row in manifest if row["path"] == bad.path]
    assert len(recorded) == 1 and recorded[0]["status"] == "quarantined" and recorded[0]["rows"] == 0
    assert not list((home.lake_raw / "raw_dcgm").glob(f"event_date=*/{recorded[0]['file_id']}.parquet"))


def test_a_bad_line_quarantines_the_file_and_keeps_what_was_ingested(small_fleet, tmp_path):
    home = data_home(tmp_path / "home").ensure()
    landed = home.landing / "node_events" / "alpha" / "2026-11-01" / "events.jsonl"
    landed.parent.mkdir(parents=True)
    good = {
        "version": 1,
        "node": "alpha-n01",
        "state": "down",
        "reason": "xid 79",
        "start": "2026-11-01T01:00:00Z",
        "end": "2026-11-01T03:00:00Z",
    }
    landed.write_text(json.dumps(good) + "\n")
    assert [o.status for o in ingest(home)] == ["ok"]
    bad = home.landing / "node_events" / "alpha" / "2026-11-02" / "events.jsonl"
    bad.parent.mkdir(parents=True)
    bad.write_text(json.dumps(good | {"state": "broken"}) + "\n")

    outcome = ingest(home)

    statuses = {o.path: (o.status, o.reason) for o in outcome}
    assert statuses["node_events/alpha/2026-11-02/events.jsonl"][0] == "quarantined"
    assert "state 'broken' is not one of" in statuses["node_events/alpha/2026-11-02/events.jsonl"][1]
    assert raw_count(home, "node_events") == 1


def test_same_content_under_another_name_is_a_new_landed_file(small_fleet, tmp_path):
    home = data_home(tmp_path / "home").ensure()
    source = next(path for path in landed_files(small_fleet.landing) if "/node_software/" in path.as_posix())
    first = home.landing / "node_software" / "alpha" / "2026-11-01" / "a.jsonl"
    second = home.landing / "node_software" / "alpha" / "2026-11-01" / "b.jsonl"
    first.parent.mkdir(parents=True)
    shutil.copyfile(source, first)
    shutil.copyfile(source, second)

    outcomes = ingest(home)

    assert [o.status for o in outcomes] == ["ok", "ok"]
    ids = {row["file_id"] for row in read_manifest(home.manifest_dir).to_pylist() if row["rows"]}
    assert len(ids) == 2  # both landed; staging keeps one row per natural key (tested on the warehouse)


def test_deliver_copies_by_sniffed_source_and_never_overwrites(small_fleet, tmp_path):
    home = data_home(tmp_path / "home").ensure()
    outside = tmp_path / "incoming"
    outside.mkdir()
    step_file = next(path for path in landed_files(small_fleet.landing) if "/step_events/" in path.as_posix())
    shutil.copyfile(step_file, outside / "steps.jsonl")
    (outside / "notes.txt").write_text("not an export\n")

    landed, problems = deliver(
        home, [outside / "steps.jsonl", outside / "notes.txt"], cluster="alpha", day="2026-11-01"
    )

    assert [path.relative_to(home.landing).as_posix() for path in landed] == [
        "step_events/alpha/2026-11-01/steps.jsonl"
    ]
    assert len(problems) == 1 and "cannot tell which source" in problems[0]
    again, _ = deliver(home, [outside / "steps.jsonl"], cluster="alpha", day="2026-11-01")
    assert again == landed  # same bytes: the landed file is reused, not copied twice


def test_sacct_sample_without_header_reads_with_the_format_sidecar(samples, tmp_path):
    sample = samples / "slurm_sacct" / "slyme_sacct_parallel_parsable2_noheader.out"
    home = data_home(tmp_path / "home").ensure()
    folder = home.landing / "sacct" / "fasrc" / "2014-06-26"
    folder.mkdir(parents=True)
    shutil.copyfile(sample, folder / sample.name)

    without_sidecar = ingest(home)
    assert without_sidecar[0].status == "quarantined" and "sacct_format.txt" in without_sidecar[0].reason

    (folder / "sacct_format.txt").write_text(
        "User,JobID,JobName,State,Partition,NCPUS,NNodes,CPUTime,TotalCPU,UserCPU,SystemCPU,ReqMem,MaxRSS,Submit,Start,End,NodeList\n"
    )
    shutil.copyfile(sample, folder / "renamed.out")  # another landed file: the sidecar applies to it
    outcomes = {o.path: o for o in ingest(home)}
    assert outcomes["sacct/fasrc/2014-06-26/renamed.out"].status == "ok"
    rows = pq.read_table(next((home.lake_raw / "raw_sacct").glob("event_date=2014-06-26/*.parquet"))).to_pylist()
    job = next(row for row in rows if row["job_step"] is None)
    assert job["job_id"] == "77454" and job["nodes"] == ["hero4515", "hero4516"] and job["n_nodes"] == 2
    assert job["alloc_gpus"] is None  # no TRES column: GPUs unknown, not zero
    assert {row["job_step"] for row in rows} == {None, "batch", "0"}
    assert str(job["start_at"]) == "2014-06-26 11:51:28+00:00"


def test_nodelists_tres_and_dcgm_values():
    assert expand_nodelist("hero[4515-4516]") == ["hero4515", "hero4516"]
    assert expand_nodelist("a-n[01-02,04],b-n7") == ["a-n01", "a-n02", "a-n04", "b-n7"]
    assert expand_nodelist("None assigned") == []
    assert gpus_in_tres("billing=64,cpu=64,gres/gpu=16,mem=1000G,node=2") == 16
    assert gpus_in_tres("cpu=8,gres/gpu:h100=8,gres/gpu=8") == 8
    assert gpus_in_tres("cpu=8,mem=10G") == 0
    assert sample_value("NaN") is None and sample_value("+Inf") is None
    assert sample_value("9223372036854775794") is None  # DCGM blank sentinel: unknown, not a value
    assert sample_value("97") == 97.0
    assert sample_value("140737488355330") is None  # DCGM FP64 blank (2**47 + 2)
    assert sample_value("2500000000000000") == 2.5e15  # a large NVLink byte counter is a value, not a blank


def test_the_fast_path_reads_clean_files_exactly_as_the_checked_path(small_fleet):
    from perf_assets.lib.ingest.formats.json_records import SPECS, _parse_line_by_line, _read_clean_json_lines
    from perf_assets.lib.ingest.landing import describe

    used = {}
    for path in landed_files(small_fleet.landing):
        landed = describe(small_fleet.landing, path)
        if landed.source not in SPECS:
            continue
        fast = _read_clean_json_lines(SPECS[landed.source], landed)
        if fast is not None:
            assert fast.equals(_parse_line_by_line(SPECS[landed.source], landed)), landed.relative_path
        used[landed.source] = used.get(landed.source, False) or fast is not None
    assert used["step_events"] and used["node_events"] and used["job_meta"]


def test_a_version_the_fast_path_cannot_prove_goes_to_the_checked_path(tmp_path):
    home = data_home(tmp_path).ensure()
    landed = home.landing / "step_events" / "alpha" / "2026-11-01" / "steps.jsonl"
    landed.parent.mkdir(parents=True)
    line = {
        "version": 1,
        "job_id": "j1",
        "attempt": 1,
        "rank": 0,
        "event": "step_start",
        "step": 1,
        "ts": "2026-11-01T00:00:00Z",
    }
    landed.write_text(json.dumps(line) + "\n" + json.dumps(line | {"version": 2, "step": 2}) + "\n")

    (outcome,) = ingest(home)

    assert outcome.status == "quarantined" and outcome.reason == "line 2: version 2 not supported (supported: 1)"


SAMPLE_SOURCES = {
    "dcgm_exporter": "dcgm",
    "kineto": "kineto",
    "mlperf_mllog": "mlperf",
    "nccl_tests": "nccl_tests",
    "nsys_sqlite": "nsys",
    "nvidia_smi": "nvidia_smi",
}
NOT_SNIFFED = {
    "dcgm_exporter_dcp-metrics-included.csv",  # reference catalogues, not exports
    "dcgm_exporter_default-counters.csv",
    "slyme_sacct_parallel_parsable2_noheader.out",  # no header: needs --source sacct and its format sidecar
}


def test_perfwh_ingest_tells_every_sample_export_by_its_content(samples):
    from perf_assets.lib.ingest.deliver import sniff_source

    checked = 0
    for path in sorted(samples.rglob("*")):
        if not path.is_file() or path.name == "SOURCES.md":
            continue
        expected = None if path.name in NOT_SNIFFED else SAMPLE_SOURCES[path.parent.name]
        assert sniff_source(path) == expected, path.name
        checked += 1
    assert checked >= 25
