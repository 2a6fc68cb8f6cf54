"""From the metric tree to regressions: series -> change points -> evidence and attribution.

Plain functions over DataFrames; the Dagster asset reads the warehouse and writes the result.
Every row carries its evidence: pooled levels with numerators and denominators, the relative
effect with its confidence interval, the p-value and the test, which spine factor moved (an LMDI
split of the change in log goodput over the same windows), the software rollouts that coincide,
and the same change measured on peers that did not roll out (difference in differences).
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import math
from dataclasses import dataclass
from datetime import date, datetime, timedelta, timezone

import numpy as np
import pandas as pd

from perf_assets.lib.bursts import scan_burst
from perf_assets.lib.causes import dimension_changes, rank_causes
from perf_assets.lib.changepoint import (
    ChangePoint,
    DetectorConfig,
    benjamini_hochberg,
    detect,
    measure_split,
    measured_at,
)
from perf_assets.lib.fault_rates import excess_rate
from perf_assets.lib.grouping import FACTOR_OF_METRIC
from perf_assets.lib.incident_joins import GROUP_WINDOW_DAYS
from perf_assets.lib.knock_on import (
    MIN_ROLLOUT_NODES,
    down_time_knock_ons,
    job_peer_knock_ons,
    maintenance_knock_ons,
    no_demand_knock_ons,
    pace_companions,
    power_alone,
    rollout_wave,
)
from perf_assets.lib.mix_partner import AllocationChange, describe_partner, partner_tests
from perf_assets.lib.mix_rate import mix_rate_split, work_weighted_split
from perf_assets.lib.provisional import provisional_days, settled_verdicts
from perf_assets.lib.ramp import fit_ramp
from perf_assets.lib.rollout_canary import (
    CANARY_COLUMNS,
    CANARY_METRICS,
    COHORT_GRAIN,
    canary_calls,
    canary_tests,
    cluster_rollouts,
)
from perf_assets.lib.topology import Topology, cohort_nodes

SPINE_FACTORS = ("availability", "allocation", "runtime_goodput", "program_goodput")
DETECTED_NODES = ("goodput", *SPINE_FACTORS)
# Companion nodes (metric_tree_nodes kind 'companion', outside the identity) detected at every grain
# that has them (gpu, node, cluster, fleet); their direction comes from the seed. Not dcgm_gpu_util
# nor dcgm_tensor_active: their means over all samples move with allocation (idle samples count), and
# on `incidents` seed 1 they gave 50 of the 77 unexplained changes at the GPU grain.
DETECTED_COMPANIONS = (
    "clock_ratio",
    "power_ratio",
    "thermal_ok",
    "probe_gemm_ratio",
    "probe_hbm_bw_ratio",
)
# Badput leaves detected per cluster, judged in share points of capacity (at least the grain's minimum effect, as an
# absolute share; ``detect_regressions``): a checkpoint that takes four times as long to save (a storage slowdown) moves its cluster's
# checkpoint_save_share from 0.45 % to 1.8 % for the days it lasts, a clean step in a quiet leaf, while the runtime
# goodput it costs (-1.4 %) is lost in that factor's day-to-day noise (fleet-1k seed 2: not detected). The other
# leaves of badput (wasted progress, restarts) follow the faults that availability already shows.
DETECTED_LEAVES = ("checkpoint_save_share",)
# Which nodes are detected at which grain (metric_tree_daily.grain).
DETECTED_BY_GRAIN = {
    "fleet": DETECTED_NODES + DETECTED_COMPANIONS,
    "cluster": DETECTED_NODES + DETECTED_COMPANIONS + DETECTED_LEAVES,
    "node": DETECTED_NODES + DETECTED_COMPANIONS,
    "gpu": DETECTED_COMPANIONS,
}
# Minimum |relative effect| per grain (issue 7: >= 3 % at node level, >= 1 % at cluster or fleet level; a rollout's
# cohort, rollout_canary.py, is a set of a cluster's nodes: between the two);
# DetectorConfig.min_relative_effects entries "grain/metric" or "metric" take precedence.
GRAIN_MIN_EFFECTS = {"fleet": 0.01, "cluster": 0.01, COHORT_GRAIN: 0.02, "node": 0.03, "gpu": 0.03}
SOFTWARE_COMPONENTS = ("driver", "cuda", "nccl", "torch", "image", "firmware", "power_limit_w")
ROLLOUT_WINDOW = timedelta(days=1)
# A node's change split this many days from a configuration change of its own node, farther than ROLLOUT_WINDOW, is
# measured again at that change (``rollout_anchored``); not allocation or availability (a rollout changes how fast
# work runs, not whether a node is up or given work).
ANCHOR_DAYS = 4  # the earliest split a window allows is its fourth day (min_segment 3): seed 112's 10-04, torch's 10-08
# ... when a step there fits the change's windows about as well as the scan's split: the Gaussian log-likelihood of the
# scan's split over the rollout's, (n/2) log(SS_within at the rollout / SS_within at the split), at most this
ANCHOR_MAX_LOG_LIKELIHOOD = 2.0
ANCHOR_GRAINS = ("node", "gpu")
# Series the Student scan reads Huber-clipped (changepoint.DetectorConfig.clipped_metrics): a cluster's daily
# allocation is heavy-tailed by nature (a day when a large job pends drains it: fleet-1k's clusters have days at
# 0.63-0.75 among days at 0.85-0.93), and the very days a mix shift or a drain moves (h100-west at 0.16-0.69 for six
# days on seed 124) inflate the t scan's variance so that it cannot pass p <= 0.01 (Student p 0.012, Huber 0.001)
CLIPPED_SERIES = ("cluster/allocation",)
UNANCHORED_METRICS = ("allocation", "availability")

# The `regressions` table: name -> DuckDB type. A fixed schema, also when nothing was found.
REGRESSION_SCHEMA = {
    "regression_id": "varchar",
    "metric": "varchar",
    "grain": "varchar",
    "entity_id": "varchar",
    "change_date": "date",
    "change_kind": "varchar",  # regression | improvement (by the metric's direction)
    "before_start_date": "date",
    "after_end_date": "date",
    "n_before": "integer",
    "n_after": "integer",
    "before_level": "double",
    "after_level": "double",
    "before_numerator": "double",
    "before_denominator": "double",
    "after_numerator": "double",
    "after_denominator": "double",
    "relative_effect": "double",
    "ci_low": "double",
    "ci_high": "double",
    "p_value": "double",
    "statistic": "double",
    "test": "varchar",  # the scan's test; "; dated to its node's ..." when rollout_anchored moved the split
    "q_value": "double",  # Benjamini-Hochberg q of p_value across the series of the run
    "verdict": "varchar",  # confirmed (n_after >= confirm_points) | provisional
    "shape": "varchar",  # step | drift (a line fits the segment around the change better)
    "welch_ci_low": "double",  # Welch interval of the mean log difference, as a relative effect
    "welch_ci_high": "double",
    "factor_log_contributions": "varchar",  # JSON: spine factor -> Δln over the same windows
    "top_factor": "varchar",
    "top_factor_share": "double",
    "coinciding_changes": "varchar",  # JSON: rollouts on the entity's nodes within a day
    "peer_relative_effect": "double",
    "did_relative_effect": "double",
    "detected_at": "timestamptz",
    # cause ranking (perf_assets/lib/causes.py): appended columns
    "cause_candidates": "varchar",  # JSON list of {dimension, value, from, to, nodes, did_effect, did_ci, ...}
    "top_cause_dimension": "varchar",
    "top_cause_value": "varchar",
    # mix vs rate over the entity's segments (perf_assets/lib/mix_rate.py): fleet over clusters, cluster over nodes
    "segment_type": "varchar",  # cluster | node; NULL where the entity has no segments of that metric
    "mix_effect": "double",  # relative change of the entity's ratio from its segments' weights moving
    "rate_effect": "double",  # ... from the segments' own ratios moving (mix + rate [+ occupancy] = the pooled change)
    "attribution": "varchar",  # mix | rate | occupancy (the largest in absolute value)
    "segments": "varchar",  # JSON: the largest contributors with weights, rates, numerators and denominators
    # ramp onset (perf_assets/lib/ramp.py): appended columns
    "split_date": "date",  # the split (first day of the new level): the scan's, or its node's rollout day
    # (rollout_anchored, noted in `test`); change_date differs when a ramp fits better
    "ramp_end_date": "date",  # first day at the after level when a ramp fits better than a step, else NULL
    # job co-membership (read by grouping.py): appended column
    "job_peer_nodes": "varchar",  # JSON list: other nodes in an allocation with the row's node around the change day
    # knock-on effects (perf_assets/lib/knock_on.py): appended column
    "expected_because": "varchar",  # why a known cause explains the change (job peers, down time); NULL: nothing
    # work-weighted mix vs rate (mix_rate.work_weighted_split, metric_tree.md §6): appended columns
    "mix_basis": "varchar",  # what the split's weights are shares of: allocated_pfs for goodput, else the denominator
    "occupancy_effect": "double",  # goodput only: the part from the share of capacity at work moving; else NULL
    # a cluster allocation change: the fleet's goodput split over its clusters on this row's windows (JSON; FLEET_SPLIT)
    "fleet_split": "varchar",
}
# A ramp replaces the step's day by its onset only on very strong evidence: a BIC difference of at least 30 (10
# is "very strong" for Kass & Raftery 1995, but the BIC assumes independent days, and a node's daily program
# goodput is correlated over the days its multi-day jobs run). Tuned on `incidents` seeds 1-3: the HBM probe
# ramps score 100-160; noisy program_goodput series with two steps (an image stall, then a power cap on job
# peers) scored up to 14 and read as one long ramp whose onset chained separate incidents into one group.
RAMP_MIN_BIC_GAIN = 30.0
JOB_PEER_WINDOW = (timedelta(days=1), timedelta(days=2))  # allocations overlapping [change day - 1, change day + 2)
SEGMENT_GRAIN = {"fleet": "cluster", "cluster": "node"}
# Mix vs rate weights (metric_tree.md §6: the segments' shares of the ratio's denominator, `mix_basis`). A ratio
# over capacity is split by work done instead (mix_rate.work_weighted_split): metric -> (the series whose numerator
# is the segment's work, its name). Installed capacity does not move when work moves between clusters: on
# `incidents` seeds 1-3 the goodput split over installed capacity read mix +0.0 % on every change.
WORK_WEIGHTED = {"goodput": ("allocation", "allocated_pfs")}
# The fleet's goodput over its clusters is split in metric_tree.md §6's lens instead: running goodput per allocated
# GPU-hour, H100-equivalent (weights = the clusters' shares of allocated GPU-seconds, `mix_basis` allocated_gs), with
# occupancy (allocated over installed GPU-seconds) apart, so mix + rate + occupancy = the relative change of the
# fleet's goodput_ref over the row's windows. Own-peak weights (allocated_pfs) read work moving from H100 to A100
# GPU-hours as occupancy lost, since an A100 GPU-hour is worth 312/989 of an H100's peak-FLOP-seconds. Metric ->
# the companion whose denominator values the clusters' capacity at the reference peak (installed_h100_pfs).
REFERENCE_WEIGHTED = {"goodput": "goodput_ref"}
# A mix shift shows as cluster allocation moving opposite ways (incident_joins.mix_shift_sides) while the fleet's
# goodput, whose daily level swings with every cluster's allocation, often moves too little to be detected itself: each
# cluster allocation change therefore carries the fleet goodput's split (§6's lens, as a fleet goodput row's) over its
# own windows, so the incident says whether the fleet lost output to mix, rate or occupancy.
FLEET_SPLIT = ("cluster", "allocation")
# ... and so does a cluster's goodput change whose factor is allocation (`top_factor`), which the scan often finds when
# the allocation series itself, drained unevenly, is no change (fleet-1k seed 126: h100-west's goodput -30.8 % from
# 10-21, allocation Δln -0.22 of its -0.37, while the allocation scan read p 0.056): it stands for the cluster's
# allocation side, with that series' pooled levels over its windows in the split (`allocation_before`, `_after`), and
# the mix-shift partner test starts from it as from a scanned allocation change
ALLOCATION_SIDE_OF = ("cluster", "goodput")
# ... over at most a week either side of the change (within the row's windows), as fct_attribution_mix_rate's periods
# (var attribution_period_days, 7): other clusters' changes weeks away are not this change's rate
FLEET_SPLIT_DAYS = 7
SPLIT_BASIS = {
    "availability": "installed_pfs",
    "allocation": "available_pfs",
    "runtime_goodput": "allocated_pfs",
    "program_goodput": "productive_pfs",
}
REGRESSION_COLUMNS = list(REGRESSION_SCHEMA)


# Short bursts (perf_assets/lib/bursts.py): series -> the spine factor they belong to. Cluster grain only: the
# scheduler strands capacity per cluster, and node-grain shares of a few hours of idle time are heavy-tailed
# (single days of 3-6 % on nodes with no incident), which the burst test's Gaussian noise does not model.
BURST_SERIES = {"idle_fragmented_share": "allocation"}
BURST_GRAINS = ("cluster",)
BURST_DAYS = (2, 2)  # shortest, longest: shorter than min_segment (3), which the scan cannot see; not 1 day


def sparse_test_row(grain: str, entity: str, metric: str, day: date, first_day: date, **fields) -> dict:
    """A regression row of a test outside the change-point scan (bursts, fault rates): its identity, and the
    scan's attribution fields as not assessed (NULL, never zero); ``fields`` carry the test's own evidence."""
    return {
        "regression_id": regression_id(grain, entity, metric, day),
        "metric": metric,
        "grain": grain,
        "entity_id": entity,
        "change_date": day,
        "before_start_date": first_day,
        "factor_log_contributions": "{}",
        "top_factor_share": math.nan,
        "peer_relative_effect": math.nan,
        "did_relative_effect": math.nan,
        "ramp_end_date": None,
        "job_peer_nodes": None,
        **fields,
    }


def burst_rows(metric_tree: pd.DataFrame, config: DetectorConfig, min_effect) -> tuple[list[dict], int]:
    """Regression rows for short bursts of the ``BURST_SERIES`` (absolute effect >= the grain's minimum, in
    share points; Bonferroni p within a series, BH q across them), and the number of series tested."""
    batch = build_series(metric_tree, {grain: tuple(BURST_SERIES) for grain in BURST_GRAINS})
    unsettled = provisional_days(metric_tree)
    settled = np.array([day not in unsettled for day in batch.dates], dtype=bool)
    found = []
    for row, key in enumerate(batch.keys):
        burst = scan_burst(
            batch.numerators[row],
            batch.denominators[row],
            BURST_DAYS[1],
            config.confidence,
            BURST_DAYS[0],
            settled=settled,
        )
        if burst is not None:
            found.append((row, burst))
    if not found:
        return [], len(batch.keys)
    q_values = benjamini_hochberg([burst.p_value for _, burst in found])
    out = []
    for (row, burst), q in zip(found, q_values):
        grain, entity, metric = batch.keys[row]
        accept_q = config.max_qvalue is None or q <= config.max_qvalue
        if not (
            burst.p_value <= config.max_pvalue and accept_q and abs(burst.absolute_effect) >= min_effect(grain, metric)
        ):
            continue
        base = burst.rest_level
        relative = burst.inside_level / base - 1 if base > 0 else math.nan
        worse = burst.absolute_effect * batch.directions[row] < 0
        day = batch.dates[burst.start]
        out.append(
            sparse_test_row(
                grain,
                entity,
                metric,
                day,
                batch.dates[0],
                change_kind="regression" if worse else "improvement",
                after_end_date=batch.dates[burst.stop - 1],
                n_before=burst.n_rest,
                n_after=burst.n_inside,
                before_level=base,
                after_level=burst.inside_level,
                before_numerator=burst.rest_numerator,
                before_denominator=burst.rest_denominator,
                after_numerator=burst.inside_numerator,
                after_denominator=burst.inside_denominator,
                relative_effect=relative,
                ci_low=burst.ci_low / base if base > 0 else math.nan,
                ci_high=burst.ci_high / base if base > 0 else math.nan,
                p_value=burst.p_value,
                statistic=burst.statistic,
                test=f"burst: Cantelli bound of {burst.n_inside} days against the rest, Bonferroni over {burst.intervals}",
                q_value=float(q),
                verdict="confirmed" if burst.stop < len(batch.dates) else "provisional",  # it ended: back to base
                shape="burst",
                welch_ci_low=burst.ci_low / base if base > 0 else math.nan,
                welch_ci_high=burst.ci_high / base if base > 0 else math.nan,
                top_factor=BURST_SERIES[metric],
                split_date=day,
            )
        )
    return out, len(batch.keys)


# Excess fault rates (perf_assets/lib/fault_rates.py): count series per node-day, tested per node and per rack
# against the rest of the fleet, with the spine factor the faults take from.
FAULT_SERIES = {"xid_node_faults": "availability"}
# Fewest faults an entity's excess rests on. The fleet's base rate puts two faults close together on some node most
# months by chance, and the daily path tests a growing window again every day: fleet-1k seed 1's soak paged
# h200-east-n08 for 2 XID faults in the first 6 days (0.33 per node-day against the fleet's 0.0105: exact p 0.002,
# BH q 0.008 beside the bad batches' tests), no excess over the 30 days. With 1 fault per node per ~95 days, two in a
# 6-day window has probability ~0.002 per node and window, three ~4e-5.
MIN_FAULT_EVENTS = 3


def fault_rate_rows(
    metric_tree: pd.DataFrame, node_rack: dict[str, str], config: DetectorConfig, min_effect
) -> tuple[list[dict], int]:
    """Regression rows for nodes and racks whose fault rate exceeds the rest of the fleet's (exact conditional
    binomial p, BH q across the entities tested, onset by Poisson likelihood), and the number of series tested."""
    batch = build_series(metric_tree, {"node": tuple(FAULT_SERIES)})
    out, tested = [], 0
    for metric in FAULT_SERIES:
        rows = [row for row, key in enumerate(batch.keys) if key[2] == metric]
        if not rows:
            continue
        nodes = [batch.keys[row][1] for row in rows]
        counts, exposure = batch.numerators[rows], batch.denominators[rows]
        known = np.isfinite(counts) & np.isfinite(exposure) & (exposure > 0)
        node_events = np.where(known, counts, 0.0).sum(axis=1)
        node_exposure = np.where(known, exposure, 0.0).sum(axis=1)
        racks: dict[str, list[int]] = {}
        for position, node in enumerate(nodes):
            if node in node_rack:
                racks.setdefault(node_rack[node], []).append(position)
        entities = [("node", node, [position]) for position, node in enumerate(nodes)]
        entities += [("rack", rack, members) for rack, members in sorted(racks.items()) if len(members) > 1]
        results = []
        for grain, entity, members in entities:
            tested += 1
            inside = np.zeros(len(nodes), dtype=bool)
            inside[members] = True
            found = excess_rate(
                np.nansum(np.where(known[members], counts[members], np.nan), axis=0),
                np.nansum(np.where(known[members], exposure[members], np.nan), axis=0),
                node_events[~inside].sum(),
                node_exposure[~inside].sum(),
                config.confidence,
            )
            if found is not None:
                results.append((grain, entity, found))
        if not results:
            continue
        q_values = benjamini_hochberg([found.p_value for _, _, found in results])
        direction = batch.directions[rows[0]]
        for (grain, entity, found), q in zip(results, q_values):
            effect = found.rate_ratio - 1
            accept_q = config.max_qvalue is None or q <= config.max_qvalue
            large = math.isinf(effect) or effect >= min_effect(grain, metric)  # inf: no fault among the peers
            enough = found.events >= MIN_FAULT_EVENTS
            if not (found.p_value <= config.max_pvalue and accept_q and large and enough):
                continue
            day = batch.dates[found.start]  # corrected for the wait for the first fault; split_date: that fault
            n_after = len(batch.dates) - found.start
            out.append(
                sparse_test_row(
                    grain,
                    entity,
                    metric,
                    day,
                    batch.dates[0],
                    change_kind="regression" if direction < 0 else "improvement",  # a higher rate
                    after_end_date=batch.dates[-1],
                    n_before=found.start,
                    n_after=n_after,
                    before_level=found.peer_rate,  # the rest of the fleet's rate (the test's baseline)
                    after_level=found.rate,  # the entity's rate over the window
                    before_numerator=float(found.peer_events),
                    before_denominator=found.peer_exposure,
                    after_numerator=float(found.events),
                    after_denominator=found.exposure,
                    # unbounded when the peers had no fault: unknown (NULL), never a number
                    relative_effect=effect if math.isfinite(effect) else math.nan,
                    ci_low=found.ci_low - 1,
                    ci_high=found.ci_high - 1 if math.isfinite(found.ci_high) else math.nan,
                    p_value=found.p_value,
                    statistic=float(found.events),
                    test="fault rate vs the rest of the fleet: exact conditional binomial; onset: Poisson likelihood",
                    q_value=float(q),
                    verdict="confirmed" if n_after >= config.confirm_points else "provisional",
                    shape="rate",
                    welch_ci_low=math.nan,
                    welch_ci_high=math.nan,
                    top_factor=FAULT_SERIES[metric],
                    split_date=batch.dates[found.onset],
                )
            )
    return out, tested


def rollout_canaries(
    batch: SeriesBatch,
    changes: pd.DataFrame,
    node_software: pd.DataFrame,
    cluster_nodes: dict[str, list[str]],
    config: DetectorConfig,
    min_effect,
) -> list[dict]:
    """Every rollout to part of a cluster tested against the cluster's untouched nodes (rollout_canary.py): one
    result per rollout and ``CANARY_METRICS`` metric, the call made with BH across them. ``batch``: the scan's series
    (its node rows of those metrics); ``changes``: causes.dimension_changes of the node software and inventory."""
    node_cluster = {node: cluster for cluster, nodes in cluster_nodes.items() for node in nodes}
    rollouts = cluster_rollouts(changes, node_cluster)
    if not rollouts:
        return []
    series: dict[str, dict[str, tuple[np.ndarray, np.ndarray]]] = {}
    directions = {}
    for row, (grain, node, metric) in enumerate(batch.keys):
        if grain == "node" and metric in CANARY_METRICS:
            series.setdefault(metric, {})[node] = (batch.numerators[row], batch.denominators[row])
            directions[metric] = batch.directions[row]
    results = canary_tests(
        rollouts,
        batch.dates,
        {metric: series[metric] for metric in CANARY_METRICS if metric in series},
        cluster_nodes,
        changes,
        n_permutations=config.n_permutations,
        confidence=config.confidence,
        max_pvalue=config.max_pvalue,
        seed=config.seed,
        node_software=node_software,
    )
    return canary_calls(
        results, directions, config.max_pvalue, config.max_qvalue, lambda metric: min_effect(COHORT_GRAIN, metric)
    )


def mix_partner_rows(
    batch: SeriesBatch,
    changes: list[ChangePoint],
    allocation_sides: list[AllocationChange],
    gpus: dict[str, int],
    config: DetectorConfig,
    min_effect,
    fleet_split,
) -> tuple[list[dict], int]:
    """The other side of the scan's cluster allocation changes (mix_partner.py): a `regressions` row per call, split
    on the first side's day, and the number of tests made. ``allocation_sides``: cluster goodput changes whose factor
    is allocation (ALLOCATION_SIDE_OF), first sides too unless their cluster's allocation changed within
    GROUP_WINDOW_DAYS of them; ``gpus``: installed GPUs per cluster; ``fleet_split(start, change, stop)``: the
    `fleet_split` columns over those columns of the batch, as a scanned allocation change has."""
    rows_of = {key[1]: row for row, key in enumerate(batch.keys) if key[0] == "cluster" and key[2] == "allocation"}
    scanned = [
        AllocationChange(batch.keys[c.series_index][1], c.index, c.before_level, c.after_level)
        for c in changes
        if batch.keys[c.series_index][0] == "cluster" and batch.keys[c.series_index][2] == "allocation"
    ]
    scanned += [
        side
        for side in allocation_sides
        if not any(
            other.cluster == side.cluster and abs(other.split - side.split) <= GROUP_WINDOW_DAYS for other in scanned
        )
    ]
    if not scanned:
        return [], 0
    results = partner_tests(
        scanned,
        {cluster: (batch.numerators[row], batch.denominators[row]) for cluster, row in rows_of.items()},
        gpus,
        max_pvalue=config.max_pvalue,
        max_qvalue=config.max_qvalue,
        min_effect=min_effect("cluster", "allocation"),
        confidence=config.confidence,
        n_bootstrap=config.n_bootstrap,
        seed=config.seed,
    )
    out = []
    for result in results:
        if not result["called"]:
            continue
        day = batch.dates[result["split"]]
        direction = batch.directions[rows_of[result["cluster"]]]
        out.append(
            sparse_test_row(
                "cluster",
                result["cluster"],
                "allocation",
                day,
                batch.dates[result["start"]],
                change_kind="regression" if result["relative_effect"] * direction < 0 else "improvement",
                after_end_date=batch.dates[result["stop"] - 1],
                **{
                    field: result[field]
                    for field in (
                        "n_before",
                        "n_after",
                        "before_level",
                        "after_level",
                        "before_numerator",
                        "before_denominator",
                        "after_numerator",
                        "after_denominator",
                        "relative_effect",
                        "ci_low",
                        "ci_high",
                        "p_value",
                        "q_value",
                    )
                },
                statistic=math.log1p(result["relative_effect"]),
                test=describe_partner(result, batch.dates[result.get("first_split", result["split"])].isoformat()),
                verdict="confirmed" if result["n_after"] >= config.confirm_points else "provisional",
                shape="step",
                welch_ci_low=math.nan,
                welch_ci_high=math.nan,
                top_factor="allocation",
                split_date=day,
            )
            | fleet_split(result["start"], result["split"], result["stop"])
        )
    return out, len(results)


def canary_rows(canaries: list[dict], first_day: date, confirm_points: int) -> list[dict]:
    """Regression rows (grain ``cohort``) of the canaries that showed an effect: the cohort's pooled levels, the
    difference in differences against its untouched peers as the effect, its randomization test."""
    out = []
    for result in canaries:
        if result["verdict"] not in ("regression", "improvement"):
            continue
        day = result["after_start_date"]
        out.append(
            sparse_test_row(
                COHORT_GRAIN,
                result["cohort_entity"],
                result["metric"],
                day,
                first_day,
                change_kind=result["verdict"],
                before_start_date=result["before_start_date"],
                after_end_date=result["after_end_date"],
                n_before=result["n_before"],
                n_after=result["n_after"],
                before_level=result["cohort_before_level"],
                after_level=result["cohort_after_level"],
                before_numerator=result["cohort_before_numerator"],
                before_denominator=result["cohort_before_denominator"],
                after_numerator=result["cohort_after_numerator"],
                after_denominator=result["cohort_after_denominator"],
                relative_effect=result["did_effect"],  # against the peers: the cohort's own change is cohort_change
                ci_low=result["ci_low"],
                ci_high=result["ci_high"],
                p_value=result["p_value"],
                statistic=math.log1p(result["did_effect"]),
                test=(
                    f"rollout canary: {result['n_nodes']} nodes that took {result['changes']} against "
                    f"{result['n_peers']} untouched nodes of {result['cluster']}: difference in differences of "
                    f"pooled {result['metric']} (cohort {result['cohort_change']:+.1%}, peers "
                    f"{result['peer_change']:+.1%}), randomization p over {result['relabellings']} relabellings"
                ),
                q_value=result["q_value"],
                verdict="confirmed" if result["n_after"] >= confirm_points else "provisional",
                shape="step",
                welch_ci_low=math.nan,
                welch_ci_high=math.nan,
                top_factor=result["metric"],
                peer_relative_effect=result["peer_change"],
                did_relative_effect=result["did_effect"],
                split_date=day,
            )
        )
    return out


def regressions_ddl(table: str) -> str:
    columns = ",\n    ".join(f"{name} {kind}" for name, kind in REGRESSION_SCHEMA.items())
    return f"create or replace table {table} (\n    {columns}\n)"


@dataclass(frozen=True)
class SeriesBatch:
    keys: list[tuple[str, str, str]]  # (grain, entity_id, node_id)
    dates: list[date]
    numerators: np.ndarray
    denominators: np.ndarray
    directions: list[int]


def build_series(
    metric_tree: pd.DataFrame, nodes: tuple[str, ...] | dict[str, tuple[str, ...]] = DETECTED_NODES
) -> SeriesBatch:
    """One row per (grain, entity, node) on a common daily grid; a missing day is NaN (unknown).

    ``nodes``: the tree nodes to detect, the same at every grain, or per grain (``DETECTED_BY_GRAIN``;
    grains not named are left out). A NULL numerator or denominator is unknown, never 0.
    """
    if isinstance(nodes, dict):
        keep = pd.Series(False, index=metric_tree.index)
        for grain, names in nodes.items():
            keep |= (metric_tree["grain"] == grain) & metric_tree["node_id"].isin(names)
        frame = metric_tree[keep].copy()
    else:
        frame = metric_tree[metric_tree["node_id"].isin(nodes)].copy()
    frame["metric_date"] = pd.to_datetime(frame["metric_date"]).dt.date
    if frame.empty:
        return SeriesBatch([], [], np.empty((0, 0)), np.empty((0, 0)), [])
    dates = sorted(frame["metric_date"].unique())
    first, last = dates[0], dates[-1]
    grid = [first + timedelta(days=offset) for offset in range((last - first).days + 1)]
    index = pd.MultiIndex.from_frame(frame[["grain", "entity_id", "node_id"]].drop_duplicates())
    keys_by_day = ["grain", "entity_id", "node_id", "metric_date"]
    # sum(min_count=1): a NULL stays NULL (unknown), never 0
    numerators = (
        frame.groupby(keys_by_day)["numerator"]
        .sum(min_count=1)
        .unstack("metric_date")
        .reindex(index=index, columns=grid)
    )
    denominators = (
        frame.groupby(keys_by_day)["denominator"]
        .sum(min_count=1)
        .unstack("metric_date")
        .reindex(index=index, columns=grid)
    )
    # a series with no known point at all is not measured (e.g. a DCGM field the fleet does not export)
    known = (numerators.notna() & denominators.gt(0)).any(axis=1)
    index = index[known.to_numpy()]
    numerators, denominators = numerators[known], denominators[known]
    directions = frame.drop_duplicates("node_id").set_index("node_id")["direction"].to_dict()
    keys = [tuple(key) for key in index]
    return SeriesBatch(
        keys=keys,
        dates=grid,
        numerators=numerators.to_numpy(dtype=float),
        denominators=denominators.to_numpy(dtype=float),
        directions=[int(directions.get(key[2], 1)) for key in keys],
    )


def series_parents(batch: SeriesBatch, gpu_nodes: dict[str, str], cluster_nodes: dict[str, list[str]]) -> list[int]:
    """Per series, the row of its parent in the topology for hierarchical FDR families (changepoint.detect's
    ``parents``): a node's is its cluster's series of the same metric, a GPU's its node's; -1 (a root) for
    fleet and cluster series and where the parent has no series of that metric."""
    node_cluster = {node: cluster for cluster, nodes in cluster_nodes.items() for node in nodes}
    row_of = {key: row for row, key in enumerate(batch.keys)}
    parents = []
    for grain, entity, metric in batch.keys:
        if grain == "node":
            parent = ("cluster", node_cluster.get(entity), metric)
        elif grain == "gpu":
            parent = ("node", gpu_nodes.get(entity), metric)
        else:
            parent = None
        parents.append(row_of.get(parent, -1) if parent else -1)
    return parents


def _pooled(batch: SeriesBatch, row: int, start: int, stop: int) -> float:
    numerator = np.nansum(batch.numerators[row, start:stop])
    denominator = np.nansum(batch.denominators[row, start:stop])
    return numerator / denominator if denominator > 0 else math.nan


def _windows(batch: SeriesBatch, change: ChangePoint) -> tuple[int, int]:
    """Column range [start, stop) covering n_before valid points before and n_after after the change."""
    valid = np.isfinite(batch.numerators[change.series_index]) & (batch.denominators[change.series_index] > 0)
    before = np.flatnonzero(valid[: change.index])[-change.n_before :]
    after = np.flatnonzero(valid[change.index :])[: change.n_after] + change.index
    return int(before[0]), int(after[-1]) + 1


def ramp_onset(batch: SeriesBatch, change: ChangePoint, start: int, stop: int) -> tuple[int, int] | None:
    """(onset column, ramp end column) when a flat-ramp-flat curve fits the change's windows better than a
    step (BIC, perf_assets/lib/ramp.py), else None. The log of the daily ratios over the valid points."""
    row = change.series_index
    num, den = batch.numerators[row, start:stop], batch.denominators[row, start:stop]
    with np.errstate(divide="ignore", invalid="ignore"):
        valid = np.isfinite(num) & np.isfinite(den) & (den > 0) & (num > 0)
    columns = np.flatnonzero(valid)
    fit = fit_ramp(np.log(num[columns] / den[columns]))
    if fit is None or fit.bic_gain < RAMP_MIN_BIC_GAIN:
        return None
    return start + int(columns[fit.onset]), start + int(columns[fit.end])


def job_peer_nodes(allocations: pd.DataFrame | None, nodes: list[str], change_day: date) -> list[str] | None:
    """Nodes outside ``nodes`` that shared an allocation (one job attempt) with one of them in the days around
    the change (``JOB_PEER_WINDOW``): a synchronous job runs at its slowest node's pace, so a change on one
    node shows on its job peers. None when allocations are unknown (not given), [] when there were none."""
    if allocations is None:
        return None
    if allocations.empty or not nodes:
        return []
    day_start = datetime.combine(change_day, datetime.min.time(), tzinfo=timezone.utc)
    lo, hi = day_start - JOB_PEER_WINDOW[0], day_start + JOB_PEER_WINDOW[1]
    start, end = _utc(allocations["start_at"]), _utc(allocations["end_at"])
    overlapping = allocations[(start < hi) & (end > lo)]
    jobs = set(overlapping.loc[overlapping["node"].isin(nodes), "slurm_job_id"])
    peers = set(overlapping.loc[overlapping["slurm_job_id"].isin(jobs), "node"].astype(str)) - set(nodes)
    return sorted(peers)


def _utc(times: pd.Series) -> pd.Series:
    """pd.to_datetime(times, utc=True), without its cost where the column is UTC already (converted once per run)."""
    if isinstance(times.dtype, pd.DatetimeTZDtype) and str(times.dtype.tz) == "UTC":
        return times
    return pd.to_datetime(times, utc=True)


def factor_log_contributions(
    batch: SeriesBatch, grain: str, entity: str, start: int, change: int, stop: int
) -> dict[str, float]:
    """Δln of each spine factor between the pooled windows; they add up to Δln goodput (LMDI, one entity)."""
    rows = {key[2]: row for row, key in enumerate(batch.keys) if key[0] == grain and key[1] == entity}
    contributions = {}
    for factor in SPINE_FACTORS:
        if factor not in rows:
            continue
        before = _pooled(batch, rows[factor], start, change)
        after = _pooled(batch, rows[factor], change, stop)
        if before > 0 and after > 0:
            contributions[factor] = math.log(after / before)
    return contributions


def _reference_capacity(metric_tree: pd.DataFrame, dates: list[date]) -> dict[str, np.ndarray]:
    """Per cluster, on the batch's days: its capacity valued at the reference peak (the denominator of
    REFERENCE_WEIGHTED's companion, installed_h100_pfs); NaN where unknown. Empty without that companion."""
    companion = set(REFERENCE_WEIGHTED.values())
    frame = metric_tree[(metric_tree["grain"] == "cluster") & metric_tree["node_id"].isin(companion)]
    if frame.empty:
        return {}
    days = pd.to_datetime(frame["metric_date"]).dt.date
    table = (
        frame.assign(metric_date=days)
        .groupby(["entity_id", "metric_date"])["denominator"]
        .sum(min_count=1)
        .unstack("metric_date")
        .reindex(columns=dates)
    )
    return {str(entity): values.to_numpy(dtype=float) for entity, values in table.iterrows()}


def _work_parts(batch: SeriesBatch, rows: list[int], work_rows: list[int]) -> list[tuple[np.ndarray, list[int]]]:
    """(values, rows) of the numerator, the work and the capacity of each segment, in that order."""
    return [(batch.numerators, rows), (batch.numerators, work_rows), (batch.denominators, rows)]


def row_factor(metric: str, contributions: dict[str, float]) -> str | None:
    """The spine factor a detected change is a change of: a spine factor itself; a companion or leaf share the
    factor it describes (grouping.FACTOR_OF_METRIC: SM clock, power, thermal, probes -> program goodput; idle
    shares -> allocation; fault counts -> availability); goodput, and any metric without a factor, the factor
    whose Δln over the change's windows is the largest in the direction of Δln goodput (LMDI, one entity).

    Not the LMDI top for a spine factor or a companion: their windows are chosen by their own change, over which
    goodput need not have changed at all, and its split is then the entity's allocation noise (on `incidents`
    seeds 1-3: a power cap, an NCCL rollout, an HBM decay and a torch upgrade whose group heads were power or
    probe companions all read 'allocation')."""
    if metric in SPINE_FACTORS:
        return metric
    if metric in FACTOR_OF_METRIC:
        return FACTOR_OF_METRIC[metric]
    total = sum(contributions.values())
    if total < 0:
        return min(contributions, key=contributions.get)
    return max(contributions, key=contributions.get, default=None)


def software_changes(node_software: pd.DataFrame) -> pd.DataFrame:
    """One row per node rollout: the instant and which components moved from what to what."""
    if node_software.empty:
        return pd.DataFrame(columns=["node", "changed_at", "component", "from_version", "to_version"])
    ordered = node_software.sort_values(["node", "valid_from_at"])
    rows = []
    for node, versions in ordered.groupby("node"):
        previous = None
        for version in versions.itertuples(index=False):
            if previous is not None:
                for component in SOFTWARE_COMPONENTS:
                    old, new = getattr(previous, component), getattr(version, component)
                    if str(old) != str(new):
                        rows.append((node, version.valid_from_at, component, str(old), str(new)))
            previous = version
    return pd.DataFrame(rows, columns=["node", "changed_at", "component", "from_version", "to_version"])


def coinciding_changes(changes: pd.DataFrame, nodes: list[str], change_day: date) -> list[dict]:
    """Rollouts on the entity's nodes within a day of the change, summarised per component and version."""
    if changes.empty or not nodes:
        return []
    day_start = datetime.combine(change_day, datetime.min.time(), tzinfo=timezone.utc)
    at = _utc(changes["changed_at"])
    near = changes[
        changes["node"].isin(nodes)
        & (at >= day_start - ROLLOUT_WINDOW)
        & (at < day_start + ROLLOUT_WINDOW + timedelta(days=1))
    ]
    summary = []
    for (component, old, new), group in near.groupby(["component", "from_version", "to_version"]):
        summary.append(
            {
                "component": component,
                "from": old,
                "to": new,
                "nodes": int(group["node"].nunique()),
                "of_nodes": len(nodes),
                "first_at": pd.to_datetime(group["changed_at"], utc=True).min().isoformat(),
            }
        )
    return sorted(summary, key=lambda item: (-item["nodes"], item["component"]))


def scan_splits(batch: SeriesBatch, changes: list[ChangePoint], node_of) -> dict[tuple[str, str, bool], dict]:
    """``{(grain, metric, rising): {node or cluster: [split days]}}`` of the scan's node-, GPU- (under its node,
    ``node_of(grain, entity)``) and cluster-grain changes: which nodes, and whether their cluster, a rollout's day
    moved (``rollout_anchored``)."""
    out: dict[tuple[str, str, bool], dict] = {}
    for change in changes:
        grain, entity, metric = batch.keys[change.series_index]
        node = node_of(grain, entity) if grain in ANCHOR_GRAINS else entity if grain == "cluster" else None
        if node:
            key = (grain, metric, change.relative_effect > 0)
            out.setdefault(key, {}).setdefault(node, []).append(batch.dates[change.index])
    return out


def rollout_anchored(
    batch: SeriesBatch,
    change: ChangePoint,
    start: int,
    stop: int,
    rollouts: pd.DataFrame,
    nodes: list[str],
    config: DetectorConfig,
    min_effect: float,
    splits: dict[tuple[str, str, bool], dict] | None = None,
    cluster: str | None = None,
) -> tuple[ChangePoint, str] | None:
    """The change measured again at a configuration change of its own node (``measure_split``), with a note for its
    `test`, when the scan's split lies more than ``ROLLOUT_WINDOW`` and at most ``ANCHOR_DAYS`` from it (the nearest
    such change inside the change's windows) and the split there holds: a step there fits the windows about as well
    as one at the scan's split (``ANCHOR_MAX_LOG_LIKELIHOOD``), in the same direction, by at least ``min_effect``,
    with p <= ``config.split_pvalue`` (one test at a day fixed by the rollout, not chosen from the data), and the
    rollout moved its other nodes: the node's cluster has a change of this metric and direction that split within
    ``ROLLOUT_WINDOW`` of it, or, of the nodes that got the same versions within a day, when they are at least
    ``MIN_ROLLOUT_NODES``, at least half have a change of the scan of this grain, metric and direction that split
    there (``splits``: ``scan_splits``; fleet-1k seed 113: a null firmware rollout to all of h100-west on 10-13,
    which two nodes' program goodput drop of 10-15 would otherwise have been dated to; the torch upgrade of 10-08
    moved a100-west's program goodput, +3.1 %, and 9 of its 32 nodes' by more than the node minimum). None
    otherwise: a change that began days before or after a rollout of its node stays where the scan put it.

    The scan picks the split that best separates its windows; on a short before window over a series that was
    already rising, that can be days before the step (fleet-1k seeds 108, 112, 113: torch 2.6.0 reached every
    a100-west node on 10-08, +3 %; nodes whose program goodput had crept up over 10-01..10-07 split on 10-04 or
    10-05, a group apart from the upgrade's, dated three days before it, with no cause)."""
    split_day = batch.dates[change.index]
    if rollouts.empty or not nodes:
        return None
    mine = rollouts[rollouts["node"].isin(nodes)]
    days = sorted({at.date() for at in mine["changed_at"]}, key=lambda day: (abs((day - split_day).days), day))
    if not days or abs((days[0] - split_day).days) <= ROLLOUT_WINDOW.days:
        return None  # none, or one that coincides with the split (coinciding_changes): nothing to move
    row = change.series_index
    candidates = [
        batch.dates.index(day)
        for day in days
        if abs((day - split_day).days) <= ANCHOR_DAYS and day in batch.dates and start < batch.dates.index(day) < stop
    ]
    if not candidates:
        return None
    scanned = measure_split(batch.numerators[row], batch.denominators[row], start, change.index, stop, config, False)
    if scanned is None:
        return None
    for at in candidates:
        day = batch.dates[at]
        measured = measure_split(batch.numerators[row], batch.denominators[row], start, at, stop, config, False)
        if measured is None:
            continue
        effect = measured["relative_effect"]
        worse = _log_likelihood_ratio(scanned, measured)
        if not (
            worse <= ANCHOR_MAX_LOG_LIKELIHOOD
            and math.isfinite(effect)
            and (effect > 0) == (change.relative_effect > 0)
            and abs(effect) >= min_effect
            and measured["p_value"] <= config.split_pvalue
        ):
            continue
        moved = mine[[at.date() == day for at in mine["changed_at"]]]
        if not _rollout_moved_its_nodes(batch, change, moved, rollouts, splits or {}, cluster):
            continue
        what = ", ".join(
            sorted(
                {
                    f"{c} {a} -> {b}"
                    for c, a, b in moved[["component", "from_version", "to_version"]].itertuples(index=False)
                }
            )
        )
        anchored = measured_at(change, batch.numerators[row], batch.denominators[row], start, at, stop, config)
        note = (
            f"{change.test}; dated to its node's {what} of {day}: the scan split on {split_day} "
            f"({change.relative_effect:+.1%}, p {change.p_value:.2g}); at {day} {effect:+.1%}, "
            f"p {measured['p_value']:.2g} (the t test at a fixed split), log-likelihood of the scan's split over "
            f"that day's {worse:+.2f}"
        )
        return anchored, note
    return None


def _log_likelihood_ratio(scanned: dict[str, float], anchored: dict[str, float]) -> float:
    """The Gaussian log-likelihood of a two-level fit at the scan's split over one at the rollout's, the same points:
    (n/2) ln(SS_within at the rollout / SS_within at the split); -inf when the rollout's fits exactly, inf when only
    the scan's does."""
    n = anchored["n_before"] + anchored["n_after"]
    if anchored["ss_within"] <= 0:
        return -math.inf
    if scanned["ss_within"] <= 0:
        return math.inf
    return n / 2.0 * math.log(anchored["ss_within"] / scanned["ss_within"])


def _rollout_moved_its_nodes(
    batch: SeriesBatch,
    change: ChangePoint,
    moved: pd.DataFrame,
    rollouts: pd.DataFrame,
    splits: dict[tuple[str, str, bool], dict],
    cluster: str | None,
) -> bool:
    """Whether the configuration changes of ``moved`` (one node's, one day) moved its cluster or each moved its wave
    (``rollout_anchored``)."""
    grain, _, metric = batch.keys[change.series_index]
    rising = change.relative_effect > 0
    moving = splits.get((grain, metric, rising), {})
    day = moved["changed_at"].min().date()
    if any(
        abs((split - day).days) <= ROLLOUT_WINDOW.days
        for split in splits.get(("cluster", metric, rising), {}).get(cluster, [])
    ):
        return True
    own = set(moved["node"])
    for version in moved[["component", "from_version", "to_version", "changed_at"]].itertuples(index=False):
        wave = rollout_wave(rollouts, version.component, version.from_version, version.to_version, version.changed_at)
        if len(wave | own) < MIN_ROLLOUT_NODES:
            continue  # too few nodes to judge by how many moved
        wave -= own
        rolled = version.changed_at.date()
        hit = {
            node
            for node in wave
            if any(abs((split - rolled).days) <= ROLLOUT_WINDOW.days for split in moving.get(node, []))
        }
        if 2 * len(hit) < len(wave):
            return False
    return True


def regression_id(grain: str, entity: str, metric: str, change_day: date) -> str:
    return hashlib.sha256(f"{grain}|{entity}|{metric}|{change_day.isoformat()}".encode()).hexdigest()[:16]


def detect_regressions(
    metric_tree: pd.DataFrame,
    node_software: pd.DataFrame,
    cluster_nodes: dict[str, list[str]],
    config: DetectorConfig = DetectorConfig(),
    detected_at: datetime | None = None,
    gpu_nodes: dict[str, str] | None = None,
    grain_min_effects: dict[str, float] | None = None,
    inventory: pd.DataFrame | None = None,
    allocations: pd.DataFrame | None = None,
) -> pd.DataFrame:
    """Change points on every goodput and spine-factor series, with their evidence and attribution.

    The minimum effect of a series is that of its metric (``config.min_relative_effects``). The
    frame's ``attrs["series"]`` counts the series tested, changed and too short to test, and
    ``attrs["too_short"]`` names the latter (``grain/entity/metric``): they were not tested, which
    is not the same as "no change".

    Grains: the spine and the companions per cluster, for the fleet and per node, the companions
    per GPU (``DETECTED_BY_GRAIN``). ``gpu_nodes`` maps a GPU (uuid) to its node, for the rollouts
    that coincide and the peers of a GPU. Minimum effect of a series: ``config.min_relative_effects``
    under ``"grain/metric"``, else under ``"metric"``, else ``grain_min_effects`` (default
    ``GRAIN_MIN_EFFECTS``) of its grain, else ``config.min_relative_effect``. Peers of a node or a
    GPU are the other nodes (GPUs) of its cluster; of a cluster, the other clusters.

    ``allocations`` (int_allocation_nodes: slurm_job_id, node, start_at, end_at) gives node and GPU rows
    their ``job_peer_nodes`` (JSON; NULL without allocations and for cluster and fleet rows).
    """
    batch = build_series(metric_tree, DETECTED_BY_GRAIN)
    if not batch.keys:
        empty = pd.DataFrame(columns=REGRESSION_COLUMNS)
        empty.attrs.update(series={"tested": 0, "changed": 0, "too_short": 0}, too_short=[])
        return empty
    gpu_nodes = gpu_nodes or {}
    node_cluster = {node: cluster for cluster, nodes in cluster_nodes.items() for node in nodes}
    grain_min = GRAIN_MIN_EFFECTS if grain_min_effects is None else grain_min_effects

    def min_effect(grain: str, metric: str) -> float:
        """The minimum effect of a series: relative, or for a leaf (``DETECTED_LEAVES``) in share points."""
        chosen = config.min_relative_effects
        if f"{grain}/{metric}" in chosen:
            return float(chosen[f"{grain}/{metric}"])
        if metric in chosen:
            return float(chosen[metric])
        return float(grain_min.get(grain, config.min_relative_effect))

    names = ["/".join(key[:3:2]) for key in batch.keys]  # grain/metric
    per_series = dataclasses.replace(
        config,
        min_relative_effects={
            name: 0.0 if name.split("/")[1] in DETECTED_LEAVES else min_effect(*name.split("/")) for name in set(names)
        },
    )
    result = detect(
        batch.numerators,
        batch.denominators,
        per_series,
        metrics=names,
        parents=series_parents(batch, gpu_nodes or {}, cluster_nodes),
    )

    def cluster_of(grain: str, entity: str) -> str | None:
        if grain == "node":
            return node_cluster.get(entity)
        if grain == "gpu":
            return node_cluster.get(gpu_nodes.get(entity, ""))
        return None

    def nodes_of(grain: str, entity: str) -> list[str]:
        if grain == "fleet":
            return sorted({node for nodes in cluster_nodes.values() for node in nodes})
        if grain == "node":
            return [entity]
        if grain == "gpu":
            return [gpu_nodes[entity]] if entity in gpu_nodes else []
        if grain == COHORT_GRAIN:
            return sorted(cohort_nodes(entity))
        return cluster_nodes.get(entity, [])

    reference_capacity = _reference_capacity(metric_tree, batch.dates)
    rows_by_grain_metric: dict[tuple[str, str], list[int]] = {}
    for row, key in enumerate(batch.keys):
        rows_by_grain_metric.setdefault((key[0], key[2]), []).append(row)
    row_of = {key: row for row, key in enumerate(batch.keys)}

    def segment_split(grain: str, entity: str, metric: str, start: int, change: int, stop: int) -> dict:
        """Mix vs rate of this change over the entity's segments (clusters of the fleet, nodes of a cluster)."""
        split = split_over_segments(grain, entity, metric, start, change, stop)
        if split is None:
            return {}
        columns = split.as_columns(SEGMENT_GRAIN[grain])
        columns["segments"] = json.dumps(columns["segments"])
        return columns

    def allocation_levels(entity: str, start: int, change: int, stop: int) -> tuple[float, float] | None:
        """A cluster's pooled allocation before and after ``change`` over [start, stop); None when unknown."""
        row = row_of.get(("cluster", entity, "allocation"))
        if row is None:
            return None
        levels = []
        for lo, hi in ((start, change), (change, stop)):
            num, den = batch.numerators[row, lo:hi], batch.denominators[row, lo:hi]
            keep = np.isfinite(num) & np.isfinite(den) & (den > 0)
            if not keep.any():
                return None
            levels.append(float(num[keep].sum() / den[keep].sum()))
        return levels[0], levels[1]

    def fleet_split(
        grain: str, metric: str, start: int, change: int, stop: int, entity: str = "", top: str | None = None
    ) -> dict:
        """A cluster allocation change's `fleet_split` column: the fleet's goodput over its clusters on the row's
        windows (FLEET_SPLIT), whether or not the fleet's own series changed enough to be detected; also a cluster
        goodput change whose factor is allocation (ALLOCATION_SIDE_OF), with the cluster's allocation levels."""
        side = (grain, metric) == ALLOCATION_SIDE_OF and top == "allocation"
        if (grain, metric) != FLEET_SPLIT and not side:
            return {}
        levels = allocation_levels(entity, start, change, stop) if side else None
        if side and levels is None:
            return {}
        start, stop = max(start, change - FLEET_SPLIT_DAYS), min(stop, change + FLEET_SPLIT_DAYS)
        split = split_over_segments("fleet", "fleet", "goodput", start, change, stop)
        if split is None:
            return {}
        relative = split.after_level / split.before_level - 1 if split.before_level else None
        sides = {"allocation_before": levels[0], "allocation_after": levels[1]} if levels else {}
        return {
            "fleet_split": json.dumps(
                {
                    # §6's lens: levels over installed capacity at the reference peak (goodput_ref)
                    "metric": "goodput_ref" if split.mix_basis == "allocated_gs" else "goodput",
                    "before_start_date": batch.dates[start].isoformat(),
                    "change_date": batch.dates[change].isoformat(),
                    "after_end_date": batch.dates[stop - 1].isoformat(),
                    "before_level": split.before_level,
                    "after_level": split.after_level,
                    "relative_change": relative,
                }
                | sides
                | split.as_columns("cluster"),
                default=float,
            )
        }

    def split_over_segments(grain: str, entity: str, metric: str, start: int, change: int, stop: int):
        child = SEGMENT_GRAIN.get(grain)
        rows = [
            row
            for row in rows_by_grain_metric.get((child, metric), [])
            if grain == "fleet" or node_cluster.get(batch.keys[row][1]) == entity
        ]
        if child is None or len(rows) < 2:
            return None

        def window_sum(values: np.ndarray, lo: int, hi: int, of: list[int] = rows) -> np.ndarray:
            part = values[of, lo:hi]
            return np.where(np.isfinite(part).any(axis=1), np.nansum(part, axis=1), np.nan)

        names = [batch.keys[row][1] for row in rows]
        work_rows = (
            [row_of.get((child, name, WORK_WEIGHTED[metric][0])) for name in names] if metric in WORK_WEIGHTED else []
        )
        reference = (
            [reference_capacity.get(name) for name in names]
            if grain == "fleet" and metric in REFERENCE_WEIGHTED
            else []
        )
        if (
            work_rows
            and reference
            and all(row is not None for row in work_rows)
            and all(part is not None for part in reference)
        ):
            # the fleet's goodput: §6's lens (REFERENCE_WEIGHTED), occupancy apart (mix_rate.work_weighted_split)
            capacity = np.vstack(reference)
            with np.errstate(invalid="ignore", divide="ignore"):
                to_reference = capacity / batch.denominators[rows]  # per cluster-day: peak_ref / own peak
            parts = (batch.numerators[rows], batch.numerators[work_rows] * to_reference, capacity)
            split = work_weighted_split(
                names,
                tuple(window_sum(values, start, change, list(range(len(rows)))) for values in parts),
                tuple(window_sum(values, change, stop, list(range(len(rows)))) for values in parts),
                mix_basis="allocated_gs",
            )
        elif work_rows and all(row is not None for row in work_rows):
            # a ratio over capacity: weights by work done (metric_tree.md §6), occupancy apart (mix_rate.py)
            split = work_weighted_split(
                names,
                tuple(window_sum(values, start, change, of) for values, of in _work_parts(batch, rows, work_rows)),
                tuple(window_sum(values, change, stop, of) for values, of in _work_parts(batch, rows, work_rows)),
                mix_basis=WORK_WEIGHTED[metric][1],
            )
        else:
            split = mix_rate_split(
                names,
                window_sum(batch.numerators, start, change),
                window_sum(batch.denominators, start, change),
                window_sum(batch.numerators, change, stop),
                window_sum(batch.denominators, change, stop),
                mix_basis=SPLIT_BASIS.get(metric, "denominator"),
            )
        return split

    changes = [  # a leaf's change counts in share points of capacity, its relative size says little (0.1 % -> 0.2 %)
        change
        for change in result.changes
        if batch.keys[change.series_index][2] not in DETECTED_LEAVES
        or abs(change.after_level - change.before_level) >= min_effect(*names[change.series_index].split("/"))
    ]
    if allocations is not None:  # once, not per change
        allocations = allocations.assign(
            start_at=pd.to_datetime(allocations["start_at"], utc=True),
            end_at=pd.to_datetime(allocations["end_at"], utc=True),
        )
    rollouts = software_changes(node_software)
    rollouts["changed_at"] = pd.to_datetime(rollouts["changed_at"], utc=True)  # once, not per change
    detected_at = detected_at or datetime.now(timezone.utc)
    rows = []
    allocation_sides: list[AllocationChange] = []  # cluster goodput changes that stand for their allocation's
    splits = scan_splits(batch, changes, lambda grain, entity: entity if grain == "node" else gpu_nodes.get(entity))
    for change in changes:
        grain, entity, metric = batch.keys[change.series_index]
        start, stop = _windows(batch, change)
        nodes = nodes_of(grain, entity)
        ramp = ramp_onset(batch, change, start, stop)
        anchored = (
            rollout_anchored(
                batch,
                change,
                start,
                stop,
                rollouts,
                nodes,
                config,
                min_effect(grain, metric),
                splits,
                cluster_of(grain, entity),
            )
            if ramp is None and grain in ANCHOR_GRAINS and metric not in UNANCHORED_METRICS
            else None
        )
        test = change.test
        if anchored is not None:
            change, test = anchored
        split_day = batch.dates[change.index]
        change_day = batch.dates[ramp[0]] if ramp else split_day  # a ramp's change begins at its onset
        direction = batch.directions[change.series_index]
        contributions = factor_log_contributions(batch, grain, entity, start, change.index, stop)
        total = sum(contributions.values())
        top = row_factor(metric, contributions)
        if (grain, metric) == ALLOCATION_SIDE_OF and top == "allocation":
            levels = allocation_levels(entity, start, change.index, stop)
            if levels is not None:
                allocation_sides.append(AllocationChange(entity, change.index, *levels, seen_as=metric))
        home = cluster_of(grain, entity)
        peers = [
            row
            for row in rows_by_grain_metric[(grain, metric)]
            if batch.keys[row][1] != entity and cluster_of(grain, batch.keys[row][1]) == home
        ]
        peer_effect = math.nan
        if peers:
            # each peer's window sum (a row of one nansum, as np.nansum of the row alone), added up in peer order
            before = sum(np.nansum(batch.numerators[peers, start : change.index], axis=1).tolist())
            before_den = sum(np.nansum(batch.denominators[peers, start : change.index], axis=1).tolist())
            after = sum(np.nansum(batch.numerators[peers, change.index : stop], axis=1).tolist())
            after_den = sum(np.nansum(batch.denominators[peers, change.index : stop], axis=1).tolist())
            if before_den > 0 and after_den > 0 and before > 0:
                peer_effect = (after / after_den) / (before / before_den) - 1
        rows.append(
            {
                "regression_id": regression_id(grain, entity, metric, change_day),
                "metric": metric,
                "grain": grain,
                "entity_id": entity,
                "change_date": change_day,
                "change_kind": "regression" if change.relative_effect * direction < 0 else "improvement",
                "before_start_date": batch.dates[start],
                "after_end_date": batch.dates[stop - 1],
                "n_before": change.n_before,
                "n_after": change.n_after,
                "before_level": change.before_level,
                "after_level": change.after_level,
                "before_numerator": change.before_numerator,
                "before_denominator": change.before_denominator,
                "after_numerator": change.after_numerator,
                "after_denominator": change.after_denominator,
                "relative_effect": change.relative_effect,
                "ci_low": change.ci_low,
                "ci_high": change.ci_high,
                "p_value": change.p_value,
                "statistic": change.statistic,
                "test": test,
                "q_value": change.q_value,
                "verdict": change.verdict,
                "shape": change.shape,
                "welch_ci_low": change.welch_ci_low,
                "welch_ci_high": change.welch_ci_high,
                "factor_log_contributions": json.dumps(contributions, sort_keys=True),
                "top_factor": top,
                "top_factor_share": contributions[top] / total if top in contributions and total else math.nan,
                "coinciding_changes": json.dumps(coinciding_changes(rollouts, nodes, change_day)),
                "peer_relative_effect": peer_effect,
                "did_relative_effect": (1 + change.relative_effect) / (1 + peer_effect) - 1
                if math.isfinite(peer_effect)
                else math.nan,
                "detected_at": detected_at,
            }
            | segment_split(grain, entity, metric, start, change.index, stop)
            | fleet_split(grain, metric, start, change.index, stop, entity, top)
            | {"split_date": split_day, "ramp_end_date": batch.dates[ramp[1]] if ramp else None}
            | {
                "job_peer_nodes": json.dumps(job_peer_nodes(allocations, nodes, change_day))
                if grain in ("node", "gpu") and allocations is not None
                else None
            }
        )
    topology = Topology.from_frame(inventory) if inventory is not None else Topology.from_cluster_nodes(cluster_nodes)
    partners, partner_series = mix_partner_rows(
        batch,
        changes,
        allocation_sides,
        topology.gpus_per_cluster(),
        config,
        min_effect,
        lambda start, change, stop: fleet_split("cluster", "allocation", start, change, stop),
    )
    bursts, burst_series = burst_rows(metric_tree, config, min_effect)
    bursts += partners
    burst_series += partner_series
    node_rack = (
        dict(zip(inventory["node"].astype(str), inventory["rack"].astype(str)))
        if inventory is not None and "rack" in inventory
        else {}
    )
    faults, fault_series = fault_rate_rows(metric_tree, node_rack, config, min_effect)
    bursts += faults
    burst_series += fault_series
    changes = dimension_changes(node_software, inventory)  # once: the canaries' rollouts and the cause candidates
    canaries = rollout_canaries(batch, changes, node_software, cluster_nodes, config, min_effect)
    bursts += canary_rows(canaries, batch.dates[0], config.confirm_points)
    burst_series += sum(result["verdict"] != "not testable" for result in canaries)
    for burst in bursts:
        burst["coinciding_changes"] = json.dumps(
            coinciding_changes(rollouts, nodes_of(burst["grain"], burst["entity_id"]), burst["change_date"])
        )
        burst["detected_at"] = detected_at
    rows.extend(bursts)
    found = pd.DataFrame(rows, columns=REGRESSION_COLUMNS).sort_values(
        ["grain", "entity_id", "change_date", "metric"], ignore_index=True
    )
    found["verdict"] = settled_verdicts(found, metric_tree, config.confirm_points)  # not confirmed by provisional days
    too_short = ["/".join(batch.keys[s.series_index]) for s in result.series if s.status == "too_short"]
    found.attrs.update(
        series={
            "tested": sum(s.status != "too_short" for s in result.series) + burst_series,
            "changed": sum(s.status == "changed" for s in result.series),
            "too_short": len(too_short),
        },
        too_short=too_short,
    )
    # cause candidates, ranked by difference in differences (perf_assets/lib/causes.py)
    ranked = rank_causes(found, changes, topology, metric_tree)
    for column in ranked.columns:
        found[column] = ranked[column]
    expected = job_peer_knock_ons(found, allocations, min_effect("node", "program_goodput"), rollouts)
    expected |= pace_companions(found, expected, gpu_nodes)
    expected |= down_time_knock_ons(found, metric_tree)
    expected |= maintenance_knock_ons(found, metric_tree)
    expected |= {i: r for i, r in no_demand_knock_ons(found, metric_tree).items() if i not in expected}
    expected |= {i: r for i, r in power_alone(found, gpu_nodes, rollouts).items() if i not in expected}
    found["expected_because"] = pd.Series(
        [expected.get(index) for index in found.index], index=found.index, dtype=object
    )
    found.attrs["days"] = len(batch.dates)
    found.attrs["series_days"] = found.attrs["series"]["tested"] * len(batch.dates)
    found.attrs["canaries"] = pd.DataFrame(canaries, columns=CANARY_COLUMNS)
    return found


def _figure(value, spec: str) -> str:
    """A figure of a regression row as text; unknown (None, NaN: a relative change from a level of zero, an interval
    without an upper bound) is written as such, never as a number."""
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return "unknown"
    return format(value, spec)


def _known(value) -> bool:
    return isinstance(value, (int, float)) and math.isfinite(value)


def describe_regression(row: dict) -> str:
    """One line a person can act on."""
    where = "the fleet" if row["grain"] == "fleet" else f"{row['grain']} {row['entity_id']}"
    against = ""
    if row["grain"] == COHORT_GRAIN:  # the nodes that took one rollout; its effect is against the untouched peers
        nodes = sorted(cohort_nodes(row["entity_id"]))
        named = ", ".join(nodes) if len(nodes) <= 6 else f"{nodes[0]} … {nodes[-1]}"
        where, against = f"the {len(nodes)} nodes {named}", " against untouched peers"
    rollouts = json.loads(row["coinciding_changes"] or "[]")
    rollout = "; ".join(
        f"{r['component']} {r['from']}→{r['to']} on {r['nodes']}/{r['of_nodes']} nodes" for r in rollouts[:3]
    )
    peers = (
        f", peers {row['peer_relative_effect']:+.1%} (diff-in-diff {_figure(row.get('did_relative_effect'), '+.1%')})"
        if _known(row.get("peer_relative_effect"))
        else ""
    )
    relative = _figure(row["relative_effect"], "+.1%")
    if relative == "unknown" and row["before_level"] == 0:
        relative = "from zero"  # a relative change from a level of zero has no value
    return (
        f"{row['change_kind']}: {row['metric']} of {where} from {row['change_date']}: "
        f"{_figure(row['before_level'], '.4f')} → {_figure(row['after_level'], '.4f')} "
        f"({relative}{against}, "
        f"95% CI {_figure(row['ci_low'], '+.1%')} to {_figure(row['ci_high'], '+.1%')}, "
        f"p={_figure(row['p_value'], '.3g')}"
        + (f", q={row['q_value']:.3g}" if _known(row.get("q_value")) else "")
        + f", n={row['n_before']}+{row['n_after']} days"
        + (f", {row['verdict']}" if row.get("verdict") == "provisional" else "")
        + (", gradual drift" if row.get("shape") == "drift" else "")
        + (f", a ramp from {row['change_date']} to {row['ramp_end_date']}" if row.get("ramp_end_date") else "")
        + f"); factor: {row['top_factor']}{peers}"
        + (f"; coincides with {rollout}" if rollout else "")
    )
