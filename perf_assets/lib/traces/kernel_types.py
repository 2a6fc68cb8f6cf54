"""Kernel-type breakdown of one rank's GPU activities (HTA's `get_gpu_kernel_breakdown`). Pure, no I/O.

Per kernel type: count, Σ durations, the union of its intervals, and its *exclusive* time (running
with no activity of another type). HTA reports the union of all activities partitioned by the set of
types running ("COMPUTATION", "COMPUTATION overlapping COMMUNICATION", ...): `type_partition`.
HTA classifies by name only (`hta_kernel_type`, for comparisons); our stored figures use
breakdown.classify_kernel (categories first), so memcpy/memset events are memory either way.
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Iterable
from dataclasses import dataclass

import numpy as np

from perf_assets.lib.traces.breakdown import KERNEL_TYPES, as_arrays, union_length

# HolisticTraceAnalysis 0.5.0 hta/utils/utils.py get_kernel_type
_HTA_COMM = re.compile(r"^nccl.*Kernel")
_HTA_MEMORY = re.compile(r"(^Memcpy)|(^Memset)|(^dma)")
_HTA_NOT_COMPUTE = re.compile(r"(^nccl.*Kernel)|(.*(Memcpy)|(Memset))|(.*Sync)")
HTA_LABELS = {"compute": "COMPUTATION", "communication": "COMMUNICATION", "memory": "MEMORY"}


def hta_kernel_type(name: str) -> str | None:
    """HTA's kernel type (compute | communication | memory), None for its OTHER (e.g. `... Sync`)."""
    if _HTA_COMM.match(name):
        return "communication"
    if _HTA_MEMORY.match(name):
        return "memory"
    return None if _HTA_NOT_COMPUTE.match(name) else "compute"


@dataclass(frozen=True)
class TypeTime:
    kernel_type: str
    activity_count: int
    time_ns: int  # Σ durations
    union_ns: int  # |U intervals|
    exclusive_ns: int  # |U intervals| minus the time another type runs too


def kernel_type_breakdown(activities: Iterable[tuple[int, int, str]]) -> list[TypeTime]:
    """From (start_ns, end_ns, kernel_type); one row per type present, in KERNEL_TYPES order.

    exclusive = |U type| - |U type n U others| = |U all| - |U others| (numpy unions, exact)."""
    starts, ends, types = as_arrays(activities)
    return kernel_types_of(starts, ends, np.array(types, dtype=object))


def kernel_types_of(starts: np.ndarray, ends: np.ndarray, kinds: np.ndarray) -> list[TypeTime]:
    """kernel_type_breakdown over columns: int64 starts and ends, the kernel types as an array of str."""
    everything = union_length(starts, ends)
    rows = []
    present = set(kinds.tolist())
    for kernel_type in sorted(present, key=lambda t: (KERNEL_TYPES.index(t) if t in KERNEL_TYPES else 99, t)):
        mine = kinds == kernel_type
        others = ~mine
        rows.append(
            TypeTime(
                kernel_type,
                int(mine.sum()),
                int((ends[mine] - starts[mine]).sum()),
                union_length(starts[mine], ends[mine]),
                everything - union_length(starts[others], ends[others]),
            )
        )
    return rows


def type_partition(activities: Iterable[tuple[int, int, str]]) -> dict[frozenset[str], int]:
    """The union of all activities split by the set of types running at each instant (HTA's sweep)."""
    edges: list[tuple[int, int, str]] = []
    for start, end, kernel_type in activities:
        if end > start:
            edges += [(start, 1, kernel_type), (end, -1, kernel_type)]
    edges.sort(key=lambda edge: (edge[0], edge[1]))
    running: Counter[str] = Counter()
    result: Counter[frozenset[str]] = Counter()
    previous = None
    for time, step, kernel_type in edges:
        active = frozenset(t for t, n in running.items() if n > 0)
        if previous is not None and active and time > previous:
            result[active] += time - previous
        running[kernel_type] += step
        previous = time
    return dict(result)


def hta_label(types: frozenset[str]) -> str:
    """HTA's name for a set of running types, e.g. 'COMPUTATION overlapping COMMUNICATION'."""
    order = ("compute", "communication", "memory")  # HTA's bit order: COMPUTATION, COMMUNICATION, MEMORY
    return " overlapping ".join(HTA_LABELS[t] for t in order if t in types)


def top_kernels(kernels: Iterable[tuple[str, int]], limit: int = 10) -> list[tuple[str, int, int]]:
    """(name, count, Σ duration ns) of the kernels with the most time, most first."""
    count: Counter[str] = Counter()
    time: Counter[str] = Counter()
    for name, duration in kernels:
        count[name] += 1
        time[name] += duration
    return [(name, count[name], total) for name, total in time.most_common(limit)]
