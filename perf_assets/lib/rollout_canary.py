"""Every configuration change tested as a canary: the nodes that took it against the nodes of its cluster that did not.

A rollout is a value of a node dimension (driver, CUDA, NCCL, PyTorch, image, firmware, power limit) that some nodes
of one cluster took within a day of each other (``CAUSE_WINDOW``); dimensions that changed together on the same nodes
(a driver and the CUDA version it reports) are one rollout. When part of the cluster took it, the rest is a control
group, and the question an owner asks of every rollout -- did it cost anything? -- has a direct answer that the
per-series scan cannot give: the small image stall of fleet-1k (4 of h200-east's 32 nodes, steps 4 % slower on one in
ten) moves each node's program goodput by less than its day-to-day noise (scan p 0.035-0.12 per node) and the
cluster's by 0.5 %, but the four nodes together against the 24 untouched ones move by -3.0 % [-4.3 %, -1.3 %]
(seed 1), about 4.4 standard deviations of the same estimate on random sets of four of those 28 nodes (0.68 %).

Per rollout and metric (``CANARY_METRICS``: the spine factors a configuration change acts on; allocation is the
scheduler's):

* Windows: up to ``WINDOW_DAYS`` days before the first node changed and from the first whole day after the last one
  changed (the days in between are part-way), each cut at the cohort's previous or next change of any dimension.
* Peers: the cluster's nodes that ran the cohort's configuration before the change (every dimension: a node that
  took an earlier rollout the cohort did not, or the cohort took and it did not, is on another trend) and changed
  nothing over both windows. fleet-1k seed 107: the null image rollout to h200-east-n01-n08, ten days after their
  driver rollout of n01-n16, read +3.5 % [+0.7 %, +6.6 %], p 0.007, against all 24 untouched nodes, 16 of them on the
  old driver; against n09-n16, on the same driver, +2.7 % [+1.2 %, +4.3 %], p 0.035: no effect shown. Job peers of
  the cohort stay peers: a synchronous job runs at its slowest node's pace, so they slowed too and the estimate is
  diluted towards zero; dropping them leaves the few nodes that run other job sizes, which differ on their own (seed
  1: the null image decoy read -3.5 %, randomization p 0.002, on its 4 untouched peers outside the cohort's jobs,
  against -0.2 %, p 0.9, on all 24 untouched nodes).
* Estimate: the difference in differences of the pooled ratios, ``(A1/A0) / (P1/P0) - 1`` (A: the cohort's
  Σnumerator/Σdenominator over a window, P: the peers'), as causes.py ranks cause candidates.
* Test: randomization inference. If the change did nothing, which k of the k + m nodes took it does not matter, so
  the estimate is compared with those of relabellings of k of the same nodes as the cohort, over the same days
  (all of them when there are at most ``n_permutations``, else that many at random): two-sided
  ``p = (1 + #{|null| >= |observed|}) / (1 + n)``. Days need not be independent, since every relabelling reads the
  same days; the nodes are taken as exchangeable, which a rollout to a rack or to the nodes of one job would strain.
* Interval: causes.did_estimate's percentile bootstrap over days (resampled within each window, the same days for
  both arms), as cause candidates get theirs.
* Call: a regression or an improvement (by the metric's direction) when p <= ``max_pvalue``, the Benjamini-Hochberg q
  across the run's canary tests <= ``max_qvalue`` and the estimate is at least the cohort's minimum effect; else "no
  effect shown" (with its interval: how large an effect the data can still hide). Not testable, with the reason: the
  whole cluster took it (the cluster's own series is the test then), too few peers or days, or too few distinct
  relabellings to reach ``max_pvalue``.

Plain numpy over a node-grain ``SeriesBatch``; no I/O.
"""

from __future__ import annotations

import itertools
import math
from collections import Counter
from dataclasses import dataclass
from datetime import date, timedelta

import numpy as np
import pandas as pd

from perf_assets.lib.causes import CAUSE_WINDOW, SOFTWARE_DIMENSIONS, _version_text, did_estimate
from perf_assets.lib.changepoint import benjamini_hochberg
from perf_assets.lib.topology import COHORT_SEPARATOR

CANARY_METRICS = ("availability", "runtime_goodput", "program_goodput")
COHORT_GRAIN = "cohort"  # regressions.grain of a canary's row; its entity_id lists the nodes (``cohort_entity``)
WINDOW_DAYS = 7
MIN_NODES = 2  # a rollout to one node is that node's own series, which the scan tests
MIN_PEERS = 4
MIN_DAYS = 3  # known days in each window (the scan's min_segment)
N_BOOTSTRAP = 999
# The `rollout_canaries` table: name -> DuckDB type; one row per rollout and metric, tested or not.
CANARY_SCHEMA = {
    "canary_id": "varchar",
    "cluster": "varchar",
    "changes": "varchar",  # "dimension from -> to" of each dimension the cohort took together, "; "-separated
    "first_changed_at": "timestamptz",
    "last_changed_at": "timestamptz",
    "metric": "varchar",
    "cohort_entity": "varchar",  # the cohort's regressions.entity_id (its nodes joined by COHORT_SEPARATOR)
    "n_nodes": "integer",
    "n_peers": "integer",
    "before_start_date": "date",
    "before_end_date": "date",
    "after_start_date": "date",
    "after_end_date": "date",
    "n_before": "integer",  # known days in the window
    "n_after": "integer",
    "cohort_before_level": "double",  # Σnumerator / Σdenominator of the cohort's nodes over the window
    "cohort_after_level": "double",
    "cohort_before_numerator": "double",
    "cohort_before_denominator": "double",
    "cohort_after_numerator": "double",
    "cohort_after_denominator": "double",
    "peer_before_level": "double",
    "peer_after_level": "double",
    "peer_before_numerator": "double",
    "peer_before_denominator": "double",
    "peer_after_numerator": "double",
    "peer_after_denominator": "double",
    "cohort_change": "double",  # cohort_after_level / cohort_before_level - 1
    "peer_change": "double",
    "did_effect": "double",  # (1 + cohort_change) / (1 + peer_change) - 1
    "ci_low": "double",  # 95 % bootstrap interval of did_effect
    "ci_high": "double",
    "p_value": "double",  # randomization p (two-sided)
    "q_value": "double",  # Benjamini-Hochberg across the run's tested canaries
    "relabellings": "varchar",  # how many relabellings the p-value counts, of how many there are
    "verdict": "varchar",  # regression | improvement | no effect shown | not testable
    "reason": "varchar",  # why not testable, or why no effect was shown; NULL for a call
}
CANARY_COLUMNS = list(CANARY_SCHEMA)


@dataclass(frozen=True)
class Rollout:
    """One configuration change of part or all of a cluster: which nodes took which values, and when."""

    cluster: str
    nodes: tuple[str, ...]
    changes: tuple[tuple[str, str, str], ...]  # (dimension, from, to), together on ``nodes``
    first_at: pd.Timestamp
    last_at: pd.Timestamp

    @property
    def label(self) -> str:
        return "; ".join(f"{dimension} {old} -> {new}" for dimension, old, new in self.changes)


def cohort_entity(nodes) -> str:
    """The entity_id of a cohort's row: its nodes, sorted, joined by ``COHORT_SEPARATOR`` (Topology reads it back)."""
    names = sorted(str(node) for node in nodes)
    if any(COHORT_SEPARATOR in name for name in names):
        raise ValueError(f"a node name holds the cohort separator {COHORT_SEPARATOR!r}: {names}")
    return COHORT_SEPARATOR.join(names)


def cluster_rollouts(changes: pd.DataFrame, node_cluster: dict[str, str]) -> list[Rollout]:
    """Rollouts of ``changes`` (causes.dimension_changes: node, changed_at, dimension, from_version, to_version; the
    node software dimensions only): per cluster, dimension and new value, the nodes that took it within
    ``CAUSE_WINDOW`` of the first of them; waves of one value days apart are two rollouts. Dimensions that changed
    on the same nodes within that window are one rollout."""
    if changes is None or changes.empty:
        return []
    frame = changes[changes["dimension"].isin(SOFTWARE_DIMENSIONS)].copy()
    frame["cluster"] = frame["node"].astype(str).map(node_cluster)
    frame = frame[frame["cluster"].notna()]
    frame["changed_at"] = pd.to_datetime(frame["changed_at"], utc=True)
    waves = []
    for (cluster, dimension, new), group in frame.groupby(["cluster", "dimension", "to_version"], sort=True):
        group = group.sort_values("changed_at")
        start, members = None, []
        for change in group.itertuples(index=False):
            if start is not None and change.changed_at - start > CAUSE_WINDOW:
                waves.append((cluster, dimension, members))
                start, members = None, []
            start = change.changed_at if start is None else start
            members.append(change)
        if members:
            waves.append((cluster, dimension, members))
    merged: dict[tuple, list] = {}
    for cluster, dimension, members in waves:
        nodes = tuple(sorted({str(change.node) for change in members}))
        first = min(change.changed_at for change in members)
        last = max(change.changed_at for change in members)
        old = pd.Series([_version_text(change.from_version) for change in members]).mode().iloc[0]
        new = _version_text(members[0].to_version)
        for key, found in merged.items():
            if key[0] == cluster and key[1] == nodes and abs(found[0] - first) <= CAUSE_WINDOW:
                found[2].append((dimension, old, new))
                found[0], found[1] = min(found[0], first), max(found[1], last)
                break
        else:
            merged[(cluster, nodes, first)] = [first, last, [(dimension, old, new)]]
    rollouts = [
        Rollout(cluster, nodes, tuple(sorted(found[2])), found[0], found[1])
        for (cluster, nodes, _), found in merged.items()
    ]
    return sorted(rollouts, key=lambda rollout: (rollout.first_at, rollout.cluster, rollout.nodes))


def _day_index(dates: list[date], day: date) -> int:
    """The position of ``day`` on the grid (clipped to its ends)."""
    if not dates:
        return 0
    return min(max((day - dates[0]).days, 0), len(dates))


def _windows(rollout: Rollout, dates: list[date], node_changes: pd.DataFrame) -> tuple[int, int, int, int]:
    """Grid positions ``before_start, before_stop, after_start, after_stop`` of a rollout's windows."""
    first_day = rollout.first_at.date()
    last_day = rollout.last_at.date()
    after_day = last_day if rollout.last_at == pd.Timestamp(last_day, tz="UTC") else last_day + timedelta(days=1)
    before_stop = _day_index(dates, first_day)
    after_start = _day_index(dates, after_day)
    before_start = max(0, before_stop - WINDOW_DAYS)
    after_stop = min(len(dates), after_start + WINDOW_DAYS)
    own = node_changes[node_changes["node"].isin(rollout.nodes)]
    for at in own["changed_at"]:
        if at < rollout.first_at - CAUSE_WINDOW:  # an earlier change of the cohort: the before window starts after it
            day = at.date() + (timedelta(days=0) if at == pd.Timestamp(at.date(), tz="UTC") else timedelta(days=1))
            before_start = max(before_start, _day_index(dates, day))
        elif at > rollout.last_at + CAUSE_WINDOW:  # a later one: the after window ends before it
            after_stop = min(after_stop, _day_index(dates, at.date()))
    return before_start, before_stop, after_start, max(after_start, after_stop)


def _pooled_did(
    member: np.ndarray, sums: tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Per row of ``member`` (R, N; 1: cohort, 0: peer): the cohort's and the peers' relative change and the DiD."""
    before_num, before_den, after_num, after_den = sums
    with np.errstate(invalid="ignore", divide="ignore"):
        cohort = (member @ after_num / (member @ after_den)) / (member @ before_num / (member @ before_den))
        rest = 1.0 - member
        peers = (rest @ after_num / (rest @ after_den)) / (rest @ before_num / (rest @ before_den))
        return cohort - 1.0, peers - 1.0, cohort / peers - 1.0


def _relabellings(n_pool: int, k: int, count: int, seed) -> tuple[np.ndarray, bool]:
    """Cohort memberships (R, n_pool) of k nodes and whether they are all of them: every one when there are at most
    ``count`` (the observed one among them: an exact p), else ``count`` at random (the caller counts the observed one
    on top, ``(1 + extreme) / (1 + count)``)."""
    total = math.comb(n_pool, k)
    if total <= count:
        member = np.zeros((total, n_pool))
        for row, chosen in enumerate(itertools.combinations(range(n_pool), k)):
            member[row, list(chosen)] = 1.0
        return member, True
    rng = np.random.default_rng(seed)
    order = rng.random((count, n_pool)).argsort(axis=1)
    member = np.zeros((count, n_pool))
    np.put_along_axis(member, order[:, :k], 1.0, axis=1)
    return member, False


def canary_tests(
    rollouts: list[Rollout],
    dates: list[date],
    node_series: dict[str, dict[str, tuple[np.ndarray, np.ndarray]]],
    cluster_nodes: dict[str, list[str]],
    node_changes: pd.DataFrame,
    *,
    n_permutations: int = 999,
    confidence: float = 0.95,
    max_pvalue: float = 0.01,
    seed: int = 0,
    node_software: pd.DataFrame | None = None,
) -> list[dict]:
    """One result per rollout and metric of ``node_series`` (metric -> node -> (numerators, denominators) on
    ``dates``), with the estimate, interval and randomization p (module docstring); the call is ``canary_calls``'s.
    ``node_changes``: every dimension change (node, changed_at), for the windows and the peers; ``node_software``
    (node, valid_from_at and the dimensions), when given, keeps as peers only the nodes that ran the cohort's stack
    before the change (``stacks_before``)."""
    node_changes = node_changes.assign(changed_at=pd.to_datetime(node_changes["changed_at"], utc=True))
    if node_software is not None:
        node_software = node_software.assign(valid_from_at=pd.to_datetime(node_software["valid_from_at"], utc=True))
    results = []
    for rollout in rollouts:
        before_start, before_stop, after_start, after_stop = _windows(rollout, dates, node_changes)
        span_from = pd.Timestamp(dates[before_start], tz="UTC") if dates else None
        span_to = pd.Timestamp(dates[after_stop - 1], tz="UTC") + timedelta(days=1) if after_stop > 0 else None
        touched = set()
        if span_from is not None and span_to is not None:
            inside = node_changes[(node_changes["changed_at"] >= span_from) & (node_changes["changed_at"] < span_to)]
            touched = set(inside["node"].astype(str))
        stacks = stacks_before(node_software, rollout.first_at) if node_software is not None else {}
        cohort_stack = _modal([stacks[node] for node in rollout.nodes if node in stacks])
        for metric, series in node_series.items():
            base = {
                "cluster": rollout.cluster,
                "changes": rollout.label,
                "first_changed_at": rollout.first_at,
                "last_changed_at": rollout.last_at,
                "metric": metric,
                "cohort_entity": cohort_entity(rollout.nodes),
                "n_nodes": len(rollout.nodes),
                "before_start_date": dates[before_start] if before_start < before_stop else None,
                "before_end_date": dates[before_stop - 1] if before_start < before_stop else None,
                "after_start_date": dates[after_start] if after_start < after_stop else None,
                "after_end_date": dates[after_stop - 1] if after_start < after_stop else None,
            }
            cohort = [node for node in rollout.nodes if node in series]
            peers = [
                node
                for node in cluster_nodes.get(rollout.cluster, [])
                if node not in rollout.nodes
                and node not in touched
                and node in series
                and (cohort_stack is None or stacks.get(node) == cohort_stack)
            ]
            base["n_peers"] = len(peers)
            reason = _untestable(rollout, cluster_nodes, cohort, peers, max_pvalue)
            if reason is None:
                result = _test(
                    cohort,
                    peers,
                    series,
                    (before_start, before_stop, after_start, after_stop),
                    n_permutations,
                    confidence,
                    [seed, len(results)],
                )
                reason = result.pop("reason", None)
                base |= result
            if reason is not None:
                base |= {"verdict": "not testable", "reason": reason}
            results.append(base)
    return results


def stacks_before(node_software: pd.DataFrame, when: pd.Timestamp) -> dict[str, tuple]:
    """Each node's configuration (``SOFTWARE_DIMENSIONS`` values, as text) just before ``when``: its latest
    node_software row from before that instant (``valid_from_at`` as UTC timestamps)."""
    if node_software is None or node_software.empty:
        return {}
    frame = node_software[node_software["valid_from_at"] < when].sort_values(["node", "valid_from_at"])
    dimensions = [dimension for dimension in SOFTWARE_DIMENSIONS if dimension in frame.columns]
    latest = frame.groupby("node").tail(1)
    return {
        str(row["node"]): tuple(_version_text(row[dimension]) for dimension in dimensions)
        for row in latest.to_dict("records")
    }


def _modal(stacks: list[tuple]) -> tuple | None:
    """The most common stack (ties: the first in sorted order); None for none."""
    counts = Counter(stacks)
    return min(counts, key=lambda stack: (-counts[stack], stack)) if counts else None


def _untestable(
    rollout: Rollout, cluster_nodes: dict[str, list[str]], cohort: list[str], peers: list[str], max_pvalue: float
) -> str | None:
    if set(rollout.nodes) >= set(cluster_nodes.get(rollout.cluster, [])):
        return "the whole cluster took it: no untouched node to compare with (the cluster's own series is the test)"
    if len(cohort) < MIN_NODES:
        return f"{len(cohort)} node(s) with the metric took it; a single node is its own series' test"
    if len(peers) < MIN_PEERS:
        return f"{len(peers)} untouched peers (at least {MIN_PEERS} needed)"
    relabellings = math.comb(len(cohort) + len(peers), len(cohort))
    if 1.0 / relabellings > max_pvalue:
        return f"{relabellings} relabellings of {len(cohort)} among {len(cohort) + len(peers)} nodes: no p under {max_pvalue}"
    return None


def _test(
    cohort: list[str],
    peers: list[str],
    series: dict[str, tuple[np.ndarray, np.ndarray]],
    windows: tuple[int, int, int, int],
    n_permutations: int,
    confidence: float,
    seed,
) -> dict:
    before_start, before_stop, after_start, after_stop = windows
    pool = cohort + peers
    numerators = np.vstack([series[node][0] for node in pool])
    denominators = np.vstack([series[node][1] for node in pool])
    known = np.isfinite(numerators) & np.isfinite(denominators) & (denominators > 0)
    numerators, denominators = np.where(known, numerators, 0.0), np.where(known, denominators, 0.0)
    k = len(cohort)
    daily = (
        numerators[:k].sum(axis=0),
        denominators[:k].sum(axis=0),
        numerators[k:].sum(axis=0),
        denominators[k:].sum(axis=0),
    )
    days_known = (daily[1] > 0) & (daily[3] > 0)
    n_before = int(days_known[before_start:before_stop].sum())
    n_after = int(days_known[after_start:after_stop].sum())
    if n_before < MIN_DAYS or n_after < MIN_DAYS:
        return {"n_before": n_before, "n_after": n_after, "reason": f"{n_before} known days before, {n_after} after"}
    total = math.comb(len(pool), k)
    mask = days_known.astype(float)
    sums = tuple(
        part[:, lo:hi] @ mask[lo:hi]
        for part, (lo, hi) in (
            (numerators, (before_start, before_stop)),
            (denominators, (before_start, before_stop)),
            (numerators, (after_start, after_stop)),
            (denominators, (after_start, after_stop)),
        )
    )
    observed = np.zeros((1, len(pool)))
    observed[0, :k] = 1.0
    cohort_change, peer_change, did = (float(value[0]) for value in _pooled_did(observed, sums))
    member, exact = _relabellings(len(pool), k, n_permutations, seed)
    null = _pooled_did(member, sums)[2]
    null = null[np.isfinite(null)]
    extreme = int(np.sum(np.abs(null) >= abs(did) * (1 - 1e-12)))
    # exact: the observed labelling is among the enumerated ones; random: it is added to the draws
    p_value = extreme / null.size if exact else (1 + extreme) / (1 + null.size)
    days = np.r_[before_start:before_stop, after_start:after_stop]  # the part-way days between them left out
    _, interval = did_estimate(
        (daily[0][days], daily[1][days]),
        (daily[2][days], daily[3][days]),
        before_stop - before_start,
        N_BOOTSTRAP,
        [*seed, 1],
        confidence,
    )
    low, high = interval or (math.nan, math.nan)
    cohort_num0, cohort_den0, cohort_num1, cohort_den1 = (float(part[:k].sum()) for part in sums)
    peer_num0, peer_den0, peer_num1, peer_den1 = (float(part[k:].sum()) for part in sums)
    return {
        "n_before": n_before,
        "n_after": n_after,
        "cohort_before_level": cohort_num0 / cohort_den0,
        "cohort_after_level": cohort_num1 / cohort_den1,
        "cohort_before_numerator": cohort_num0,
        "cohort_before_denominator": cohort_den0,
        "cohort_after_numerator": cohort_num1,
        "cohort_after_denominator": cohort_den1,
        "peer_before_level": peer_num0 / peer_den0,
        "peer_after_level": peer_num1 / peer_den1,
        "peer_before_numerator": peer_num0,
        "peer_before_denominator": peer_den0,
        "peer_after_numerator": peer_num1,
        "peer_after_denominator": peer_den1,
        "cohort_change": cohort_change,
        "peer_change": peer_change,
        "did_effect": did,
        "ci_low": low,
        "ci_high": high,
        "p_value": float(p_value),
        "relabellings": f"{'all ' if exact else ''}{member.shape[0]} of {total}",
    }


def canary_calls(
    results: list[dict],
    directions: dict[str, int],
    max_pvalue: float,
    max_qvalue: float | None,
    min_effect,
) -> list[dict]:
    """``results`` with ``q_value`` (Benjamini-Hochberg across the tested ones) and ``verdict``/``reason`` set;
    ``min_effect(metric)`` is the cohort's minimum |DiD|, ``directions`` the metrics' (+1: higher is better)."""
    tested = [result for result in results if result.get("verdict") != "not testable"]
    q_values = benjamini_hochberg([result["p_value"] for result in tested]) if tested else []
    for result, q in zip(tested, q_values):
        result["q_value"] = float(q)
        effect, floor = result["did_effect"], min_effect(result["metric"])
        significant = result["p_value"] <= max_pvalue and (max_qvalue is None or q <= max_qvalue)
        if significant and abs(effect) >= floor:
            worse = effect * directions.get(result["metric"], 1) < 0
            result["verdict"] = "regression" if worse else "improvement"
            result["reason"] = None
        else:
            result["verdict"] = "no effect shown"
            result["reason"] = (
                f"p {result['p_value']:.3g}, q {q:.3g}, |effect| {abs(effect):.1%} against the minimum {floor:.0%}"
                if math.isfinite(effect)
                else "no estimate"
            )
    for result in results:
        result["canary_id"] = "|".join(
            [result["cluster"], result["changes"], str(result["first_changed_at"]), result["metric"]]
        )
    return results


def canary_markdown(canaries: pd.DataFrame | None) -> str:
    """The tested canaries as a markdown table (the `regressions` asset's metadata), calls first."""
    if canaries is None or canaries.empty:
        return "no rollout to part of a cluster"
    tested = canaries[canaries["verdict"] != "not testable"]
    untestable = len(canaries) - len(tested)
    lines = [
        "| cluster | change | nodes vs peers | metric | from | effect vs peers [95% CI] | p | q | verdict |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    order = tested.assign(_call=~tested["verdict"].isin(["regression", "improvement"])).sort_values(
        ["_call", "after_start_date", "cluster", "metric"]
    )
    for row in order.itertuples(index=False):
        lines.append(
            f"| {row.cluster} | {row.changes} | {row.n_nodes} vs {row.n_peers} | {row.metric} | {row.after_start_date} "
            f"| {row.did_effect:+.1%} [{row.ci_low:+.1%}, {row.ci_high:+.1%}] | {row.p_value:.3g} | {row.q_value:.3g} "
            f"| {row.verdict} |"
        )
    if untestable:
        lines.append(f"\n{untestable} rollout-metric pairs not testable (reasons in `rollout_canaries`)")
    return "\n".join(lines)
