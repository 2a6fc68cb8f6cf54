"""What the incident catalogue (catalogue.py) does to the simulated fleet. Pure: scenario -> effects.

`Effects` turns a scenario's `incidents:` into what the other modules ask for: step-time multipliers
per node and instant (straggler semantics: a synchronous job runs at its slowest node's pace),
data-loader stalls, checkpoint-save factors, noise, the scheduler's stranded nodes and demand shifts
(fleet.py), extra node faults and maintenance windows, node_software changes (writers.py), and what
DCGM and the probes see on a throttled, capped or decaying GPU (telemetry.py).

Randomness comes only from new streams (`stream(seed, "incident", ...)`), and nothing here runs for a
cluster without incidents, so scenarios without `incidents:` give the same bytes as before.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import numpy as np

from perf_assets.lib.simulate.catalogue import (
    BadBatch,
    CheckpointSlowdown,
    DiurnalSwing,
    Fragmentation,
    HbmDecay,
    ImageStall,
    MaintenanceDecoy,
    MixShift,
    NoiseBurst,
    PowerCap,
    ThermalThrottle,
    VersionChange,
)
from perf_assets.lib.simulate.clock import DAY_S, HOUR_S
from perf_assets.lib.simulate.ids import stream
from perf_assets.lib.simulate.scenario import Maintenance, Scenario

EARLY_SUBMIT_H = 0.25  # a mix shift's receiving cluster: jobs are submitted at least this long before they fit


@dataclass(frozen=True)
class Applied:
    """One incident inside the window: its list name, spec, and [start, end) in unix seconds."""

    kind: str
    spec: object
    start: int
    end: int  # the window end when the spec has no duration
    open_ended: bool
    nodes: tuple[str, ...]  # nodes it acts on (all nodes of its clusters when it is cluster-wide)


@dataclass(frozen=True)
class Slowdown:
    """Steps that start on `nodes` in [start, end) take `factor` x; with `ramp_end`, the factor grows
    linearly from 1 at `start` to `factor` at `ramp_end` (and stays)."""

    nodes: frozenset[str]
    start: int
    end: int
    factor: float
    ramp_end: int | None = None

    def at(self, t: np.ndarray) -> np.ndarray:
        inside = (t >= self.start) & (t < self.end)
        if self.ramp_end is None:
            return np.where(inside, self.factor, 1.0)
        progress = np.clip((t - self.start) / max(1, self.ramp_end - self.start), 0.0, 1.0)
        return np.where(inside, 1.0 + (self.factor - 1.0) * progress, 1.0)


@dataclass(frozen=True)
class Stall:
    nodes: frozenset[str]
    start: int
    end: int
    factor: float
    probability: float


@dataclass(frozen=True)
class SoftwareChange:
    """New node_software rows: `changes` (and a power limit) on `nodes` from `at`."""

    cluster: str
    nodes: tuple[str, ...]
    at: int
    changes: tuple[tuple[str, str], ...]
    power_limit_w: float | None = None


@dataclass
class AttemptEffects:
    """The incidents one attempt runs into (on its nodes, in its cluster)."""

    nodes: tuple[str, ...]
    slowdowns: list[Slowdown]
    stalls: list[Stall]
    saves: list[tuple[int, int, float]]  # (start, end, save time factor)
    noise: list[tuple[int, int, float]]  # (start, end, sigma)
    diurnal: list[tuple[int, int, float, float]]  # (start, end, amplitude, peak hour)
    rng: np.random.Generator

    @property
    def has_stalls(self) -> bool:
        return bool(self.stalls)

    def multiplier(self, t: np.ndarray) -> np.ndarray:
        """Mean step-time multiplier at step starts `t`: the slowest node's product of slowdowns."""
        t = np.asarray(t, dtype=float)
        per_node = np.ones((len(self.nodes), t.size))
        for row, node in enumerate(self.nodes):
            for slowdown in self.slowdowns:
                if node in slowdown.nodes:
                    per_node[row] *= slowdown.at(t)
        result = per_node.max(axis=0) if len(self.nodes) else np.ones(t.size)
        for start, end, amplitude, peak in self.diurnal:
            hour = (t % DAY_S) / HOUR_S
            swing = 1.0 + amplitude * np.cos(2 * math.pi * (hour - peak) / 24.0)
            result = result * np.where((t >= start) & (t < end), swing, 1.0)
        return result

    def noise_factor(self, t: np.ndarray, z: np.ndarray) -> np.ndarray:
        result = np.ones(t.size)
        for start, end, sigma in self.noise:
            burst = np.exp(sigma * z - sigma**2 / 2)  # mean 1
            result = result * np.where((t >= start) & (t < end), burst, 1.0)
        return result

    def stall_seconds(self, t: np.ndarray, nominal_s: float, u: np.ndarray) -> np.ndarray:
        """Seconds a step waits for data: a share `probability` of the steps waits so long that steps
        take `factor` x on average."""
        result = np.zeros(t.size)
        for stall in self.stalls:
            if not any(node in stall.nodes for node in self.nodes):
                continue
            hit = (t >= stall.start) & (t < stall.end) & (u < stall.probability)
            result = result + np.where(hit, nominal_s * (stall.factor - 1.0) / stall.probability, 0.0)
        return result

    def save_factor(self, t: np.ndarray) -> np.ndarray:
        result = np.ones(t.size)
        for start, end, factor in self.saves:
            result = result * np.where((t >= start) & (t < end), factor, 1.0)
        return result


@dataclass
class Effects:
    """The incidents of a scenario inside [t0, t1), indexed for the simulator's questions."""

    scenario: Scenario
    t0: int
    t1: int
    applied: list[Applied] = field(default_factory=list)

    def __post_init__(self) -> None:
        nodes_of = {cluster.name: cluster.nodes for cluster in self.scenario.clusters}
        for kind, spec in self.scenario.incidents.all():
            start = int(self.t0 + spec.offset_h * HOUR_S)
            if start >= self.t1:
                continue  # outside the window: not injected, not labelled
            duration = getattr(spec, "duration_h", None)
            if isinstance(spec, HbmDecay):
                duration = None
            end = self.t1 if duration is None else min(self.t1, int(start + duration * HOUR_S))
            if isinstance(spec, MixShift):
                nodes = tuple(n for c in (spec.to_cluster, *spec.from_clusters) for n in nodes_of[c])
            elif isinstance(spec, PowerCap):
                cluster = self.scenario.cluster(spec.cluster)
                nodes = tuple(n for n in cluster.nodes if cluster.rack_of(n) == spec.rack)
            elif hasattr(spec, "node"):
                nodes = (spec.node,)
            else:
                nodes = tuple(getattr(spec, "nodes", ())) or nodes_of[spec.cluster]
            self.applied.append(Applied(kind, spec, start, end, duration is None, nodes))
        self.clusters = {a.spec.cluster for a in self.applied if not isinstance(a.spec, MixShift)}
        self.clusters |= {
            c for a in self.applied if isinstance(a.spec, MixShift) for c in (a.spec.to_cluster, *a.spec.from_clusters)
        }

    def of(self, *types: type) -> list[Applied]:
        return [a for a in self.applied if isinstance(a.spec, types)]

    def touches(self, cluster: str) -> bool:
        return cluster in self.clusters

    # ------------------------------------------------------------------ steps
    def slowdowns(self) -> list[tuple[str, Slowdown]]:
        out = []
        for a in self.of(VersionChange, ThermalThrottle, PowerCap, HbmDecay):
            spec = a.spec
            if spec.step_time_factor == 1.0:
                continue
            ramp = int(a.start + spec.ramp_h * HOUR_S) if isinstance(spec, HbmDecay) else None
            out.append((spec.cluster, Slowdown(frozenset(a.nodes), a.start, a.end, spec.step_time_factor, ramp)))
        return out

    def for_attempt(self, seed: int, cluster: str, nodes: tuple[str, ...], job_id: str, attempt: int):
        """The incidents an attempt on `nodes` runs into, or None (then nothing changes for it)."""
        if not self.touches(cluster):
            return None
        mine = set(nodes)
        slowdowns = [s for c, s in self.slowdowns() if c == cluster and mine & s.nodes]
        stalls = [
            Stall(frozenset(a.nodes), a.start, a.end, a.spec.step_time_factor, a.spec.stall_probability)
            for a in self.of(ImageStall)
            if a.spec.cluster == cluster and mine & set(a.nodes)
        ]
        saves = [
            (a.start, a.end, a.spec.save_time_factor) for a in self.of(CheckpointSlowdown) if a.spec.cluster == cluster
        ]
        noise = [(a.start, a.end, a.spec.sigma) for a in self.of(NoiseBurst) if a.spec.cluster == cluster]
        diurnal = [
            (a.start, a.end, a.spec.amplitude, a.spec.peak_hour_utc)
            for a in self.of(DiurnalSwing)
            if a.spec.cluster == cluster
        ]
        if not (slowdowns or stalls or saves or noise or diurnal):
            return None
        rng = stream(seed, "incident-steps", job_id, str(attempt))
        return AttemptEffects(tuple(nodes), slowdowns, stalls, saves, noise, diurnal, rng)

    def worst_step_factor(self, cluster: str) -> float:
        """An upper bound of the step-time multiplier on a cluster (for jobs' time limits); 1.0 without incidents."""
        worst = 1.0
        for c, slowdown in self.slowdowns():
            if c == cluster:
                worst *= max(1.0, slowdown.factor)
        for a in self.of(ImageStall):
            if a.spec.cluster == cluster:
                worst *= a.spec.step_time_factor * 1.1
        for a in self.of(DiurnalSwing):
            if a.spec.cluster == cluster:
                worst *= 1.0 + a.spec.amplitude
        for a in self.of(NoiseBurst):
            if a.spec.cluster == cluster:
                worst *= math.exp(4 * a.spec.sigma)
        return worst

    def worst_save_factor(self, cluster: str) -> float:
        return math.prod(a.spec.save_time_factor for a in self.of(CheckpointSlowdown) if a.spec.cluster == cluster)

    # ------------------------------------------------------------------ scheduler, demand, faults
    def stranded(self, cluster: str, t: int) -> int:
        return sum(
            a.spec.stranded_nodes for a in self.of(Fragmentation) if a.spec.cluster == cluster and a.start <= t < a.end
        )

    def submit_shift_h(self, cluster: str, t: int, offset_h: float, latest_h: float) -> float:
        """A job's submit offset (hours after it could fit) under the mix shifts active at `t`."""
        for a in self.of(MixShift):
            if not a.start <= t < a.end:
                if cluster == a.spec.to_cluster:
                    offset_h += a.spec.spare_gap_h  # spare capacity outside the shift
                continue
            if cluster == a.spec.to_cluster:
                offset_h -= latest_h + EARLY_SUBMIT_H  # always a job waiting: every free node is used
            elif cluster in a.spec.from_clusters:
                offset_h += a.spec.gap_h  # nodes sit idle before the next job comes
        return offset_h

    def receiving_submit(self, cluster: str, now: int, submit: int) -> int:
        """A receiving cluster's job drawn before its shift starts and due after it comes at the start (its spare
        capacity ends there: the work moved to it is ready), not `spare_gap_h` into the shift."""
        for a in self.of(MixShift):
            if cluster == a.spec.to_cluster and a.spec.spare_gap_h and now < a.start < submit:
                submit = max(now + 60, a.start)
        return submit

    def receives_work(self, cluster: str, t: int) -> bool:
        """Whether a mix shift moves work to `cluster` at `t` (its demand then asks for sizes that fit first)."""
        return any(a.spec.to_cluster == cluster and a.start <= t < a.end for a in self.of(MixShift))

    def extra_faults(self, seed: int, cluster: str, reasons: tuple[str, ...]) -> list[tuple[int, str, str]]:
        """(time, node, reason) of the faults a bad hardware batch adds, from its own stream."""
        out = []
        for a in self.of(BadBatch):
            if a.spec.cluster != cluster:
                continue
            rng = stream(seed, "incident", a.spec.incident_id)
            days = (a.end - a.start) / DAY_S
            for node in a.nodes:
                count = int(rng.poisson(a.spec.fault_rate_per_node_day * days))
                for at in np.sort(rng.integers(a.start, a.end, count)).tolist():
                    out.append((int(at), node, str(rng.choice(reasons))))
        return out

    def maintenances(self, cluster: str) -> list[Maintenance]:
        return [
            Maintenance(a.spec.cluster, a.spec.node, a.spec.offset_h, a.spec.duration_h, a.spec.reason)
            for a in self.of(MaintenanceDecoy)
            if a.spec.cluster == cluster
        ]

    # ------------------------------------------------------------------ node_software
    def software_changes(self) -> list[SoftwareChange]:
        out = []
        for a in self.of(VersionChange, ImageStall, PowerCap):
            spec = a.spec
            if isinstance(spec, VersionChange):
                out.append(SoftwareChange(spec.cluster, a.nodes, a.start, spec.changes))
            elif isinstance(spec, ImageStall):
                out.append(SoftwareChange(spec.cluster, a.nodes, a.start, (("image", spec.image),)))
            else:
                out.append(SoftwareChange(spec.cluster, a.nodes, a.start, (), spec.power_limit_w))
        return out

    # ------------------------------------------------------------------ what the GPUs report
    def power_limit(self, node: str, t: np.ndarray, default: float) -> np.ndarray | None:
        caps = [a for a in self.of(PowerCap) if node in a.nodes]
        if not caps:
            return None
        limit = np.full(t.size, float(default))
        for a in sorted(caps, key=lambda a: a.start):
            limit = np.where(t >= a.start, a.spec.power_limit_w, limit)
        return limit

    def clock_factor(self, node: str, gpu: int, t: np.ndarray) -> np.ndarray | None:
        """SM clock multiplier under load (thermal throttling, a power cap); None when always 1."""
        hits = [a for a in self.of(ThermalThrottle) if node in a.nodes and gpu in a.spec.gpus]
        hits += [a for a in self.of(PowerCap) if node in a.nodes]
        if not hits:
            return None
        factor = np.ones(t.size)
        for a in hits:
            factor = factor * np.where((t >= a.start) & (t < a.end), 1.0 / a.spec.step_time_factor, 1.0)
        return factor

    def throttled(self, node: str, gpu: int, t: np.ndarray) -> np.ndarray | None:
        hits = [a for a in self.of(ThermalThrottle) if node in a.nodes and gpu in a.spec.gpus]
        if not hits:
            return None
        return np.logical_or.reduce([(t >= a.start) & (t < a.end) for a in hits])

    def throttle_start(self, node: str, gpu: int) -> int | None:
        hits = [a.start for a in self.of(ThermalThrottle) if node in a.nodes and gpu in a.spec.gpus]
        return min(hits) if hits else None

    def gemm_factor(self, node: str, gpu: int, t: int) -> tuple[float, str]:
        """The GEMM probe's result multiplier and throttle class at `t`."""
        factor = self.clock_factor(node, gpu, np.asarray([t]))
        if factor is None or factor[0] == 1.0:
            return 1.0, "clean"
        thermal = self.throttled(node, gpu, np.asarray([t]))
        return float(factor[0]), "thermal" if thermal is not None and thermal[0] else "power_capped"

    def hbm_factor(self, node: str, t: int) -> float:
        factor = 1.0
        for a in self.of(HbmDecay):
            if node in a.nodes and t >= a.start:
                ramp_end = a.start + a.spec.ramp_h * HOUR_S
                progress = min(1.0, (t - a.start) / max(1.0, ramp_end - a.start))
                factor *= 1.0 + (a.spec.bandwidth_factor - 1.0) * progress
        return factor
