"""HTML reports (docs/reports.md) on the demo warehouse: job, alert, fleet; self-contained; clear errors."""

from __future__ import annotations

import math
import re
import xml.etree.ElementTree as ElementTree

import pytest

from perf_assets.cli import main
from perf_assets.lib import html_report, svg
from perf_assets.lib.alerts import read_alerts

JOB = "beta-000011"  # the demo's requeued job: 2 attempts, 1 restart


def _alpha_alert(home) -> dict:
    alerts = [
        a
        for a in read_alerts(home.alerts_dir)
        if a["grain"] == "cluster" and a["entity_id"] == "alpha" and a["direction"] == "regression"
    ]
    assert alerts, "the demo has an alert on cluster alpha"
    return alerts[0]


def _self_contained(html: str) -> None:
    assert "http://" not in html and "https://" not in html
    assert "src=" not in html and "<script" not in html and "<link" not in html and "@import" not in html
    for drawing in re.findall(r"<svg.*?</svg>", html, re.S):
        ElementTree.fromstring(drawing)  # well-formed
    for target in re.findall(r'href="([^"]*)"', html):
        assert re.fullmatch(r"alert-[0-9a-f]+\.html", target), target


def _cell(html: str, label: str) -> str:
    match = re.search(rf"<td>{re.escape(label)}</td><td class=\"n\">([^<]*)</td>", html)
    assert match, label
    return match.group(1)


def test_job_report_shows_fct_job_factors(demo_home, demo_snapshot, tmp_path, capsys):
    out = tmp_path / "job.html"
    assert main(["report", "--job", JOB, "--out", str(out), "--data-dir", str(demo_home.root)]) == 0
    assert capsys.readouterr().out.strip() == str(out)
    html = out.read_text()
    _self_contained(html)
    row = demo_snapshot(f"select * from fct_job where job_id = '{JOB}'").iloc[0]
    labels = {
        "scheduling goodput S": "scheduling_goodput",
        "runtime goodput R": "runtime_goodput",
        "program goodput P": "program_goodput",
        "job goodput G = S × R × P": "job_goodput",
        "time goodput (ETTR) = S × R": "time_goodput",
    }
    for label, column in labels.items():
        shown = _cell(html, label)
        assert shown.endswith(" (fraction)")
        assert float(shown.split()[0]) == pytest.approx(row[column], abs=5e-5), column
    data = html_report.job_data(demo_home, JOB)
    for key, column in (("S", "scheduling_goodput"), ("R", "runtime_goodput"), ("P", "program_goodput")):
        factor = data["factors"][key]
        assert factor["value"] == pytest.approx(row[column])
        assert factor["numerator"] / factor["denominator"] == pytest.approx(row[column])
    assert data["factors"]["G"]["value"] == pytest.approx(
        row["scheduling_goodput"] * row["runtime_goodput"] * row["program_goodput"]
    )
    # the waterfall ends at G: 1 − every loss (queues, badput leaves, program loss) = useful / eligible
    fall = data["waterfall"]
    assert 1 - sum(value for _, value in fall["steps"]) == pytest.approx(row["job_goodput"], rel=1e-9)
    assert fall["end"][1] == pytest.approx(row["job_goodput"])
    queues = sum(value for _, value in fall["steps"][:2])
    assert 1 - queues == pytest.approx(row["allocated_pfs"] / row["eligible_pfs"])
    assert sorted(fall["subtotals"].values()) == ["allocated", "productive"]
    assert len(data["days"]) == row["job_days"] and data["job"]["restarts"] == 1
    assert "<td>attempts</td><td>2 attempts</td>" in html and "<td>restarts</td><td>1 restarts</td>" in html
    assert "No traces for this job" in html and "<svg" in html
    assert data["expected_ettr"]["value"] is not None and "against" in html


def test_alert_report_marks_the_change_day(demo_home, tmp_path, capsys):
    alert = _alpha_alert(demo_home)
    out = tmp_path / "alert.html"
    argv = ["report", "--alert", alert["alert_id"][:6], "--out", str(out), "--data-dir", str(demo_home.root)]
    assert main(argv) == 0
    html = out.read_text()
    _self_contained(html)
    assert 'class="change" data-change-date="2026-11-08"' in html
    assert 'class="band"' in html and html.count('class="level"') == 2
    data = html_report.alert_data(demo_home, alert["alert_id"])
    assert data["evidence"]["change_date"] == "2026-11-08"
    assert "program_goodput" in data["factors"] and data["causes"]
    assert data["causes"][0]["dimension"] in html and "diff-in-diff effect" in html
    assert "GPU-h/day" in html
    split = data["split"]  # the cluster's change over its nodes: mix + rate is the pooled change
    assert split["segment_type"] == "node" and split["attribution"] in ("mix", "rate", "occupancy")
    parts = split["mix_effect"] + split["rate_effect"] + (split["occupancy_effect"] or 0.0)  # occupancy: goodput
    assert parts == pytest.approx(data["evidence"]["relative_effect"], rel=1e-6)
    assert "Segments: mix versus rate" in html and split["segments"][0]["segment"] in html
    low, high = data["band"]
    assert low < data["evidence"]["after_level"] < high or high < data["evidence"]["after_level"] < low


def test_fleet_report_links_alert_pages_written_alongside(demo_home, tmp_path, capsys):
    alert = _alpha_alert(demo_home)
    assert main(["report", "--alert", alert["alert_id"], "--out", str(tmp_path / f"alert-{alert['alert_id']}.html"),
                 "--data-dir", str(demo_home.root)]) == 0  # fmt: skip
    out = tmp_path / "fleet.html"
    assert main(["report", "--fleet", "--out", str(out), "--data-dir", str(demo_home.root)]) == 0
    html = out.read_text()
    _self_contained(html)
    assert f'href="alert-{alert["alert_id"]}.html"' in html
    assert 'data-change-date="2026-11-08"' in html
    assert "fct_attribution_lmdi" in html and "fct_attribution_mix_rate" in html


def test_default_output_under_reports_dir(demo_home, capsys):
    assert main(["report", "--fleet", "--data-dir", str(demo_home.root)]) == 0
    path = capsys.readouterr().out.strip()
    assert path == str(demo_home.reports_dir / "fleet.html")


def test_unknown_job_or_alert_exits_2(demo_home, capsys):
    assert main(["report", "--job", "no-such-job", "--data-dir", str(demo_home.root)]) == 2
    assert "no job 'no-such-job'" in capsys.readouterr().err
    assert main(["report", "--alert", "ffffffffff", "--data-dir", str(demo_home.root)]) == 2
    assert "no alert" in capsys.readouterr().err


def test_out_needs_a_report_kind(demo_home, capsys):
    assert main(["report", "--out", "x.html", "--data-dir", str(demo_home.root)]) == 2
    assert "--out goes with" in capsys.readouterr().err


def test_unknown_is_never_zero():
    assert html_report.num(None, "GPU-s") == "unknown"
    assert html_report.num(math.nan, "GPU-s") == "unknown"
    assert html_report.fraction(None) == "unknown" and html_report.gpu_seconds(math.nan) == "unknown"
    assert html_report.num(0.0, "GPU-s") == "0 GPU-s"
    drawn = svg.waterfall(("eligible", 1.0), [("queue", 0.2), ("program (P) loss", None)], "useful", unit="share")
    assert drawn.count("unknown") == 2  # the unknown step and the end it makes unknown
    assert "unknown" in svg.bar_chart([("allocation", None)], unit="Δln")


def test_a_cluster_allocation_alert_shows_the_fleets_split_over_its_windows(tmp_path):
    """The mix shift's sending side pages as a cluster allocation drop: the page says what the fleet's goodput did
    over that change's windows (detection's `fleet_split`), mix, rate and occupancy with the clusters' weights."""
    from perf_assets.lib.paths import DataHome

    fleet = {
        "entity_id": "a100-west",
        "metric": "goodput_ref",
        "before_start_date": "2026-10-13",
        "change_date": "2026-10-20",
        "after_end_date": "2026-10-25",
        "relative_change": -0.103,
        "mix_effect": -0.039,
        "rate_effect": -0.033,
        "occupancy_effect": -0.031,
        "attribution": "mix",
        "mix_basis": "allocated_gs",
        "segments": [{"segment": "a100-west", "weight_before": 0.24, "weight_after": 0.30, "mix_effect": -0.05}],
    }
    alert = {"alert_id": "a1", "headline_metric": "allocation", "change_date": "2026-10-22", "summary": "h100-west"}
    alert |= {"grain": "cluster", "entity_id": "h100-west", "direction": "regression", "status": "open"}
    data = {"alert": alert, "evidence": {"change_date": "2026-10-22"}, "series": [], "unit": None, "band": None}
    data |= {"factors": {}, "causes": [], "coinciding": [], "children": [], "units": {}, "impact": {}, "split": {}}
    html = html_report.render_alert(data | {"fleet_split": fleet}, DataHome(tmp_path))
    _self_contained(html)
    assert "The fleet over the windows of a100-west's allocation change" in html
    assert "goodput_ref -10.3 %" in html and "mix -3.9 %" in html and "occupancy -3.1 %" in html
    assert "reported as <b>mix</b>" in html and "30.0 %" in html
    assert "The fleet over" not in html_report.render_alert(data | {"fleet_split": None}, DataHome(tmp_path))
