"""The program-goodput ladder (docs/program_ladder.md) on the `incidents` scenario (seed 1; the session's
incidents_home build): the job traced on h100-n04 while its GPU 3 throttles shows the straggler in
rank_balance, traced jobs without a straggler do not, untraced windows leave their gap unattributed, the
ladder multiplies to P at every grain, and the SQL's what-if and MAD filter agree with a recomputation here."""

from __future__ import annotations

import json

import duckdb
import numpy as np
import pandas as pd
import pytest

from perf_assets.lib.warehouse import published_frame

FACTORS = ["step_stability", "ladder_coverage", "rank_balance", "gpu_busy", "comm_overlap", "kernel_efficiency"]
LEAVES = [
    "effloss_transient",
    "effloss_unattributed",
    "effloss_straggler",
    "effloss_host_idle",
    "effloss_exposed_comm",
    "effloss_kernel",
]
MAD_K = 3  # var ladder_mad_k's default

pytestmark = pytest.mark.slow  # the incidents_home session build


@pytest.fixture(scope="module")
def throttle(incidents_home):
    labels = json.loads(incidents_home.labels_file.read_text())["incidents"]
    return next(label for label in labels if label["incident_id"] == "inc-thermal-h100-n04-gpu3")


@pytest.fixture(scope="module")
def measured(incidents_home):
    return published_frame(incidents_home, "select * from fct_job_window where ladder_source = 'measured'")


@pytest.fixture(scope="module")
def warehouse(incidents_home):
    connection = duckdb.connect(str(incidents_home.warehouse_db), read_only=True)
    yield connection
    connection.close()


def test_the_throttled_gpu_is_a_straggler_in_rank_balance(incidents_home, throttle, measured):
    straggler = measured[measured["job_id"].isin(throttle["scope"]["jobs"])]
    assert len(straggler) == 1, "one traced window of a job on h100-n04 while GPU 3 throttles"
    window = straggler.iloc[0]
    assert str(window["metric_date"])[:10] == throttle["start"][:10]
    # GPU 3 computes 1.12x longer; the other three traced ranks wait for it in NCCL
    assert window["rank_balance"] < 0.95
    assert window["effloss_straggler"] > 0.05
    others = measured[~measured["job_id"].isin(throttle["scope"]["jobs"])]
    assert len(others) >= 1
    assert (others["rank_balance"] > 0.999).all(), "no straggler where nothing throttles"
    assert (others["effloss_straggler"] < 0.001).all()
    # busy time cannot see it: a rank waiting in a collective is busy
    busy_view = published_frame(
        incidents_home,
        f"select straggler_ratio from intermediate.int_traces__step_stragglers where job_id = '{window['job_id']}'",
    )
    assert len(busy_view) >= 1 and (busy_view["straggler_ratio"] < 1.001).all()
    # the job-day carries it where the trace covers it (its window, and the later ones of the attempt by carry-forward)
    day = published_frame(
        incidents_home,
        f"select * from fct_job_day where job_id = '{window['job_id']}' and metric_date = '{throttle['start'][:10]}'",
    ).iloc[0]
    assert day["effloss_straggler"] > 0.05
    assert day["rank_balance"] < 0.95
    assert 0 < day["coverage_ladder"] < day["coverage_ladder_attributed"] <= 1


def _compute_union_ns(kernels: pd.DataFrame, start_ns: int, end_ns: int) -> float:
    """Union of kernel intervals clipped to [start_ns, end_ns)."""
    starts = np.maximum(kernels["start_ns"].to_numpy(), start_ns)
    ends = np.minimum(kernels["end_ns"].to_numpy(), end_ns)
    keep = ends > starts
    order = np.lexsort((ends[keep], starts[keep]))
    total, covered = 0.0, -np.inf
    for s, e in zip(starts[keep][order], ends[keep][order], strict=True):
        total += max(0.0, e - max(s, covered))
        covered = max(covered, e)
    return total


def test_the_what_if_agrees_with_a_recomputation_from_the_kernels(throttle, measured, warehouse):
    window = measured[measured["job_id"].isin(throttle["scope"]["jobs"])].iloc[0]
    job = window["job_id"]
    steps = warehouse.sql(
        f"select * from staging.stg_traces__step_busy where job_id = '{job}' and not last_step order by step, rank"
    ).df()
    kernels = warehouse.sql(
        f"select capture_id, rank, start_ns, end_ns from staging.stg_traces__kernels "
        f"where job_id = '{job}' and kernel_type = 'compute'"
    ).df()
    assert steps["step"].nunique() == window["traced_steps"]
    span = wait = critical_busy = mean_compute = 0.0
    for _, step in steps.groupby("step"):
        compute = [
            _compute_union_ns(
                kernels[(kernels["capture_id"] == row.capture_id) & (kernels["rank"] == row.rank)],
                row.step_start_ns,
                row.step_end_ns,
            )
            for row in step.itertuples()
        ]
        critical = int(np.argmax(compute))
        span += step["span_ns"].max()
        wait += max(compute) - np.mean(compute)
        critical_busy += step["busy_ns"].iloc[critical]
        mean_compute += np.mean(compute)
        assert step["rank"].iloc[critical] % 8 == throttle["cause"]["gpu_indices"][0]  # GPU 3 of the node
    ladder = measured[measured["job_id"] == job].iloc[0]
    assert ladder["t_balanced_s"] / ladder["t_attr_s"] == pytest.approx((span - wait) / span, rel=1e-9)
    assert ladder["t_busy_s"] / ladder["t_balanced_s"] == pytest.approx(
        (critical_busy - wait) / (span - wait), rel=1e-9
    )
    assert ladder["t_compute_s"] / ladder["t_busy_s"] == pytest.approx(mean_compute / (critical_busy - wait), rel=1e-9)


def test_untraced_windows_leave_their_gap_unattributed(incidents_home):
    jobs = published_frame(
        incidents_home, "select * from fct_job where program_goodput is not null and coverage_ladder_attributed = 0"
    )
    assert len(jobs) > 100  # most jobs of the scenario are never traced
    for factor in ("rank_balance", "gpu_busy", "comm_overlap", "kernel_efficiency"):
        assert list(jobs[factor]) == pytest.approx([1.0] * len(jobs), abs=1e-12), factor
    assert list(jobs["ladder_coverage"]) == pytest.approx(
        list(jobs["ladder_t_sol_pfs"] / jobs["ladder_t_typical_pfs"]), rel=1e-9
    )
    assert list(jobs["effloss_unattributed"]) == pytest.approx(
        list(1 - jobs["program_goodput"] - jobs["effloss_transient"]), rel=1e-9
    )
    assert (
        jobs[["effloss_straggler", "effloss_host_idle", "effloss_exposed_comm", "effloss_kernel"]].abs() < 1e-9
    ).all(axis=None)
    assert (jobs["coverage_ladder"] == 0).all()


@pytest.mark.parametrize("table", ["fct_job_window", "fct_job_day", "fct_job"])
def test_the_ladder_multiplies_to_program_goodput(incidents_home, table):
    rows = published_frame(incidents_home, f"select * from {table} where ladder_program_goodput is not null")
    assert len(rows) > 100
    target = rows["ladder_program_goodput"] if table == "fct_job_window" else rows["program_goodput"]
    assert list(rows[FACTORS].prod(axis=1)) == pytest.approx(list(target), rel=1e-9)
    assert list(target + rows[LEAVES].sum(axis=1)) == pytest.approx([1.0] * len(rows), abs=1e-9)
    if table != "fct_job_window":
        # the ladder's top and bottom are the job lens's own productive time and useful FLOPs
        assert list(rows["ladder_t_mean_pfs"]) == pytest.approx(list(rows["productive_pfs"]), rel=1e-9)
        assert list(rows["ladder_t_sol_pfs"]) == pytest.approx(list(rows["useful_flop"]), rel=1e-9)


def test_the_mad_filter_matches_googles_ideal_step_time(incidents_home):
    """t_mean and t_typical of a job's hourly windows recomputed from its steps: median + 3 MAD, time-share weights."""
    windows = published_frame(incidents_home, "select * from intermediate.int_job_windows")
    spiky = windows[(windows["t_typical_s"] < 0.99 * windows["t_mean_s"]) & (windows["attempt"] == 1)]
    assert len(spiky) > 0, "some windows hold transient spikes"
    job = spiky.sort_values("t_typical_s").iloc[0]["job_id"]
    attempt = published_frame(
        incidents_home,
        f"select start_at, end_at from intermediate.int_job_attempts where job_id = '{job}' and attempt = 1",
    ).iloc[0]
    steps = published_frame(
        incidents_home, f"select * from intermediate.int_job_steps where job_id = '{job}' and is_retained"
    )
    steps = steps[(steps["step_start_at"] >= attempt["start_at"]) & (steps["step_start_at"] < attempt["end_at"])]
    first = steps["step_start_at"].min()
    steps = steps[steps["duration_s"] > 0]
    expected = windows[(windows["job_id"] == job) & (windows["attempt"] == 1)].set_index("window_start_at")
    checked = 0
    for start, window in expected.iterrows():
        end = start + pd.Timedelta(hours=1)
        inside = steps[(steps["step_start_at"] < end) & (steps["step_end_at"] > start)].copy()
        if (inside["step_start_at"] == first).any():
            continue  # the first step's excess is program startup, not recomputed here
        overlap = inside["step_end_at"].clip(upper=end) - inside["step_start_at"].clip(lower=start)
        inside["share"] = overlap.dt.total_seconds() / inside["duration_s"]
        inside = inside[inside["share"] > 0]
        median = inside["productive_s"].median()
        mad = (inside["productive_s"] - median).abs().median()
        typical = inside[inside["productive_s"] <= median + MAD_K * mad]
        t_mean = (inside["productive_s"] * inside["share"]).sum() / inside["share"].sum()
        t_typical = (typical["productive_s"] * typical["share"]).sum() / typical["share"].sum()
        assert window["t_mean_s"] == pytest.approx(t_mean, rel=1e-9)
        assert window["t_typical_s"] == pytest.approx(t_typical, rel=1e-9)
        checked += 1
    assert checked >= 5
