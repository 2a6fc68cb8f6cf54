"""Whether an incident's evidence establishes a change: what an alert needs before it opens.

Every detected change carries a test (its scan's permutation p, with Benjamini-Hochberg q) and a 95 % interval
of its relative effect (the bootstrap's; a sparse test's own interval). The two can disagree at the end of the
window: with two or three days after the split, the scan can find its best split significant among all splits
while the resampled effect still reaches zero. The evidence then says "something may have moved", not by how much
or in which direction for certain, and a page on it asks a person to chase a change that may not exist.

An incident is **not established** when every row of it that nothing explains (no ``expected_because``) has a
finite 95 % interval that includes zero. It is kept, scored aside by the evaluation (``unestablished_groups``),
and opens no alert (alerts.py, ``upsert_incidents``); a later run whose interval excludes zero opens it then, as
a new incident: the interval narrows as days follow the split. A row without a finite interval (unknown) never
counts as one that includes zero: unknown is not "no change".

Measured on fleet-1k seeds 1, 2 and 110-117 (docs/detection.md, "Not established"): of the groups that were not
all knock-ons, two had only such rows, both false alarms and neither matched any label: seed 117's cluster
h200-east program goodput +1.4 % [-0.7 %, +3.7 %] of 10-28 (three days after, inside the null-image decoy) and
seed 113's cluster h100-east goodput +6.9 % [-0.2 %, ...] of 10-28 (a duplicate of the torch upgrade's group).

An incident is also not established when it is **a node's pace moving with its cluster** (``moved_with_peers``):
every row nothing explains is a node's ``program_goodput`` (or its goodput, the largest factor program goodput),
none with a fault rate or a configuration change of its own (``coinciding_changes``, a software cause ranked first),
and none moved by the node grain's minimum effect beyond the cluster's other nodes over the same windows (the
difference in differences, column ``did_relative_effect``; detection's ``GRAIN_MIN_EFFECTS["node"]``, 3 %). The
minimum effect is what makes a node's change its own incident; a node that moved 3.4 % while the cluster's other
31 moved 1.4 % changed by 2.0 % of its own, and a change of its hardware (clock, power, thermal state, probes) or its
software would show as a row of the group. Measured: fleet-1k seed 120's h200-east-n30 and n31 program goodput of
10-05 (-3.4 % [-4.5 %, -2.2 %], four days before the split; their peers -1.4 %: difference in differences -2.0 %),
the one false alarm of that seed, inside the diurnal-swing decoy. On seeds 119 and 120 no other group is a node's
pace alone; on fresh seeds 121-123 two are: 122's h100-west-n02 of 10-05 (a false alarm) and 121's h100-west-n01 of
10-20 (difference -2.8 %), which had matched the mix shift with the wrong factor (docs/evaluation.md, s28). A node group with any companion, fault or rollout row is judged by its intervals
only: a real node incident moves something of the node's own.
"""

from __future__ import annotations

import math


def interval_includes_zero(row: dict) -> bool:
    """The row's 95 % interval (``ci_low``, ``ci_high``) is known and contains zero."""
    low, high = _finite(row.get("ci_low")), _finite(row.get("ci_high"))
    return low is not None and high is not None and low <= 0.0 <= high


def not_established(rows: list[dict]) -> str | None:
    """The reason an incident of these rows is not established (module docstring), None when it is: some row that
    nothing explains has an interval that excludes zero or is unknown, and it is not a node's pace moving with its
    cluster (``moved_with_peers``), or every row is explained (a knock-on group, which ``expected_because``
    describes instead)."""
    live = [row for row in rows if not expected_reason(row)]
    if not live:
        return None
    if not all(interval_includes_zero(row) for row in live):
        return moved_with_peers(live)
    shown = _largest(
        live,
        lambda row: (
            f"{row['grain']}/{row['entity_id']}/{row['metric']} {float(row['relative_effect']):+.1%} "
            f"[{float(row['ci_low']):+.1%}, {float(row['ci_high']):+.1%}]"
        ),
    )
    return (
        f"not established: the 95% interval of every change nothing explains includes zero ({shown}); "
        "an alert opens when a later run's interval excludes it"
    )


def moved_with_peers(live: list[dict]) -> str | None:
    """The reason these rows (an incident's, none explained) are a node's pace moving with its cluster (module
    docstring), None when they are not."""
    # imported here: detection and grouping import this module (detection -> knock_on -> grouping -> established)
    from perf_assets.lib.detection import GRAIN_MIN_EFFECTS
    from perf_assets.lib.grouping import own_cause

    floor = GRAIN_MIN_EFFECTS["node"]
    for row in live:
        pace = row.get("metric") == "program_goodput" or (
            row.get("metric") == "goodput" and row.get("top_factor") == "program_goodput"
        )
        did = _finite(row.get("did_relative_effect"))
        if row.get("grain") != "node" or not pace or row.get("shape") == "rate" or own_cause(row) is not None:
            return None
        if did is None or abs(did) >= floor or _finite(row.get("peer_relative_effect")) is None:
            return None
    shown = _largest(
        live,
        lambda row: (
            f"node/{row['entity_id']}/{row['metric']} {float(row['relative_effect']):+.1%} against its "
            f"cluster's other nodes {float(row['peer_relative_effect']):+.1%} (difference in differences "
            f"{float(row['did_relative_effect']):+.1%})"
        ),
    )
    return (
        f"not established: a node's pace moved with its cluster ({shown}): under the node's {floor:.0%} "
        "minimum effect beyond its peers, with no hardware, fault or configuration change of its own"
    )


def expected_reason(row: dict) -> str | None:
    """The row's ``expected_because`` (a known cause explains the change: knock_on.py), None when nothing does (a
    NULL, NaN or empty reason). The one reading of that column for grouping, alerts, the evaluation and this module."""
    reason = row.get("expected_because")
    return reason if isinstance(reason, str) and reason else None


def all_expected(rows: list[dict]) -> bool:
    """Every row explained by a known cause (a knock-on incident: stored, never paged)."""
    return all(expected_reason(row) for row in rows)


def _largest(rows: list[dict], describe, shown: int = 3) -> str:
    """The ``shown`` rows of the largest |relative effect|, each as ``describe`` writes it, and how many more."""
    largest = sorted(rows, key=lambda row: -abs(_finite(row.get("relative_effect")) or 0.0))[:shown]
    more = f" and {len(rows) - shown} more" if len(rows) > shown else ""
    return "; ".join(describe(row) for row in largest) + more


def _finite(value) -> float | None:
    try:
        number = float(value)
    except (TypeError, ValueError):
        return None
    return number if math.isfinite(number) else None
