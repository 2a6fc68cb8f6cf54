"""What to simulate: the fleet (clusters, nodes, SKUs), the window, the job mix and the incidents.

A scenario is plain frozen data; `fleet.simulate_fleet` turns it (and a seed) into records. Offsets
are relative to the scenario's start so that `start`/`days` can be changed without editing the
incidents; an incident that falls outside the window is simply not injected.

Scenarios are written as YAML files in `scenarios/` (format: docs/simulator.md); `get_scenario`
takes a name from there or a path to a `.yaml` file. `load_scenario` checks every key against the
dataclasses below, so a misspelt key is a ValueError naming it rather than a silent default.
"""

from __future__ import annotations

import datetime as dt
import os
import types
import typing
from dataclasses import dataclass, field, fields, is_dataclass, replace
from pathlib import Path

import yaml

from perf_assets.lib.simulate.catalogue import Incidents, check_incidents


@dataclass(frozen=True)
class Sku:
    name: str  # inventory `sku`
    model_name: str  # DCGM `modelName` label
    peak_bf16_flops: float  # dense BF16, FLOP/s per GPU
    power_limit_w: float
    idle_power_w: float
    mfu_range: tuple[float, float]  # band of a job's program goodput on this SKU (jobs sit near its middle)
    gemm_fraction_range: tuple[float, float]  # GEMM probe result as a fraction of peak
    max_sm_clock_mhz: float = 1980.0  # DCGM_FI_DEV_SM_CLOCK under load (gpu_sku_specs.csv)
    hbm_bandwidth_gbps: float = 3350.0  # hbm_stream probe peak (gpu_sku_specs.csv)
    allreduce_busbw_gbps: float = 482.0  # nccl-tests all_reduce busbw, 8 GPUs over NVLink, large sizes

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
    max_sm_clock_mhz=1410.0,
    hbm_bandwidth_gbps=2039.0,
    allreduce_busbw_gbps=232.0,  # NVLink 3: 300 GB/s per direction, ring all_reduce ~230 GB/s busbw
)
H200_SXM = Sku(
    name="H200-SXM",
    model_name="NVIDIA H200",
    peak_bf16_flops=989.4e12,  # dbt_project/seeds/gpu_sku_specs.csv
    power_limit_w=700.0,
    idle_power_w=75.0,
    mfu_range=(0.38, 0.48),  # same compute as H100, more HBM bandwidth
    gemm_fraction_range=(0.78, 0.80),
    hbm_bandwidth_gbps=4800.0,
)
SKUS: dict[str, Sku] = {sku.name: sku for sku in (H100_SXM, A100_SXM4_80GB, H200_SXM)}

# DCGM fields every scenario writes by default, and the ones a scenario may add (`dcgm_fields`).
DCGM_FIELDS = (
    "DCGM_FI_DEV_GPU_UTIL",
    "DCGM_FI_PROF_SM_ACTIVE",
    "DCGM_FI_PROF_PIPE_TENSOR_ACTIVE",
    "DCGM_FI_DEV_POWER_USAGE",
)
DCGM_EXTRA_FIELDS = ("DCGM_FI_DEV_SM_CLOCK", "DCGM_FI_DEV_GPU_TEMP", "DCGM_FI_DEV_THERMAL_VIOLATION")
PROBES = ("gemm", "hbm_stream")  # daily probes a scenario may run (`probes`)


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
class Exports:
    """The exports written besides the daily ones (docs/simulator.md, *exports*)."""

    exporter_scrapes_per_node_day: int = 2  # dcgm-exporter text scrapes, at instants of the DCGM grid
    nccl_tests_after_maintenance: bool = True  # an all_reduce_perf log per node after each maintenance
    traced_jobs: int = 2  # jobs with a Kineto trace per traced rank (plus one per thermally throttled GPU)
    trace_ranks: int = 2  # ranks traced per traced job: local ranks 0.. of one node
    trace_steps: int = 3  # consecutive profiled steps per trace


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
    incidents: Incidents = field(default_factory=Incidents)  # the catalogue (catalogue.py)
    dcgm_fields: tuple[str, ...] = DCGM_FIELDS
    probes: tuple[str, ...] = ("gemm",)
    exports: Exports = field(default_factory=Exports)

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


SCENARIOS = {"demo": demo}  # code-defined; scenarios/demo.yaml must equal demo() (tested)
SCENARIO_DIR = Path(__file__).with_name("scenarios")


def scenario_names() -> list[str]:
    """Every scenario `get_scenario` knows by name: the YAML files in scenarios/ and the code ones."""
    return sorted({path.stem for path in SCENARIO_DIR.glob("*.yaml")} | set(SCENARIOS))


def get_scenario(name: str | os.PathLike[str]) -> Scenario:
    """A scenario by name (scenarios/<name>.yaml, else a code-defined one) or by path to a .yaml file."""
    text = os.fspath(name)
    if text.endswith((".yaml", ".yml")) or os.sep in text or "/" in text:
        path = Path(text)
        if not path.is_file():
            raise FileNotFoundError(f"scenario file {text!r} does not exist")
        return load_scenario(path)
    path = SCENARIO_DIR / f"{text}.yaml"
    if path.is_file():
        return load_scenario(path)
    try:
        return SCENARIOS[text]()
    except KeyError:
        raise KeyError(f"unknown scenario {text!r}; known: {', '.join(scenario_names())}") from None


def load_scenario(path: str | os.PathLike[str]) -> Scenario:
    """Read a scenario YAML file; `name` defaults to the file's stem."""
    path = Path(path)
    data = yaml.safe_load(path.read_text())
    if not isinstance(data, dict):
        raise ValueError(f"{path}: a scenario file must be a mapping of keys, got {type(data).__name__}")
    data.setdefault("name", path.stem)
    try:
        return scenario_from_dict(data)
    except ValueError as error:
        raise ValueError(f"{path}: {error}") from None


def scenario_from_dict(data: dict) -> Scenario:
    """Build a Scenario from plain data (as parsed from YAML), checking every key and value type."""
    scenario = _build(Scenario, data, "scenario")
    check_scenario(scenario)
    return scenario


def check_scenario(scenario: Scenario) -> None:
    """ValueError for references that do not exist (clusters, nodes, fields, probes)."""
    for name in scenario.dcgm_fields:
        if name not in DCGM_FIELDS + DCGM_EXTRA_FIELDS:
            raise ValueError(f"scenario.dcgm_fields: unknown field {name!r}; known: {DCGM_FIELDS + DCGM_EXTRA_FIELDS}")
    for name in scenario.probes:
        if name not in PROBES:
            raise ValueError(f"scenario.probes: unknown probe {name!r}; known: {', '.join(PROBES)}")
    exports = scenario.exports
    for key in ("exporter_scrapes_per_node_day", "traced_jobs"):
        if getattr(exports, key) < 0:
            raise ValueError(f"scenario.exports.{key}: must be 0 or more, got {getattr(exports, key)}")
    smallest = min((c.gpus_per_node for c in scenario.clusters), default=1)
    if not 1 <= exports.trace_ranks <= smallest:
        raise ValueError(
            f"scenario.exports.trace_ranks: must be 1 to {smallest} (GPUs per node), got {exports.trace_ranks}"
        )
    if exports.trace_steps < 2:
        raise ValueError(f"scenario.exports.trace_steps: must be 2 or more, got {exports.trace_steps}")
    racks = {c.name: {c.rack_of(node) for node in c.nodes} for c in scenario.clusters}
    check_incidents(scenario.incidents, {c.name: c.nodes for c in scenario.clusters}, racks)


def _build(cls: type, data: object, where: str):
    if not isinstance(data, dict):
        raise ValueError(f"{where}: expected a mapping, got {type(data).__name__}")
    hints = typing.get_type_hints(cls)
    known = {f.name: f for f in fields(cls)}
    unknown = [key for key in data if key not in known]
    if unknown:
        raise ValueError(f"{where}: unknown key {unknown[0]!r} (known keys: {', '.join(known)})")
    kwargs = {key: _convert(hints[key], value, f"{where}.{key}") for key, value in data.items()}
    try:
        return cls(**kwargs)
    except TypeError as error:  # a required key is missing
        raise ValueError(f"{where}: {error}") from None


def _convert(hint, value, where: str):
    origin = typing.get_origin(hint)
    args = typing.get_args(hint)
    if origin in (typing.Union, types.UnionType):
        if value is None and type(None) in args:
            return None
        (inner,) = [arg for arg in args if arg is not type(None)]
        return _convert(inner, value, where)
    if hint is Sku:
        if isinstance(value, str):
            if value not in SKUS:
                raise ValueError(f"{where}: unknown SKU {value!r}; known: {', '.join(SKUS)} (or give a mapping)")
            return SKUS[value]
        return _build(Sku, value, where)
    if is_dataclass(hint):
        return _build(hint, value, where)
    if origin is tuple:
        if isinstance(value, dict):  # (key, value) pairs may be written as a mapping
            value = list(value.items())
        if not isinstance(value, (list, tuple)):
            raise ValueError(f"{where}: expected a list, got {value!r}")
        if len(args) == 2 and args[1] is Ellipsis:
            return tuple(_convert(args[0], item, f"{where}[{i}]") for i, item in enumerate(value))
        if len(value) != len(args):
            raise ValueError(f"{where}: expected {len(args)} items, got {len(value)}")
        return tuple(_convert(arg, item, f"{where}[{i}]") for i, (arg, item) in enumerate(zip(args, value)))
    if hint is dt.date:
        if isinstance(value, dt.date) and not isinstance(value, dt.datetime):
            return value
        if isinstance(value, str):
            try:
                return dt.date.fromisoformat(value)
            except ValueError:
                pass
        raise ValueError(f"{where}: expected a date YYYY-MM-DD, got {value!r}")
    if hint is str:
        if not isinstance(value, str):
            raise ValueError(f"{where}: expected a string, got {value!r} (quote versions like '12.4')")
        return value
    if hint is bool:
        if not isinstance(value, bool):
            raise ValueError(f"{where}: expected true or false, got {value!r}")
        return value
    if hint is int:
        if isinstance(value, bool) or not isinstance(value, int):
            raise ValueError(f"{where}: expected an integer, got {value!r}")
        return value
    if hint is float:
        if isinstance(value, str):  # YAML 1.1 reads 4e-3 (no dot) as a string
            try:
                return float(value)
            except ValueError:
                pass
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            raise ValueError(f"{where}: expected a number, got {value!r}")
        return float(value)
    raise ValueError(f"{where}: unsupported type {hint!r}")  # pragma: no cover - a new field's type
