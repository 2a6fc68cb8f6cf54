"""HTA's idle-time breakdown per CUDA stream: host wait, kernel wait, other. Pure, no I/O.

HolisticTraceAnalysis 0.5.0 `BreakdownAnalysis._analyze_idle_time_for_stream`: the GPU activities
(kernel, memcpy, memset; not cuda_sync) of one stream, sorted by start; the gap before each one
(its start - the previous activity's end) is

* host wait: the activity's launching runtime call (correlation id) started after the previous
  activity ended -- the CPU did not enqueue work fast enough;
* kernel wait: otherwise, a gap shorter than the consecutive-kernel threshold (launch overhead of
  back-to-back kernels);
* other: the rest (e.g. waiting on an event from another stream).

HTA's threshold is `consecutive_kernel_delay = 30`, documented as ns but compared with its trace
timestamps, which are µs: in effect 30 µs, so KERNEL_WAIT_THRESHOLD_NS = 30_000. HTA sums signed gaps;
we clamp a negative gap (activities overlapping on one stream) to 0: overlap is not idle time.
Callers pass the activities that count for the temporal breakdown too (profiler_steps: HTA's trace
loader drops the last, incomplete iteration before any analysis).
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

import numpy as np

KERNEL_WAIT_THRESHOLD_NS = 30_000


@dataclass(frozen=True)
class StreamIdle:
    stream: int | None
    activity_count: int
    gap_count: int  # activity_count - 1: the first activity has no gap before it
    host_wait_ns: int
    kernel_wait_ns: int
    other_ns: int
    launch_unknown_count: int  # activities without a correlated launch: never host wait (HTA's join)

    @property
    def idle_ns(self) -> int:
        return self.host_wait_ns + self.kernel_wait_ns + self.other_ns

    def share(self, part: int) -> float | None:
        """Share of this stream's idle time; None (unknown) when the stream was never idle."""
        return part / self.idle_ns if self.idle_ns > 0 else None


def stream_idle(
    stream: int | None,
    activities: Iterable[tuple[int, int, int | None]],
    threshold_ns: int = KERNEL_WAIT_THRESHOLD_NS,
) -> StreamIdle:
    """From one stream's (start_ns, end_ns, launch_start_ns or None) activities."""
    ordered = sorted(activities, key=lambda activity: activity[0])
    host = kernel = other = unknown = 0
    previous_end: int | None = None
    for start, end, launched in ordered:
        unknown += launched is None
        if previous_end is not None:
            gap = max(0, start - previous_end)
            if launched is not None and launched > previous_end:
                host += gap
            elif gap < threshold_ns:
                kernel += gap
            else:
                other += gap
        previous_end = end
    return StreamIdle(stream, len(ordered), max(0, len(ordered) - 1), host, kernel, other, unknown)


def idle_breakdown(
    activities: Iterable[tuple[int | None, int, int, int | None]],
    threshold_ns: int = KERNEL_WAIT_THRESHOLD_NS,
) -> list[StreamIdle]:
    """Per stream, from (stream, start_ns, end_ns, launch_start_ns or None); activities without a stream skipped.

    stream_idle for every stream at once with numpy: a stable sort by (stream, start), each gap against the
    previous activity of the same stream, sums per stream with add.reduceat (int64, exact)."""
    rows = [row for row in activities if row[0] is not None]
    if not rows:
        return []
    count = len(rows)
    streams = np.fromiter((row[0] for row in rows), dtype=np.int64, count=count)
    starts = np.fromiter((row[1] for row in rows), dtype=np.int64, count=count)
    ends = np.fromiter((row[2] for row in rows), dtype=np.int64, count=count)
    known = np.fromiter((row[3] is not None for row in rows), dtype=bool, count=count)
    launched = np.fromiter((0 if row[3] is None else row[3] for row in rows), dtype=np.int64, count=count)
    return idle_of(streams, starts, ends, launched, known, threshold_ns)


def idle_of(
    streams: np.ndarray,
    starts: np.ndarray,
    ends: np.ndarray,
    launched: np.ndarray,
    known: np.ndarray,
    threshold_ns: int = KERNEL_WAIT_THRESHOLD_NS,
) -> list[StreamIdle]:
    """idle_breakdown over columns (int64 streams, starts, ends, launch starts; known: the launch start is known),
    activities with a stream only."""
    count = len(streams)
    if not count:
        return []
    order = np.lexsort((starts, streams))  # stable: equal (stream, start) keep their order, as sorted() does
    streams, starts, ends, known, launched = streams[order], starts[order], ends[order], known[order], launched[order]
    first = np.concatenate(([True], streams[1:] != streams[:-1]))  # the first activity of its stream
    previous_end = np.concatenate(([0], ends[:-1]))
    gap = np.where(first, 0, np.maximum(0, starts - previous_end))
    host = ~first & known & (launched > previous_end)
    kernel = ~first & ~host & (gap < threshold_ns)
    other = ~first & ~host & ~kernel
    groups = np.flatnonzero(first)
    sizes = np.diff(np.concatenate((groups, [count])))

    def per_stream(mask: np.ndarray) -> list[int]:
        return np.add.reduceat(np.where(mask, gap, 0), groups).tolist()

    return [
        StreamIdle(stream, size, max(0, size - 1), host_ns, kernel_ns, other_ns, unknown)
        for stream, size, host_ns, kernel_ns, other_ns, unknown in zip(
            streams[groups].tolist(),
            sizes.tolist(),
            per_stream(host),
            per_stream(kernel),
            per_stream(other),
            np.add.reduceat((~known).astype(np.int64), groups).tolist(),
        )
    ]
