"""What the GPUs would report: DCGM samples per node-day and a daily GEMM probe per GPU. Pure.

DCGM is sampled at the scenario's step (300 s) on the boundaries of each UTC day, from the node's
state at that instant: out of service (NaN), idle, or inside an attempt, where the phase comes
from the attempt's last event (device init, checkpoint save, eval, compute, ...). While a step
computes, the tensor-pipe activity is proportional to the job's MFU at that time (so it falls with
a rollout's slowdown) while GPU utilisation stays near 100 %, as nvidia-smi's does.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from perf_assets.lib.contracts import STEP_EVENTS
from perf_assets.lib.simulate.clock import DAY_S, rfc3339
from perf_assets.lib.simulate.fleet import Attempt, Fleet, NodeInterval
from perf_assets.lib.simulate.ids import gpu_uuid, probe_run_id, stream
from perf_assets.lib.simulate.scenario import Cluster

FIELDS = (
    "DCGM_FI_DEV_GPU_UTIL",
    "DCGM_FI_PROF_SM_ACTIVE",
    "DCGM_FI_PROF_PIPE_TENSOR_ACTIVE",
    "DCGM_FI_DEV_POWER_USAGE",
)

# phase -> (GPU util %, SM active ratio, tensor active as a multiple of the compute level, power share)
PHASES = {
    "idle": (0.0, 0.0, 0.0, 0.0),
    "startup": (0.0, 0.0, 0.0, 0.05),
    "device_init": (2.0, 0.01, 0.0, 0.08),
    "training_prep": (15.0, 0.05, 0.0, 0.12),
    "ckpt_restore": (5.0, 0.02, 0.0, 0.10),
    "data_loading": (30.0, 0.10, 0.0, 0.15),
    "compute": (100.0, 0.90, 1.0, None),  # power from the MFU
    "ckpt_save": (10.0, 0.03, 0.0, 0.20),
    "eval": (95.0, 0.70, 0.8, 0.60),
    "teardown": (0.0, 0.0, 0.0, 0.05),
    "hang": (100.0, 0.06, 0.0, 0.30),  # a collective spinning after a peer died
}
PHASE_NAMES = tuple(PHASES)
_PHASE = {name: index for index, name in enumerate(PHASE_NAMES)}
OUT_OF_SERVICE = -1
TENSOR_PER_MFU = 1.3  # tensor-pipe activity per unit of MFU while computing

_AFTER_EVENT = {
    "job_start": "startup",
    "device_init_start": "device_init",
    "device_init_end": "startup",
    "training_prep_start": "training_prep",
    "training_prep_end": "startup",
    "data_loading_start": "data_loading",
    "data_loading_end": "startup",
    "step_start": "compute",
    "ckpt_save_start": "ckpt_save",
    "ckpt_save_end": "compute",
    "ckpt_restore_start": "ckpt_restore",
    "ckpt_restore_end": "startup",
    "custom_start": "eval",
    "custom_end": "compute",
    "job_end": "teardown",
}
PHASE_AFTER_CODE = np.asarray([_PHASE[_AFTER_EVENT[name]] for name in STEP_EVENTS], dtype=np.int64)


@dataclass(frozen=True)
class GpuSeries:
    """One GPU's samples of one node-day: each field's values (NaN where the node is out of service)."""

    index: int
    uuid: str
    values: dict[str, np.ndarray]


@dataclass(frozen=True)
class NodeDay:
    node: str
    day_start: int
    times: np.ndarray  # unix seconds
    gpus: tuple[GpuSeries, ...]


class FleetIndex:
    """Who was where: attempts and out-of-service intervals per node."""

    def __init__(self, fleet: Fleet):
        self.fleet = fleet
        self.attempts: dict[str, list[Attempt]] = {}
        self.intervals: dict[str, list[NodeInterval]] = {}
        for attempt in fleet.attempts:
            if attempt.start is not None:
                for node in attempt.nodes:
                    self.attempts.setdefault(node, []).append(attempt)
        for interval in fleet.intervals:
            self.intervals.setdefault(interval.node, []).append(interval)

    def out_of_service(self, node: str, times: np.ndarray) -> np.ndarray:
        mask = np.zeros(times.size, dtype=bool)
        for interval in self.intervals.get(node, ()):
            end = self.fleet.t1 if interval.end is None else interval.end
            mask |= (times >= interval.start) & (times < end)
        return mask


def phases_at(fleet: Fleet, index: FleetIndex, node: str, times: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Phase index (OUT_OF_SERVICE, or into PHASE_NAMES) and the running job's MFU at each instant."""
    phase = np.full(times.size, _PHASE["idle"], dtype=np.int64)
    mfu = np.zeros(times.size)
    for attempt in index.attempts.get(node, ()):
        end = fleet.t1 if attempt.end is None else attempt.end
        inside = (times >= attempt.start) & (times < end)
        if not inside.any():
            continue
        when = times[inside]
        timeline = attempt.timeline
        if len(timeline):
            last = np.searchsorted(timeline.ts_ms, when * 1000, side="right") - 1
            here = np.where(last >= 0, PHASE_AFTER_CODE[timeline.code[np.maximum(last, 0)]], _PHASE["startup"])
        else:  # stopped (or the window ended) before its first event
            here = np.full(when.size, _PHASE["startup"])
        if attempt.stop_at is not None:
            stopped = _PHASE["hang"] if attempt.stop_reason == "fault" else _PHASE["teardown"]
            here = np.where(when >= attempt.stop_at, stopped, here)
        factor = np.ones(when.size)
        for at, slowdown in fleet.slowdowns(attempt.job.cluster):
            factor = np.where(when >= at, factor * slowdown, factor)
        phase[inside] = here
        mfu[inside] = attempt.job.mfu / factor
    phase[index.out_of_service(node, times)] = OUT_OF_SERVICE
    return phase, mfu


def dcgm_node_day(fleet: Fleet, index: FleetIndex, cluster: Cluster, node: str, day_start: int) -> NodeDay:
    step = fleet.scenario.dcgm_step_s
    times = np.arange(day_start, day_start + DAY_S, step, dtype=np.int64)
    phase, mfu = phases_at(fleet, index, node, times)
    rng = stream(fleet.seed, "dcgm", node, str(day_start))
    table = np.asarray([PHASES[name][:3] for name in PHASE_NAMES])
    power_share = np.asarray([np.nan if PHASES[name][3] is None else PHASES[name][3] for name in PHASE_NAMES])
    known = phase != OUT_OF_SERVICE
    safe = np.where(known, phase, 0)
    util0, sm0, tensor_rel = table[safe, 0], table[safe, 1], table[safe, 2]
    tensor0 = tensor_rel * TENSOR_PER_MFU * mfu
    share0 = np.where(np.isnan(power_share[safe]), np.minimum(0.55 + 0.7 * mfu, 0.95), power_share[safe])
    sku = cluster.sku
    shape = (cluster.gpus_per_node, times.size)
    busy = util0 >= 99.0
    jitter = rng.normal(0.0, 2.0, shape) * (util0 > 0)
    util = np.where(busy, 100.0 - np.abs(rng.normal(0.0, 1.0, shape)), util0 + jitter)
    sm = sm0 * (1.0 + rng.normal(0.0, 0.02, shape))
    tensor = tensor0 * (1.0 + rng.normal(0.0, 0.03, shape))
    power = sku.idle_power_w + share0 * (sku.power_limit_w - sku.idle_power_w) * (1.0 + rng.normal(0.0, 0.02, shape))
    power = power + rng.normal(0.0, 1.5, shape)
    values = {
        "DCGM_FI_DEV_GPU_UTIL": np.clip(np.round(util), 0, 100),
        "DCGM_FI_PROF_SM_ACTIVE": np.clip(sm, 0.0, 1.0),
        "DCGM_FI_PROF_PIPE_TENSOR_ACTIVE": np.clip(tensor, 0.0, 1.0),
        "DCGM_FI_DEV_POWER_USAGE": np.clip(power, 0.0, sku.power_limit_w),
    }
    for name in values:
        values[name] = np.where(known, values[name], np.nan)
    gpus = tuple(
        GpuSeries(i, gpu_uuid(fleet.seed, node, i), {name: values[name][i] for name in FIELDS})
        for i in range(cluster.gpus_per_node)
    )
    return NodeDay(node, day_start, times, gpus)


def probe_rows(fleet: Fleet, index: FleetIndex, cluster: Cluster, node: str, day_start: int) -> tuple[int, list[dict]]:
    """The day's GEMM probe on each GPU of a node: its start and rows (none while the node is out)."""
    scenario = fleet.scenario
    rng = stream(fleet.seed, "probe", node, str(day_start))
    started = int(day_start + rng.uniform(*scenario.probe_offset_s))
    if index.out_of_service(node, np.asarray([started]))[0]:
        return started, []
    sku = cluster.sku
    base = stream(fleet.seed, "probe-gpu", node).uniform(*sku.gemm_fraction_range, cluster.gpus_per_node)
    started_at = rfc3339(started)
    run_id = probe_run_id(fleet.seed, node, started_at)
    rows = []
    for i in range(cluster.gpus_per_node):
        value = round(sku.peak_tflops * base[i] * (1.0 + rng.normal(0.0, 0.002)), 2)
        iqr = round(value * rng.uniform(0.003, 0.008), 3)
        half = round(1.96 * iqr / 1.349 / np.sqrt(50), 3)
        rows.append(
            {
                "version": 1,
                "run_id": run_id,
                "node": node,
                "gpu_uuid": gpu_uuid(fleet.seed, node, i),
                "gpu_index": i,
                "sku": sku.name,
                "device_kind": "cuda",
                "probe": "gemm",
                "metric": "bf16_8192_tflops",
                "value": value,
                "unit": "TFLOP/s",
                "median": value,
                "iqr": iqr,
                "ci_low": round(value - half, 3),
                "ci_high": round(value + half, 3),
                "n": 50,
                "throttle_class": "clean",
                "peak": sku.peak_tflops,
                "fraction_of_peak": round(value / sku.peak_tflops, 4),
                "status": "pass",
                "reason": None,
                "started_at": started_at,
                "context": {"simulated": True},
            }
        )
    return started, rows
