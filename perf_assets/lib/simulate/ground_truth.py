"""What the simulated fleet did, from its own records (jobs, attempts, steps): the ground truth of a mix shift.

Pure and independent of the warehouse and the detector: it reads the `Fleet` the simulator built, never the
landed files, and does its own arithmetic (no import of perf_assets.lib.mix_rate), so a label computed here
cannot agree with the detector by sharing its code.

Per cluster and window [lo, hi): installed GPU-seconds (nodes x GPUs x seconds), allocated GPU-seconds (every
attempt's allocation overlapping the window, its GPUs x the overlap) and useful FLOPs (the steps started in the
window x the job's FLOPs per step). Two lenses of metric_tree.md:

- capacity lens, own peak (pfs): G = useful / installed_pfs = O x RG, O = allocated_pfs / installed_pfs (the
  share of capacity at work: availability x allocation), RG = useful / allocated_pfs (runtime x program goodput);
- §6's running goodput, H100-equivalent: g = useful / (allocated GPU-seconds x the H100 dense BF16 peak), over
  the clusters weighted by their shares of allocated GPU-seconds (`mix_basis` allocated_gs), split exactly into
  mix and rate (the symmetric two-factor split), with occupancy (allocated over installed GPU-seconds) apart for
  the H100-equivalent goodput over installed GPU-seconds: G_ref = O_gs x g.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from perf_assets.lib.simulate.fleet import Fleet
from perf_assets.lib.simulate.scenario import H100_SXM
from perf_assets.lib.simulate.steps import CODE

REFERENCE_PEAK_FLOPS = H100_SXM.peak_bf16_flops  # §6: peak_ref = H100 dense BF16


@dataclass(frozen=True)
class ClusterWindow:
    cluster: str
    peak_flops: float  # per GPU, dense BF16
    installed_gs: float  # GPU-seconds
    allocated_gs: float
    useful_flop: float

    @property
    def installed_pfs(self) -> float:
        return self.installed_gs * self.peak_flops

    @property
    def allocated_pfs(self) -> float:
        return self.allocated_gs * self.peak_flops


def cluster_windows(fleet: Fleet, lo: int, hi: int) -> list[ClusterWindow]:
    """Per cluster of the scenario: what it installed, allocated and computed in [lo, hi) (unix seconds)."""
    allocated = {c.name: 0.0 for c in fleet.scenario.clusters}
    useful = {c.name: 0.0 for c in fleet.scenario.clusters}
    step_start = CODE["step_start"]
    for attempt in fleet.attempts:
        if attempt.start is None:
            continue
        end = fleet.t1 if attempt.end is None else attempt.end
        overlap = max(0, min(hi, end) - max(lo, attempt.start))
        allocated[attempt.job.cluster] += overlap * attempt.job.n_gpus
        timeline = attempt.timeline
        if timeline is None or not overlap:
            continue
        starts = timeline.ts_ms[timeline.code == step_start]
        steps = int(((starts >= lo * 1000) & (starts < hi * 1000)).sum())
        useful[attempt.job.cluster] += steps * attempt.job.flops_per_step
    return [
        ClusterWindow(
            c.name,
            c.sku.peak_bf16_flops,
            float(c.n_nodes * c.gpus_per_node * (hi - lo)),
            allocated[c.name],
            useful[c.name],
        )
        for c in fleet.scenario.clusters
    ]


def _ln_ratio(after: float, before: float) -> float:
    return math.log(after / before) if after > 0 and before > 0 else math.nan


def shift_truth(fleet: Fleet, start: int, end: int, window_s: int) -> dict:
    """The fleet's change between [start - window_s, start) and [start, min(end, start + window_s)).

    Returns plain figures: per cluster weights (shares of allocated GPU-seconds) and H100-equivalent running
    goodput before and after; the fleet's running goodput g (H100-equivalent, per allocated GPU-second) before,
    after and its relative change, split into `mix_effect` + `rate_effect` (relative to g before); the same
    split of G_ref over installed GPU-seconds with `occupancy_effect` apart (mix + rate + occupancy = the
    relative change of G_ref); the capacity lens's Δln O (`dln_occupancy_pfs`) and Δln RG (`dln_running_pfs`),
    whose sum is Δln G of the own-peak goodput; and the relative change of the fleet's allocated GPU-seconds.
    """
    before = cluster_windows(fleet, max(fleet.t0, start - window_s), start)
    after = cluster_windows(fleet, start, min(end, start + window_s))
    names = [c.cluster for c in before]

    def arrays(rows: list[ClusterWindow]):
        alloc = np.array([c.allocated_gs for c in rows])
        useful = np.array([c.useful_flop for c in rows])
        installed = np.array([c.installed_gs for c in rows])
        with np.errstate(invalid="ignore", divide="ignore"):
            g = np.where(alloc > 0, useful / (alloc * REFERENCE_PEAK_FLOPS), np.nan)
        return alloc, useful, installed, alloc / alloc.sum(), g

    ab, ub, ib, wb, gb = arrays(before)
    aa, ua, ia, wa, ga = arrays(after)
    gb_f, ga_f = np.where(np.isfinite(gb), gb, ga), np.where(np.isfinite(ga), ga, gb)
    g_before = ub.sum() / (ab.sum() * REFERENCE_PEAK_FLOPS)
    g_after = ua.sum() / (aa.sum() * REFERENCE_PEAK_FLOPS)
    mix = float(np.nansum((wa - wb) * (ga_f + gb_f) / 2))
    rate = float(np.nansum((ga_f - gb_f) * (wa + wb) / 2))
    o_before, o_after = ab.sum() / ib.sum(), aa.sum() / ia.sum()  # occupancy in GPU-seconds
    level_before = o_before * g_before  # G_ref over installed GPU-seconds
    to_g = (o_before + o_after) / 2 / level_before
    pfs = {
        when: (
            sum(c.allocated_pfs for c in rows) / sum(c.installed_pfs for c in rows),
            sum(c.useful_flop for c in rows) / sum(c.allocated_pfs for c in rows),
        )
        for when, rows in (("before", before), ("after", after))
    }
    return {
        "lens": "running_goodput_ref",
        "mix_basis": "allocated_gs",
        "window_days": round(window_s / 86400, 3),
        "clusters": {
            name: {
                "weight_before": round(float(wb[i]), 4),
                "weight_after": round(float(wa[i]), 4),
                "running_goodput_ref_before": round(float(gb[i]), 4),
                "running_goodput_ref_after": round(float(ga[i]), 4),
            }
            for i, name in enumerate(names)
        },
        "running_goodput_ref_before": round(float(g_before), 4),
        "running_goodput_ref_after": round(float(g_after), 4),
        "relative_change": round(float(g_after / g_before - 1), 4),
        "mix_effect": round(mix / g_before, 4),
        "rate_effect": round(rate / g_before, 4),
        "goodput_ref_mix_effect": round(mix * to_g, 4),
        "goodput_ref_rate_effect": round(rate * to_g, 4),
        "goodput_ref_occupancy_effect": round((o_after - o_before) * (g_before + g_after) / 2 / level_before, 4),
        "allocated_gpu_seconds_change": round(float(aa.sum() / ab.sum() * (ib.sum() / ia.sum()) - 1), 4),
        "dln_occupancy_pfs": round(_ln_ratio(pfs["after"][0], pfs["before"][0]), 4),
        "dln_running_pfs": round(_ln_ratio(pfs["after"][1], pfs["before"][1]), 4),
    }
