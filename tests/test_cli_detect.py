"""`perfwh detect FILE`: the detector on CSV, JSON and JSON-lines series (perf_assets/lib/series_io.py)."""

from __future__ import annotations

import io
import json
import subprocess
import sys

import pytest

from perf_assets import cli
from perf_assets.lib import series_io

STEP = [10.21, 9.75, 10.04, 9.94, 9.95, 9.98, 9.8, 9.98, 9.91, 10.34, 10.02, 9.96, 9.97, 9.93, 9.9,
        8.96, 9.05, 8.98, 9.09, 8.98, 9.0, 9.14, 9.05, 8.96, 8.98, 9.05, 9.18, 8.97, 8.98, 9.09]  # fmt: skip
FLAT = [10.21, 9.75, 10.04, 9.94, 9.95, 9.98, 9.8, 9.98, 9.91, 10.34, 10.02, 9.96, 9.97, 9.93, 9.9,
        9.96, 10.05, 9.98, 10.1, 9.98, 10.0, 10.16, 10.05, 9.95, 9.98, 10.05, 10.2, 9.97, 9.98, 10.1]  # fmt: skip


class FakeStdin(io.StringIO):
    def __init__(self, text: str, tty: bool = False):
        super().__init__(text)
        self._tty = tty

    def isatty(self) -> bool:
        return self._tty


def run(capsys, monkeypatch, *args: str, stdin: str | None = None, tty: bool = False):
    monkeypatch.setattr(sys, "stdin", FakeStdin(stdin or "", tty=tty))
    code = cli.main(["detect", *args])
    out, err = capsys.readouterr()
    return code, [json.loads(line) for line in out.splitlines() if line.strip()], err


def test_csv_column_finds_the_step_with_its_evidence(tmp_path, capsys, monkeypatch):
    path = tmp_path / "latency.csv"
    path.write_text("day,tokens_per_s,other\n" + "".join(f"{i},{v},1\n" for i, v in enumerate(STEP)))
    code, (result,), err = run(capsys, monkeypatch, str(path), "--column", "tokens_per_s", "--better", "higher")
    assert code == 0, err
    assert result["change_points"] == [15]
    (change,) = result["changes"]
    assert set(change) >= {"index", "before", "after", "effect", "ci", "p_value", "direction", "verdict"}
    assert change["direction"] == "down" and change["kind"] == "regression" and change["verdict"] == "confirmed"
    assert change["before"] == pytest.approx(sum(STEP[:15]) / 15)
    assert change["effect"] == pytest.approx(sum(STEP[15:]) / sum(STEP[:15]) - 1)
    low, high = change["ci"]
    assert low < change["effect"] < high < 0
    assert change["p_value"] <= 0.01
    assert result["status"] == "changed" and result["n"] == 30


def test_json_file_with_missing_values_keeps_the_original_indices(tmp_path, capsys, monkeypatch):
    series = list(STEP)
    series[3] = None
    series[15] = None  # the first day of the new regime is unknown: the change is seen at 16
    path = tmp_path / "s.json"
    path.write_text(json.dumps({"series": series}).replace("null", "NaN", 1))  # NaN is missing too
    code, (result,), _ = run(capsys, monkeypatch, str(path))
    assert code == 0
    assert result["change_points"] == [16]
    assert result["n"] == 30 and result["n_valid"] == 28
    assert result["changes"][0]["n_before"] == 14 and result["changes"][0]["n_after"] == 14


def test_stdin_by_dash_and_by_pipe_and_an_improvement(capsys, monkeypatch):
    rising = [2 * 10.0 - v for v in STEP]  # mirrored: a rise at 15
    text = json.dumps({"series": rising})
    for args in (["-"], []):
        code, (result,), _ = run(capsys, monkeypatch, *args, "--better", "higher", stdin=text)
        assert code == 0
        assert result["change_points"] == [15]
        assert result["changes"][0]["direction"] == "up" and result["changes"][0]["kind"] == "improvement"
    code, (result,), _ = run(capsys, monkeypatch, "-", "--better", "lower", stdin=text)
    assert result["changes"][0]["kind"] == "regression"


def test_no_change_and_too_short_are_different_answers(capsys, monkeypatch):
    code, (flat,), _ = run(capsys, monkeypatch, "-", stdin=json.dumps({"series": FLAT}))
    assert code == 0 and flat["change_points"] == [] and flat["status"] == "no_change" and flat["p_value"] > 0.01
    code, (short,), _ = run(capsys, monkeypatch, "-", stdin=json.dumps({"series": [1, 1, 1, 1, 2, 2, 2, 2]}))
    assert code == 0 and short["change_points"] == [] and short["status"] == "too_short"
    assert short["p_value"] is None and short["min_length"] == 10


def test_jsonl_several_series_in_one_process_and_one_detector_call(capsys, monkeypatch):
    calls = []
    real = series_io.detect

    def spy(num, den, config, *args):
        calls.append(num.shape)
        return real(num, den, config, *args)

    monkeypatch.setattr(series_io, "detect", spy)
    lines = [
        json.dumps({"id": "a", "series": STEP}),
        json.dumps(FLAT),
        "",
        json.dumps({"series": STEP[:20] + [None, *STEP[20:]]}),  # 31 points, one missing
        json.dumps({"id": 7, "series": [5, 5, 5]}),
    ]
    code, results, err = run(capsys, monkeypatch, "--jsonl", stdin="\n".join(lines) + "\n")
    assert code == 0, err
    assert calls == [(4, 31)]  # one batch, padded to the longest series
    assert [r.get("id") for r in results] == ["a", None, None, 7]
    assert [r["change_points"] for r in results] == [[15], [], [15], []]
    assert [r["status"] for r in results] == ["changed", "no_change", "changed", "too_short"]
    assert results[2]["n"] == 31 and results[2]["n_valid"] == 30
    # one BH family: q >= p
    assert all(c["q_value"] >= c["p_value"] for r in results for c in r["changes"])


def test_robust_and_knobs(capsys, monkeypatch):
    spiky = list(FLAT)
    spiky[0], spiky[1], spiky[3] = 15.0, 16.0, 14.5
    text = json.dumps({"series": spiky})
    code, (plain,), _ = run(capsys, monkeypatch, "-", stdin=text)
    code, (robust,), _ = run(capsys, monkeypatch, "-", "--robust", stdin=text)
    assert plain["change_points"] == [4] and robust["change_points"] == []
    code, (loose,), _ = run(
        capsys, monkeypatch, "-", "--min-effect", "0.2", "--max-pvalue", "0.05", "--seed", "3", stdin=text
    )
    assert loose["change_points"] == [4]
    code, (strict,), _ = run(capsys, monkeypatch, "-", "--min-effect", "0.5", stdin=text)
    assert strict["change_points"] == []


def test_linear_scale_takes_values_at_or_below_zero(capsys, monkeypatch):
    centred = [v - 10.0 for v in STEP]
    code, _, err = run(capsys, monkeypatch, "-", stdin=json.dumps({"series": centred}))
    assert code == 2 and "<= 0" in err and "--scale linear" in err
    code, (result,), err = run(capsys, monkeypatch, "-", "--scale", "linear", stdin=json.dumps({"series": centred}))
    assert code == 0, err
    assert result["change_points"] == [15] and result["changes"][0]["direction"] == "down"


@pytest.mark.parametrize(
    ("stdin", "args", "message"),
    [
        ('{"series": [1, "x", 3]}', ["-"], 'point 1 is "x"'),
        ('{"values": [1, 2]}', ["-"], 'expected {"series": [numbers]}'),
        ("{not json", ["-"], "not valid JSON"),
        ("a,b\n1,2\n3,4\n", ["-"], "choose one with --column"),
        ("a,b\n1,2\n", ["-", "--column", "c"], "'c' is not a column"),
        ("a\n1\nabc\n", ["-"], "point 1 is 'abc'"),
        ('[1, 2]\n{"series": [1, true]}\n', ["--jsonl"], "line 2: point 1 is true"),
        ("", ["-"], "empty"),
        ('{"series": [1, 2]}', ["-", "--max-pvalue", "2"], "max_pvalue"),
    ],
)
def test_bad_input_is_a_clear_error_with_exit_code_2(capsys, monkeypatch, stdin, args, message):
    code, results, err = run(capsys, monkeypatch, *args, stdin=stdin)
    assert code == 2 and results == []
    assert message in err and err.startswith("perfwh detect: ")


def test_a_missing_file_is_exit_code_2(tmp_path, capsys, monkeypatch):
    code, _, err = run(capsys, monkeypatch, str(tmp_path / "nope.csv"))
    assert code == 2 and "cannot read" in err


def test_no_file_and_a_terminal_runs_the_warehouse_detection(tmp_path, capsys, monkeypatch):
    import perf_assets.lib.build as build_module

    selections = []
    monkeypatch.setattr(build_module, "build", lambda home, selection=None, **_: selections.append(selection) or True)
    assert run(capsys, monkeypatch, "--data-dir", str(tmp_path), tty=True)[0] == 0
    assert run(capsys, monkeypatch, "--data-dir", str(tmp_path), stdin="")[0] == 0  # nothing piped in
    assert selections == ["regressions*", "regressions*"]
    code, _, err = run(capsys, monkeypatch, "--robust", tty=True)
    assert code == 2 and "apply to series input" in err and selections == ["regressions*", "regressions*"]


def test_a_real_pipe_into_the_command(tmp_path):
    result = subprocess.run(
        [sys.executable, "-m", "perf_assets.cli", "detect", "--jsonl"],
        input=json.dumps(STEP) + "\n" + json.dumps(FLAT) + "\n",
        capture_output=True,
        text=True,
        timeout=120,
        env={**__import__("os").environ, "PERFWH_HOME": str(tmp_path)},
    )
    assert result.returncode == 0, result.stderr
    assert [json.loads(line)["change_points"] for line in result.stdout.splitlines()] == [[15], []]
