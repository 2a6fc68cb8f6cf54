"""The Dagster UI in a real browser (Playwright on the system chromium, no `playwright install`).

One `make ui` server per session (the `ui_server` fixture: a copy of the built demo and of the Dagster
instance that recorded its build). Every test drives real pages and asserts on what they show; the
screenshots land in the session's tmp dir (`screenshots/`). Without chromium or the playwright package
the tests skip, and fail under CI=true (`make test` installs chromium when it runs as root).
"""

from __future__ import annotations

import json
import os
import re
import shutil
import time
from pathlib import Path

import pytest

from perf_assets.lib.paths import data_home
from perf_assets.lib.warehouse import published_frame
from tests.ui_server import LOCATION, REPOSITORY

pytestmark = [pytest.mark.slow, pytest.mark.browser]

GROUPS = ("raw", "staging", "intermediate", "marts", "detection", "alerts", "evaluation", "probes")
CHROMIUM_CANDIDATES = ("chromium", "chromium-browser")
CHROMIUM_ARGS = [
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
]
LAUNCH = """
mutation Launch($p: ExecutionParams!) { launchRun(executionParams: $p) { __typename
  ... on LaunchRunSuccess { run { runId } } ... on PythonError { message } } }
"""
FAILURES = """
query($runId: ID!) { logsForRun(runId: $runId, limit: 2000) { ... on EventConnection { events {
  __typename ... on ExecutionStepFailureEvent { stepKey error { message cause { message } } } } } } }
"""
INSTIGATORS = """
{ repositoryOrError(repositorySelector: {repositoryLocationName: "%s", repositoryName: "%s"}) {
  ... on Repository { schedules { name scheduleState { status } } sensors { name sensorState { status } } } } }
""" % (LOCATION, REPOSITORY)


TOGGLE_STATE = """label => {
  let row = label;
  while (row && row.querySelectorAll('input[type=checkbox]').length < 2) row = row.parentElement;
  return row ? [...row.querySelectorAll('input[type=checkbox]')].map(box => box.checked) : [];
}"""


def _unavailable(message: str):
    if os.environ.get("CI") == "true":
        pytest.fail(message)
    pytest.skip(message)


def _chromium() -> str | None:
    for name in CHROMIUM_CANDIDATES:
        found = shutil.which(name)
        if found:
            return found
    return None


@pytest.fixture(scope="session")
def browser():
    executable = _chromium()
    if executable is None:
        _unavailable("chromium not found (apt-get install chromium; `make test` does it as root)")
    try:
        from playwright.sync_api import sync_playwright
    except ImportError:
        _unavailable("the playwright package is missing (pip install -e '.[dev]')")
    with sync_playwright() as playwright:
        launched = playwright.chromium.launch(executable_path=executable, headless=True, args=CHROMIUM_ARGS)
        yield launched
        launched.close()


@pytest.fixture(scope="session")
def screenshots(tmp_path_factory) -> Path:
    return tmp_path_factory.mktemp("screenshots")


@pytest.fixture
def page(browser, ui_server):
    context = browser.new_context(viewport={"width": 1600, "height": 1100})
    context.set_default_timeout(60_000)
    opened = context.new_page()
    yield opened
    context.close()


def _open(page, ui_server, path: str) -> None:
    page.goto(ui_server.url + path, wait_until="networkidle")
    skip = page.get_by_role("button", name="Skip")  # the first-visit modal, should setNuxSeen not hold
    if skip.count() and skip.first.is_visible():
        skip.first.click()


def _expect():
    from playwright.sync_api import expect

    expect.set_options(timeout=60_000)  # pages poll GraphQL; a loaded 2-core machine is slow
    return expect


def _metadata_row(page, key: str):
    """The row of the asset overview's metadata table (Key, Timestamp, Value) whose key cell is exactly `key`
    (the Columns table above it has rows named after columns, e.g. `goodput`)."""
    table = page.locator("table", has=page.locator("th, td", has_text=re.compile(r"^\s*Timestamp\s*$")))
    key_cell = page.locator("td:first-child", has_text=re.compile(rf"^\s*{re.escape(key)}\s*$"))
    return table.locator("tr", has=key_cell).first


def _metadata_number(page, key: str) -> float:
    text = _metadata_row(page, key).inner_text()
    numbers = re.findall(r"-?\d+(?:\.\d+)?(?:e-?\d+)?", text)
    assert numbers, (key, text)
    return float(numbers[-1])


def _dialog_image(page, key: str):
    """Open the "[Show Markdown]" dialog of a long Markdown entry; its image."""
    _metadata_row(page, key).get_by_text("[Show Markdown]").click()
    return page.get_by_role("dialog").locator("img").first


def _visible_image_size(image) -> tuple[float, float]:
    image.scroll_into_view_if_needed()
    natural = image.evaluate("img => [img.complete, img.naturalWidth, img.naturalHeight]")
    assert natural[0] and natural[1] > 0 and natural[2] > 0, f"the image did not decode: {natural}"
    box = image.bounding_box()
    assert box is not None
    return box["width"], box["height"]


def _ui_home(ui_server):
    return data_home(ui_server.perfwh_home)


def test_lineage_graph_shows_every_group(page, ui_server, screenshots):
    expect = _expect()
    _open(page, ui_server, "/asset-groups")
    graph = page.locator("svg foreignObject")  # the graph's nodes (the sidebar lists the groups too)
    for group in GROUPS:
        expect(graph.get_by_text(group, exact=True).first).to_be_visible()
    expect(graph).to_have_count(len(GROUPS))  # one node per group: no asset left in a `default` group
    page.screenshot(path=str(screenshots / "lineage_groups.png"))


def test_fleet_asset_page_shows_goodput_factors_plot_and_checks(page, ui_server, screenshots):
    expect = _expect()
    fleet = published_frame(
        _ui_home(ui_server),
        "select sum(numerator) / sum(denominator) as goodput from metric_tree_daily "
        "where grain = 'fleet' and node_id = 'goodput'",
    )["goodput"].iloc[0]
    rows = published_frame(_ui_home(ui_server), "select count(*) as n from fct_fleet_day")["n"].iloc[0]
    _open(page, ui_server, "/assets/fct_fleet_day")
    expect(page.get_by_text("Description", exact=True).first).to_be_visible()
    expect(page.get_by_text(re.compile(r"capacity lens")).first).to_be_visible()
    factors = [
        _metadata_number(page, key) for key in ("availability", "allocation", "runtime_goodput", "program_goodput")
    ]
    assert _metadata_number(page, "goodput") == pytest.approx(fleet, rel=1e-6)
    assert factors[0] * factors[1] * factors[2] * factors[3] == pytest.approx(fleet, rel=1e-6)  # A x U x R x P
    expect(page.get_by_text("Row count", exact=True).locator("xpath=..")).to_contain_text(str(rows))
    width, height = _visible_image_size(_metadata_row(page, "goodput_sparkline").locator("img"))
    assert width > 100 and height > 30
    _metadata_row(page, "goodput_sparkline").scroll_into_view_if_needed()
    page.screenshot(path=str(screenshots / "asset_fct_fleet_day.png"))
    width, height = _visible_image_size(_dialog_image(page, "goodput_plot"))
    assert width > 300 and height > 100
    page.screenshot(path=str(screenshots / "asset_fct_fleet_day_plot_dialog.png"))
    _open(page, ui_server, "/assets/fct_fleet_day?view=checks")
    expect(page.get_by_text(re.compile(r"^not_null_fct_fleet_day_")).first).to_be_visible()
    expect(page.get_by_text("Passed").first).to_be_visible()
    page.screenshot(path=str(screenshots / "asset_fct_fleet_day_checks.png"), full_page=True)


def test_cluster_and_detection_pages_show_their_plots_and_figures(page, ui_server, screenshots):
    expect = _expect()
    home = _ui_home(ui_server)
    confirmed = published_frame(home, "select count(*) as n from regressions where change_kind = 'regression'")
    _open(page, ui_server, "/assets/fct_cluster_day")
    table = _metadata_row(page, "goodput_by_cluster_table")
    for cluster in published_frame(home, "select distinct cluster from fct_cluster_day")["cluster"]:
        expect(table).to_contain_text(cluster)
    _visible_image_size(_metadata_row(page, "goodput_sparkline").locator("img"))
    page.screenshot(path=str(screenshots / "asset_fct_cluster_day.png"))

    _open(page, ui_server, "/assets/regressions")
    expect(_metadata_row(page, "regressions")).to_contain_text(str(int(confirmed["n"].iloc[0])))
    expect(_metadata_row(page, "headline")).to_contain_text("95% CI")
    width, height = _visible_image_size(_metadata_row(page, "regression_sparkline").locator("img"))
    assert width > 100 and height > 30
    page.screenshot(path=str(screenshots / "asset_regressions.png"))
    width, height = _visible_image_size(_dialog_image(page, "regression_plot"))
    assert width > 300 and height > 100
    page.screenshot(path=str(screenshots / "asset_regressions_plot_dialog.png"))

    evaluation = json.loads((home.reports_dir / "evaluation.json").read_text())
    _open(page, ui_server, "/assets/detection_evaluation")
    for name in ("recall", "precision"):
        assert _metadata_number(page, name) == pytest.approx(evaluation[name], abs=1e-6)
    _open(page, ui_server, "/assets/detection_evaluation?view=checks")
    expect(page.get_by_text("evaluation_meets_thresholds").first).to_be_visible()
    expect(page.get_by_text("Passed").first).to_be_visible()
    page.screenshot(path=str(screenshots / "asset_detection_evaluation_checks.png"), full_page=True)

    _open(page, ui_server, "/assets/alert_outbox")
    assert _metadata_number(page, "unresolved_alerts") >= 1  # the demo's incidents are open


def test_materialize_button_launches_a_run_that_succeeds(page, ui_server, screenshots):
    expect = _expect()
    _open(page, ui_server, "/assets/alert_outbox")
    page.get_by_role("button", name=re.compile(r"Materialize$")).first.click()
    toast = page.get_by_text(re.compile(r"Launched run [0-9a-f]{8}"))
    expect(toast).to_be_visible()
    short_id = re.search(r"Launched run ([0-9a-f]{8})", toast.inner_text()).group(1)
    runs = ui_server.graphql("{ runsOrError(limit: 5) { ... on Runs { results { runId } } } }")
    run_id = next(r["runId"] for r in runs["runsOrError"]["results"] if r["runId"].startswith(short_id))
    run = ui_server.wait_run(run_id)
    assert run["status"] == "SUCCESS", run
    assert {step["stepKey"] for step in run["stepStats"]} == {"alert_outbox"}
    _open(page, ui_server, f"/runs/{run_id}")
    expect(page.get_by_text("Success", exact=True).first).to_be_visible()
    page.screenshot(path=str(screenshots / "run_materialize_success.png"))


def test_failed_run_is_reexecuted_from_failure_after_the_input_is_fixed(page, ui_server, screenshots):
    expect = _expect()
    labels = _ui_home(ui_server).labels_file
    good = labels.read_text()
    labels.write_text(good[: len(good) // 2])  # a truncated delivery: not valid JSON
    try:
        launched = ui_server.graphql(
            LAUNCH,
            {
                "p": {
                    "selector": {
                        "repositoryLocationName": LOCATION,
                        "repositoryName": REPOSITORY,
                        "jobName": "__ASSET_JOB",
                        "assetSelection": [{"path": ["alert_outbox"]}, {"path": ["detection_evaluation"]}],
                    },
                    "runConfigData": {},
                }
            },
        )["launchRun"]
        assert launched["__typename"] == "LaunchRunSuccess", launched
        failed_id = launched["run"]["runId"]
        failed = ui_server.wait_run(failed_id)
        assert failed["status"] == "FAILURE", failed
        steps = {step["stepKey"]: step["status"] for step in failed["stepStats"]}
        assert steps == {"alert_outbox": "SUCCESS", "detection_evaluation": "FAILURE"}, steps
        errors = [
            e["error"]["message"] + ((e["error"].get("cause") or {}).get("message") or "")
            for e in ui_server.graphql(FAILURES, {"runId": failed_id})["logsForRun"]["events"]
            if e["__typename"] == "ExecutionStepFailureEvent"
        ]
        assert any("not valid JSON" in message for message in errors), errors
    finally:
        labels.write_text(good)  # the fixed delivery

    _open(page, ui_server, f"/runs/{failed_id}")
    expect(page.get_by_text("Failure", exact=True).first).to_be_visible()
    expect(page.get_by_text(re.compile(r"labels file .* is not valid JSON")).first).to_be_visible()
    page.screenshot(path=str(screenshots / "run_failed.png"))
    # the caret next to "Re-execute all (*)" opens the strategies; "From failure" launches and opens the new run
    page.get_by_role("button", name="Re-execute all (*)").locator("xpath=..").get_by_role("button").last.click()
    page.get_by_role("menuitem", name="From failure").click()
    page.wait_for_url(lambda url: "/runs/" in url and failed_id not in url)
    rerun_id = re.search(r"/runs/([0-9a-f-]{36})", page.url).group(1)
    rerun = ui_server.wait_run(rerun_id)
    assert rerun["status"] == "SUCCESS", rerun
    assert rerun["parentRunId"] == failed_id
    assert {step["stepKey"] for step in rerun["stepStats"]} == {"detection_evaluation"}, rerun["stepStats"]
    _open(page, ui_server, f"/runs/{rerun_id}")
    expect(page.get_by_text("Success", exact=True).first).to_be_visible()
    page.screenshot(path=str(screenshots / "run_reexecuted_success.png"))


def test_schedules_and_sensors_are_listed_with_their_state(page, ui_server, screenshots):
    expect = _expect()
    repository = ui_server.graphql(INSTIGATORS)["repositoryOrError"]
    states = {s["name"]: s["scheduleState"]["status"] for s in repository["schedules"]}
    states |= {s["name"]: s["sensorState"]["status"] for s in repository["sensors"]}
    # the code's defaults: the daily build, detection, landing, alert and watchdog sensors on; probes off (no GPU assumed)
    assert states == {
        "daily_build": "RUNNING",
        "daily_detection": "RUNNING",
        "daily_probes": "STOPPED",
        "landing_sensor": "RUNNING",
        "alert_delivery": "RUNNING",
        "probe_confirmation_sensor": "STOPPED",
        "dead_run_watchdog": "RUNNING",
    }, states
    _open(page, ui_server, "/automation")
    # the on/off toggles render once the states have loaded: "select all", then two boxes per row
    expect(page.locator("input[type=checkbox]")).to_have_count(1 + 2 * len(states))
    for name, status in states.items():
        label = page.get_by_text(name, exact=True).first
        expect(label).to_be_visible()
        # a row holds the selection box, then the on/off toggle, whose checked state can render after the box itself
        deadline = time.monotonic() + 15
        boxes = label.evaluate(TOGGLE_STATE)
        while not (len(boxes) == 2 and boxes[1] == (status == "RUNNING")) and time.monotonic() < deadline:
            page.wait_for_timeout(250)
            boxes = label.evaluate(TOGGLE_STATE)
        assert len(boxes) == 2, (name, boxes)
        assert boxes[1] == (status == "RUNNING"), (name, status, boxes)
    page.screenshot(path=str(screenshots / "automation.png"))
