"""Which probes must run again before a GPU is called defective: the warehouse side of the confirmation re-run.

A rule with ``confirm_rerun`` that fired on a GPU's latest run of a probe, not yet confirmed by the run before,
verdict ``warn`` ("awaiting a confirming re-run"), asks for that probe to run again on that node. The host's
suite re-runs a probe that failed its *own* verdict at once; this covers what only the warehouse can see (a
cohort regression, a floor the host does not know).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

PENDING_SQL = """
with latest as (
    select *, row_number() over (partition by gpu_uuid, probe, metric, rule order by started_at desc) as recency
    from intermediate.int_probe_verdicts
)
select node, probe, run_id, string_agg(distinct rule, ',' order by rule) as rules,
       string_agg(distinct gpu_uuid, ',' order by gpu_uuid) as gpus
from latest
where recency = 1 and fired and confirm_rerun and verdict = 'warn' and device_kind = 'cuda'
group by node, probe, run_id
order by node, probe, run_id
"""


@dataclass(frozen=True)
class PendingConfirmation:
    node: str
    probe: str
    run_id: str  # the run whose verdicts wait for the re-run
    rules: str
    gpus: str

    @property
    def key(self) -> str:
        """One re-run per awaiting run and probe (a sensor's run key)."""
        return f"confirm-{self.run_id}-{self.probe}"


def pending_confirmations(query: Callable[[str], tuple[list[str], list[tuple]]]) -> list[PendingConfirmation]:
    """The (node, probe) pairs awaiting a confirming re-run; ``query(sql) -> (columns, rows)`` reads the
    published warehouse (``functools.partial(query_published, home)``)."""
    _, rows = query(PENDING_SQL)
    return [PendingConfirmation(*row) for row in rows]
