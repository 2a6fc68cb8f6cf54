"""Probes through Dagster Pipes: the local asset in a subprocess (PipesSubprocessClient) and the remote asset
over ssh against a real OpenSSH server on 127.0.0.1 (started here with throw-away keys). Both land a file
that ingests. Without sshd the ssh test skips, except under CI=true where it fails (.ci/run installs it)."""

from __future__ import annotations

import getpass
import json
import os
import shutil
import socket
import subprocess
import sys
import time
from pathlib import Path, PurePosixPath

import dagster as dg
import pytest

from perf_assets.defs.probes.assets import local_probe_suite, remote_probe_suite
from perf_assets.defs.probes.pipes_clients import handle_line
from perf_assets.defs.resources import PerfwhHome
from perf_assets.lib.ingest import ingest
from perf_assets.lib.paths import data_home
from perf_assets.lib.probe_runs import land_fetched, landing_relative

SELECTION = {"probes": ["gemm"], "gemm_dtypes": ["fp32"], "quick": True, "backend": "numpy", "cluster": "c1"}
SSHD = shutil.which("sshd") or ("/usr/sbin/sshd" if os.path.exists("/usr/sbin/sshd") else None)


def _records(path: Path) -> list[dict]:
    return [json.loads(line) for line in path.read_text().splitlines()]


def _materialization(result: dg.ExecuteInJobResult, key: str) -> dict:
    (event,) = result.asset_materializations_for_node(key)
    return {k: getattr(v, "value", v) for k, v in event.metadata.items()}


def _check(result: dg.ExecuteInJobResult):
    (evaluation,) = [e.event_specific_data for e in result.all_events if e.event_type_value == "ASSET_CHECK_EVALUATION"]
    return evaluation


def test_local_probe_suite_runs_in_a_subprocess_over_pipes_and_lands_a_file_that_ingests(tmp_path):
    home = data_home(tmp_path / "home")
    result = dg.materialize(
        [local_probe_suite],
        resources={"perfwh": PerfwhHome(data_dir=str(home.root))},
        run_config={"ops": {"local_probe_suite": {"config": SELECTION}}},
    )
    assert result.success
    meta = _materialization(result, "local_probe_suite")
    landed = Path(meta["landed_path"])
    assert landed.is_relative_to(home.landing / "probe_results" / "c1") and meta["device_kind"] == "cpu"
    records = _records(landed)
    assert meta["rows"] == len(records) and {r["probe"] for r in records} == {"gemm", "health"}
    assert {r["run_id"] for r in records} == {meta["run_id"]}
    check = _check(result)
    assert check.check_name == "probes_pass" and check.passed  # health rows are skipped on a CPU, not failed
    assert [(o.status, o.rows) for o in ingest(home)] == [("ok", len(records))]


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


@pytest.fixture(scope="module")
def sshd(tmp_path_factory):
    """An OpenSSH server on 127.0.0.1 that accepts one generated key for the current user."""
    if SSHD is None:
        if os.environ.get("CI") == "true":
            pytest.fail("sshd is missing: .ci/run installs openssh-server for the Pipes-over-ssh test")
        pytest.skip("sshd not installed (apt-get install openssh-server)")
    folder = tmp_path_factory.mktemp("sshd")
    os.chmod(folder, 0o700)
    for name in ("host_key", "client_key"):
        subprocess.run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-f", str(folder / name)], check=True)
    shutil.copy(folder / "client_key.pub", folder / "authorized_keys")
    port = _free_port()
    (folder / "sshd_config").write_text(
        f"Port {port}\nListenAddress 127.0.0.1\nHostKey {folder / 'host_key'}\n"
        f"AuthorizedKeysFile {folder / 'authorized_keys'}\nPidFile {folder / 'sshd.pid'}\n"
        "PasswordAuthentication no\nKbdInteractiveAuthentication no\nUsePAM no\nStrictModes no\n"
        "PermitRootLogin prohibit-password\n"
    )
    if os.geteuid() == 0:
        os.makedirs("/run/sshd", mode=0o755, exist_ok=True)  # privilege separation directory
    server = subprocess.Popen(
        [SSHD, "-D", "-e", "-f", str(folder / "sshd_config")], stderr=open(folder / "sshd.log", "w")
    )
    options = [
        "-p", str(port), "-i", str(folder / "client_key"), "-o", "StrictHostKeyChecking=no",
        "-o", "UserKnownHostsFile=/dev/null", "-o", "LogLevel=ERROR",
    ]  # fmt: skip
    destination = f"{getpass.getuser()}@127.0.0.1"
    deadline = time.monotonic() + 20
    while True:
        probe = subprocess.run(["ssh", "-o", "BatchMode=yes", *options, destination, "true"], capture_output=True)
        if probe.returncode == 0:
            break
        if time.monotonic() > deadline or server.poll() is not None:
            server.kill()
            pytest.fail(f"sshd did not accept the key: {probe.stderr!r}; {(folder / 'sshd.log').read_text()}")
        time.sleep(0.3)
    yield destination, options
    server.terminate()
    server.wait(timeout=10)


def test_remote_probe_suite_over_ssh_lands_the_hosts_file_here_and_it_ingests(sshd, tmp_path):
    destination, options = sshd
    home = data_home(tmp_path / "home")
    remote_out = tmp_path / "remote-landing"  # the "remote" host's own landing folder
    instance = dg.DagsterInstance.ephemeral()
    instance.add_dynamic_partitions("probe_hosts", ["gpu-node-7"])
    config = {
        **SELECTION,
        "ssh_destination": destination,
        "ssh_options": options,
        "remote_python": sys.executable,
        "remote_workdir": str(Path(__file__).resolve().parents[1]),
        "remote_out_dir": str(remote_out),
    }
    result = dg.materialize(
        [remote_probe_suite],
        partition_key="gpu-node-7",
        instance=instance,
        resources={"perfwh": PerfwhHome(data_dir=str(home.root))},
        run_config={"ops": {"remote_probe_suite": {"config": config}}},
    )
    assert result.success
    meta = _materialization(result, "remote_probe_suite")
    remote_file, local_file = Path(meta["landed_path"]), Path(meta["landed_file"])
    assert remote_file.is_relative_to(remote_out) and local_file.is_relative_to(home.landing)
    assert local_file.relative_to(home.landing) == remote_file.relative_to(remote_out)
    assert local_file.read_bytes() == remote_file.read_bytes()
    records = _records(local_file)
    assert {r["node"] for r in records} == {"gpu-node-7"} and meta["rows"] == len(records)
    assert _check(result).passed
    assert [(o.status, o.rows) for o in ingest(home)] == [("ok", len(records))]


def test_a_remote_host_cannot_choose_where_its_file_lands_and_a_bad_hash_is_refused(tmp_path):
    root = "/tmp/perfwh-probes"
    good = landing_relative(root, f"{root}/probe_results/c1/2026-11-02/n1__-__-__20261102T010203Z.jsonl")
    assert good == PurePosixPath("probe_results/c1/2026-11-02/n1__-__-__20261102T010203Z.jsonl")
    for bad in (f"{root}/../etc/passwd", f"{root}/probe_results/../../x.jsonl", "/elsewhere/probe_results/a/b/c.jsonl"):
        with pytest.raises(ValueError):
            landing_relative(root, bad)
    home = data_home(tmp_path)
    with pytest.raises(ValueError, match="sha256"):
        land_fetched(home, good, b"{}\n", "0" * 64)
    assert not (home.landing / good).exists()


def test_only_pipes_protocol_lines_are_messages():
    seen = []

    class Handler:
        def handle_message(self, message):
            seen.append(message)

    assert not handle_line(Handler(), "gemm fp32_128_tflops 0.001 pass")
    assert not handle_line(Handler(), '{"json": "but not a Pipes message"}')
    assert handle_line(Handler(), '{"__dagster_pipes_version": "0.1", "method": "opened", "params": {}}')
    assert len(seen) == 1
