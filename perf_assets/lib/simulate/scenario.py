"""What to simulate: the fleet (clusters, nodes, SKUs), the window, the job mix and the incidents.

A scenario is plain frozen data; `fleet.simulate_fleet` turns it (and a seed) into records. Offsets
are relative to the scenario's start so that `start`/`days` can be changed without editing the
incidents; an incident that falls outside the window is simply not injected.
"""

from __future__ import annotations

import datetime as dt
from dataclasses import dataclass, field, replace


@dataclass(frozen=True)
class Sku:
    name: str  # inventory `sku`
    model_name: str  # DCGM `modelName` label
    peak_bf16_flops: float  # dense BF16, FLOP/s per GPU
    power_limit_w: float
    idle_power_w: float
    mfu_range: tuple[float, float]  # band of a job's program goodput on this SKU (jobs sit near its middle)
    gemm_fraction_range: tuple[float, float]  # GEMM probe result as a fraction of peak

    @property
    def peak_tflops(self) -> float:
        return self.peak_bf16_flops / 1e12


H100_SXM = Sku(
    name="H100-SXM",
    model_name="NVIDIA H100 80GB HBM3",
    peak_bf16_flops=989e12,
    power_limit_w=700.0,
    idle_power_w=72.0,
    mfu_range=(0.35, 0.45),
    gemm_fraction_range=(0.78, 0.80),
)
A100_SXM4_80GB = Sku(
    name="A100-SXM4-80GB",
    model_name="NVIDIA A100-SXM4-80GB",
    peak_bf16_flops=312e12,
    power_limit_w=400.0,
    idle_power_w=58.0,
    mfu_range=(0.45, 0.50),
    gemm_fraction_range=(0.78, 0.80),
)


@dataclass(frozen=True)
class Cluster:
    name: str
    sku: Sku
    n_nodes: int
    slurm_id_base: int  # first Slurm JobID handed out on this cluster
    gpus_per_node: int = 8
    nodes_per_rack: int = 2
    cpus_per_node: int = 32
    mem_per_node_gb: int = 500
    partition: str = "train"

    @property
    def nodes(self) -> tuple[str, ...]:
        return tuple(f"{self.name}-n{index:02d}" for index in range(1, self.n_nodes + 1))

    def rack_of(self, node: str) -> str:
        return f"{self.name}-r{self.nodes.index(node) // self.nodes_per_rack + 1}"


@dataclass(frozen=True)
class SoftwareStack:
    driver: str
    cuda: str
    nccl: str
    torch: str
    image: str
    firmware: str


@dataclass(frozen=True)
class Rollout:
    """A software rollout on every node of a cluster that makes every job step slower from then on."""

    incident_id: str
    cluster: str
    offset_h: float  # from the scenario start
    changes: tuple[tuple[str, str], ...]  # (stack field, new version)
    cause_component: str  # which change is the labelled cause
    step_time_factor: float  # step time multiplier (same FLOPs per step) => P / factor


@dataclass(frozen=True)
class Maintenance:
    cluster: str
    node: str
    offset_h: float
    duration_h: float
    reason: str = "scheduled maintenance: firmware and BMC update"


@dataclass(frozen=True)
class Faults:
    rate_per_node_day: float = 4e-3
    forced_cluster: str | None = "beta"  # at least one fault, on a node that runs a job
    forced_at_fraction: float = 0.3  # of the window
    forced_reason: str = "xid 79"
    reasons: tuple[str, ...] = ("xid 79", "xid 48", "xid 94", "xid 119")
    repair_reasons: tuple[str, ...] = ("gpu reseat", "gpu rma swap", "nvlink retrain")
    hang_s: tuple[float, float] = (270.0, 330.0)  # fault -> scheduler notices (NODE_FAIL)
    down_h: tuple[float, float] = (2.0, 5.0)
    repair_h: tuple[float, float] = (2.0, 6.0)
    requeue_delay_s: tuple[float, float] = (540.0, 660.0)  # requeue -> eligible again


@dataclass(frozen=True)
class JobMix:
    sizes: tuple[int, ...] = (1, 2, 4)  # nodes, all GPUs of each
    size_weights: tuple[float, ...] = (0.05, 0.2, 0.75)
    duration_h: tuple[float, float] = (6.0, 30.0)  # planned wall time of a job without faults
    step_time_s: tuple[float, float] = (20.0, 40.0)
    step_noise_sigma: float = 0.03  # lognormal
    mfu_sigma: float = 0.01  # lognormal spread of jobs' MFU around the middle of their SKU's band
    ckpt_interval_min: tuple[float, float] = (30.0, 40.0)
    ckpt_save_s: tuple[float, float] = (8.0, 12.0)
    eval_every_h: float = 2.0
    eval_s: tuple[float, float] = (50.0, 70.0)
    startup_s: tuple[float, float] = (5.0, 30.0)  # allocation start -> job_start
    device_init_s: tuple[float, float] = (60.0, 240.0)
    training_prep_s: tuple[float, float] = (60.0, 120.0)
    ckpt_restore_s: tuple[float, float] = (120.0, 180.0)
    first_batch_s: tuple[float, float] = (10.0, 30.0)
    teardown_s: tuple[float, float] = (5.0, 30.0)  # job_end -> allocation end
    submit_offset_h: tuple[float, float] = (-1.5, 3.0)  # submit time relative to when the job could fit
    fit_slack_h: float = 10.0  # a size is only asked for if it fits within this of the smallest
    sched_latency_s: tuple[float, float] = (10.0, 120.0)
    cancel_probability: float = 0.05
    owners: tuple[tuple[str, str], ...] = (
        ("team-llm", "ana"),
        ("team-multimodal", "ben"),
        ("team-code", "chen"),
        ("team-research", "dara"),
    )
    workloads: tuple[tuple[str, float], ...] = (("pretrain", 0.8), ("finetune", 0.2))
    tp: int = 8


@dataclass(frozen=True)
class Scenario:
    name: str
    start: dt.date
    days: int
    clusters: tuple[Cluster, ...]
    software: SoftwareStack
    jobs: JobMix = field(default_factory=JobMix)
    faults: Faults = field(default_factory=Faults)
    maintenances: tuple[Maintenance, ...] = ()
    rollouts: tuple[Rollout, ...] = ()
    dcgm_step_s: int = 300
    pending_snapshot_s: int = 3600
    probe_offset_s: tuple[float, float] = (1800.0, 3000.0)  # daily GEMM probe, after midnight UTC

    def with_window(self, start: dt.date | None = None, days: int | None = None) -> "Scenario":
        return replace(self, start=start or self.start, days=self.days if days is None else int(days))

    def cluster(self, name: str) -> Cluster:
        for cluster in self.clusters:
            if cluster.name == name:
                return cluster
        raise KeyError(name)


def demo() -> Scenario:
    """Two clusters of four 8-GPU nodes for two weeks; an NCCL rollout on alpha slows steps by 15%."""
    return Scenario(
        name="demo",
        start=dt.date(2026, 11, 1),
        days=14,
        clusters=(
            Cluster(name="alpha", sku=H100_SXM, n_nodes=4, slurm_id_base=70_001),
            Cluster(name="beta", sku=A100_SXM4_80GB, n_nodes=4, slurm_id_base=80_001),
        ),
        software=SoftwareStack(
            driver="550.54.15",
            cuda="12.4",
            nccl="2.21.5",
            torch="2.5.1",
            image="trainer:2026.10.1",
            firmware="96.00.89.00.01",
        ),
        maintenances=(Maintenance(cluster="beta", node="beta-n03", offset_h=4 * 24 + 8, duration_h=6.0),),
        rollouts=(
            Rollout(
                incident_id="demo-nccl-rollout-alpha",
                cluster="alpha",
                offset_h=7 * 24.0,
                changes=(("nccl", "2.22.3"), ("image", "trainer:2026.11.1")),
                cause_component="nccl",
                step_time_factor=1.15,
            ),
        ),
    )


SCENARIOS = {"demo": demo}


def get_scenario(name: str) -> Scenario:
    try:
        return SCENARIOS[name]()
    except KeyError:
        raise KeyError(f"unknown scenario {name!r}; known: {', '.join(sorted(SCENARIOS))}") from None
