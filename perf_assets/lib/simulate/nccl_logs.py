"""nccl-tests logs: an 8-GPU `all_reduce_perf` run on a node after each of its maintenance windows.

The text is nccl-tests' own (header, rank map, results table from 8 B to 8 GiB by factor 2, trailer),
as in shared/samples/nccl_tests/xxrjun_h100_N1_G8_single_node.log. The bus bandwidth of a size follows
time(S) = latency + fill x S / (S + half) + S x 2(n-1)/n / peak: latency-bound at small sizes
(about 20-30 us), a pipeline-fill cost at mid sizes, and busbw near the SKU's
`allreduce_busbw_gbps` (H100/H200 ~482 GB/s with NVLS, A100 ~232 GB/s) at large ones, with seeded
noise of about 1 %. On a node where an NCCL or driver rollout with a step-time factor above 1 is in
force (a cluster-wide `rollouts` entry or a catalogue `node_rollouts` on that node), the collectives
are that factor slower: the labelled incident shows in busbw. The NCCL version printed is the node's
at that time (node_software). Pure text; the writer is `write_nccl_tests` in writers.py.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from perf_assets.lib.simulate.catalogue import VersionChange
from perf_assets.lib.simulate.fleet import Fleet, NodeInterval
from perf_assets.lib.simulate.ids import stream
from perf_assets.lib.simulate.scenario import Cluster

NCCL_TESTS_VERSION = "2.17.8"
MIN_BYTES, MAX_BYTES = 8, 8 << 30
LATENCY_US = {"A100-SXM4-80GB": 28.0}  # small-size all_reduce time; others 22 us
FILL_US, HALF_BYTES = 60.0, 4 << 20  # mid-size cost (fit to the H100 sample: 321 GB/s busbw at 32 MiB)
NOISE_SIGMA = 0.01
AFTER_MAINTENANCE_S = (120.0, 900.0)  # the node's validation run starts this long after maintenance
COMPONENTS = ("nccl", "driver")  # rollouts of these slow the collectives by their step-time factor
# PCI bus ids of the 8 GPUs: an HGX H100/H200 board and a DGX A100 (as nvidia-smi shows them)
BUS_IDS = {
    "A100-SXM4-80GB": ("07", "0f", "47", "4e", "87", "90", "b7", "bd"),
    None: ("1b", "43", "52", "61", "9d", "c3", "d1", "df"),
}


@dataclass(frozen=True)
class NcclRun:
    node: str
    at: int  # unix seconds: the run's start (the file's capture time)
    nccl_version: str
    slowdown: float  # collective time multiplier from rollouts in force (1.0: none)
    text: str


def maintenance_ends(fleet: Fleet) -> list[NodeInterval]:
    """Maintenance windows that end inside the window, in time order."""
    ends = [i for i in fleet.intervals if i.state == "maintenance" and i.end is not None and i.end < fleet.t1]
    return sorted(ends, key=lambda i: (i.end, i.node))


def rollout_slowdown(fleet: Fleet, cluster: str, node: str, t: int) -> float:
    """The product of the step-time factors (> 1) of NCCL/driver rollouts in force on `node` at `t`."""
    factor = 1.0
    for rollout in fleet.rollouts:
        if rollout.cluster == cluster and rollout.at <= t and _touches(rollout.changes, rollout.cause_component):
            factor *= max(1.0, rollout.step_time_factor)
    for applied in fleet.effects.of(VersionChange):
        spec = applied.spec
        if node in applied.nodes and applied.start <= t < applied.end and _touches(spec.changes, spec.cause_component):
            factor *= max(1.0, spec.step_time_factor)
    return factor


def _touches(changes: tuple[tuple[str, str], ...], cause: str) -> bool:
    return cause in COMPONENTS or any(name in COMPONENTS for name, _ in changes)


def nccl_headers(version: str) -> str:
    """`2.21.5` -> `22105` (NCCL_VERSION_CODE as nccl-tests prints it)."""
    major, minor, patch = (int(part) for part in (version.split(".") + ["0", "0"])[:3])
    return str(major * 10000 + minor * 100 + patch)


def _time_text(us: float) -> str:
    return f"{us:7.1f}" if us >= 10000 else f"{us:7.2f}"


def all_reduce_log(fleet: Fleet, cluster: Cluster, node: str, at: int, nccl_version: str, slowdown: float) -> str:
    """The text of one single-node all_reduce_perf run (float sum, out-of-place and in-place)."""
    rng = stream(fleet.seed, "nccl-tests", node, str(at))
    sku = cluster.sku
    n = cluster.gpus_per_node
    bus_ids = BUS_IDS.get(sku.name, BUS_IDS[None])
    code = nccl_headers(nccl_version)
    lines = [
        f"# nccl-tests version {NCCL_TESTS_VERSION} nccl-headers={code} nccl-library={code}",
        "# Collective test starting: all_reduce_perf",
        f"# nThread 1 nGpus 1 minBytes {MIN_BYTES} maxBytes {MAX_BYTES} step: 2(factor) warmup iters: 5 iters: 20 "
        "agg iters: 1 validation: 1 graph: 0",
        "#",
        "# Using devices",
    ]
    pid = int(rng.integers(100_000, 4_000_000))
    for rank in range(n):
        bus = bus_ids[rank % len(bus_ids)]
        lines.append(
            f"#  Rank {rank:2d} Group  0 Pid {pid + rank:7d} on {node} device {rank:2d} [0000:{bus}:00] {sku.model_name}"
        )
    lines += [
        "#",
        "#                                                              out-of-place                       in-place          ",
        "#       size         count      type   redop    root     time   algbw   busbw  #wrong     time   algbw   busbw  #wrong ",
        "#        (B)    (elements)                               (us)  (GB/s)  (GB/s)             (us)  (GB/s)  (GB/s)         ",
    ]
    latency = LATENCY_US.get(sku.name, 22.0)
    bus_factor = 2.0 * (n - 1) / n
    busbws = []
    size = MIN_BYTES
    while size <= MAX_BYTES:
        cells = []
        for _ in range(2):  # out-of-place, in-place
            peak = sku.allreduce_busbw_gbps * 1e9
            fill = FILL_US * size / (size + HALF_BYTES)
            us = (
                (latency + fill + size * bus_factor / peak * 1e6)
                * slowdown
                * float(np.exp(rng.normal(0.0, NOISE_SIGMA)))
            )
            algbw = size / (us * 1e-6) / 1e9
            busbw = algbw * bus_factor
            busbws.append(float(f"{busbw:.2f}"))
            cells.append(f"{_time_text(us)}  {algbw:6.2f}  {busbw:6.2f}  {0:6d}")
        lines.append(f"{size:12d}  {size // 4:12d}  {'float':>8s}  {'sum':>6s}  {-1:6d}  " + "  ".join(cells))
        size *= 2
    lines += [
        "# Out of bounds values : 0 OK",
        f"# Avg bus bandwidth    : {sum(busbws) / len(busbws):.3f} ",
        "#",
        "# Collective test concluded: all_reduce_perf",
        "#",
    ]
    return "\n".join(lines) + "\n"


def runs_after_maintenance(fleet: Fleet, software_at) -> list[tuple[Cluster, NcclRun]]:
    """One run per maintenance window that ended: `software_at(cluster, node, t)` gives the node's stack."""
    out = []
    for interval in maintenance_ends(fleet):
        cluster = fleet.scenario.cluster(interval.cluster)
        rng = stream(fleet.seed, "nccl-tests-start", interval.node, str(interval.end))
        at = int(interval.end + rng.uniform(*AFTER_MAINTENANCE_S))
        if at >= fleet.t1:
            continue
        version = software_at(cluster.name, interval.node, at).nccl
        slowdown = rollout_slowdown(fleet, cluster.name, interval.node, at)
        text = all_reduce_log(fleet, cluster, interval.node, at, version, slowdown)
        out.append((cluster, NcclRun(interval.node, at, version, slowdown, text)))
    return out
