"""Rows of the derived per-rank trace tables from canonical events (dicts as trace_tables builds them). Pure.

Each function returns rows without identity columns (capture, host, rank...): trace_tables adds them.
Idle time and kernel types count the activities of the temporal breakdown (`in_breakdown`: HTA drops
the last, incomplete profiler step when it loads a trace); step busy time clips all activities to
each step window, the last step included (flagged `last_step`).
A device without GPU activity gets no rows (unknown, not 0); the rank breakdown row says why.
"""

from __future__ import annotations

from perf_assets.lib.traces.idle_time import KERNEL_WAIT_THRESHOLD_NS, idle_breakdown
from perf_assets.lib.traces.kernel_types import kernel_type_breakdown
from perf_assets.lib.traces.steps import profiler_steps, step_busy

GPU_ACTIVITIES = ("kernel", "memcpy", "memset")  # what the breakdowns count (cuda_sync does not)


def by_device(events: list[dict], counted_only: bool = False) -> dict[int | None, list[dict]]:
    """GPU activities grouped by device index, devices in order (None last); counted_only: `in_breakdown` ones."""
    devices: dict[int | None, list[dict]] = {}
    for event in events:
        if event["category"] in GPU_ACTIVITIES and (event.get("in_breakdown") or not counted_only):
            devices.setdefault(event.get("device_index"), []).append(event)
    return dict(sorted(devices.items(), key=lambda item: (item[0] is None, item[0] or 0)))


def launch_starts(events: list[dict]) -> dict[int, int]:
    """correlation id -> start of the runtime call that launched it (Kineto `correlation`, nsys correlationId)."""
    return {
        event["correlation_id"]: event["start_ns"]
        for event in events
        if event["category"] == "runtime" and event.get("correlation_id") is not None
    }


def idle_rows(
    events: list[dict], devices: dict[int | None, list[dict]], launches: dict[int, int] | None = None
) -> list[dict]:
    """launches: launch_starts(events) when given (the runtime events need not be in `events`)."""
    if launches is None:
        launches = launch_starts(events)
    rows = []
    for device, activities in devices.items():
        first_start = min(e["start_ns"] for e in activities)
        streams = idle_breakdown(
            (e.get("stream"), e["start_ns"], e["end_ns"], launches.get(e.get("correlation_id"))) for e in activities
        )
        for result in streams:
            rows.append(idle_row(device, result, first_start))
    return rows


def kernel_type_rows(devices: dict[int | None, list[dict]]) -> list[dict]:
    rows = []
    for device, activities in devices.items():
        types = kernel_type_breakdown((e["start_ns"], e["end_ns"], e["kernel_type"]) for e in activities)
        rows += kernel_type_rows_of(device, types, min(e["start_ns"] for e in activities))
    return rows


def step_rows(events: list[dict], devices: dict[int | None, list[dict]]) -> list[dict]:
    steps = profiler_steps(
        (e["name"], e["start_ns"], e["end_ns"])
        for e in events
        if e["category"] == "annotation" and e.get("device_index") is None
    )
    if not steps:
        return []
    last = steps[-1][0]
    rows = []
    for device, activities in devices.items():
        for result in step_busy(steps, ((e["start_ns"], e["end_ns"]) for e in activities)):
            rows.append(step_row(device, result, last))
    return rows


# One row of each table from a numpy core's result; shared with rank_columns (the fast path's columns).


def idle_row(device: int | None, result, first_start: int) -> dict:
    """A stream's idle-time row (idle_time.idle_breakdown / idle_of result)."""
    return {
        "device_index": device,
        "stream": result.stream,
        "activity_count": result.activity_count,
        "gap_count": result.gap_count,
        "launch_unknown_count": result.launch_unknown_count,
        "idle_ns": result.idle_ns,
        "host_wait_ns": result.host_wait_ns,
        "kernel_wait_ns": result.kernel_wait_ns,
        "other_ns": result.other_ns,
        "host_wait_share": result.share(result.host_wait_ns),
        "kernel_wait_share": result.share(result.kernel_wait_ns),
        "other_share": result.share(result.other_ns),
        "kernel_wait_threshold_ns": KERNEL_WAIT_THRESHOLD_NS,
        "_start_ns": first_start,
    }


def kernel_type_rows_of(device: int | None, types: list, first_start: int) -> list[dict]:
    """A device's kernel-type rows (kernel_types results), each with its share of the device's kernel time."""
    total = sum(t.time_ns for t in types)
    return [
        {
            "device_index": device,
            "kernel_type": t.kernel_type,
            "activity_count": t.activity_count,
            "time_ns": t.time_ns,
            "time_share": t.time_ns / total if total > 0 else None,
            "union_ns": t.union_ns,
            "exclusive_ns": t.exclusive_ns,
            "_start_ns": first_start,
        }
        for t in types
    ]


def step_row(device: int | None, result, last_step: int) -> dict:
    """A device's busy time in one profiler step (steps.step_busy / step_busy_of result)."""
    return {
        "device_index": device,
        "step": result.step,
        "step_start_ns": result.start_ns,
        "step_end_ns": result.end_ns,
        "span_ns": result.span_ns,
        "busy_ns": result.busy_ns,
        "activity_count": result.activity_count,
        "last_step": result.step == last_step,
        "_start_ns": result.start_ns,
    }
