"""The numpy breakdowns (perf_assets.lib.traces) equal the pure-Python definitions they replaced, on random
activities with the awkward cases: equal starts, touching and nested intervals, zero and negative lengths,
activities without a stream or a launch."""

from __future__ import annotations

import random
from bisect import bisect_right

import pytest

from perf_assets.lib.traces.breakdown import (
    COMMUNICATION,
    COMPUTE,
    KERNEL_TYPES,
    length,
    merge,
    overlap,
    temporal_breakdown,
)
from perf_assets.lib.traces.idle_time import StreamIdle, idle_breakdown, stream_idle
from perf_assets.lib.traces.kernel_types import TypeTime, kernel_type_breakdown
from perf_assets.lib.traces.steps import StepBusy, step_busy

# --- the pure-Python definitions as they were before numpy (reference) -------------------------------


def reference_temporal(activities):
    by_type = {kernel_type: [] for kernel_type in KERNEL_TYPES}
    everything = []
    for start, end, kernel_type in activities:
        by_type[kernel_type].append((start, end))
        everything.append((start, end))
    busy = merge(everything)
    if not busy:
        return None
    compute, communication = merge(by_type[COMPUTE]), merge(by_type[COMMUNICATION])
    return (
        busy[0][0],
        busy[-1][1],
        length(busy),
        length(compute),
        length(communication),
        overlap(communication, compute),
    )


def reference_idle(activities, threshold_ns):
    by_stream = {}
    for stream, start, end, launched in activities:
        if stream is not None:
            by_stream.setdefault(stream, []).append((start, end, launched))
    return [stream_idle(stream, rows, threshold_ns) for stream, rows in sorted(by_stream.items())]


def reference_kernel_types(activities):
    intervals = {}
    for start, end, kernel_type in activities:
        intervals.setdefault(kernel_type, []).append((start, end))
    merged = {kernel_type: merge(rows) for kernel_type, rows in intervals.items()}
    rows = []
    for kernel_type in sorted(intervals, key=lambda t: (KERNEL_TYPES.index(t) if t in KERNEL_TYPES else 99, t)):
        others = merge(span for other, spans in merged.items() if other != kernel_type for span in spans)
        union = length(merged[kernel_type])
        rows.append(
            TypeTime(
                kernel_type,
                len(intervals[kernel_type]),
                sum(end - start for start, end in intervals[kernel_type]),
                union,
                union - overlap(merged[kernel_type], others),
            )
        )
    return rows


def reference_step_busy(steps, activities):
    spans = list(activities)
    merged = merge(spans)
    starts = sorted(start for start, _ in spans)
    merged_starts = [start for start, _ in merged]
    rows = []
    for step, window_start, window_end in steps:
        busy = 0
        index = max(0, bisect_right(merged_starts, window_start) - 1)
        while index < len(merged) and merged[index][0] < window_end:
            busy += max(0, min(merged[index][1], window_end) - max(merged[index][0], window_start))
            index += 1
        count = bisect_right(starts, window_end - 1) - bisect_right(starts, window_start - 1)
        rows.append(StepBusy(step, window_start, window_end, busy, count))
    return rows


def random_activities(rng: random.Random, count: int, base: int) -> list[tuple]:
    rows = []
    for _ in range(count):
        start = base + rng.choice([rng.randrange(0, 2_000_000), rng.randrange(0, 50) * 1000])
        end = start + rng.choice([0, -5, rng.randrange(1, 40_000), rng.randrange(1, 400_000)])
        stream = rng.choice([7, 7, 13, 20, None])
        launched = rng.choice([None, start - rng.randrange(0, 60_000), start + 10])
        kernel_type = rng.choice(["compute", "compute", "communication", "memory"])
        rows.append((start, end, kernel_type, stream, launched))
    return rows


@pytest.mark.parametrize("seed", range(40))
def test_numpy_breakdowns_equal_the_pure_definitions(seed):
    rng = random.Random(seed)
    base = rng.choice([0, 1_700_000_000_000_000_000])
    rows = random_activities(rng, rng.choice([0, 1, 2, 5, 60, 400]), base)
    typed = [(start, end, kernel_type) for start, end, kernel_type, _, _ in rows]
    ours = temporal_breakdown(typed)
    expected = reference_temporal(typed)
    if expected is None:
        assert ours is None
    else:
        figures = (ours.span_start_ns, ours.span_end_ns, ours.busy_ns, ours.compute_ns, ours.communication_ns)
        assert (*figures, ours.comm_compute_overlap_ns) == expected
    assert kernel_type_breakdown(typed) == reference_kernel_types(typed)
    idle_input = [(stream, start, end, launched) for start, end, _, stream, launched in rows]
    for threshold in (30_000, 30):
        assert idle_breakdown(idle_input, threshold) == reference_idle(idle_input, threshold)
        assert all(isinstance(row, StreamIdle) for row in idle_breakdown(idle_input, threshold))
    steps = [(1, base, base + 500_000), (2, base + 500_000, base + 1_700_000), (3, base + 3_000_000, base + 3_000_001)]
    spans = [(start, end) for start, end, *_ in rows]
    assert step_busy(steps, spans) == reference_step_busy(steps, spans)


def test_launches_by_sorted_ids_equal_the_dict_of_launch_starts():
    """rank_columns.Launches (sorted ids, searchsorted) finds what a dict built in event order finds: the last runtime
    call of a repeated correlation id, nothing for an id without a call or for None."""
    import numpy as np

    from perf_assets.lib.traces.rank_columns import Launches

    rng = random.Random(7)
    for _ in range(200):
        calls = [(rng.randint(-3, 12), rng.randint(0, 10**12)) for _ in range(rng.randint(0, 15))]
        wanted = [rng.choice([None, *range(-4, 14)]) for _ in range(rng.randint(0, 15))]
        launches = Launches.of(
            np.array([id_ for id_, _ in calls], dtype=np.int64), np.array([start for _, start in calls], dtype=np.int64)
        )
        starts, known = launches.find(wanted)
        expected = dict(calls)
        assert known.tolist() == [id_ in expected for id_ in wanted]
        assert starts.tolist() == [expected.get(id_, 0) for id_ in wanted]
