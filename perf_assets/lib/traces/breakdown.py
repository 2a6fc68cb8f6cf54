"""HTA's temporal breakdown and comm/compute overlap for one rank's GPU activity: pure, no I/O.

Definitions (HolisticTraceAnalysis `breakdown_analysis.py`, `communication_analysis.py`; metric_tree.md 1.2):

* span = last GPU activity end - first GPU activity start
* idle = span - |U all activities|
* compute = |U compute kernels| (communication or memory work overlapping compute counts as compute)
* non_compute = |U all activities| - compute (exposed communication and memory time)
* comm/compute overlap = |U communication n U compute| / |U communication|

So idle + compute + non_compute = span exactly. Times are integer nanoseconds.

The interval unions are computed with numpy (`union`): sort by start, running maximum of the ends, a new
interval wherever a start lies beyond every earlier end (int64, exact); `merge`, the same in pure Python,
stays as the reference the tests compare with. Overlaps use |A n B| = |A| + |B| - |A u B|.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass
from functools import lru_cache

import numpy as np

COMPUTE, COMMUNICATION, MEMORY = "compute", "communication", "memory"
KERNEL_TYPES = (COMPUTE, COMMUNICATION, MEMORY)

# Kernel type by name, first match wins; anything else is compute. Data, not code: extend here.
# Unlike HTA we do not class every `hip*` name as communication (HTA's regex does, a known quirk).
KERNEL_TYPE_PATTERNS: tuple[tuple[str, re.Pattern[str]], ...] = (
    (COMMUNICATION, re.compile(r"^(nccl|rccl|hccl)|ncclKernel|ncclDevKernel|rcclKernel", re.IGNORECASE)),
    (MEMORY, re.compile(r"^(hip|cuda)?(memcpy|memset)|^dma", re.IGNORECASE)),
)
# Canonical categories that are memory work whatever their name.
MEMORY_CATEGORIES = frozenset({"memcpy", "memset"})


@lru_cache(maxsize=4096)  # kernel names repeat within and across traces; the regexes scan long mangled names
def classify_kernel(name: str | None, category: str = "kernel") -> str:
    """communication | memory | compute, for a GPU activity of a canonical category."""
    if category in MEMORY_CATEGORIES:
        return MEMORY
    for kernel_type, pattern in KERNEL_TYPE_PATTERNS:
        if name and pattern.search(name):
            return kernel_type
    return COMPUTE


def merge(intervals: Iterable[tuple[int, int]]) -> list[tuple[int, int]]:
    """The union of [start, end) intervals as sorted, disjoint intervals."""
    merged: list[list[int]] = []
    for start, end in sorted(intervals):
        if end < start:
            continue
        if merged and start <= merged[-1][1]:
            merged[-1][1] = max(merged[-1][1], end)
        else:
            merged.append([start, end])
    return [(start, end) for start, end in merged]


def length(merged: list[tuple[int, int]]) -> int:
    return sum(end - start for start, end in merged)


def overlap(left: list[tuple[int, int]], right: list[tuple[int, int]]) -> int:
    """Total time covered by both of two merged interval lists."""
    total, i, j = 0, 0, 0
    while i < len(left) and j < len(right):
        start = max(left[i][0], right[j][0])
        end = min(left[i][1], right[j][1])
        total += max(0, end - start)
        if left[i][1] < right[j][1]:
            i += 1
        else:
            j += 1
    return total


@dataclass(frozen=True)
class Breakdown:
    """One rank's (one device's) temporal breakdown; shares are of the span, None when the span is 0."""

    span_start_ns: int
    span_end_ns: int
    span_ns: int
    busy_ns: int
    idle_ns: int
    compute_ns: int
    non_compute_ns: int
    communication_ns: int
    comm_compute_overlap_ns: int

    def share(self, part: int) -> float | None:
        return part / self.span_ns if self.span_ns > 0 else None

    @property
    def idle_share(self) -> float | None:
        return self.share(self.idle_ns)

    @property
    def compute_share(self) -> float | None:
        return self.share(self.compute_ns)

    @property
    def non_compute_share(self) -> float | None:
        return self.share(self.non_compute_ns)

    @property
    def comm_overlap_share(self) -> float | None:
        """Share of communication time that overlaps compute; None (unknown) without communication."""
        return self.comm_compute_overlap_ns / self.communication_ns if self.communication_ns > 0 else None


def union(starts: np.ndarray, ends: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """merge() with numpy: the union of [start, end) intervals as sorted, disjoint (starts, ends) int64 arrays."""
    valid = ends >= starts
    if not valid.all():
        starts, ends = starts[valid], ends[valid]
    if not len(starts):
        return starts, ends
    order = np.argsort(starts, kind="stable")
    starts, ends = starts[order], ends[order]
    reach = np.maximum.accumulate(ends)  # the end of the merged interval so far
    first = np.flatnonzero(np.concatenate(([True], starts[1:] > reach[:-1])))
    last = np.concatenate((first[1:] - 1, [len(starts) - 1]))
    return starts[first], reach[last]


def union_length(starts: np.ndarray, ends: np.ndarray) -> int:
    merged_starts, merged_ends = union(starts, ends)
    return int((merged_ends - merged_starts).sum())


def as_arrays(activities: Iterable[tuple]) -> tuple[np.ndarray, np.ndarray, list]:
    """(starts, ends) as int64 arrays and the third fields as a list, from (start, end, x) tuples."""
    rows = list(activities)
    starts = np.fromiter((row[0] for row in rows), dtype=np.int64, count=len(rows))
    ends = np.fromiter((row[1] for row in rows), dtype=np.int64, count=len(rows))
    return starts, ends, [row[2] for row in rows]


def temporal_breakdown(activities: Iterable[tuple[int, int, str]]) -> Breakdown | None:
    """From (start_ns, end_ns, kernel_type) GPU activities of one rank; None without any activity."""
    starts, ends, types = as_arrays(activities)
    return breakdown_of(starts, ends, np.array(types, dtype=object))


def breakdown_of(starts: np.ndarray, ends: np.ndarray, kinds: np.ndarray) -> Breakdown | None:
    """temporal_breakdown over columns: int64 starts and ends, the kernel types as an array of str."""
    busy_starts, busy_ends = union(starts, ends)
    if not len(busy_starts):
        return None
    compute, communication = kinds == COMPUTE, kinds == COMMUNICATION
    busy_ns = int((busy_ends - busy_starts).sum())
    compute_ns = union_length(starts[compute], ends[compute])
    communication_ns = union_length(starts[communication], ends[communication])
    either = compute | communication
    span_start, span_end = int(busy_starts[0]), int(busy_ends[-1])
    return Breakdown(
        span_start_ns=span_start,
        span_end_ns=span_end,
        span_ns=span_end - span_start,
        busy_ns=busy_ns,
        idle_ns=span_end - span_start - busy_ns,
        compute_ns=compute_ns,
        non_compute_ns=busy_ns - compute_ns,
        communication_ns=communication_ns,
        comm_compute_overlap_ns=compute_ns + communication_ns - union_length(starts[either], ends[either]),
    )


def hta_rounded(activities: Iterable[tuple[int, int, str]]) -> list[tuple[int, int, str]]:
    """HTA's integer-µs view of ns activities (start = ceil, end = floor to the µs), to compare figures with
    HTA: on float-µs traces its rounding shortens every sub-µs kernel. Our stored figures keep ns."""
    return [(-(-start // 1000) * 1000, (end // 1000) * 1000, kernel_type) for start, end, kernel_type in activities]
