"""Bad and awkward DCGM input (issue 3): the vectorised range-JSON parser equals the per-sample rule,
counter resets and XID transitions, duplicated / out-of-order / conflicting samples, decompression
bombs and size limits, implausible clocks and values (docs/formats/telemetry.md)."""

from __future__ import annotations

import gzip
import json
import math
import os
import subprocess
import sys
from datetime import datetime, timezone
from pathlib import Path

import duckdb
import pytest

from perf_assets.lib.incremental import every_lake_day_args
from perf_assets.lib.ingest import ingest
from perf_assets.lib.ingest.formats import decompress
from perf_assets.lib.ingest.formats.dcgm_rows import identity_from_labels
from perf_assets.lib.ingest.formats.errors import QuarantineError
from perf_assets.lib.ingest.formats.prometheus_range import parse_prometheus_range, sample_value
from perf_assets.lib.ingest.landing import describe
from perf_assets.lib.paths import DBT_PROJECT_DIR, data_home

T0 = 1793491200  # 2026-11-01T00:00:00Z
DAY = "dcgm/lab/2026-11-01"
UUID_A = "GPU-aaaaaaaa-0000-0000-0000-000000000001"
UUID_B = "GPU-bbbbbbbb-0000-0000-0000-000000000002"


def labels(field: str, uuid: str = UUID_A, gpu: int = 0, host: str = "gpu-n1", **more) -> dict:
    return {"__name__": field, "gpu": str(gpu), "UUID": uuid, "Hostname": host, "modelName": "NVIDIA H100", **more}


def range_json(*series: tuple[dict, list]) -> str:
    result = [{"metric": metric, "values": values} for metric, values in series]
    return json.dumps({"status": "success", "data": {"resultType": "matrix", "result": result}})


def land(home, relative: str, content: str | bytes) -> Path:
    target = home.landing / relative
    target.parent.mkdir(parents=True, exist_ok=True)
    target.write_bytes(content.encode() if isinstance(content, str) else content)
    return target


def outcomes_of(home) -> dict:
    return {outcome.path: outcome for outcome in ingest(home)}


# ----------------------------------------------------------------------------- same rows as before


def reference_rows(landed) -> list[dict]:
    """The per-sample rule the parser had before it was vectorised (one datetime and float() per sample)."""
    document = json.loads(landed.path.read_bytes())
    rows = []
    for series in document["data"]["result"]:
        metric = series.get("metric") or {}
        gpu = identity_from_labels(metric, landed)
        if not metric.get("__name__") or gpu is None:
            continue
        for ts, text in series["values"]:
            when = datetime.fromtimestamp(float(ts), tz=timezone.utc)
            rows.append(
                {
                    "cluster": landed.cluster,
                    **{name: getattr(gpu, name) for name in ("host", "gpu_uuid", "gpu_index", "gpu_instance")},
                    "pci_bus_id": gpu.pci_bus_id,
                    "model_name": gpu.model_name,
                    "field": metric["__name__"],
                    "ts": when,
                    "value": sample_value(text),
                    "labels_json": json.dumps(metric, sort_keys=True),
                    "event_date": when.date(),
                }
            )
    return rows


def test_vectorised_range_parser_gives_the_per_sample_rows(tmp_path):
    home = data_home(tmp_path).ensure()
    edge = range_json(
        (
            labels("DCGM_FI_DEV_GPU_UTIL", GPU_I_ID="3", pci_bus_id="00000000:1B:00.0"),
            [[T0, "97"], [T0 + 0.0000005, "NaN"], [T0 + 300.25, "+Inf"], [str(T0 + 600), "-Inf"], [T0 + 900.5, "1e1"]],
        ),
        (
            labels("DCGM_FI_DEV_FB_USED", uuid="GPU-00000000-0000-0000-0000-000000000000", gpu=1),
            [[T0, "9223372036854775794"], [T0 + 1, "140737488355330"], [T0 + 2, "140737488355328.5"], [T0 + 3, 12]],
        ),
        ({"__name__": "DCGM_FI_DEV_GPU_TEMP"}, [[T0, "40"]]),  # no identity: counted, not ingested
        (labels("DCGM_FI_DEV_SM_CLOCK", gpu=2), []),
    )
    path = land(home, f"{DAY}/gpu-n1__-__-__20261101T000000Z.json", edge)
    landed = describe(home.landing, path)
    table = parse_prometheus_range(landed)
    assert table.to_pylist() == reference_rows(landed)
    assert table.schema.metadata == {b"unattributed_series": b"1"}
    values = [row["value"] for row in table.to_pylist()]
    assert values[:5] == [97.0, None, None, None, 10.0] and values[5:] == [None, None, 140737488355328.5, 12.0]


def test_demo_file_rows_equal_the_per_sample_rule(tmp_path):
    from perf_assets.lib.simulate import simulate

    home = data_home(tmp_path).ensure()
    simulate(home, "demo", seed=7, days=1)
    path = sorted((home.landing / "dcgm").rglob("*.json"))[0]
    landed = describe(home.landing, path)
    table = parse_prometheus_range(landed)
    assert table.num_rows > 1000 and table.to_pylist() == reference_rows(landed)


# ----------------------------------------------------------------------------- bad range JSON


@pytest.mark.parametrize(
    "content, reason",
    [
        ("", "invalid JSON"),
        (range_json((labels("DCGM_FI_DEV_GPU_UTIL"), [[T0, "1"]] * 3))[:-20], "invalid JSON"),
        ('{"status": "error", "error": "timeout"}', "status is 'error'"),
        ('{"status": "success", "data": {"resultType": "vector", "result": []}}', "resultType 'vector'"),
        (range_json((labels("DCGM_FI_DEV_GPU_UTIL"), [[T0, "busy"]])), "series DCGM_FI_DEV_GPU_UTIL on gpu-n1"),
        (range_json((labels("DCGM_FI_DEV_GPU_UTIL"), [[T0, "1", "2"]])), "is not [time, value]"),
        (range_json((labels("DCGM_FI_DEV_GPU_UTIL"), [[None, "1"]])), "sample time None is not a number"),
        (range_json((labels("DCGM_FI_DEV_GPU_UTIL"), [["NaN", "1"]])), "not a finite number"),
        (range_json(({"__name__": "DCGM_FI_DEV_GPU_UTIL"}, [[T0, "1"]])), "no attributable samples"),
        ('{"status": "success", "data": {"resultType": "matrix", "result": [7]}}', "data.result[0] is not a series"),
    ],
    ids=["empty", "truncated", "error", "vector", "value", "pair", "time", "nan-time", "unattributed", "series"],
)
def test_bad_range_json_is_quarantined_with_an_actionable_reason(tmp_path, content, reason):
    home = data_home(tmp_path).ensure()
    bad = f"{DAY}/gpu-n9__-__-__20261101T000000Z.json"
    good = f"{DAY}/gpu-n1__-__-__20261101T000000Z.json"
    land(home, bad, content)
    land(home, good, range_json((labels("DCGM_FI_DEV_GPU_UTIL"), [[T0, "50"]])))
    outcomes = outcomes_of(home)
    assert outcomes[bad].status == "quarantined" and reason in outcomes[bad].reason, outcomes[bad].reason
    assert not outcomes[bad].reason.startswith("parser error"), outcomes[bad].reason
    assert (outcomes[good].status, outcomes[good].rows) == ("ok", 1)  # the rest of the batch lands


# ----------------------------------------------------------------------------- clocks and absurd values


@pytest.mark.parametrize(
    "when, reason",
    [(4102444800, "more than 1 day after ingestion"), (T0 - 30 * 365 * 86400, "before 2000-01-01")],
    ids=["future", "past"],
)
def test_implausible_sample_times_quarantine_the_file(tmp_path, when, reason):
    home = data_home(tmp_path).ensure()
    path = f"{DAY}/gpu-n1__-__-__20261101T000000Z.json"
    content = range_json(
        (labels("DCGM_FI_DEV_GPU_UTIL"), [[T0, "1"]]),
        (labels("DCGM_FI_DEV_POWER_USAGE", gpu=3), [[T0, "1"], [when, "2"], [when + 300, "2"]]),
    )
    land(home, path, content)
    outcome = outcomes_of(home)[path]
    assert outcome.status == "quarantined" and reason in outcome.reason
    assert "2 of 4 sample times" in outcome.reason and "DCGM_FI_DEV_POWER_USAGE on gpu-n1 GPU-aaaa" in outcome.reason


def test_exporter_text_with_a_future_capture_time_is_quarantined(tmp_path):
    home = data_home(tmp_path).ensure()
    path = f"{DAY}/gpu-n1__-__-__20991101T000000Z.txt"
    land(home, path, 'DCGM_FI_DEV_GPU_UTIL{gpu="0",UUID="' + UUID_A + '"} 5\n')
    outcome = outcomes_of(home)[path]
    assert outcome.status == "quarantined" and "more than 1 day after ingestion" in outcome.reason


def test_absurd_values_become_null_and_are_counted(tmp_path):
    home = data_home(tmp_path).ensure()
    path = f"{DAY}/gpu-n1__-__-__20261101T000000Z.json"
    content = range_json(
        (labels("DCGM_FI_DEV_GPU_UTIL"), [[T0, "250"], [T0 + 300, "100"], [T0 + 600, "-1"]]),
        (labels("DCGM_FI_DEV_POWER_USAGE"), [[T0, "-5"], [T0 + 300, "700.5"]]),
        (labels("DCGM_FI_PROF_SM_ACTIVE"), [[T0, "1.7"], [T0 + 300, "1.0000000001"], [T0 + 600, "NaN"]]),
        (labels("DCGM_FI_DEV_GPU_TEMP"), [[T0, "-20"]]),  # no physical bound kept for temperatures
        ({"__name__": "DCGM_FI_DEV_GPU_UTIL"}, [[T0, "5"]]),
    )
    land(home, path, content)
    outcome = outcomes_of(home)[path]
    assert (outcome.status, outcome.rows) == ("ok", 9)  # every sample kept, absurd values as NULL
    assert outcome.reason == (
        "1 series without host/GPU labels not ingested; 4 values outside their physical range set to NULL "
        "(DCGM_FI_DEV_GPU_UTIL < 0 %: 1, DCGM_FI_DEV_GPU_UTIL > 100 %: 1, DCGM_FI_DEV_POWER_USAGE < 0 W: 1, "
        "DCGM_FI_PROF_SM_ACTIVE > 1 ratio: 1)"
    )
    glob = home.lake_raw / "raw_dcgm" / "**" / "*.parquet"
    values = duckdb.sql(f"select field, value from read_parquet('{glob}') order by field, ts").fetchall()
    assert values == [
        ("DCGM_FI_DEV_GPU_TEMP", -20.0),
        ("DCGM_FI_DEV_GPU_UTIL", None),
        ("DCGM_FI_DEV_GPU_UTIL", 100.0),
        ("DCGM_FI_DEV_GPU_UTIL", None),
        ("DCGM_FI_DEV_POWER_USAGE", None),
        ("DCGM_FI_DEV_POWER_USAGE", 700.5),
        ("DCGM_FI_PROF_SM_ACTIVE", None),
        ("DCGM_FI_PROF_SM_ACTIVE", 1.0000000001),
        ("DCGM_FI_PROF_SM_ACTIVE", None),
    ]


# ----------------------------------------------------------------------------- compression and bombs


EXPOSITION = (
    "# TYPE DCGM_FI_DEV_GPU_UTIL gauge\n"
    f'DCGM_FI_DEV_GPU_UTIL{{gpu="0",UUID="{UUID_A}",Hostname="gpu-n1"}} 42\n'
    f'DCGM_FI_DEV_GPU_UTIL{{gpu="1",UUID="{UUID_B}",Hostname="gpu-n1"}} 7\n'
)


def test_gzip_exports_ingest_like_plain_ones_and_bad_gzip_is_quarantined(tmp_path):
    home = data_home(tmp_path).ensure()
    packed = gzip.compress(EXPOSITION.encode())
    files = {
        f"{DAY}/gpu-n1__-__-__20261101T000000Z.txt.gz": (packed, "ok", None),
        f"{DAY}/gpu-n2__-__-__20261101T000000Z.txt.gz": (packed[: len(packed) // 2], "quarantined", "truncated gzip"),
        f"{DAY}/gpu-n3__-__-__20261101T000000Z.txt.gz": (EXPOSITION.encode(), "quarantined", "but not gzip"),
        f"{DAY}/gpu-n4__-__-__20261101T000000Z.txt.gz": (packed + b"junk", "quarantined", "trailing garbage"),
        f"{DAY}/gpu-n5__-__-__20261101T000000Z.txt.gz": (packed + packed, "ok", None),  # two members
        f"{DAY}/gpu-n6__-__-__20261101T000000Z.json.gz": (
            gzip.compress(range_json((labels("DCGM_FI_DEV_GPU_UTIL"), [[T0, "1"]])).encode()),
            "ok",  # a gzipped range export is told by its decompressed head and read through decompress
            None,
        ),
    }
    for relative, (content, _, _) in files.items():
        land(home, relative, content)
    outcomes = outcomes_of(home)
    for relative, (_, status, reason) in files.items():
        outcome = outcomes[relative]
        assert outcome.status == status, outcome.line()
        assert reason is None or reason in outcome.reason, outcome.reason
    assert outcomes[f"{DAY}/gpu-n1__-__-__20261101T000000Z.txt.gz"].rows == 2
    assert outcomes[f"{DAY}/gpu-n5__-__-__20261101T000000Z.txt.gz"].rows == 4  # written; staging dedupes


def test_range_parser_reads_gzip(tmp_path):
    home = data_home(tmp_path).ensure()
    content = range_json((labels("DCGM_FI_DEV_GPU_UTIL"), [[T0, "1"], [T0 + 300, "2"]]))
    path = land(home, f"{DAY}/gpu-n1__-__-__20261101T000000Z.json.gz", gzip.compress(content.encode()))
    assert parse_prometheus_range(describe(home.landing, path)).num_rows == 2


def test_a_decompression_bomb_is_quarantined_without_expanding_it(tmp_path):
    home = data_home(tmp_path).ensure()
    line = f'DCGM_FI_DEV_GPU_UTIL{{gpu="0",UUID="{UUID_A}",Hostname="gpu-n1"}} 42\n'.encode()
    bomb = gzip.compress(b"# TYPE DCGM_FI_DEV_GPU_UTIL gauge\n" + line + b"\n" * (24 << 20), compresslevel=9)
    assert len(bomb) < 30_000  # a few KB expanding to 24 MiB of (valid) blank lines
    path = f"{DAY}/gpu-n1__-__-__20261101T000000Z.txt.gz"
    land(home, path, bomb)
    outcome = outcomes_of(home)[path]
    assert outcome.status == "quarantined", outcome.line()
    assert "exceeds the 200:1 ratio limit" in outcome.reason and "PERFWH_MAX_DECOMPRESSION_RATIO" in outcome.reason


def test_the_byte_limit_is_a_setting(tmp_path, monkeypatch):
    monkeypatch.setenv("PERFWH_MAX_DECOMPRESSED_BYTES", "100")
    home = data_home(tmp_path).ensure()
    gz = f"{DAY}/gpu-n1__-__-__20261101T000000Z.txt.gz"
    plain = f"{DAY}/gpu-n2__-__-__20261101T000000Z.txt"
    land(home, gz, gzip.compress(EXPOSITION.encode()))
    land(home, plain, EXPOSITION)
    outcomes = outcomes_of(home)
    assert "decompressed size exceeds 100 bytes" in outcomes[gz].reason
    assert "raise PERFWH_MAX_DECOMPRESSED_BYTES if this is a real export" in outcomes[gz].reason
    assert "over the 100 byte limit" in outcomes[plain].reason


def test_gunzip_stops_at_the_bound():
    bomb = gzip.compress(b"\0" * (64 << 20))
    with pytest.raises(QuarantineError, match="ratio limit"):
        decompress.gunzip_bounded(bomb)
    with pytest.raises(QuarantineError, match="exceeds 1,000 bytes"):
        decompress.gunzip_bounded(gzip.compress(b"x" * 5000), max_bytes=1000)
    assert decompress.gunzip_bounded(gzip.compress(b"a" * 10_000)) == b"a" * 10_000  # small: ratio not checked
    assert decompress.sniff(gzip.compress(b"# TYPE x gauge\n" * 10)[:40]).startswith(b"# TYPE x")


# ----------------------------------------------------------------------------- warehouse: deltas, XIDs, duplicates


def exposition_file(field: str, value: str, uuid: str = UUID_A, kind: str = "counter") -> str:
    return f'# TYPE {field} {kind}\n{field}{{gpu="0",UUID="{uuid}",Hostname="gpu-n1"}} {value}\n'


@pytest.fixture(scope="module")
def robustness_warehouse(tmp_path_factory):
    """Small synthetic DCGM deliveries, ingested and built by dbt once."""
    home = data_home(tmp_path_factory.mktemp("robust")).ensure()
    energy = [[T0 + 300 * k, v] for k, v in enumerate(["100", "150", "170", "20", "60"])]
    energy = [energy[i] for i in (3, 0, 4, 2, 1)]  # delivered out of order
    xid_a = [[T0 + 300 * k, v] for k, v in enumerate(["0", "0", "79", "79", "48", "48", "0", "79"])]
    xid_b = [[T0 + 300 * k, v] for k, v in enumerate(["13", "13", "NaN", "31"])]
    util = [[T0 + 300 * k, v] for k, v in enumerate(["10", "20", "30"])]
    first = range_json(
        (labels("DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION"), energy),
        (labels("DCGM_FI_DEV_XID_ERRORS"), xid_a),
        (labels("DCGM_FI_DEV_XID_ERRORS", uuid=UUID_B, gpu=1), xid_b),
        (labels("DCGM_FI_DEV_GPU_UTIL"), util),
        (labels("DCGM_FI_DEV_GPU_UTIL"), [[T0 + 900, "40"], [T0 + 900, "45"]]),  # twice in one file, differing
    )
    land(home, f"{DAY}/gpu-n1__-__-__20261101T000000Z.json", first)
    land(home, f"{DAY}/gpu-n1-copy__-__-__20261101T000000Z.json", first)  # same content, another name
    second_exporter = range_json((labels("DCGM_FI_DEV_GPU_UTIL"), [[T0, "10"], [T0 + 300, "25"], [T0 + 600, "NaN"]]))
    land(home, "dcgm/lab/2026-11-02/replica-b__-__-__20261101T000000Z.json", second_exporter)
    for minute, value in ((0, "5"), (5, "7"), (10, "2")):  # PCIe replays scraped three times, reset at 10
        land(
            home,
            f"{DAY}/gpu-n1__-__-__20261101T00{minute:02d}00Z.txt",
            exposition_file("DCGM_FI_DEV_PCIE_REPLAY_COUNTER", value),
        )
    outcomes = ingest(home)
    assert {outcome.status for outcome in outcomes} == {"ok"}, [o.line() for o in outcomes]

    dbt = Path(sys.executable).parent / "dbt"
    target = tmp_path_factory.mktemp("dbt")
    models = ["int_dcgm_counter_deltas", "int_dcgm_xid_events", "int_dcgm_sample_conflicts", "int_dcgm_node_days"]
    command = [str(dbt) if dbt.exists() else "dbt", "build", "--quiet", "--select", *[f"+{m}" for m in models]]
    command += ["--project-dir", str(DBT_PROJECT_DIR), "--profiles-dir", str(DBT_PROJECT_DIR)]
    command += ["--target-path", str(target / "target"), "--log-path", str(target / "logs")]
    command += every_lake_day_args(home)  # the incremental models' days (docs/incremental.md)
    result = subprocess.run(command, env={**os.environ, "PERFWH_HOME": str(home.root)}, capture_output=True, text=True)
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    connection = duckdb.connect(str(home.warehouse_db), read_only=True)
    yield connection
    connection.close()


@pytest.mark.slow
def test_counter_deltas_sort_out_of_order_samples_and_detect_resets(robustness_warehouse):
    rows = robustness_warehouse.sql(
        "select field, value, delta, is_reset from intermediate.int_dcgm_counter_deltas order by field, sampled_at"
    ).fetchall()
    assert rows == [
        ("DCGM_FI_DEV_PCIE_REPLAY_COUNTER", 5.0, None, False),
        ("DCGM_FI_DEV_PCIE_REPLAY_COUNTER", 7.0, 2.0, False),
        ("DCGM_FI_DEV_PCIE_REPLAY_COUNTER", 2.0, 2.0, True),
        ("DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION", 100.0, None, False),
        ("DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION", 150.0, 50.0, False),
        ("DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION", 170.0, 20.0, False),
        ("DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION", 20.0, 20.0, True),
        ("DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION", 60.0, 40.0, False),
    ]
    units = robustness_warehouse.sql("select distinct field, unit from intermediate.int_dcgm_counter_deltas").fetchall()
    assert dict(units) == {"DCGM_FI_DEV_PCIE_REPLAY_COUNTER": "count", "DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION": "mJ"}


@pytest.mark.slow
def test_xid_events_are_transitions_to_a_non_zero_code(robustness_warehouse):
    rows = robustness_warehouse.sql(
        "select gpu_uuid, previous_code, xid, is_first_observation, sampled_at "
        "from intermediate.int_dcgm_xid_events order by gpu_uuid, sampled_at"
    ).fetchall()
    at = [datetime.fromtimestamp(T0 + 300 * k, tz=timezone.utc) for k in range(8)]
    assert [(uuid, prev, xid, first, when) for uuid, prev, xid, first, when in rows] == [
        (UUID_A, 0, 79, False, at[2]),
        (UUID_A, 79, 48, False, at[4]),
        (UUID_A, 0, 79, False, at[7]),
        (UUID_B, None, 13, True, at[0]),  # already set when observation began
        (UUID_B, 13, 31, False, at[3]),  # across the unknown (NaN) sample
    ]


@pytest.mark.slow
def test_duplicates_collapse_and_conflicts_are_counted(robustness_warehouse):
    util = robustness_warehouse.sql(
        "select sampled_at, value, copies, conflicting from staging.stg_dcgm__samples "
        "where field = 'DCGM_FI_DEV_GPU_UTIL' order by sampled_at"
    ).fetchall()
    # Three files deliver T0..T0+600 (two identical names and a second exporter): one row per sample.
    assert [(value, copies, conflicting) for _, value, copies, conflicting in util] == [
        (10.0, 3, False),
        (20.0, 3, True),  # the second exporter said 25: the lowest landed_file_id's row is kept
        (30.0, 3, True),  # the second exporter said NaN (unknown)
        (45.0, 4, True),  # twice in each copy of the file (40 and 45): the larger, deterministically
    ]
    conflicts = robustness_warehouse.sql(
        "select min_value, max_value, null_copies, kept_value, landed_files, copies "
        "from intermediate.int_dcgm_sample_conflicts order by sampled_at"
    ).fetchall()
    assert conflicts == [(20.0, 25.0, 0, 20.0, 3, 3), (30.0, 30.0, 1, 30.0, 3, 3), (40.0, 45.0, 0, 45.0, 2, 4)]
    assert robustness_warehouse.sql("select dcgm_gpu_util_samples from intermediate.int_dcgm_node_days").fetchall() == [
        (4,)
    ]
    assert not math.isnan(util[0][1])


@pytest.mark.slow
def test_the_day_built_samples_apply_staging_rules_to_repeated_and_single_deliveries(robustness_warehouse):
    """int_dcgm_samples deduplicates each batch's raw rows itself (a hash aggregate picks the keys that repeat, only
    those go through the window): the same rows as the staging view, and a sample delivered once (each PCIe replay
    scrape) has one copy and no conflict."""
    columns = "node, gpu_uuid, gpu_index, gpu_instance, field, sampled_at, value, copies, conflicting, landed_file_id"
    staged = robustness_warehouse.sql(f"select {columns} from staging.stg_dcgm__samples order by all").fetchall()
    built = robustness_warehouse.sql(f"select {columns} from intermediate.int_dcgm_samples order by all").fetchall()
    assert built == staged and len(built) > 20
    replays = robustness_warehouse.sql(
        "select value, copies, conflicting from intermediate.int_dcgm_samples "
        "where field = 'DCGM_FI_DEV_PCIE_REPLAY_COUNTER' order by sampled_at"
    ).fetchall()
    assert replays == [(5.0, 1, False), (7.0, 1, False), (2.0, 1, False)]
    util = robustness_warehouse.sql(
        "select value, copies, conflicting from intermediate.int_dcgm_samples "
        "where field = 'DCGM_FI_DEV_GPU_UTIL' order by sampled_at"
    ).fetchall()
    assert util == [(10.0, 3, False), (20.0, 3, True), (30.0, 3, True), (45.0, 4, True)]


def test_range_files_convert_in_one_call_and_odd_values_fall_back_to_the_same_rows(tmp_path, monkeypatch):
    """A clean file converts all its series at once (the series-by-series path is not taken); a value of another
    type (a bool) or a NaN literal (which orjson refuses: json.loads reads the file) still gives the per-sample rows."""
    from perf_assets.lib.ingest.formats import prometheus_range

    home = data_home(tmp_path).ensure()
    clean = range_json(
        (labels("DCGM_FI_DEV_GPU_UTIL"), [[T0, "97"], [T0 + 300.25, "NaN"], [T0 + 600, 12]]),
        (labels("DCGM_FI_DEV_POWER_USAGE", gpu=1, uuid=UUID_B), [[T0, "350.5"], [T0 + 300, "9223372036854775794"]]),
        ({"__name__": "DCGM_FI_DEV_GPU_TEMP"}, [[T0, "40"]]),
        (labels("DCGM_FI_DEV_SM_CLOCK", gpu=2), []),
    )
    odd = range_json(
        (labels("DCGM_FI_DEV_GPU_UTIL"), [[T0, "97"], [T0 + 300, True], [T0 + 600, math.nan]]),
        (labels("DCGM_FI_DEV_POWER_USAGE", gpu=1, uuid=UUID_B), [[T0, "350.5"]]),
    )
    assert "NaN" in odd
    landed = {
        name: describe(home.landing, land(home, f"{DAY}/gpu-n{i}__-__-__20261101T000000Z.json", content))
        for i, (name, content) in enumerate((("clean", clean), ("odd", odd)), start=1)
    }
    slow = prometheus_range._rows_series_by_series
    calls = []
    monkeypatch.setattr(prometheus_range, "_rows_series_by_series", lambda *a: calls.append(a) or slow(*a))

    clean_rows = parse_prometheus_range(landed["clean"]).to_pylist()
    assert not calls and clean_rows == reference_rows(landed["clean"]) and len(clean_rows) == 5
    odd_rows = parse_prometheus_range(landed["odd"]).to_pylist()
    assert len(calls) == 1 and odd_rows == reference_rows(landed["odd"])
    assert [row["value"] for row in odd_rows] == [97.0, 1.0, None, 350.5]
