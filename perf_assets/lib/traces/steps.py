"""Per-step GPU busy time (straggler input): pure, no I/O.

A step is a `ProfilerStep#N` CPU annotation (Kineto) or NVTX range (nsys) of one rank. Its busy time
is |U GPU activities clipped to [step start, step end)| on one device; span = end - start. Across the
ranks of one job, max/mean of busy per step estimates the straggler slowdown (metric_tree.md 2.2).
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass

import numpy as np

from perf_assets.lib.traces.breakdown import union

STEP_NUMBER = re.compile(r"^ProfilerStep\s*#\s*(\d+)")


@dataclass(frozen=True)
class StepBusy:
    step: int
    start_ns: int
    end_ns: int
    busy_ns: int
    activity_count: int  # activities that start inside the window

    @property
    def span_ns(self) -> int:
        return self.end_ns - self.start_ns


def profiler_steps(annotations: Iterable[tuple[str | None, int, int]]) -> list[tuple[int, int, int]]:
    """(step number, start_ns, end_ns) of the ProfilerStep annotations, by start; the first of a repeated number."""
    steps: dict[int, tuple[int, int, int]] = {}
    for name, start, end in annotations:
        match = STEP_NUMBER.match(name or "")
        if match and int(match.group(1)) not in steps:
            steps[int(match.group(1))] = (int(match.group(1)), start, end)
    return sorted(steps.values(), key=lambda step: step[1])


def step_busy(steps: list[tuple[int, int, int]], activities: Iterable[tuple[int, int]]) -> list[StepBusy]:
    """Busy time of one device inside each step window (numpy: the union clipped to each window)."""
    spans = list(activities)
    starts = np.fromiter((start for start, _ in spans), dtype=np.int64, count=len(spans))
    ends = np.fromiter((end for _, end in spans), dtype=np.int64, count=len(spans))
    return step_busy_of(steps, starts, ends)


def step_busy_of(steps: list[tuple[int, int, int]], starts: np.ndarray, ends: np.ndarray) -> list[StepBusy]:
    """step_busy over columns: the device's activities as int64 starts and ends."""
    merged_starts, merged_ends = union(starts, ends)
    starts = np.sort(starts)
    rows = []
    for step, window_start, window_end in steps:
        clipped = np.minimum(merged_ends, window_end) - np.maximum(merged_starts, window_start)
        busy = int(clipped[clipped > 0].sum())
        count = int(
            np.searchsorted(starts, window_end - 1, "right") - np.searchsorted(starts, window_start - 1, "right")
        )
        rows.append(StepBusy(step, window_start, window_end, busy, count))
    return rows
