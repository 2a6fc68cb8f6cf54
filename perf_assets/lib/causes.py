"""Cause candidates of a change: which node dimension changed on the entity's nodes and not on its peers.

For a change of a metric at (grain, entity) on a day, a candidate is a (dimension, new value) of the
node_software stack (driver, cuda, nccl, torch, image, firmware, power_limit_w), of the node's rack
(from the inventory's validity intervals), or the node itself (for a node- or GPU-grain change), such that

* some nodes of the entity took that value within ± 1 day of the change point (``CAUSE_WINDOW``), and
* no node outside the entity took it in the same window (a change present on peers too is not a
  candidate: the peers are the counterfactual), and
* at least one node kept its value through the window (else there is no counterfactual).

Each candidate is ranked by a difference in differences: the change of the affected units' pooled
series (Σnumerator/Σdenominator over the regression's before and after windows) minus, in log terms,
the change of the pooled series of peer units that did not take the value, reported as a relative effect
``(A1/A0)/(P1/P0) - 1`` with a 95 % percentile interval from a bootstrap over days (days resampled
with replacement within the before and within the after window, the same days for both arms).

A cluster change that one node carries (``carrying_node``: its own rate moved the cluster's ratio by at least half
the change, from the row's mix-vs-rate split over nodes) also has that node as a candidate, its peers the cluster's
other nodes.

Units are the finest grain the metric tree holds for the metric: nodes (grain ``node``) when present,
else clusters; a cluster unit is affected when it holds an affected node, a peer when it holds no node
that took the value. So with today's cluster/fleet-only tree the estimate compares clusters, and every
candidate of a cluster change gets the same estimate; ties rank by the share of the entity's nodes that
changed, then by name. The ranking key is the estimate in the direction of the change (the candidate
whose counterfactual gap is largest the same way as the change comes first); a candidate with no
estimate (no series for its units) ranks last, with ``did_effect: null`` and a ``reason``.

Dimensions that changed together on the same nodes get the same estimate: the data cannot separate them, and
each such candidate says so (``tied_with``). Their order is then by specificity (``TIE_ORDER``), not by name: the
CUDA version a node reports beside its driver is the driver's (nvidia-smi's "CUDA Version" is the newest CUDA the
driver supports), so a driver and a CUDA change together name the driver; an image carries NCCL, PyTorch and the
CUDA runtime, so an image that changed together with a component it carries names that component, the image being
the vehicle. A node-level setting (firmware, power limit) ranks before the software stack.
"""

from __future__ import annotations

import hashlib
import json
import math
from datetime import date, datetime, timedelta, timezone

import numpy as np
import pandas as pd

from perf_assets.lib.topology import Topology

SOFTWARE_DIMENSIONS = ("driver", "cuda", "nccl", "torch", "image", "firmware", "power_limit_w")
CANDIDATE_DIMENSIONS = (*SOFTWARE_DIMENSIONS, "rack", "node")
CAUSE_WINDOW = timedelta(days=1)
N_BOOTSTRAP = 400
CHANGE_COLUMNS = ["node", "changed_at", "dimension", "from_version", "to_version"]
# the order of candidates whose estimates tie (changed together on the same units), most specific first (docstring)
TIE_ORDER = ("driver", "firmware", "power_limit_w", "nccl", "torch", "cuda", "image", "rack", "node")


def _version_text(value: object) -> str:
    if isinstance(value, float) and value.is_integer():
        return str(int(value))  # power_limit_w 700.0 -> "700", as labels write it
    return str(value)


def dimension_changes(node_software: pd.DataFrame, inventory: pd.DataFrame | None = None) -> pd.DataFrame:
    """One row per node and dimension that changed value: node_software components, and the rack
    (inventory rows with `valid_from`) when a node's rack changes."""
    rows = []
    if node_software is not None and not node_software.empty:
        ordered = node_software.sort_values(["node", "valid_from_at"])
        for node, versions in ordered.groupby("node"):
            previous = None
            for version in versions.itertuples(index=False):
                if previous is not None:
                    for dimension in SOFTWARE_DIMENSIONS:
                        if not hasattr(version, dimension):
                            continue
                        old, new = (
                            _version_text(getattr(previous, dimension)),
                            _version_text(getattr(version, dimension)),
                        )
                        if old != new:
                            rows.append((node, version.valid_from_at, dimension, old, new))
                previous = version
    since = next((c for c in ("valid_from_at", "valid_from") if inventory is not None and c in inventory.columns), None)
    if since and not inventory.empty and "rack" in inventory.columns:
        racks = inventory[["node", "rack", since]].rename(columns={since: "valid_from"})
        racks = racks.drop_duplicates().sort_values(["node", "valid_from"])
        for node, spans in racks.groupby("node"):
            previous = None
            for span in spans.itertuples(index=False):
                if previous is not None and str(previous.rack) != str(span.rack):
                    rows.append((node, span.valid_from, "rack", str(previous.rack), str(span.rack)))
                previous = span
    frame = pd.DataFrame(rows, columns=CHANGE_COLUMNS)
    if not frame.empty:
        frame["changed_at"] = pd.to_datetime(frame["changed_at"], utc=True)
    return frame


def _day_bounds(change_day: date) -> tuple[pd.Timestamp, pd.Timestamp]:
    start = datetime.combine(change_day, datetime.min.time(), tzinfo=timezone.utc)
    return pd.Timestamp(start - CAUSE_WINDOW), pd.Timestamp(start + CAUSE_WINDOW + timedelta(days=1))


def _unit_series(
    metric_tree: pd.DataFrame, metric: str, dates: list[date]
) -> tuple[str | None, dict[str, tuple[np.ndarray, np.ndarray]]]:
    """Per unit (node, else cluster): numerator and denominator arrays on `dates` (NaN where missing)."""
    return UnitSeries(metric_tree).on(metric, dates)


class UnitSeries:
    """`_unit_series` of one metric tree for many changes: each metric's units are grouped once into a unit x day
    matrix, and each change takes its days from it (grouping the whole tree again per change was 85 % of
    `detect_regressions` on fleet-1k at 30 days)."""

    def __init__(self, metric_tree: pd.DataFrame | None):
        self._tree = metric_tree
        self._by_metric: dict[str, tuple[str | None, list[str], dict[date, int], np.ndarray, np.ndarray]] = {}
        self._rows_of: dict[str, np.ndarray] | None = None

    def on(self, metric: str, dates: list[date]) -> tuple[str | None, dict[str, tuple[np.ndarray, np.ndarray]]]:
        if self._tree is None or self._tree.empty:
            return None, {}
        if metric not in self._by_metric:
            self._by_metric[metric] = self._matrix(metric)
        grain, units, column_of, numerators, denominators = self._by_metric[metric]
        if grain is None:
            return None, {}
        columns = np.array([column_of.get(day, -1) for day in dates], dtype=np.int64)
        known = columns >= 0
        series = {}
        for row, unit in enumerate(units):
            numerator = np.full(len(dates), np.nan)
            denominator = np.full(len(dates), np.nan)
            numerator[known] = numerators[row, columns[known]]
            denominator[known] = denominators[row, columns[known]]
            series[unit] = (numerator, denominator)
        return grain, series

    def _matrix(self, metric: str):
        if self._rows_of is None:  # row positions per tree node, in the tree's order (one pass over node_id)
            codes, names = pd.factorize(self._tree["node_id"], use_na_sentinel=True)
            order = np.argsort(codes, kind="stable")
            bounds = np.searchsorted(codes[order], np.arange(len(names) + 1))
            self._rows_of = {str(name): order[bounds[i] : bounds[i + 1]] for i, name in enumerate(names)}
        rows = self._tree.iloc[self._rows_of.get(metric, np.empty(0, dtype=np.int64))]
        for grain in ("node", "cluster"):
            frame = rows[rows["grain"] == grain]
            if frame.empty:
                continue
            frame = frame.assign(metric_date=pd.to_datetime(frame["metric_date"]).dt.date)
            # as the per-unit groupby: a day present with unknown values sums to 0, a day absent is NaN
            by_day = frame.groupby(["entity_id", "metric_date"])[["numerator", "denominator"]].sum()
            units = by_day.index.get_level_values(0)
            days = by_day.index.get_level_values(1)
            unit_names, unit_rows = np.unique(units.astype(str), return_inverse=True)
            grid = sorted(set(days))
            column_of = {day: column for column, day in enumerate(grid)}
            columns = np.fromiter((column_of[day] for day in days), dtype=np.int64, count=len(days))
            numerators = np.full((len(unit_names), len(grid)), np.nan)
            denominators = np.full((len(unit_names), len(grid)), np.nan)
            numerators[unit_rows, columns] = by_day["numerator"].to_numpy(float)
            denominators[unit_rows, columns] = by_day["denominator"].to_numpy(float)
            return grain, [str(unit) for unit in unit_names], column_of, numerators, denominators
        return None, [], {}, np.empty((0, 0)), np.empty((0, 0))


def _pooled_days(series: list[tuple[np.ndarray, np.ndarray]]) -> tuple[np.ndarray, np.ndarray]:
    numerators = np.nansum([s[0] for s in series], axis=0)
    denominators = np.nansum([s[1] for s in series], axis=0)
    return numerators, denominators


def did_estimate(
    affected: tuple[np.ndarray, np.ndarray],
    peers: tuple[np.ndarray, np.ndarray],
    split: int,
    n_bootstrap: int = N_BOOTSTRAP,
    seed=0,
    confidence: float = 0.95,
) -> tuple[float | None, list[float] | None]:
    """(A1/A0)/(P1/P0) - 1 over days [0, split) vs [split, n), with a bootstrap-over-days percentile interval at
    ``confidence`` (days resampled within each side, the same days for both arms); ``seed``: numpy's seed."""
    an, ad = affected
    pn, pd_ = peers
    valid = np.isfinite(an) & np.isfinite(ad) & np.isfinite(pn) & np.isfinite(pd_) & (ad > 0) & (pd_ > 0)
    before = np.flatnonzero(valid[:split])
    after = np.flatnonzero(valid[split:]) + split
    if len(before) < 2 or len(after) < 2:
        return None, None

    def ratio(b: np.ndarray, a: np.ndarray) -> np.ndarray:
        # b, a: index arrays of shape (k, m); pooled Σ/Σ per resample
        a0 = an[b].sum(-1) / ad[b].sum(-1)
        a1 = an[a].sum(-1) / ad[a].sum(-1)
        p0 = pn[b].sum(-1) / pd_[b].sum(-1)
        p1 = pn[a].sum(-1) / pd_[a].sum(-1)
        with np.errstate(divide="ignore", invalid="ignore"):
            return (a1 / a0) / (p1 / p0) - 1

    point = float(ratio(before[None, :], after[None, :])[0])
    if not math.isfinite(point):
        return None, None
    rng = np.random.default_rng(seed)
    b = rng.choice(before, size=(n_bootstrap, len(before)), replace=True)
    a = rng.choice(after, size=(n_bootstrap, len(after)), replace=True)
    draws = ratio(b, a)
    draws = draws[np.isfinite(draws)]
    if len(draws) < n_bootstrap // 2:
        return point, None
    tail = round((1.0 - confidence) / 2.0, 12)  # 0.025 exactly for 95 %, not 0.025000000000000022
    return point, [float(np.quantile(draws, tail)), float(np.quantile(draws, 1.0 - tail))]


def cause_candidates(
    row: dict,
    changes: pd.DataFrame,
    topology: Topology,
    metric_tree: pd.DataFrame | None = None,
    n_bootstrap: int = N_BOOTSTRAP,
    unit_series: UnitSeries | None = None,
) -> list[dict]:
    """Ranked cause candidates of one regression row (needs grain, entity_id, metric, change_date,
    before_start_date, after_end_date, relative_effect). See the module docstring for the rules.

    ``unit_series``: the metric tree's units grouped once (`UnitSeries(metric_tree)`), for many rows."""
    grain, entity, metric = str(row["grain"]), str(row["entity_id"]), str(row["metric"])
    change_day = pd.Timestamp(row["change_date"]).date()
    first = pd.Timestamp(row.get("before_start_date") or change_day - timedelta(days=7)).date()
    last = pd.Timestamp(row.get("after_end_date") or change_day + timedelta(days=7)).date()
    dates = [first + timedelta(days=offset) for offset in range((last - first).days + 1)]
    split = (change_day - first).days
    entity_nodes = topology.nodes_of(grain, entity)
    all_nodes = set(topology.nodes) | entity_nodes
    if not entity_nodes:
        return []
    proposals: list[dict] = []
    if changes is not None and not changes.empty:
        low, high = _day_bounds(change_day)
        at = pd.to_datetime(changes["changed_at"], utc=True)
        near = changes[(at >= low) & (at < high)]
        for (dimension, old, new), part in near.groupby(["dimension", "from_version", "to_version"]):
            moved = set(part["node"].astype(str))
            affected = moved & entity_nodes
            if not affected or moved - entity_nodes:
                continue  # not on the entity, or on its peers too
            changed_dimension = set(near.loc[near["dimension"] == dimension, "node"].astype(str))
            peers = all_nodes - changed_dimension
            if not peers:
                continue
            proposals.append(
                {"dimension": dimension, "value": new, "from": old, "to": new, "affected": affected, "peers": peers}
            )
    carrier = carrying_node(row)
    if carrier is not None and carrier in entity_nodes and len(entity_nodes) > 1:
        proposals.append(
            {
                "dimension": "node",
                "value": carrier,
                "from": None,
                "to": None,
                "affected": {carrier},
                "peers": entity_nodes - {carrier},
            }
        )
    if grain in ("node", "gpu"):
        (node,) = tuple(entity_nodes)
        cluster = topology.node_cluster.get(node)
        peers = {other for other, owner in topology.node_cluster.items() if owner == cluster} - {node}
        if peers:
            proposals.append(
                {"dimension": "node", "value": node, "from": None, "to": None, "affected": {node}, "peers": peers}
            )
    if not proposals:
        return []
    unit_grain, series = (unit_series or UnitSeries(metric_tree)).on(metric, dates)
    seed = int(hashlib.sha256(f"{grain}|{entity}|{metric}|{change_day}".encode()).hexdigest()[:8], 16)
    out = []
    for proposal in proposals:
        if unit_grain == "node":
            affected_units = {n for n in proposal["affected"] if n in series}
            peer_units = {n for n in proposal["peers"] if n in series}
        elif unit_grain == "cluster":
            changed_clusters = {topology.node_cluster.get(n) for n in all_nodes - proposal["peers"]}
            affected_units = {topology.node_cluster.get(n) for n in proposal["affected"]} & set(series)
            peer_units = {topology.node_cluster.get(n) for n in proposal["peers"]} - changed_clusters
            peer_units &= set(series)
        else:
            affected_units, peer_units = set(), set()
        effect, interval, reason = None, None, None
        if affected_units and peer_units:
            effect, interval = did_estimate(
                _pooled_days([series[u] for u in sorted(affected_units)]),
                _pooled_days([series[u] for u in sorted(peer_units)]),
                split,
                n_bootstrap,
                seed,
            )
            if effect is None:
                reason = "too few days with data in the before or after window"
        else:
            reason = f"no {metric} series for the affected units or for peers that did not change"
        candidate = {
            "dimension": proposal["dimension"],
            "value": proposal["value"],
            "from": proposal["from"],
            "to": proposal["to"],
            "nodes": sorted(proposal["affected"]),
            "share_of_entity_nodes": len(proposal["affected"]) / len(entity_nodes),
            "did_effect": effect,
            "did_ci": interval,
            "did_units": unit_grain,
            "peer_units": len(peer_units),
        }
        if reason:
            candidate["reason"] = reason
        out.append(candidate)
    sign = -1.0 if (row.get("relative_effect") or 0) < 0 else 1.0
    out.sort(
        key=lambda c: (
            c["did_effect"] is None,
            -(sign * c["did_effect"]) if c["did_effect"] is not None else 0.0,
            -c["share_of_entity_nodes"],
            TIE_ORDER.index(c["dimension"]) if c["dimension"] in TIE_ORDER else len(TIE_ORDER),
            c["dimension"],
            str(c["value"]),
        )
    )
    for candidate in out:
        tied = [
            f"{other['dimension']}={other['value']}"
            for other in out
            if other is not candidate
            and other["did_effect"] is not None
            and other["did_effect"] == candidate["did_effect"]
            and other["nodes"] == candidate["nodes"]
        ]
        if tied:
            candidate["tied_with"] = tied
    return out


CARRIER_SHARE = 0.5  # a node whose own rate carries at least this share of its cluster's change is a candidate


def carrying_node(row: dict) -> str | None:
    """The node that carries a cluster change, or None: the node segment of the row's mix-vs-rate split
    (`segments`, detection.py) whose own rate moved the cluster's ratio the same way by at least ``CARRIER_SHARE``
    of the change. Such a cluster change is one node's (`incidents` seeds 1 and 2: h200's HBM probe fell 3.4 %,
    all of it h200-n04's decay, and the only candidates were a firmware rollout on the cluster that day)."""
    if str(row.get("grain")) != "cluster" or row.get("segment_type") != "node" or not row.get("segments"):
        return None
    effect = row.get("relative_effect")
    if effect is None or not math.isfinite(float(effect)) or float(effect) == 0:
        return None
    segments = json.loads(row["segments"]) if isinstance(row["segments"], str) else row["segments"]
    carried = [
        (float(seg["rate_effect"]) / float(effect), str(seg["segment"]))
        for seg in segments or []
        if seg.get("rate_effect") is not None and math.isfinite(float(seg["rate_effect"]))
    ]
    share, node = max(carried, default=(0.0, None))
    return node if share >= CARRIER_SHARE else None


def rank_causes(
    regressions: pd.DataFrame,
    changes: pd.DataFrame,
    topology: Topology,
    metric_tree: pd.DataFrame | None = None,
    n_bootstrap: int = N_BOOTSTRAP,
) -> pd.DataFrame:
    """The three `regressions` columns: cause_candidates (JSON list), top_cause_dimension, top_cause_value."""
    columns = ["cause_candidates", "top_cause_dimension", "top_cause_value"]
    if regressions.empty:
        return pd.DataFrame(columns=columns, index=regressions.index)
    values = []
    unit_series = UnitSeries(metric_tree)
    for row in regressions.to_dict("records"):
        candidates = cause_candidates(row, changes, topology, metric_tree, n_bootstrap, unit_series)
        top = candidates[0] if candidates else None
        values.append(
            (
                json.dumps(candidates, default=str),
                top["dimension"] if top else None,
                None if top is None else str(top["value"]),
            )
        )
    return pd.DataFrame(values, columns=columns, index=regressions.index)
