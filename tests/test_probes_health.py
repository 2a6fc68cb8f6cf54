"""Probe verdicts as data (seed probe_rules -> int_probe_verdicts -> fct_node_health) on the demo fleet,
and a synthetic failing GPU landed into a copy of it, flagged with its evidence."""

from __future__ import annotations

import shutil
from datetime import timedelta

import pytest

from perf_assets.lib.paths import data_home
from perf_assets.lib.warehouse import query_published
from probes.records import ProbeResult, landing_path, write_jsonl


def _frame(home, sql):
    import pandas as pd

    columns, rows = query_published(home, sql)
    return pd.DataFrame(rows, columns=columns)


def test_every_demo_gpu_passes_the_gemm_floor_and_no_node_is_drained(demo_snapshot):
    floor = demo_snapshot(
        "select count(*) as n, count(distinct gpu_uuid) as gpus, count(*) filter (where verdict <> 'pass') as bad, "
        "min(fraction_of_peak) as lowest from intermediate.int_probe_verdicts where rule = 'gemm_floor'"
    ).iloc[0]
    assert floor.n > 0 and floor.bad == 0 and floor.lowest >= 0.70
    probed = demo_snapshot(
        "select count(distinct gpu_uuid) from intermediate.int_probe_verdicts "
        "where probe = 'gemm' and rule = 'missing_or_failed'"
    )
    assert floor.gpus == probed.iloc[0, 0]
    cohort = demo_snapshot(
        "select count(*) filter (where cohort_n >= 3) as judged, max(abs(deviation)) as widest "
        "from intermediate.int_probe_verdicts where rule = 'gemm_regression'"
    ).iloc[0]
    assert cohort.judged > 0 and cohort.widest < 0.05  # demo GPUs sit within 78-80% of peak
    health = demo_snapshot(
        "select count(*) as node_days, count(*) filter (where drain_recommended) as drained, "
        "count(distinct worst_verdict) as verdicts, min(worst_verdict) as worst from fct_node_health"
    ).iloc[0]
    assert health.node_days > 0 and health.drained == 0 and health.verdicts == 1 and health.worst == "pass"


@pytest.fixture(scope="module")
def failing_home(demo_home, tmp_path_factory):
    """A copy of the demo with one synthetic GPU on a demo node: slow GEMM and a burn mismatch."""
    from perf_assets.lib.build import build

    home = data_home(tmp_path_factory.mktemp("failing") / "home")
    shutil.copytree(demo_home.root, home.root)
    home.ensure()
    node, sku, peak, started = query_published(
        demo_home,
        "select node, sku, peak, max(started_at) from intermediate.int_probe_verdicts where probe = 'gemm' "
        "group by node, sku, peak order by node limit 1",
    )[1][0]
    started = started + timedelta(hours=1)
    base = dict(
        run_id="synthetic-bad-gpu", node=node, gpu_uuid="GPU-badbadba-dbad-badb-adba-dbadbadbadba", gpu_index=9,
        sku=sku, device_kind="cuda", iqr=None, ci_low=None, ci_high=None, n=50, throttle_class="clean",
        reason=None, started_at=started,
    )  # fmt: skip
    value = round(0.60 * peak, 2)
    rows = [
        ProbeResult(
            **base,
            probe="gemm",
            metric="bf16_8192_tflops",
            value=value,
            unit="TFLOP/s",
            median=value,
            peak=peak,
            fraction_of_peak=0.60,
            status="pass",
        ),  # fmt: skip
        ProbeResult(
            **base,
            probe="burn_soak",
            metric="mismatched_elements",
            value=3.0,
            unit="elements",
            median=3.0,
            peak=None,
            fraction_of_peak=None,
            status="fail",
        ),  # fmt: skip
    ]
    write_jsonl(rows, landing_path(home.landing, "synthetic", node, started))
    assert build(home), "the build with the synthetic GPU failed"
    return home, node


def test_a_synthetic_failing_gpu_is_flagged_with_its_evidence(failing_home):
    home, node = failing_home
    fired = _frame(
        home,
        "select rule, verdict, evidence from intermediate.int_probe_verdicts "
        "where run_id = 'synthetic-bad-gpu' and fired order by rule",
    )
    verdicts = dict(zip(fired.rule, fired.verdict))
    assert verdicts["gemm_floor"] == "fail" and verdicts["sdc"] == "fail" and verdicts["missing_or_failed"] == "fail"
    assert verdicts["gemm_regression"] == "warn"  # a cohort regression waits for a confirming re-run
    evidence = dict(zip(fired.rule, fired.evidence))
    assert "fraction_of_peak = 0.6" in evidence["gemm_floor"] and "x < 0.70" in evidence["gemm_floor"]
    assert "vs cohort median" in evidence["gemm_regression"] and "-2" in evidence["gemm_regression"]
    drain = _frame(home, "select * from fct_node_health where drain_recommended")
    assert list(drain.node) == [node]
    (row,) = drain.itertuples()
    assert row.failing_gpus == 1 and row.worst_verdict == "fail"
    assert set(row.failing_rules.split(",")) == {"gemm_floor", "missing_or_failed", "sdc"}
    assert "GPU-badbadba" in row.failing_evidence and "SDC" in row.drain_reason
