"""GPU telemetry formats: dcgm-exporter text, dcgmi dmon, nvidia-smi query-gpu CSV, capture bundles,
nvidia_gpu_exporter text -> raw_dcgm / raw_nvidia_smi -> int_gpu_telemetry_samples (docs/formats/telemetry.md)."""

from __future__ import annotations

import csv
import json
import os
import re
import shutil
import subprocess
import sys
from datetime import datetime, timedelta, timezone
from pathlib import Path

import duckdb
import pytest

from perf_assets.lib.incremental import every_lake_day_args
from perf_assets.lib.ingest import ingest, reingest
from perf_assets.lib.ingest.formats.gpu_identity import normalise_bus_id, normalise_uuid
from perf_assets.lib.ingest.manifest import read_manifest
from perf_assets.lib.paths import DBT_PROJECT_DIR, data_home

DMON_FIXTURE = Path(__file__).parent / "data" / "dcgmi_dmon" / "dmon_profiling.txt"
H100 = "nvidia_smi/capture__linux-x86_64__nvidia-h100-80gb-hbm3__590.48.01.txt"
H200 = "nvidia_smi/capture__linux-x86_64__nvidia-h200-mig__590.48.01.txt"
L40S = "nvidia_smi/capture__linux-x86_64__nvidia-l40s__595.80.txt"
GOLDEN = "nvidia_smi/exporter_golden__linux-x86_64__nvidia-h100-80gb-hbm3__590.48.01__load.metrics"
DATADOG = "dcgm_exporter/datadog_dcgm_fixture_metrics.txt"
CATALOGUES = (
    "dcgm_exporter/dcgm_exporter_default-counters.csv",
    "dcgm_exporter/dcgm_exporter_dcp-metrics-included.csv",
)

# Where each sample lands (contract names: <host>__<job>__<rank>__<utc-ts>.<ext>), and what it yields.
LANDED = {
    DATADOG: "dcgm/lab/2026-11-01/dd-scrape__-__-__20261101T120000Z.txt",
    H100: "nvidia_smi/lab/2026-07-14/h100-node__-__-__20260714T081238Z.txt",
    H200: "nvidia_smi/lab/2026-07-03/h200-node__-__-__20260703T222159Z.txt",
    L40S: "nvidia_smi/lab/2026-07-03/l40s-node__-__-__20260703T083338Z.txt",
    GOLDEN: "nvidia_smi/lab/2026-07-14/h100-node__-__-__20260714T081253Z.metrics",
    **{catalogue: f"dcgm/lab/2026-11-01/{Path(catalogue).name}" for catalogue in CATALOGUES},
}
DMON_LANDED = "dcgm/lab/2026-11-01/dgx-07__-__-__20261101T120000Z.d500.txt"

EXPECTED = {  # sample -> (format, status, rows, manifest reason or None)
    DATADOG: ("dcgm_exporter_text", "ok", 24, "14 series without host/GPU labels not ingested"),
    H100: ("nvidia_smi_capture_bundle", "ok", 522, None),  # 2 x 206 query fields + 2 x 5 x 11 dmon
    H200: ("nvidia_smi_capture_bundle", "ok", 522, None),
    L40S: ("nvidia_smi_capture_bundle", "ok", 502, None),  # 2 x 196 query fields + 2 x 5 x 11 dmon
    GOLDEN: ("nvidia_gpu_exporter_text", "ok", 134, "4 series without host/GPU labels not ingested"),
    CATALOGUES[0]: (None, "skipped", 0, "no parser for source 'dcgm'"),
    CATALOGUES[1]: (None, "skipped", 0, "no parser for source 'dcgm'"),
}


def land(home, relative: str, content: bytes | str | Path) -> Path:
    target = home.landing / relative
    target.parent.mkdir(parents=True, exist_ok=True)
    if isinstance(content, Path):
        shutil.copyfile(content, target)
    elif isinstance(content, str):
        target.write_text(content)
    else:
        target.write_bytes(content)
    return target


def raw_rows(home, table: str, where: str = "true") -> list[dict]:
    glob = home.lake_raw / table / "**" / "*.parquet"
    relation = duckdb.sql(f"select * from read_parquet('{glob}', union_by_name = true) where {where}")
    return [dict(zip(relation.columns, row)) for row in relation.fetchall()]


def rows_of(home, table: str, landed_path: str) -> list[dict]:
    file_id = next(row["file_id"] for row in read_manifest(home.manifest_dir).to_pylist() if row["path"] == landed_path)
    return raw_rows(home, table, f"landed_file_id = '{file_id}'")


def utc(text: str) -> datetime:
    return datetime.fromisoformat(text).replace(tzinfo=timezone.utc)


@pytest.fixture(scope="module")
def telemetry_home(samples, tmp_path_factory):
    """Every telemetry sample (and the synthetic dmon fixture) landed under contract names, ingested once."""
    home = data_home(tmp_path_factory.mktemp("telemetry")).ensure()
    for sample, relative in LANDED.items():
        land(home, relative, samples / sample)
    land(home, DMON_LANDED, DMON_FIXTURE)
    outcomes = {outcome.path: outcome for outcome in ingest(home)}
    return home, outcomes


# ----------------------------------------------------------------------------- every sample file


@pytest.mark.parametrize("sample", list(EXPECTED), ids=lambda sample: Path(sample).stem[:40])
def test_each_sample_file_lands_with_its_format_and_rows(telemetry_home, sample):
    home, outcomes = telemetry_home
    fmt, status, rows, reason = EXPECTED[sample]
    outcome = outcomes[LANDED[sample]]
    assert (outcome.format, outcome.status, outcome.rows) == (fmt, status, rows), outcome.line()
    if reason is None:
        assert outcome.reason is None
    else:
        assert reason in outcome.reason
    if status == "ok":
        table = "raw_dcgm" if LANDED[sample].startswith("dcgm/") else "raw_nvidia_smi"
        assert len(rows_of(home, table, LANDED[sample])) == rows


def test_datadog_fixture_attributes_three_gpus_and_counts_the_unlabelled_block(telemetry_home):
    home, _ = telemetry_home
    rows = rows_of(home, "raw_dcgm", LANDED[DATADOG])
    by_host = {}
    for row in rows:
        by_host.setdefault(row["host"], set()).add(row["gpu_uuid"])
    assert by_host == {
        "424773df46e0": {"GPU-20c56d28-0da5-6d26-a36a-e7af1ce2586e"},
        "551bdf382151": {"GPU-9ef1b6d0-3643-5dd7-b823-c0ec20dcf2d5"},
        "ip-11111": {"GPU-abc"},  # not a UUID: kept as written, it still names that host's GPU
    }
    assert sum(row["host"] == "424773df46e0" for row in rows) == 16
    assert sum(row["host"] == "551bdf382151" for row in rows) == 7
    assert {row["ts"] for row in rows} == {utc("2026-11-01T12:00:00")}  # no times in the text: capture time
    assert {row["gpu_index"] for row in rows} == {0} and {row["gpu_instance"] for row in rows} == {None}
    power = next(row for row in rows if row["field"] == "DCGM_FI_DEV_POWER_USAGE")
    assert power["value"] == pytest.approx(8.969) and power["model_name"] == "Tesla T4"
    energy = next(row for row in rows if row["field"] == "DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION")
    assert energy["value"] == 128996013  # a counter keeps its value as written
    a10g = next(row for row in rows if row["host"] == "ip-11111")
    labels = json.loads(a10g["labels_json"])
    assert a10g["field"] == "DCGM_FI_PROF_DRAM_ACTIVE" and a10g["model_name"] == "NVIDIA A10G"
    assert (labels["container"], labels["namespace"], labels["pod"]) == ("ray-worker", "ray-llm", "ray-1111111")
    unlabelled = {"DCGM_FI_DEV_FAN_SPEED", "DCGM_FI_PROF_SM_ACTIVE", "DCGM_FI_DEV_MEMORY_TEMP"}
    assert not unlabelled & {row["field"] for row in rows}  # the dummy block is counted, not ingested


def test_dcgm_exporter_text_identity_mig_and_sentinels(tmp_path):
    home = data_home(tmp_path / "home").ensure()
    gpu = 'gpu="1",uuid="GPU-5FA1B2C3-0000-1111-2222-333344445555",pci_bus_id="00000000:1B:00.0",device="nvidia1"'
    text = "\n".join(
        [
            "# HELP DCGM_FI_PROF_SM_ACTIVE The ratio of cycles an SM has at least 1 warp assigned.",
            "# TYPE DCGM_FI_PROF_SM_ACTIVE gauge",
            f'DCGM_FI_PROF_SM_ACTIVE{{{gpu},modelName="NVIDIA-H100-80GB-HBM3",hostname="gpu-n7"}} 0.910000',
            f'DCGM_FI_PROF_SM_ACTIVE{{{gpu},modelName="NVIDIA-H100-80GB-HBM3",hostname="gpu-n7",'
            'GPU_I_PROFILE="3g.40gb",GPU_I_ID="1"} 0.450000',
            f'DCGM_FI_PROF_SM_ACTIVE{{{gpu},modelName="NVIDIA-H100-80GB-HBM3",hostname="gpu-n7",'
            'GPU_I_PROFILE="<<<NULL>>>",GPU_I_ID="2"} NaN',
            f'DCGM_FI_DEV_MEMORY_TEMP{{{gpu},hostname="gpu-n7",container="",pod=""}} 9223372036854775794',
            f'DCGM_FI_DEV_GPU_TEMP{{{gpu},hostname="gpu-n7"}} 41 1793534400000',  # its own timestamp (ms)
            'DCGM_FI_DEV_NVLINK_BANDWIDTH_L0{nvlink="0",gpu_uuid="GPU-5fa1",model_name="x",hostname="gpu-n7"} 12',
            'DCGM_FI_DEV_GPU_UTIL{gpu="0",UUID="GPU-x"} 50',  # no hostname label: host from the file name
        ]
    )
    relative = "dcgm/lab/2026-11-02/fallback-host__-__-__20261102T010203Z.prom"
    land(home, relative, text + "\n")

    [outcome] = ingest(home)

    assert (outcome.format, outcome.status, outcome.rows) == ("dcgm_exporter_text", "ok", 6), outcome.line()
    assert "1 series without host/GPU labels" in outcome.reason  # the NVLink entity
    rows = rows_of(home, "raw_dcgm", relative)
    sm = sorted((r for r in rows if r["field"] == "DCGM_FI_PROF_SM_ACTIVE"), key=lambda r: r["gpu_instance"] or 0)
    assert [(r["gpu_instance"], r["value"]) for r in sm] == [(None, 0.91), (1, 0.45), (2, None)]  # MIG: 3 series
    assert {r["gpu_uuid"] for r in sm} == {"GPU-5fa1b2c3-0000-1111-2222-333344445555"}
    assert {(r["host"], r["gpu_index"], r["pci_bus_id"], r["model_name"]) for r in sm} == {
        ("gpu-n7", 1, "0000:1b:00.0", "NVIDIA H100 80GB HBM3")
    }
    assert json.loads(sm[1]["labels_json"])["GPU_I_PROFILE"] == "3g.40gb"
    memory_temp = next(r for r in rows if r["field"] == "DCGM_FI_DEV_MEMORY_TEMP")
    assert memory_temp["value"] is None  # DCGM blank sentinel: unknown, not a temperature
    gpu_temp = next(r for r in rows if r["field"] == "DCGM_FI_DEV_GPU_TEMP")
    assert gpu_temp["ts"] == datetime.fromtimestamp(1793534400, tz=timezone.utc)
    util = next(r for r in rows if r["field"] == "DCGM_FI_DEV_GPU_UTIL")
    assert (util["host"], util["ts"]) == ("fallback-host", utc("2026-11-02T01:02:03"))


# ----------------------------------------------------------------------------- dcgmi dmon


def test_dmon_fixture_rows_times_entities_and_na(telemetry_home):
    home, outcomes = telemetry_home
    outcome = outcomes[DMON_LANDED]
    assert (outcome.format, outcome.status, outcome.rows) == ("dcgmi_dmon_text", "ok", 81), outcome.line()
    assert "9 series" in outcome.reason  # GPU-CI 0: 9 fields, not tied to a GPU
    rows = rows_of(home, "raw_dcgm", DMON_LANDED)
    start = utc("2026-11-01T12:00:00")
    gr_gpu0 = sorted(
        (r["ts"], r["value"]) for r in rows if r["field"] == "DCGM_FI_PROF_GR_ENGINE_ACTIVE" and r["gpu_index"] == 0
    )
    assert gr_gpu0 == [
        (start, 0.429),
        (start + timedelta(milliseconds=500), 0.431),
        (start + timedelta(seconds=1), 0.433),
    ]
    instance = [r for r in rows if r["gpu_instance"] == 1]
    assert len(instance) == 27 and {r["gpu_index"] for r in instance} == {None}
    assert {r["value"] for r in instance if r["field"] == "DCGM_FI_DEV_GPU_UTIL"} == {None}  # N/A per MIG instance
    gpu1_second = [r for r in rows if r["gpu_index"] == 1 and r["ts"] == start + timedelta(milliseconds=500)]
    assert {r["field"]: r["value"] for r in gpu1_second}["DCGM_FI_PROF_SM_ACTIVE"] is None
    assert {r["field"]: r["value"] for r in gpu1_second}["DCGM_FI_PROF_PCIE_TX_BYTES"] == 1000
    assert {r["host"] for r in rows} == {"dgx-07"}


@pytest.mark.parametrize(
    "name, sidecar, step",
    [
        ("dgx-07__-__-__20261101T120000Z.txt", None, timedelta(seconds=1)),  # dmon's default
        ("dgx-07__-__-__20261101T120000Z.txt", "dcgmi dmon -e 1001,1002 -d 250\n", timedelta(milliseconds=250)),
    ],
)
def test_dmon_delay_from_sidecar_or_default(tmp_path, name, sidecar, step):
    home = data_home(tmp_path / "home").ensure()
    relative = f"dcgm/lab/2026-11-01/{name}"
    land(home, relative, DMON_FIXTURE)
    if sidecar:
        land(home, "dcgm/lab/2026-11-01/dcgmi_dmon_command.txt", sidecar)

    [outcome] = ingest(home)  # the sidecar is not a landed file

    assert outcome.status == "ok", outcome.line()
    times = sorted({r["ts"] for r in rows_of(home, "raw_dcgm", relative) if r["gpu_index"] == 0})
    assert times == [utc("2026-11-01T12:00:00") + k * step for k in range(3)]


# ----------------------------------------------------------------------------- nvidia-smi


@pytest.mark.parametrize(
    "sample, model, pci_bus_id, power_w, load_at",
    [
        (H100, "NVIDIA H100 80GB HBM3", "0000:00:09.0", 631.95, "2026-07-14T08:12:53.353"),
        (H200, "NVIDIA H200", "0000:83:00.0", 295.01, "2026-07-03T22:22:27.218"),
        (L40S, "NVIDIA L40S", "0000:01:00.0", 110.23, "2026-07-03T08:33:53.415"),
    ],
    ids=["h100", "h200-mig", "l40s"],
)
def test_capture_bundle_identity_values_and_dmon(telemetry_home, sample, model, pci_bus_id, power_w, load_at):
    home, _ = telemetry_home
    rows = rows_of(home, "raw_nvidia_smi", LANDED[sample])
    host = LANDED[sample].split("/")[-1].split("__")[0]
    # one GPU; its UUID is masked (all zeros) in the public captures: unknown, identity by host/index/bus
    assert {(r["host"], r["gpu_uuid"], r["gpu_index"], r["pci_bus_id"], r["model_name"]) for r in rows} == {
        (host, None, 0, pci_bus_id, model)
    }
    assert {r["section"] for r in rows} == {"idle :: query-gpu", "load :: query-gpu", "idle :: dmon", "load :: dmon"}
    load = {r["field"]: r for r in rows if r["section"] == "load :: query-gpu"}
    assert (load["power.draw"]["value"], load["power.draw"]["unit"]) == (pytest.approx(power_w), "W")
    assert load["power.draw"]["ts"] == utc(load_at)  # host local time read as UTC (no timezone.txt)
    assert load["serial"]["value"] is None and load["serial"]["text_value"] == "0000000000000"
    assert load["pstate"]["text_value"] == "P0" and load["pstate"]["value"] is None
    assert load["clocks_event_reasons.active"]["text_value"].startswith("0x")
    assert load["clocks_event_reasons.active"]["value"] == int(load["clocks_event_reasons.active"]["text_value"], 16)
    assert load["module.power.limit"]["value"] is None and load["module.power.limit"]["text_value"] is None  # [N/A]
    assert load["clocks.applications.graphics"]["value"] is None  # [Requested functionality has been deprecated]
    assert "uuid" not in load and "timestamp" not in load and "hostname" not in load  # identity: columns
    dmon = sorted((r["ts"], r["value"]) for r in rows if r["section"] == "load :: dmon" and r["field"] == "dmon.pwr")
    assert [ts for ts, _ in dmon] == [utc(load_at) + timedelta(seconds=k) for k in range(5)]
    assert all(value > 0 for _, value in dmon)
    assert {r["unit"] for r in rows if r["field"] == "dmon.pwr"} == {"W"}


def test_mig_bundle_reports_utilisation_as_unknown(telemetry_home):
    home, _ = telemetry_home
    rows = rows_of(home, "raw_nvidia_smi", LANDED[H200])
    util = [r for r in rows if r["field"] in ("utilization.gpu", "dmon.sm")]
    assert len(util) == 12 and {r["value"] for r in util} == {None}  # [N/A] and `-` under MIG: never 0
    assert {r["text_value"] for r in rows if r["field"] == "mig.mode.current"} == {"Enabled"}


def test_exporter_golden_metrics_read_into_raw_nvidia_smi(telemetry_home):
    home, _ = telemetry_home
    rows = {r["field"]: r for r in rows_of(home, "raw_nvidia_smi", LANDED[GOLDEN])}
    power = rows["nvidia_smi_power_draw_watts"]
    assert (power["value"], power["unit"], power["gpu_index"], power["gpu_uuid"]) == (631.95, "W", 0, None)
    assert (power["pci_bus_id"], power["model_name"]) == ("0000:00:09.0", "NVIDIA H100 80GB HBM3")
    assert power["ts"] == utc("2026-07-14T08:12:53") and power["section"] == "exporter"
    assert rows["nvidia_smi_utilization_gpu_ratio"]["unit"] == "ratio"
    info = json.loads(rows["nvidia_smi_gpu_info"]["text_value"])
    assert info["driver_version"] == "590.48.01" and info["vbios_version"] == "96.00.A5.00.01"
    burn = rows['nvidia_smi_compute_app_used_memory_bytes{pid="11345",process_name="./gpu_burn"}']
    assert burn["value"] == 16452157440 and burn["unit"] == "B"
    assert "nvidia_smi_failed_scrapes_total" not in rows  # exporter self-metric: counted, not a GPU sample


def _bundle_csv(path: Path) -> tuple[str, str, str]:
    """The load query-gpu section of a bundle: (command field list, header line, value line)."""
    lines = path.read_text().splitlines()
    start = max(i for i, line in enumerate(lines) if line.startswith("# load :: query-gpu"))
    command = lines[start + 1].split("--query-gpu=", 1)[1].split()[0]
    header = next(i for i in range(start, len(lines)) if lines[i].startswith("timestamp, "))
    return command, lines[header], lines[header + 1]


def _strip_units(header: str, values: str) -> str:
    cells = []
    for name, cell in zip(header.split(", "), values.split(", ")):
        unit = re.search(r"\[(.+)\]$", name)
        cells.append(cell[: -len(unit.group(1)) - 1] if unit and cell.endswith(" " + unit.group(1)) else cell)
    return ", ".join(cells)


@pytest.mark.parametrize(
    "variant, power_unit",
    [("units", "W"), ("nounits", "W"), ("noheader_sidecar", "W"), ("noheader_nounits_sidecar", None)],
)
def test_query_gpu_csv_variants(samples, tmp_path, variant, power_unit):
    fields, header, values = _bundle_csv(samples / H100)
    if "nounits" in variant:
        values = _strip_units(header, values)
    home = data_home(tmp_path / "home").ensure()
    relative = "nvidia_smi/lab/2026-07-14/h100-node__-__-__20260714T081300Z.csv"
    land(home, relative, (values if "noheader" in variant else f"{header}\n{values}") + "\n")
    if "sidecar" in variant:
        land(home, "nvidia_smi/lab/2026-07-14/nvidia_smi_format.txt", f"--query-gpu={fields} --format=csv,noheader\n")

    [outcome] = ingest(home)

    assert (outcome.format, outcome.status, outcome.rows) == ("nvidia_smi_query_gpu_csv", "ok", 206), outcome.line()
    rows = {r["field"]: r for r in rows_of(home, "raw_nvidia_smi", relative)}
    assert (rows["power.draw"]["value"], rows["power.draw"]["unit"]) == (631.95, power_unit)
    assert rows["memory.used"]["value"] == 19818 and rows["utilization.gpu"]["value"] == 100
    assert rows["power.draw"]["ts"] == utc("2026-07-14T08:12:53.353") and rows["power.draw"]["gpu_index"] == 0
    assert {r["section"] for r in rows.values()} == {"query-gpu"}


def test_query_gpu_timezone_sidecar_shifts_local_time_to_utc(samples, tmp_path):
    _, header, values = _bundle_csv(samples / L40S)
    home = data_home(tmp_path / "home").ensure()
    relative = "nvidia_smi/lab/2026-07-03/l40s-node__-__-__20260703T063400Z.csv"
    land(home, relative, f"{header}\n{values}\n")
    land(home, "nvidia_smi/lab/2026-07-03/timezone.txt", "Europe/Berlin\n")  # CEST, UTC+2 in July

    [outcome] = ingest(home)

    assert outcome.status == "ok", outcome.line()
    assert {r["ts"] for r in rows_of(home, "raw_nvidia_smi", relative)} == {utc("2026-07-03T06:33:53.415")}


# ----------------------------------------------------------------------------- bad input, re-runs


def test_bad_files_are_quarantined_with_their_reason_while_the_batch_ingests(samples, tmp_path):
    home = data_home(tmp_path / "home").ensure()
    datadog = (samples / DATADOG).read_bytes()
    bundle = (samples / H100).read_text()
    cut = bundle.index("2026/07/14 08:12:38.696") + 200  # inside the idle query-gpu value line
    bad = {
        "dcgm/lab/2026-11-01/empty__-__-__20261101T000000Z.txt": ("", "empty file"),
        "dcgm/lab/2026-11-01/cut__-__-__20261101T000000Z.txt": (datadog[:300], "unterminated"),
        "dcgm/lab/2026-11-01/no-time.txt": (datadog, "no capture time"),
        "dcgm/lab/2026-11-01/dgx-07.txt": (DMON_FIXTURE.read_text(), "no host"),
        "dcgm/lab/2026-11-01/dgx-08__-__-__20261101T000000Z.txt": (
            DMON_FIXTURE.read_text().replace("612.400", "612.400 7"),
            "line 3: 10 values, the header names 9 fields",
        ),
        "nvidia_smi/lab/2026-07-14/cut-bundle__-__-__20260714T081238Z.txt": (
            bundle[:cut],
            "values, the header names 212",
        ),
        "nvidia_smi/lab/2026-07-14/empty__-__-__20260714T081238Z.csv": ("", "empty file"),
        "nvidia_smi/lab/2026-07-15/noheader__-__-__20260715T000000Z.csv": (
            _bundle_csv(samples / H100)[2] + "\n",
            "no header line and no nvidia_smi_format.txt",
        ),
        "nvidia_smi/lab/2026-07-15/h100__-__-__20260715T000000Z.csv": (
            "timestamp, index, power.draw [W]\nyesterday, 0, 631.95 W\n",
            "line 2: timestamp 'yesterday'",
        ),
    }
    for relative, (content, _) in bad.items():
        land(home, relative, content)
    good = land(home, LANDED[GOLDEN], samples / GOLDEN)

    outcomes = {outcome.path: outcome for outcome in ingest(home)}

    for relative, (_, reason) in bad.items():
        assert outcomes[relative].status == "quarantined", outcomes[relative].line()
        assert reason in outcomes[relative].reason, outcomes[relative].reason
        assert outcomes[relative].rows == 0
    assert outcomes[good.relative_to(home.landing).as_posix()].status == "ok"
    assert len(raw_rows(home, "raw_nvidia_smi")) == 134 and raw_rows(home, "raw_dcgm") == []


def test_reingesting_changes_nothing(telemetry_home):
    home, _ = telemetry_home
    before = {table: len(raw_rows(home, table)) for table in ("raw_dcgm", "raw_nvidia_smi")}
    manifest_rows = read_manifest(home.manifest_dir).num_rows

    again = ingest(home)
    assert {outcome.status for outcome in again} == {"already_ingested"}
    forced = reingest(home, "nvidia_smi_capture_bundle") + reingest(home, "dcgm_exporter_text")
    assert len(forced) == 4 and {outcome.status for outcome in forced} == {"ok"}

    assert {table: len(raw_rows(home, table)) for table in before} == before  # replaced, never duplicated
    assert before == {"raw_dcgm": 24 + 81, "raw_nvidia_smi": 522 + 522 + 502 + 134}
    assert read_manifest(home.manifest_dir).num_rows == manifest_rows  # same (file, parser version) rows


# ----------------------------------------------------------------------------- reference data


def test_counter_catalogues_are_reference_data_not_telemetry(telemetry_home):
    home, outcomes = telemetry_home
    for catalogue in CATALOGUES:
        assert outcomes[LANDED[catalogue]].status == "skipped"
    fields = {r["field"] for r in raw_rows(home, "raw_dcgm")}
    assert "DCGM_FI_DEV_POWER_VIOLATION" not in fields  # a catalogue-only field never became a sample


def test_dcgm_fields_seed_is_the_catalogues_content(samples):
    catalogue_entries: dict[str, set[tuple[str, bool]]] = {}
    for catalogue in CATALOGUES:
        for line in (samples / catalogue).read_text().splitlines():
            match = re.match(r"^(#\s*)?(DCGM_[A-Z0-9_]+)\s*,\s*([a-z]+)\s*,", line.strip())
            if match:
                catalogue_entries.setdefault(match.group(2), set()).add((match.group(3), match.group(1) is None))
    with open(DBT_PROJECT_DIR / "seeds" / "dcgm_fields.csv", newline="") as handle:
        seed = {row["field"]: row for row in csv.DictReader(handle)}
    assert set(seed) == set(catalogue_entries)
    for field, row in seed.items():
        enabled_types = {kind for kind, enabled in catalogue_entries[field] if enabled}
        assert row["prometheus_type"] in (enabled_types or {kind for kind, _ in catalogue_entries[field]}), field
    assert seed["DCGM_FI_DEV_POWER_USAGE"]["unit"] == "W"
    assert (
        seed["DCGM_FI_PROF_PCIE_TX_BYTES"]["unit"] == "B/s"
        and seed["DCGM_FI_PROF_PCIE_TX_BYTES"]["other_types"] == "counter"
    )
    assert seed["DCGM_FI_PROF_SM_ACTIVE"]["unit"] == "ratio" and seed["DCGM_FI_DEV_GPU_UTIL"]["unit"] == "%"


def test_gpu_identity_normalisation():
    assert normalise_bus_id("00000000:30:00.0") == "0000:30:00.0"
    assert normalise_bus_id("0000:1B:00") == "0000:1b:00.0"
    assert normalise_bus_id("[N/A]") is None and normalise_bus_id("bogus") is None
    assert normalise_uuid("20C56D28-0DA5-6D26-A36A-E7AF1CE2586E") == "GPU-20c56d28-0da5-6d26-a36a-e7af1ce2586e"
    assert normalise_uuid("GPU-00000000-0000-0000-0000-000000000000") is None  # masked
    assert normalise_uuid("MIG-11111111-0000-0000-0000-000000000001").startswith("MIG-")


# ----------------------------------------------------------------------------- warehouse


@pytest.mark.slow
def test_one_gpu_telemetry_table_in_the_warehouse(telemetry_home, tmp_path):
    """dbt builds the staging and union models (and their data tests) on the ingested samples."""
    home, _ = telemetry_home
    dbt = Path(sys.executable).parent / "dbt"
    command = [
        str(dbt) if dbt.exists() else "dbt",
        "build",
        "--quiet",
        "--select",
        "+int_gpu_telemetry_samples",
        "+int_dcgm_node_days",
        "--project-dir",
        str(DBT_PROJECT_DIR),
        "--profiles-dir",
        str(DBT_PROJECT_DIR),
        "--target-path",
        str(tmp_path / "target"),
        "--log-path",
        str(tmp_path / "logs"),
        *every_lake_day_args(home),  # the incremental models' days (docs/incremental.md)
    ]
    result = subprocess.run(command, env={**os.environ, "PERFWH_HOME": str(home.root)}, capture_output=True, text=True)
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]

    with duckdb.connect(str(home.warehouse_db), read_only=True) as connection:

        def query(sql: str) -> list[tuple]:
            return connection.sql(sql).fetchall()

        table = "intermediate.int_gpu_telemetry_samples"
        assert dict(query(f"select source, count(*) from {table} group by 1")) == {
            "dcgm": 24 + 81,
            "nvidia_smi": 338 + 342 + 328,  # 412 / 412 / 392 query-gpu rows less 74 / 70 / 64 text-only
            "nvidia_smi_dmon": 110 * 3,
            "nvidia_gpu_exporter": 134,
        }
        power = query(
            f"select source, value, unit from {table} where node = 'h100-node' and field = 'DCGM_FI_DEV_POWER_USAGE' "
            "and sampled_at = timestamptz '2026-07-14 08:12:53.353+00' order by source"
        )
        assert power == [("nvidia_smi", 631.95, "W"), ("nvidia_smi_dmon", 631.0, "W")]
        util = query(
            f"select value, unit, source_field from {table} where source = 'nvidia_gpu_exporter' "
            "and field = 'DCGM_FI_DEV_GPU_UTIL'"
        )
        assert util == [(100.0, "%", "nvidia_smi_utilization_gpu_ratio")]  # ratio scaled to the DCGM unit
        margin = query(f"select unit from {table} where field = 'nvsmi:temperature.gpu.tlimit' and node = 'l40s-node'")
        assert len(margin) == 2  # no DCGM twin: kept under its own name
        assert query(f"select count(*) from {table} where field in ('nvsmi:pstate', 'nvsmi:serial')") == [(0,)]
        dcgm_units = dict(query(f"select field, unit from {table} where source = 'dcgm' and node = '424773df46e0'"))
        assert dcgm_units["DCGM_FI_DEV_POWER_USAGE"] == "W" and dcgm_units["DCGM_FI_DEV_FB_FREE"] == "MiB"
        mig = query(f"select count(*) from {table} where gpu_instance = 1 and node = 'dgx-07'")
        assert mig == [(27,)]
        node_days = query(
            "select node, dcgm_gpu_util_samples, dcgm_tensor_active_samples from intermediate.int_dcgm_node_days "
            "order by node"
        )
        assert node_days == [("424773df46e0", 1, 0), ("551bdf382151", 0, 0), ("dgx-07", 6, 5), ("ip-11111", 0, 0)]
