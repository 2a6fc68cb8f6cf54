"""Which GPU activities belong to the traced iterations (HTA's last-iteration rule): pure, no I/O.

With at least two `ProfilerStep#N` annotations, HTA keeps only GPU activities whose launching CPU
call (joined on the correlation id) started before the last ProfilerStep began: the last iteration
is usually cut off by the end of the capture. Activities with no launching call are dropped too
(HTA's inner join). With fewer than two steps everything counts.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping

PROFILER_STEP = re.compile(r"^ProfilerStep\s*#\s*\d+")


def last_step_start(annotations: Iterable[tuple[str, int]]) -> int | None:
    """Start of the last ProfilerStep among (name, start) CPU annotations; None with fewer than two steps."""
    starts = [start for name, start in annotations if name and PROFILER_STEP.match(name)]
    return max(starts) if len(starts) >= 2 else None


def in_traced_iterations(correlation: int | None, launches: Mapping[int, int], cutoff: int | None) -> bool:
    """Whether a GPU activity counts: always without a cutoff, else launched (correlation -> start) before it."""
    if cutoff is None:
        return True
    launched_at = launches.get(correlation) if correlation is not None else None
    return launched_at is not None and launched_at < cutoff
