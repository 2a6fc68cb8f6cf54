"""rank_tables and trace_tables.mark_activities over columns: one trace's GPU activities as numpy arrays. Pure.

The Kineto fast path hands its events as columns; building a dict per GPU activity for rank_tables cost more
than the breakdowns themselves. `Activities` holds the columns the breakdowns read, `mark` sets kernel type
and `in_breakdown` (HTA's last-iteration rule, profiler_steps) the way mark_activities does, and the row
functions give rank_tables' rows, value for value and in the same order, from the same numpy cores
(breakdown_of, idle_of, kernel_types_of, step_busy_of). tests/test_kineto_fast.py compares the fast path's
tables (these functions) with the checked path's (rank_tables, over dicts) on every Kineto sample.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pyarrow as pa

from perf_assets.lib.traces.breakdown import COMMUNICATION, Breakdown, breakdown_of, classify_kernel
from perf_assets.lib.traces.idle_time import idle_of
from perf_assets.lib.traces.kernel_types import kernel_types_of
from perf_assets.lib.traces.profiler_steps import last_step_start
from perf_assets.lib.traces.rank_tables import idle_row, kernel_type_rows_of, step_row
from perf_assets.lib.traces.steps import profiler_steps, step_busy_of


@dataclass
class Activities:
    """GPU activities (kernel, memcpy, memset) of one trace, in event order, as columns."""

    category: list[str]
    name: list[str | None]
    device: list[int | None]
    stream: list[int | None]
    correlation: list[int | None]
    start_ns: np.ndarray  # int64
    end_ns: np.ndarray  # int64
    kernel_type: np.ndarray | None = None  # str (object array); set by mark
    in_breakdown: np.ndarray | None = None  # bool; set by mark
    launched_ns: np.ndarray | None = None  # int64 start of the launching runtime call, 0 when unknown; set by mark
    launch_known: np.ndarray | None = None  # bool; set by mark

    def __len__(self) -> int:
        return len(self.category)


@dataclass(frozen=True)
class Launches:
    """The start of the runtime call that launched each correlation id (rank_tables.launch_starts as arrays): ids
    sorted and unique, the last call of an id kept, as a dict built in event order keeps it."""

    correlation: np.ndarray  # int64, sorted, unique
    start_ns: np.ndarray  # int64

    @classmethod
    def of(cls, correlation: np.ndarray, start_ns: np.ndarray) -> Launches:
        """From the runtime calls' correlation ids and starts (int64), in event order."""
        order = np.argsort(correlation, kind="stable")
        ids, starts = correlation[order], start_ns[order]
        last = np.ones(len(ids), dtype=bool)
        last[:-1] = ids[1:] != ids[:-1]
        return cls(ids[last], starts[last])

    def find(self, correlation: list[int | None]) -> tuple[np.ndarray, np.ndarray]:
        """(launch start, 0 where unknown; whether known) of each correlation id (None: unknown)."""
        values = pa.array(correlation, pa.int64())
        ids = values.fill_null(0).to_numpy()
        if not len(self.correlation):
            return np.zeros(len(ids), dtype=np.int64), np.zeros(len(ids), dtype=bool)
        at = np.minimum(np.searchsorted(self.correlation, ids), len(self.correlation) - 1)
        known = values.is_valid().to_numpy(zero_copy_only=False) & (self.correlation[at] == ids)
        return np.where(known, self.start_ns[at], 0), known


def kernel_types(names: list[str | None], categories: list[str]) -> list[str]:
    """classify_kernel of each (name, category), each distinct pair classified once (kernel names repeat)."""
    pairs = list(zip(names, categories))
    types = dict.fromkeys(pairs)
    for name, category in types:
        types[name, category] = classify_kernel(name, category)
    return list(map(types.__getitem__, pairs))


def mark(activities: Activities, annotations: list[tuple[str | None, int, int]], launches: Launches) -> int:
    """Kernel types, launch starts and `in_breakdown` of every activity (mark_activities); returns how many
    activities are excluded. annotations: the CPU annotations' (name, start_ns, end_ns); launches: the runtime
    calls by correlation id."""
    activities.kernel_type = np.array(kernel_types(activities.name, activities.category), dtype=object)
    activities.launched_ns, activities.launch_known = launches.find(activities.correlation)
    cutoff = last_step_start((name, start) for name, start, _ in annotations)
    if cutoff is None:
        activities.in_breakdown = np.ones(len(activities), dtype=bool)
    else:
        activities.in_breakdown = activities.launch_known & (activities.launched_ns < cutoff)
    return int(len(activities) - activities.in_breakdown.sum())


def by_device(activities: Activities) -> list[tuple[int | None, np.ndarray]]:
    """(device index, positions of its activities in event order), devices in order, None last."""
    devices = activities.device
    present = set(devices)
    if len(present) == 1:
        return [(devices[0], np.arange(len(devices)))] if devices else []
    column = np.array(devices, dtype=object)
    return [
        (device, np.flatnonzero(column == device) if device is not None else np.flatnonzero(column == None))  # noqa: E711
        for device in sorted(present, key=lambda device: (device is None, device or 0))
    ]


@dataclass(frozen=True)
class DeviceFigures:
    """What trace_tables.breakdown_rows computes per device."""

    device: int | None
    kernel_count: int
    kernel_time_ns: int
    communication_kernel_count: int
    breakdown: Breakdown | None


def device_figures(activities: Activities, devices: list[tuple[int | None, np.ndarray]]) -> list[DeviceFigures]:
    figures = []
    is_kernel = np.array([category == "kernel" for category in activities.category], dtype=bool)
    communication = activities.kernel_type == COMMUNICATION
    for device, where in devices:
        kernels = where[is_kernel[where]]
        counted = where[activities.in_breakdown[where]]
        figures.append(
            DeviceFigures(
                device,
                len(kernels),
                int((activities.end_ns[kernels] - activities.start_ns[kernels]).sum()),
                int(communication[kernels].sum()),
                breakdown_of(activities.start_ns[counted], activities.end_ns[counted], activities.kernel_type[counted]),
            )
        )
    return figures


def _counted(
    activities: Activities, devices: list[tuple[int | None, np.ndarray]]
) -> list[tuple[int | None, np.ndarray]]:
    """rank_tables.by_device(counted_only=True): devices with at least one activity in the breakdown."""
    counted = [(device, where[activities.in_breakdown[where]]) for device, where in devices]
    return [(device, where) for device, where in counted if len(where)]


def idle_rows(activities: Activities, devices: list[tuple[int | None, np.ndarray]]) -> list[dict]:
    """rank_tables.idle_rows."""
    rows = []
    streams = activities.stream
    for device, where in _counted(activities, devices):
        first_start = int(activities.start_ns[where].min())
        with_stream = [position for position in where.tolist() if streams[position] is not None]
        at = np.array(with_stream, dtype=np.int64)
        results = idle_of(
            np.array([streams[position] for position in with_stream], dtype=np.int64),
            activities.start_ns[at],
            activities.end_ns[at],
            activities.launched_ns[at],
            activities.launch_known[at],
        )
        for result in results:
            rows.append(idle_row(device, result, first_start))
    return rows


def kernel_type_rows(activities: Activities, devices: list[tuple[int | None, np.ndarray]]) -> list[dict]:
    """rank_tables.kernel_type_rows."""
    rows = []
    for device, where in _counted(activities, devices):
        types = kernel_types_of(activities.start_ns[where], activities.end_ns[where], activities.kernel_type[where])
        rows += kernel_type_rows_of(device, types, int(activities.start_ns[where].min()))
    return rows


def step_rows(
    activities: Activities,
    devices: list[tuple[int | None, np.ndarray]],
    annotations: list[tuple[str | None, int, int]],
) -> list[dict]:
    """rank_tables.step_rows; annotations: the CPU annotations' (name, start_ns, end_ns)."""
    steps = profiler_steps(annotations)
    if not steps:
        return []
    last = steps[-1][0]
    rows = []
    for device, where in devices:
        for result in step_busy_of(steps, activities.start_ns[where], activities.end_ns[where]):
            rows.append(step_row(device, result, last))
    return rows
