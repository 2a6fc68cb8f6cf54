"""The incident catalogue as a scenario writes it: one frozen spec per kind, under the `incidents:` key.

Pure data, checked key by key by `scenario.load_scenario` (docs/simulator.md lists every key). What each
kind does to the fleet is in `incidents.py`; how it is labelled is in `labels.py`. Offsets are hours
from the scenario start; `duration_h: null` lasts to the window end; `nodes: []` is every node of the
cluster. A step-time factor above 1 slows steps (same FLOPs per step), below 1 speeds them up.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class VersionChange:
    """New versions on some nodes of a cluster (node_software rows); steps there change by the factor.

    Used by `node_rollouts` (factor > 1: e.g. an NCCL or driver rollout slowing collectives),
    `framework_upgrades` (factor < 1: a torch upgrade that raises MFU) and `null_rollouts` (factor 1,
    decoys: versions change, performance does not)."""

    incident_id: str
    cluster: str
    offset_h: float
    changes: tuple[tuple[str, str], ...]  # (stack field, new version)
    cause_component: str
    step_time_factor: float = 1.0
    nodes: tuple[str, ...] = ()


@dataclass(frozen=True)
class ThermalThrottle:
    """GPUs of one node that throttle thermally: SM clock / factor, hotter, thermal violation time
    grows; every job on the node straggles (synchronous steps wait for the slowest GPU)."""

    incident_id: str
    cluster: str
    node: str
    offset_h: float
    step_time_factor: float
    gpus: tuple[int, ...] = (0,)
    duration_h: float | None = None


@dataclass(frozen=True)
class ImageStall:
    """A container image rolled out to some nodes whose data loader stalls: a share of the steps wait
    for data (data_loading_start/_end inside the step), so that steps are `step_time_factor` slower."""

    incident_id: str
    cluster: str
    offset_h: float
    image: str
    step_time_factor: float
    stall_probability: float = 0.25
    nodes: tuple[str, ...] = ()


@dataclass(frozen=True)
class CheckpointSlowdown:
    """The checkpoint storage of a cluster slows down: every blocking save takes `save_time_factor` x."""

    incident_id: str
    cluster: str
    offset_h: float
    save_time_factor: float
    duration_h: float | None = None


@dataclass(frozen=True)
class Fragmentation:
    """The scheduler cannot place jobs on `stranded_nodes` of a cluster's idle nodes: jobs pend while
    nodes sit idle (allocation falls; the pending queue shows it)."""

    incident_id: str
    cluster: str
    offset_h: float
    duration_h: float
    stranded_nodes: int = 1


@dataclass(frozen=True)
class BadBatch:
    """A hardware batch (some nodes) fails more often: node faults at `fault_rate_per_node_day` on
    those nodes (on top of the fleet's rate), each a down + repair and a requeued job."""

    incident_id: str
    cluster: str
    nodes: tuple[str, ...]
    batch: str
    fault_rate_per_node_day: float
    offset_h: float = 0.0
    duration_h: float | None = None


@dataclass(frozen=True)
class PowerCap:
    """A rack's power limit is lowered (node_software power_limit_w): lower power, lower SM clock,
    slower steps on its nodes."""

    incident_id: str
    cluster: str
    rack: str
    offset_h: float
    power_limit_w: float
    step_time_factor: float


@dataclass(frozen=True)
class HbmDecay:
    """One node's HBM bandwidth decays gradually over `ramp_h`: its hbm_stream probe falls to
    `bandwidth_factor` of its level and its jobs' steps slow to `step_time_factor`."""

    incident_id: str
    cluster: str
    node: str
    offset_h: float
    ramp_h: float
    step_time_factor: float
    bandwidth_factor: float = 0.85


@dataclass(frozen=True)
class MixShift:
    """Work moves to `to_cluster` (an older SKU) at roughly constant fleet demand (metric_tree.md §6): outside
    the shift the receiving cluster has spare capacity (its jobs come `spare_gap_h` later than they could
    start); during the shift its jobs are submitted ahead of time, in the sizes that fit first (always a job
    ready), and the `from_clusters`' jobs come `gap_h` later than they could start, so the GPU-hours the
    receiving cluster gains are about those the others lose. Per-SKU rates stay; the fleet's allocated
    GPU-hours move toward the receiving SKU. `spare_gap_h: 0` is the older shift, onto a cluster already
    busy (then the fleet mostly loses allocation)."""

    incident_id: str
    offset_h: float
    to_cluster: str
    from_clusters: tuple[str, ...]
    gap_h: float = 6.0
    duration_h: float | None = None
    spare_gap_h: float = 0.0


@dataclass(frozen=True)
class NoiseBurst:
    """Decoy: step-time noise (mean-preserving lognormal, `sigma`) on a cluster for a few hours."""

    incident_id: str
    cluster: str
    offset_h: float
    duration_h: float
    sigma: float = 0.15


@dataclass(frozen=True)
class DiurnalSwing:
    """Decoy: step time x (1 + amplitude x cos(2 pi (hour - peak_hour_utc) / 24)): zero mean per day."""

    incident_id: str
    cluster: str
    amplitude: float = 0.04
    peak_hour_utc: float = 15.0
    offset_h: float = 0.0
    duration_h: float | None = None


@dataclass(frozen=True)
class MaintenanceDecoy:
    """Decoy: a planned maintenance window (node_events `maintenance`)."""

    incident_id: str
    cluster: str
    node: str
    offset_h: float
    duration_h: float
    reason: str = "scheduled maintenance: BMC update"


@dataclass(frozen=True)
class Incidents:
    """Every kind of the catalogue; a scenario lists the ones it injects."""

    node_rollouts: tuple[VersionChange, ...] = ()
    thermal_throttles: tuple[ThermalThrottle, ...] = ()
    image_stalls: tuple[ImageStall, ...] = ()
    checkpoint_slowdowns: tuple[CheckpointSlowdown, ...] = ()
    fragmentations: tuple[Fragmentation, ...] = ()
    bad_batches: tuple[BadBatch, ...] = ()
    power_caps: tuple[PowerCap, ...] = ()
    hbm_decays: tuple[HbmDecay, ...] = ()
    mix_shifts: tuple[MixShift, ...] = ()
    framework_upgrades: tuple[VersionChange, ...] = ()
    noise_bursts: tuple[NoiseBurst, ...] = ()
    diurnal_swings: tuple[DiurnalSwing, ...] = ()
    null_rollouts: tuple[VersionChange, ...] = ()
    maintenance_decoys: tuple[MaintenanceDecoy, ...] = ()

    def all(self) -> list[tuple[str, object]]:
        """(list name, spec) for every incident, in catalogue order."""
        return [(name, spec) for name in self.__dataclass_fields__ for spec in getattr(self, name)]


STACK_FIELDS = ("driver", "cuda", "nccl", "torch", "image", "firmware")


def check_incidents(incidents: Incidents, nodes: dict[str, tuple[str, ...]], racks: dict[str, set[str]]) -> None:
    """ValueError naming the first incident that refers to an unknown cluster, node, rack or field, or
    whose factor points the wrong way for its kind."""
    seen: set[str] = set()
    for kind, spec in incidents.all():
        where = f"scenario.incidents.{kind}[{spec.incident_id}]"
        if spec.incident_id in seen:
            raise ValueError(f"{where}: incident_id used twice")
        seen.add(spec.incident_id)
        clusters = [spec.to_cluster, *spec.from_clusters] if isinstance(spec, MixShift) else [spec.cluster]
        for cluster in clusters:
            if cluster not in nodes:
                raise ValueError(f"{where}: unknown cluster {cluster!r}")
        chosen = list(getattr(spec, "nodes", ())) + [getattr(spec, "node", None)] * hasattr(spec, "node")
        for node in chosen:
            if node not in nodes[clusters[0]]:
                raise ValueError(f"{where}: {node!r} is not a node of {clusters[0]}")
        if isinstance(spec, PowerCap) and spec.rack not in racks[spec.cluster]:
            raise ValueError(f"{where}: unknown rack {spec.rack!r}")
        if isinstance(spec, VersionChange):
            for component, _ in spec.changes:
                if component not in STACK_FIELDS:
                    raise ValueError(f"{where}: changes: unknown stack field {component!r}")
            if spec.cause_component not in dict(spec.changes):
                raise ValueError(f"{where}: cause_component {spec.cause_component!r} is not among the changes")
        factor = getattr(spec, "step_time_factor", None)
        wanted = {"framework_upgrades": factor is not None and factor < 1, "null_rollouts": factor == 1.0}
        if kind in wanted and not wanted[kind]:
            raise ValueError(f"{where}: step_time_factor {factor} does not fit {kind}")
        if kind not in wanted and factor is not None and factor <= 1.0:
            raise ValueError(f"{where}: step_time_factor must be above 1 (a slowdown), got {factor}")
        if isinstance(spec, ThermalThrottle) and not spec.gpus:
            raise ValueError(f"{where}: gpus must name at least one GPU index")
        if isinstance(spec, ImageStall) and not 0 < spec.stall_probability <= 1:
            raise ValueError(f"{where}: stall_probability must be in (0, 1]")
