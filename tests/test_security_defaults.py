"""Security defaults: servers on loopback unless configured, `perfwh sql` read-only (no way out of the snapshot).

Secrets (webhook secret, Slack token) from the environment only: tests/test_alerts.py (delivery, sensor, CLI)
and tests/test_faults_build.py (a whole build's logs, Dagster event log and reports)."""

from __future__ import annotations

import hashlib
import os
import re
import subprocess
import sys
from pathlib import Path

import duckdb
import pytest

from perf_assets.cli import main
from perf_assets.lib.paths import REPO_ROOT, data_home

SERVER_COMMANDS = re.compile(r"\b(dagster dev|dagster-webserver|dagster api grpc|dagster code-server start)\b")


def _make_ui_commands(**variables: str) -> list[str]:
    """The server command lines `make ui` would run (`make -n` prints recipes without running them)."""
    env = {k: v for k, v in os.environ.items() if k != "PERFWH_UI_HOST"}
    shown = subprocess.run(
        ["make", "-n", "-B", "ui", *(f"{k}={v}" for k, v in variables.items())],
        cwd=REPO_ROOT,
        capture_output=True,
        text=True,
        check=True,
        env=env,
    )
    return [line for line in shown.stdout.splitlines() if SERVER_COMMANDS.search(line)]


def test_make_ui_binds_to_loopback_unless_configured():
    servers = _make_ui_commands()
    assert servers
    for line in servers:
        assert re.search(r"(-h|--host) 127\.0\.0\.1\b", line), line
    (configured,) = _make_ui_commands(PERFWH_UI_HOST="10.1.2.3")
    assert "-h 10.1.2.3 " in configured


def test_no_server_in_the_project_listens_on_every_interface():
    makefile = (REPO_ROOT / "Makefile").read_text()
    assert re.search(r"^PERFWH_UI_HOST \?= 127\.0\.0\.1$", makefile, re.MULTILINE)
    for line in makefile.splitlines():
        if SERVER_COMMANDS.search(line):
            assert re.search(r"(-h|--host) (127\.0\.0\.1|\$\(PERFWH_UI_HOST\))( |$)", line), line
    checked = 0
    for folder in ("perf_assets", "probes", "bench", "docs"):
        for path in (REPO_ROOT / folder).rglob("*"):
            if path.suffix in (".py", ".md", ".yaml", ".yml", ".toml", ".sh") and path.is_file():
                text = path.read_text(encoding="utf-8", errors="replace")
                assert "0.0.0.0" not in text and "INADDR_ANY" not in text, path
                checked += 1
    for name in ("Makefile", "dagster.yaml", "workspace.yaml", "pyproject.toml"):
        assert "0.0.0.0" not in (REPO_ROOT / name).read_text(), name
    assert checked > 50


@pytest.fixture
def snapshot_home(tmp_path):
    """A home whose published snapshot holds one small table (what `perfwh build` publishes, in miniature)."""
    home = data_home(tmp_path / "home").ensure()
    connection = duckdb.connect(str(home.published_db))
    connection.execute("create table fct_fleet_day as select 'fleet' as fleet, 0.42 as goodput")
    connection.close()
    (tmp_path / "other.duckdb").write_bytes(b"")
    return home


WRITES = [
    "create table t (a int)",
    "insert into fct_fleet_day values ('x', 1.0)",
    "update fct_fleet_day set goodput = 0",
    "drop table fct_fleet_day",
    "attach '{other}' as other",
    "attach '{other}' as other (read_only false)",
    "copy fct_fleet_day to '{outside}'",
    "copy (select 1) to '{outside}' (format csv)",
    "export database '{outside_dir}'",
    "install httpfs",
    "load httpfs",
    "select * from read_csv('/etc/hostname')",
    "select * from read_text('/etc/hostname')",
    "set enable_external_access = true",
    "set temp_directory = '{outside_dir}'",
]


@pytest.mark.parametrize("statement", WRITES)
def test_perfwh_sql_refuses_every_write_with_a_clear_error(snapshot_home, tmp_path, statement, capsys):
    outside, outside_dir, other = tmp_path / "outside.csv", tmp_path / "exported", tmp_path / "other.duckdb"
    before = hashlib.sha256(snapshot_home.published_db.read_bytes()).hexdigest()
    query = statement.format(outside=outside, outside_dir=outside_dir, other=other)

    code = main(["sql", query, "--data-dir", str(snapshot_home.root)])

    error = capsys.readouterr().err
    assert code == 1 and error.startswith("error: perfwh sql is read-only"), error
    assert not outside.exists() and not outside_dir.exists()
    assert hashlib.sha256(snapshot_home.published_db.read_bytes()).hexdigest() == before
    assert main(["sql", "select goodput from fct_fleet_day", "--data-dir", str(snapshot_home.root)]) == 0
    assert "0.42" in capsys.readouterr().out


def test_the_sql_prompt_refuses_writes_and_keeps_answering(snapshot_home, tmp_path):
    outside = tmp_path / "leak.csv"
    session = subprocess.run(
        [str(Path(sys.executable).parent / "perfwh"), "sql", "--data-dir", str(snapshot_home.root)],
        input=f"create table t (a int);\ncopy fct_fleet_day to '{outside}';\nselect 6 * 7 as answer;\n",
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert session.returncode == 0
    assert session.stderr.count("error: perfwh sql is read-only") == 2, session.stderr
    assert "answer\n42" in session.stdout and not outside.exists()
