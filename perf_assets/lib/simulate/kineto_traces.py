"""Kineto (PyTorch profiler) traces of a few profiled steps of a few jobs: one Chrome-trace JSON per rank.

Which jobs: `exports.traced_jobs` attempts drawn from the seed among those with a run of
`trace_steps + 1` back-to-back step starts (no checkpoint or eval between them), plus, for every
thermally throttled GPU (catalogue `thermal_throttles`), the first attempt on its node that has such
a run while it throttles, traced on that node (as an engineer chasing the slow node would). Which
ranks: local ranks 0 .. `trace_ranks - 1` of one node of the attempt (global rank = node position x
GPUs per node + local rank; world size = the job's GPUs).

What a step holds, on every traced rank of the node: the input batch copied in (`gpu_memcpy` HtoD),
then transformer layers (tensor parallel over the node's GPUs: each half layer is GEMMs, flash
attention or elementwise kernels on stream 7, then an NCCL all_reduce on stream 20 that every GPU of
the node joins), forward then backward, then the optimizer's fused kernels; each kernel has its
`cudaLaunchKernel` runtime call with the same correlation id, and each step a `ProfilerStep#N`
annotation (N = the job's step number in step_events) spanning [its step_start, the next one). The
number of layer passes fills the step's duration from step_events. Kernel durations are drawn once per
step and block and shared by the ranks: GEMMs lognormal around 8 ms (large-model shapes; inside the
real samples' range, 4 us to 11.8 ms, well above their small-model medians), flash attention 2.5 ms
forward and 6 ms backward, elementwise 0.1-0.5 ms, NCCL transfers 0.6 ms (x peak busbw ratio on
A100).

Stragglers: a GPU whose SM clock is held down (thermal throttle, power cap: `Effects.clock_factor`)
runs its compute kernels 1/clock longer; since each all_reduce ends when the slowest GPU of the node
has joined, the other ranks' NCCL kernels start earlier and last longer (they wait in the kernel), so
their busy time barely changes while the straggler's compute share grows and its communication time
shrinks (raw_trace_rank_breakdowns, raw_trace_kernel_types).

Times: `baseTimeNanoseconds` (the capture's first second) plus `ts` in float microseconds (3 decimals),
which the ingestor reads as absolute (`kineto_base_time_ns`). Files are gzipped with mtime 0, so
the same seed gives the same bytes. Pure: `traces(fleet)` returns what to write.
"""

from __future__ import annotations

import functools
import json
import math
from collections.abc import Iterator
from dataclasses import dataclass

import numpy as np

from perf_assets.lib.contracts import STEP_EVENTS
from perf_assets.lib.simulate.catalogue import ThermalThrottle
from perf_assets.lib.simulate.fleet import Attempt, Fleet
from perf_assets.lib.simulate.ids import stream
from perf_assets.lib.simulate.scenario import Cluster

CODE_STEP_START = STEP_EVENTS.index("step_start")
COMPUTE_STREAM, NCCL_STREAM = 7, 20
FILL = 0.93  # share of a step's wall time the GPU timeline fills (the rest: host overhead, data, gaps)
GAP_US = 4.0  # between dependent kernels on one GPU
NCCL_TRANSFER_US = 600.0  # a TP all_reduce of one block's activations at H100 NVLink speed
GEMM_MEDIAN_US, GEMM_SIGMA, GEMM_RANGE_US = 8000.0, 0.2, (500.0, 11_500.0)
KERNEL_NOISE = 0.005  # per rank and kernel, lognormal

GEMM_NAME = {
    "A100-SXM4-80GB": "ampere_bf16_s16816gemm_bf16_256x128_ldg8_f2f_stages_64x3_{}",
    None: "sm90_xmma_gemm_bf16bf16_bf16f32_f32_{}_n_tilesize128x256x64_warpgroupsize2x1x1_execute_segment_k_off_kernel__5x_cublas",
}
FLASH_FWD = (
    "void flash_fwd_kernel<Flash_fwd_kernel_traits<128, 128, 64, 4, false, false, cutlass::bfloat16_t>, "
    "false, true, false, false, true, true, false>(Flash_fwd_params)"
)
FLASH_BWD = (
    "void flash_bwd_dq_dk_dv_loop_seqk_parallel_kernel<Flash_bwd_kernel_traits<128, 64, 128, 8, 2, 4, 2, false, "
    "false, cutlass::bfloat16_t>, true, false, false, false, false, false>(Flash_bwd_params)"
)
LAYER_NORM = (
    "void at::native::(anonymous namespace)::vectorized_layer_norm_kernel<c10::BFloat16, float>"
    "(int, float, c10::BFloat16 const*, c10::BFloat16 const*, c10::BFloat16 const*, float*, float*, c10::BFloat16*)"
)
GELU = (
    "void at::native::vectorized_elementwise_kernel<4, at::native::GeluCUDAKernelImpl(at::TensorIteratorBase&, "
    "at::native::GeluType)::{lambda()#2}::operator()() const::{lambda()#1}::operator()() const::"
    "{lambda(c10::BFloat16)#1}, at::detail::Array<char*, 2> >(int, at::native::GeluCUDAKernelImpl"
    "(at::TensorIteratorBase&, at::native::GeluType)::{lambda()#2}::operator()() const::{lambda()#1}::operator()() "
    "const::{lambda(c10::BFloat16)#1}, at::detail::Array<char*, 2>)"
)
ADAM = (
    "void at::native::(anonymous namespace)::multi_tensor_apply_kernel<at::native::(anonymous namespace)::"
    "TensorListMetadata<4>, at::native::(anonymous namespace)::FusedAdamMathFunctor<c10::BFloat16, 4, "
    "(at::native::ADAM_MODE)1, false>, float*, float, float, float, float, float, float, bool, float*, float*>"
    "(at::native::(anonymous namespace)::TensorListMetadata<4>, ...)"
)
NCCL = "ncclDevKernel_AllReduce_Sum_bf16_RING_LL(ncclDevComm*, unsigned long, ncclWork*)"
NCCL_NELEMS = 16_777_216  # bf16 elements of one block's activations (32 MiB)

# A block is a half layer: (kind, name, median us, sigma) of its compute kernels, then a TP all_reduce.
FORWARD = (
    (("gemm", "tn"), ("flash", FLASH_FWD, 2500.0, 0.1), ("gemm", "tn")),
    (("elementwise", LAYER_NORM, 150.0, 0.2), ("gemm", "tn"), ("elementwise", GELU, 300.0, 0.2), ("gemm", "tn")),
)
BACKWARD = (
    (("gemm", "nt"), ("gemm", "nn"), ("elementwise", GELU, 450.0, 0.2), ("gemm", "nt"), ("gemm", "nn")),
    (("gemm", "nt"), ("gemm", "nn"), ("flash", FLASH_BWD, 6000.0, 0.1), ("gemm", "nt"), ("gemm", "nn")),
)


@dataclass(frozen=True)
class TraceFile:
    cluster: str
    node: str
    job_id: str
    rank: int
    at: int  # unix seconds: the capture's first second (file name, day folder)
    data: bytes  # the JSON document (not yet gzipped)
    events: int


@dataclass(frozen=True)
class Capture:
    attempt: Attempt
    node: str
    step_starts_ms: np.ndarray  # trace_steps + 1 step starts: the profiled steps' bounds
    steps: np.ndarray  # the profiled steps' numbers


def _runs(attempt: Attempt, steps: int) -> list[int]:
    """Indices into the attempt's step starts that begin a run of `steps + 1` back-to-back starts."""
    timeline = attempt.timeline
    if timeline is None or len(timeline) == 0:
        return []
    positions = np.flatnonzero(timeline.code == CODE_STEP_START)
    if positions.size <= steps:
        return []
    back_to_back = np.diff(positions) == 1  # nothing between two step starts
    window = np.convolve(back_to_back.astype(np.int64), np.ones(steps, dtype=np.int64), mode="valid")
    return np.flatnonzero(window == steps).tolist()


def _capture(attempt: Attempt, node: str, first: int, steps: int) -> Capture:
    timeline = attempt.timeline
    positions = np.flatnonzero(timeline.code == CODE_STEP_START)[first : first + steps + 1]
    return Capture(attempt, node, timeline.ts_ms[positions], timeline.step[positions][:-1])


def captures(fleet: Fleet) -> list[Capture]:
    """The profiled steps: sampled attempts, then one per thermally throttled GPU (see module doc)."""
    exports = fleet.scenario.exports
    steps = exports.trace_steps
    candidates = [a for a in fleet.attempts if a.start is not None and _runs(a, steps)]
    candidates.sort(key=lambda a: (a.start, a.job_id, a.attempt))
    rng = stream(fleet.seed, "kineto-traces")
    chosen: list[Capture] = []
    if candidates and exports.traced_jobs:
        picks = rng.choice(len(candidates), size=min(exports.traced_jobs, len(candidates)), replace=False)
        for pick in sorted(int(p) for p in picks):
            attempt = candidates[pick]
            runs = _runs(attempt, steps)
            chosen.append(_capture(attempt, attempt.nodes[0], runs[int(rng.integers(len(runs)))], steps))
    for applied in fleet.effects.of(ThermalThrottle):
        node = applied.spec.node
        for attempt in candidates:
            if node not in attempt.nodes or any(c.attempt is attempt and c.node == node for c in chosen):
                continue
            starts = attempt.timeline.ts_ms[attempt.timeline.code == CODE_STEP_START]
            inside = [r for r in _runs(attempt, steps) if applied.start * 1000 <= starts[r] < applied.end * 1000]
            if inside:
                chosen.append(_capture(attempt, node, inside[0], steps))
                break
    return chosen


def _speed(fleet: Fleet, node: str, gpus: int, t: float) -> np.ndarray:
    """Compute-time multiplier of each GPU of the node at `t` (1 / SM clock factor)."""
    speed = np.ones(gpus)
    for gpu in range(gpus):
        factor = fleet.effects.clock_factor(node, gpu, np.asarray([t]))
        if factor is not None:
            speed[gpu] = 1.0 / float(factor[0])
    return speed


def _draw_block(rng: np.random.Generator, block: tuple, gemm: str) -> list[tuple[str, float]]:
    kernels = []
    for kernel in block:
        if kernel[0] == "gemm":
            us = min(max(GEMM_MEDIAN_US * math.exp(rng.normal(0.0, GEMM_SIGMA)), GEMM_RANGE_US[0]), GEMM_RANGE_US[1])
            kernels.append((gemm.format(kernel[1]), us))
        else:
            _, name, median, sigma = kernel
            kernels.append((name, median * math.exp(rng.normal(0.0, sigma))))
    return kernels


def _mean_us(block: tuple) -> float:
    gemm_mean = GEMM_MEDIAN_US * math.exp(GEMM_SIGMA**2 / 2)
    return sum(gemm_mean if k[0] == "gemm" else k[2] * math.exp(k[3] ** 2 / 2) for k in block)


@functools.cache
def _quoted(name: str) -> str:
    return json.dumps(name)


def _members(args: dict) -> str:
    return "".join(f",{json.dumps(k)}:{json.dumps(v)}" for k, v in args.items())


NCCL_ARGS = _members(
    {
        "Collective name": "allreduce",
        "In msg nelems": NCCL_NELEMS,
        "Out msg nelems": NCCL_NELEMS,
        "Group size": 8,
        "dtype": "BFloat16",
        "Process Group Name": "1",
        "Process Group Description": "tensor_parallel",
    }
)


class _RankTrace:
    """Events of one rank, as compact JSON lines."""

    def __init__(self, base_ns: int, pid: int, device: int):
        self.base_ns, self.pid, self.device = base_ns, pid, device
        self.lines: list[str] = []
        self.cpu_free_us = -math.inf  # when the host thread can issue the next runtime call
        self.correlation = 1

    def us(self, t_ns: float) -> float:
        return (t_ns - self.base_ns) / 1000.0

    def launch(self, category: str, name: str, stream_id: int, start_ns: float, dur_ns: float, extra: str, lead: float):
        """A GPU activity and the runtime call that launched it (`lead` us ahead, after the previous call);
        `extra` is the activity's further args as JSON members (`,"key":value...`)."""
        start = self.us(start_ns)
        call = "cudaMemcpyAsync" if category == "gpu_memcpy" else "cudaLaunchKernel"
        called = min(max(self.cpu_free_us + 1.0, start - lead), start - 3.0)
        call_dur = 6.0 if category == "gpu_memcpy" else 4.5
        self.cpu_free_us = called + call_dur
        c = self.correlation
        self.correlation += 1
        cbid = 51 if category == "gpu_memcpy" else 211
        self.lines.append(
            f'{{"ph":"X","cat":"cuda_runtime","name":"{call}","pid":{self.pid},"tid":{self.pid},'
            f'"ts":{called:.3f},"dur":{call_dur:.3f},"args":{{"External id":{c},"cbid":{cbid},"correlation":{c}}}}}'
        )
        self.lines.append(
            f'{{"ph":"X","cat":"{category}","name":{_quoted(name)},"pid":{self.device},"tid":{stream_id},'
            f'"ts":{start:.3f},"dur":{dur_ns / 1000.0:.3f},"args":{{"External id":{c},"device":{self.device},'
            f'"context":1,"stream":{stream_id},"correlation":{c}{extra}}}}}'
        )

    def annotation(self, name: str, start_ns: float, end_ns: float, external: int) -> None:
        start = self.us(start_ns)
        self.lines.append(
            f'{{"ph":"X","cat":"user_annotation","name":"{name}","pid":{self.pid},"tid":{self.pid},'
            f'"ts":{start:.3f},"dur":{(end_ns - start_ns) / 1000.0:.3f},"args":{{"External id":{external}}}}}'
        )


def _document(capture: Capture, cluster: Cluster, rank: int, world: int, base_ns: int, events: list[str]) -> bytes:
    sku = cluster.sku
    head = {
        "schemaVersion": 1,
        "deviceProperties": [{"id": rank % cluster.gpus_per_node, "name": sku.model_name}],
        "distributedInfo": {"backend": "nccl", "rank": rank, "world_size": world},
        "host_name": capture.node,
        "displayTimeUnit": "ms",
        "baseTimeNanoseconds": base_ns,
    }
    text = json.dumps(head, separators=(",", ":"))[:-1] + ',"traceEvents":[\n' + ",\n".join(events) + "\n]}\n"
    return text.encode("utf-8")


def trace_files(fleet: Fleet, capture: Capture) -> list[TraceFile]:
    """One trace per traced rank of a capture (see module doc)."""
    attempt, node = capture.attempt, capture.node
    job = attempt.job
    cluster = fleet.scenario.cluster(job.cluster)
    gpus = cluster.gpus_per_node
    ranks = range(fleet.scenario.exports.trace_ranks)
    node_position = attempt.nodes.index(node)
    rng = stream(fleet.seed, "kineto", job.job_id, str(attempt.attempt), node)
    gemm = GEMM_NAME.get(cluster.sku.name, GEMM_NAME[None])
    nccl_us = NCCL_TRANSFER_US * 482.0 / cluster.sku.allreduce_busbw_gbps
    base_ns = int(capture.step_starts_ms[0] // 1000) * 1_000_000_000
    traces = {r: _RankTrace(base_ns, 1000 + int(rng.integers(1000, 60000)) * 8 + r, r) for r in ranks}
    noise = {r: stream(fleet.seed, "kineto-rank", job.job_id, str(attempt.attempt), node, str(r)) for r in ranks}
    nccl_args = NCCL_ARGS.replace('"Group size":8', f'"Group size":{gpus}')
    layer_us = sum(_mean_us(b) + nccl_us + 2 * GAP_US for b in FORWARD + BACKWARD)
    for k, step in enumerate(capture.steps.tolist()):
        start_ns = float(capture.step_starts_ms[k]) * 1e6
        end_ns = float(capture.step_starts_ms[k + 1]) * 1e6
        speed = _speed(fleet, node, gpus, start_ns / 1e9)
        budget_us = (end_ns - start_ns) / 1000.0 * FILL
        optimizer_us = 2500.0 * math.exp(rng.normal(0.0, 0.1))
        copy_us = 180.0 * math.exp(rng.normal(0.0, 0.1))
        layers = max(1, int((budget_us - optimizer_us - copy_us) / (layer_us * speed.max())))
        blocks = [b for _ in range(layers) for b in FORWARD] + [b for _ in range(layers) for b in BACKWARD]
        clock = {g: start_ns + 50_000.0 for g in range(gpus)}  # ns; first activity 50 us into the step
        for r in ranks:
            traces[r].annotation(f"ProfilerStep#{step}", start_ns, end_ns, step)
            bytes_in = 16 * 8192 * 4 * 2
            args = _members({"bytes": bytes_in, "memory bandwidth (GB/s)": round(bytes_in / copy_us / 1000.0, 3)})
            traces[r].launch(
                "gpu_memcpy", "Memcpy HtoD (Pinned -> Device)", COMPUTE_STREAM, clock[r], copy_us * 1e3, args, 40.0
            )
        clock = {g: t + copy_us * 1e3 + GAP_US * 1e3 for g, t in clock.items()}
        for block in blocks:
            kernels = _draw_block(rng, block, gemm)
            joined = {}
            for g in range(gpus):
                t = clock[g]
                for name, us in kernels:
                    dur = us * speed[g] * 1e3
                    if g in traces:
                        dur *= math.exp(noise[g].normal(0.0, KERNEL_NOISE))
                        traces[g].launch("kernel", name, COMPUTE_STREAM, t, dur, "", 1500.0)
                    t += dur + GAP_US * 1e3
                joined[g] = t
            done = max(joined.values()) + nccl_us * math.exp(rng.normal(0.0, 0.05)) * 1e3
            for g in range(gpus):
                if g in traces:
                    traces[g].launch("kernel", NCCL, NCCL_STREAM, joined[g], done - joined[g], nccl_args, 1500.0)
                clock[g] = done + GAP_US * 1e3
        for g in ranks:
            dur = optimizer_us * 1e3 * speed[g]
            traces[g].launch("kernel", ADAM, COMPUTE_STREAM, clock[g], dur, "", 200.0)
    world = job.n_gpus
    out = []
    for r in ranks:
        rank = node_position * gpus + r
        data = _document(capture, cluster, rank, world, base_ns, traces[r].lines)
        out.append(
            TraceFile(cluster.name, node, job.job_id, rank, base_ns // 1_000_000_000, data, len(traces[r].lines))
        )
    return out


def traces(fleet: Fleet) -> Iterator[TraceFile]:
    """Every trace file, one capture at a time (a capture's ranks are built together; memory holds one)."""
    for capture in captures(fleet):
        yield from trace_files(fleet, capture)
