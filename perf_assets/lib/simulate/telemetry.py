"""What the GPUs would report: DCGM samples per node-day and a daily GEMM probe per GPU. Pure.

DCGM is sampled at the scenario's step (300 s) on the boundaries of each UTC day, from the node's
state at that instant: out of service (NaN), idle, or inside an attempt, where the phase comes
from the attempt's last event (device init, checkpoint save, eval, compute, ...). While a step
computes, the tensor-pipe activity is proportional to the job's MFU at that time (so it falls with
a rollout's slowdown) while GPU utilisation stays near 100 %, as nvidia-smi's does.

A scenario may add DCGM fields (`dcgm_fields`): SM clock (max under load, lower on a thermally
throttled or power-capped GPU), GPU temperature (hotter when throttled) and thermal violation time (a
counter that grows while a throttled GPU is busy); they come from their own random stream, so the
default fields' values do not change. `probes: [gemm, hbm_stream]` adds a daily memory-bandwidth probe.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from perf_assets.lib.contracts import STEP_EVENTS
from perf_assets.lib.simulate.clock import DAY_S, rfc3339
from perf_assets.lib.simulate.fleet import Attempt, Fleet, NodeInterval
from perf_assets.lib.simulate.ids import gpu_uuid, probe_run_id, stream
from perf_assets.lib.simulate.scenario import DCGM_FIELDS, Cluster

FIELDS = DCGM_FIELDS  # the default fields; a scenario's `dcgm_fields` may add DCGM_EXTRA_FIELDS
IDLE_SM_CLOCK_MHZ = 345.0

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
CODE_STEP_START = STEP_EVENTS.index("step_start")
CODE_DATA_LOADING_END = STEP_EVENTS.index("data_loading_end")


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
            if timeline.stalled:  # back to compute after a stall's data_loading_end (not the first batch's)
                code = timeline.code
                stall_end = (code == CODE_DATA_LOADING_END) & (np.cumsum(code == CODE_STEP_START) > 0)
                here = np.where((last >= 0) & stall_end[np.maximum(last, 0)], _PHASE["compute"], here)
        else:  # stopped (or the window ended) before its first event
            here = np.full(when.size, _PHASE["startup"])
        if attempt.stop_at is not None:
            stopped = _PHASE["hang"] if attempt.stop_reason == "fault" else _PHASE["teardown"]
            here = np.where(when >= attempt.stop_at, stopped, here)
        factor = np.ones(when.size)
        for at, slowdown in fleet.slowdowns(attempt.job.cluster):
            factor = np.where(when >= at, factor * slowdown, factor)
        if attempt.effects is not None:
            factor = factor * attempt.effects.multiplier(when)
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
    capped = fleet.effects.power_limit(node, times, sku.power_limit_w)
    limit = sku.power_limit_w if capped is None else capped
    power = sku.idle_power_w + share0 * (limit - sku.idle_power_w) * (1.0 + rng.normal(0.0, 0.02, shape))
    power = power + rng.normal(0.0, 1.5, shape)
    values = {
        "DCGM_FI_DEV_GPU_UTIL": np.clip(np.round(util), 0, 100),
        "DCGM_FI_PROF_SM_ACTIVE": np.clip(sm, 0.0, 1.0),
        "DCGM_FI_PROF_PIPE_TENSOR_ACTIVE": np.clip(tensor, 0.0, 1.0),
        "DCGM_FI_DEV_POWER_USAGE": np.clip(power, 0.0, limit),
    }
    fields = fleet.scenario.dcgm_fields
    if any(name not in values for name in fields):
        values.update(extra_fields(fleet, index, cluster, node, times, phase, share0))
    for name in values:
        values[name] = np.where(known, values[name], np.nan)
    gpus = tuple(
        GpuSeries(i, gpu_uuid(fleet.seed, node, i), {name: values[name][i] for name in fields})
        for i in range(cluster.gpus_per_node)
    )
    return NodeDay(node, day_start, times, gpus)


def extra_fields(
    fleet: Fleet,
    index: FleetIndex,
    cluster: Cluster,
    node: str,
    times: np.ndarray,
    phase: np.ndarray,
    share: np.ndarray,
) -> dict[str, np.ndarray]:
    """SM clock (MHz), GPU temperature (C) and thermal violation time (ns, a counter since the window
    start) of every GPU of a node at `times`, from the node's phases and its incidents."""
    effects, sku = fleet.effects, cluster.sku
    rng = stream(fleet.seed, "dcgm-extra", node, str(int(times[0])))
    shape = (cluster.gpus_per_node, times.size)
    util0 = np.asarray([PHASES[name][0] for name in PHASE_NAMES])[np.where(phase >= 0, phase, 0)]
    load = np.clip(util0 / 50.0, 0.0, 1.0)  # clocks ramp to the maximum under load
    clock = IDLE_SM_CLOCK_MHZ + (sku.max_sm_clock_mhz - IDLE_SM_CLOCK_MHZ) * load
    clock = np.broadcast_to(clock, shape) - np.abs(rng.normal(0.0, 8.0, shape)) * (load > 0)
    temp = 32.0 + 40.0 * np.clip(share, 0.0, 1.0) + rng.normal(0.0, 1.0, shape)
    violation = np.zeros(shape)
    clock, temp = clock.copy(), temp.copy()
    for gpu in range(cluster.gpus_per_node):
        factor = effects.clock_factor(node, gpu, times)
        if factor is not None:
            clock[gpu] = np.where(load > 0, np.maximum(IDLE_SM_CLOCK_MHZ, clock[gpu] * factor), clock[gpu])
        throttled = effects.throttled(node, gpu, times)
        if throttled is not None:
            temp[gpu] = np.where(throttled & (load > 0), np.minimum(93.0, temp[gpu] + 18.0), temp[gpu])
            violation[gpu] = thermal_violation_ns(fleet, index, node, gpu, times)
    return {
        "DCGM_FI_DEV_SM_CLOCK": np.round(clock),
        "DCGM_FI_DEV_GPU_TEMP": np.round(temp),
        "DCGM_FI_DEV_THERMAL_VIOLATION": violation,
    }


def thermal_violation_ns(fleet: Fleet, index: FleetIndex, node: str, gpu: int, times: np.ndarray) -> np.ndarray:
    """Cumulative thermal violation (ns) at `times`: every busy sample interval of a throttled GPU since
    the throttle began counts in full (its clock was held down all that time)."""
    start = fleet.effects.throttle_start(node, gpu)
    step = fleet.scenario.dcgm_step_s
    grid = np.arange(fleet.t0, int(times[-1]) + step, step, dtype=np.int64)
    phase, _ = phases_at(fleet, index, node, grid)
    busy = (phase >= 0) & (np.asarray([PHASES[name][0] for name in PHASE_NAMES])[np.where(phase >= 0, phase, 0)] >= 90)
    throttled = fleet.effects.throttled(node, gpu, grid) & (grid >= start)
    counted = np.concatenate(([0.0], np.cumsum((busy & throttled) * step * 1e9)[:-1]))
    return counted[np.searchsorted(grid, times)]


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
        slower, throttle_class = fleet.effects.gemm_factor(node, i, started)
        value = round(sku.peak_tflops * base[i] * (1.0 + rng.normal(0.0, 0.002)) * slower, 2)
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
                "throttle_class": throttle_class,
                "peak": sku.peak_tflops,
                "fraction_of_peak": round(value / sku.peak_tflops, 4),
                "status": "pass",
                "reason": None,
                "started_at": started_at,
                "context": {"simulated": True},
            }
        )
    if "hbm_stream" in scenario.probes:
        rows += hbm_rows(fleet, cluster, node, started, run_id)
    return started, rows


def hbm_rows(fleet: Fleet, cluster: Cluster, node: str, started: int, run_id: str) -> list[dict]:
    """The hbm_stream probe's triad bandwidth per GPU (GB/s), lower on a node whose HBM decays."""
    sku = cluster.sku
    rng = stream(fleet.seed, "probe-hbm", node, str(started))
    base = stream(fleet.seed, "probe-hbm-gpu", node).uniform(0.90, 0.92, cluster.gpus_per_node)
    decay = fleet.effects.hbm_factor(node, started)
    rows = []
    for i in range(cluster.gpus_per_node):
        value = round(sku.hbm_bandwidth_gbps * base[i] * decay * (1.0 + rng.normal(0.0, 0.002)), 1)
        iqr = round(value * rng.uniform(0.002, 0.005), 2)
        half = round(1.96 * iqr / 1.349 / np.sqrt(20), 2)
        fraction = round(value / sku.hbm_bandwidth_gbps, 4)
        rows.append(
            {
                "version": 1,
                "run_id": run_id,
                "node": node,
                "gpu_uuid": gpu_uuid(fleet.seed, node, i),
                "gpu_index": i,
                "sku": sku.name,
                "device_kind": "cuda",
                "probe": "hbm_stream",
                "metric": "triad_gbps",
                "value": value,
                "unit": "GB/s",
                "median": value,
                "iqr": iqr,
                "ci_low": round(value - half, 2),
                "ci_high": round(value + half, 2),
                "n": 20,
                "throttle_class": "clean",
                "peak": sku.hbm_bandwidth_gbps,
                "fraction_of_peak": fraction,
                "status": "pass" if fraction >= 0.80 else "fail",
                "reason": None if fraction >= 0.80 else "triad below 80% of the HBM bandwidth",
                "started_at": rfc3339(started),
                "context": {"simulated": True},
            }
        )
    return rows
