"""The warehouse side of the confirmation re-run: which (node, probe) pairs wait for one, on literal verdict
rows, and the sensor that requests them (this host: the local job; a probe_hosts partition: the remote job)."""

from __future__ import annotations

import dagster as dg
import duckdb

from perf_assets.lib.paths import data_home
from perf_assets.lib.probe_reruns import pending_confirmations

COLUMNS = "node, gpu_uuid, device_kind, probe, metric, rule, run_id, started_at, fired, confirm_rerun, verdict"
ROWS = [
    # gpu A: warned, then its next run passed: nothing pending
    ("n1", "GPU-a", "cuda", "gemm", "bf16_8192_tflops", "gemm_regression", "r1", "2026-11-01 05:00", True, True, "warn"),
    ("n1", "GPU-a", "cuda", "gemm", "bf16_8192_tflops", "gemm_regression", "r2", "2026-11-02 05:00", False, True, "pass"),
    # gpu B: its latest run fired a confirm rule for the first time: pending
    ("n2", "GPU-b", "cuda", "hbm_stream", "copy_gbps", "hbm_regression", "r3", "2026-11-02 05:00", True, True, "warn"),
    # gpu C: confirmed (fail), a hard failure, a warn-only rule and a CPU row: nothing pending
    ("n3", "GPU-c", "cuda", "gemm", "bf16_8192_tflops", "gemm_floor", "r4", "2026-11-02 05:00", True, True, "fail"),
    ("n3", "GPU-c", "cuda", "burn_soak", "mismatched_elements", "sdc", "r4", "2026-11-02 05:00", True, False, "fail"),
    ("n3", "GPU-c", "cuda", "launch_latency", "wall_us", "launch_regression", "r4", "2026-11-02 05:00", True, False, "warn"),
    ("n4", "cpu-n4", "cpu", "gemm", "fp32_1024_tflops", "missing_or_failed", "r5", "2026-11-02 05:00", True, True, "warn"),
    # gpu D on this host
    ("here", "GPU-d", "cuda", "gemm", "fp8_8192_tflops", "gemm_fp8_floor", "r6", "2026-11-02 05:00", True, True, "warn"),
]  # fmt: skip


def _warehouse(path) -> None:
    with duckdb.connect(str(path)) as con:
        con.execute("create schema intermediate")
        con.execute(
            "create table intermediate.int_probe_verdicts (node varchar, gpu_uuid varchar, device_kind varchar, "
            "probe varchar, metric varchar, rule varchar, run_id varchar, started_at timestamp, fired boolean, "
            "confirm_rerun boolean, verdict varchar)"
        )
        con.executemany(f"insert into intermediate.int_probe_verdicts ({COLUMNS}) values (?,?,?,?,?,?,?,?,?,?,?)", ROWS)


def test_only_a_first_unconfirmed_firing_on_a_gpus_latest_run_waits_for_a_re_run(tmp_path):
    path = tmp_path / "w.duckdb"
    _warehouse(path)

    def query(sql):
        with duckdb.connect(str(path), read_only=True) as con:
            cursor = con.execute(sql)
            return [d[0] for d in cursor.description], cursor.fetchall()

    pending = pending_confirmations(query)
    assert [(p.node, p.probe, p.run_id, p.rules) for p in pending] == [
        ("here", "gemm", "r6", "gemm_fp8_floor"),
        ("n2", "hbm_stream", "r3", "hbm_regression"),
    ]
    assert pending[1].key == "confirm-r3-hbm_stream"


def test_the_sensor_requests_the_local_or_remote_probe_job(tmp_path, monkeypatch):
    import perf_assets.defs.probes.sensors as sensors

    home = data_home(tmp_path).ensure()
    home.published_db.parent.mkdir(parents=True, exist_ok=True)
    _warehouse(home.published_db)
    monkeypatch.setenv("PERFWH_HOME", str(home.root))
    monkeypatch.setattr(sensors, "hostname", lambda: "here")
    instance = dg.DagsterInstance.ephemeral()
    instance.add_dynamic_partitions("probe_hosts", ["n2"])
    result = sensors.probe_confirmation_sensor(dg.build_sensor_context(instance=instance))
    requests = {r.job_name: r for r in result.run_requests}
    assert set(requests) == {"probe_local_host", "probe_remote_hosts"}
    local, remote = requests["probe_local_host"], requests["probe_remote_hosts"]
    assert local.run_config["ops"]["local_probe_suite"]["config"]["probes"] == ["gemm"]
    assert remote.partition_key == "n2" and remote.run_key == "confirm-r3-hbm_stream"
    assert remote.run_config["ops"]["remote_probe_suite"]["config"]["probes"] == ["hbm_stream"]
