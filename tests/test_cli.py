"""perfwh as a user runs it: --help everywhere, and `sql` on the snapshot while a build holds the lock."""

from __future__ import annotations

import subprocess
import sys
import time

import pytest

from perf_assets.cli import parser

COMMANDS = ["simulate", "ingest", "reingest", "build", "detect", "report", "sql", "alerts", "probe", "evaluate"]


def run_cli(*args: str, timeout: float = 120) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "perf_assets.cli", *args], capture_output=True, text=True, timeout=timeout
    )


@pytest.mark.parametrize("command", COMMANDS)
def test_every_command_has_help_and_data_dir(command, capsys):
    with pytest.raises(SystemExit) as exit_info:
        parser().parse_args([command, "--help"])
    assert exit_info.value.code == 0
    assert "--data-dir" in capsys.readouterr().out


def test_ingest_prints_one_line_per_file_and_fails_on_quarantine(tmp_path):
    good = tmp_path / "events.jsonl"
    good.write_text(
        '{"version": 1, "node": "n1", "state": "down", "reason": "xid 79", "start": "2026-11-01T00:00:00Z", "end": null}\n'
    )
    bad = tmp_path / "truncated.jsonl"
    bad.write_text(
        '{"version": 1, "node": "n1", "state": "down", "reason": "xid 79", "start": "2026-11-01T00:00:00Z", "end": null}\n{"version": 1, "no'
    )

    result = run_cli(
        "ingest",
        str(good),
        str(bad),
        "--source",
        "node_events",
        "--cluster",
        "alpha",
        "--data-dir",
        str(tmp_path / "home"),
    )

    lines = [line for line in result.stdout.splitlines() if "\t" in line]
    assert len(lines) == 2
    assert any(line.endswith("\tok") and "node_events_jsonl\t1 rows" in line for line in lines)
    assert any("quarantined: line 2: invalid JSON" in line for line in lines)
    assert result.returncode == 1


@pytest.mark.slow
def test_sql_reads_the_snapshot_while_another_process_holds_the_writer_lock(demo_home):
    holder = subprocess.Popen(
        [
            sys.executable,
            "-c",
            "import sys, time; from filelock import FileLock; from perf_assets.lib.paths import data_home;"
            "import duckdb;"
            "home = data_home(sys.argv[1]); lock = FileLock(str(home.warehouse_lock)); lock.acquire();"
            "connection = duckdb.connect(str(home.warehouse_db));"  # the writer holds the warehouse open
            "print('held', flush=True); time.sleep(30)",
            str(demo_home.root),
        ],
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert holder.stdout.readline().strip() == "held"
        started = time.monotonic()
        result = run_cli(
            "sql",
            "select cluster, metric_date, goodput from fct_cluster_day order by 1, 2 limit 5",
            "--data-dir",
            str(demo_home.root),
        )
        assert result.returncode == 0, result.stderr
        assert time.monotonic() - started < 20
        lines = result.stdout.strip().splitlines()
        assert lines[0] == "cluster\tmetric_date\tgoodput" and len(lines) == 6
    finally:
        holder.kill()
        holder.wait()


@pytest.mark.slow
def test_sql_without_a_query_is_an_interactive_prompt(demo_home):
    result = subprocess.run(
        [sys.executable, "-m", "perf_assets.cli", "sql", "--data-dir", str(demo_home.root)],
        input="select count(*) as days\nfrom fct_fleet_day;\nselect nonsense from nowhere;\n",
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert result.returncode == 0
    assert "days\n14\n" in result.stdout  # a statement may span lines until ';'
    assert "error:" in result.stderr and "nowhere" in result.stderr  # a bad query does not end the session


@pytest.mark.slow
def test_report_prints_goodput_factors_regressions_and_score(demo_home):
    result = run_cli("report", "--data-dir", str(demo_home.root))
    assert result.returncode == 0, result.stderr
    text = result.stdout
    assert "goodput" in text and "availability" in text and "program_goodput" in text
    assert "regression: program_goodput of cluster alpha from 2026-11-08" in text
    assert "95% CI" in text and "recall 1.00" in text
    assert (demo_home.reports_dir / "summary.txt").read_text().strip() == text.strip()


def test_evaluate_prints_the_table_and_json_from_the_published_warehouse(demo_home, tmp_path):
    import json

    result = run_cli("evaluate", "--data-dir", str(demo_home.root))
    assert result.returncode == 0, result.stderr
    assert "| **overall** | 1 | 1 |" in result.stdout and "false alarms per" not in result.stderr
    report = json.loads(run_cli("evaluate", "--json", "--data-dir", str(demo_home.root)).stdout)
    assert report["scenario"] == "demo" and report["recall"] == 1.0
    assert report["false_alarms"]["series_days"] > 0
    missing = run_cli("evaluate", "--labels", str(tmp_path / "none.json"), "--data-dir", str(demo_home.root))
    assert missing.returncode == 2 and "no labels" in missing.stderr


def test_probe_lands_and_ingests_a_result_that_says_it_ran_on_the_cpu(tmp_path):
    result = run_cli(
        "probe", "--probe", "gemm", "--gemm-dtype", "fp32", "--gemm-dtype", "fp8", "--gemm-size", "128", "--quick",
        "--backend", "numpy", "--node", "host1", "--data-dir", str(tmp_path),
    )  # fmt: skip
    assert result.returncode == 0, result.stderr
    assert "2/2 done" in result.stderr  # the progress bar (one line per step when stderr is not a terminal)
    lines = result.stdout.strip().splitlines()
    fp32 = next(line for line in lines if "fp32_128_tflops" in line)
    assert "TFLOP/s" in fp32 and fp32.rstrip().endswith("pass")
    fp8 = next(line for line in lines if "fp8_128_tflops" in line)
    assert "skipped" in fp8 and "compute capability" in fp8
    assert "fp32_128_eff_clock" in next(line for line in lines if "eff_clock" in line)  # skipped on a CPU: no SM clock
    landed = lines[-1]  # fp32, its eff_clock, fp8 (skipped) and the 9 health rows
    assert landed.startswith("probe_results/local/") and landed.endswith("\tprobe_results_jsonl\t12 rows\tok")


def test_sql_without_a_warehouse_says_what_to_do(tmp_path):
    result = run_cli("sql", "select 1", "--data-dir", str(tmp_path))
    assert result.returncode == 1
    assert result.stderr.startswith("error: no published warehouse") and "perfwh build" in result.stderr
    assert "Traceback" not in result.stderr
