"""Probes that need more than one device: ``p2p_copy`` (GPU-to-GPU copies per ordered pair) and
``allreduce`` (``torch.distributed.all_reduce`` bandwidth; probes.md ``p2p_nvlink`` / ``nccl_allreduce``).

``p2p_copy`` needs >= 2 CUDA devices: ``dst_on_j.copy_(src_on_i)`` for every ordered pair (i, j), timed by a
CUDA event pair on device i's current stream; GB/s decimal, one row per pair ``p2p_<i>_<j>_gbps`` with the
SKU's NVLink bandwidth per direction as the limit (70% floor). With fewer devices it writes one ``skipped``
row with the reason.

``allreduce`` runs one process per rank (``spawn``), rendezvous through a file in a temporary folder (no
port). On >= 2 GPUs: NCCL, one rank per visible GPU. On the CPU, or on a single GPU: **gloo across 2 CPU
processes**, labelled ``device_kind = cpu``: it exercises the collective path and the bus-bandwidth
arithmetic, not a GPU interconnect. Per message size, each iteration is a barrier then a timed
``all_reduce`` (``perf_counter_ns`` around the call and, on CUDA, ``torch.cuda.synchronize``); rank 0's
times are the samples. ``algbw = S / t``, ``busbw = algbw * 2(n-1)/n`` (nccl-tests' factor, section 9.6):
rows ``allreduce_<bytes>_busbw_gbps`` and ``allreduce_<bytes>_algbw_gbps``. Without torch: ``skipped``.
"""

from __future__ import annotations

import os
import tempfile
import time
from typing import Any

from probes.common import (
    RunInfo,
    cuda_event_seconds,
    error_text,
    floor_verdict,
    is_gpu,
    measured,
    open_sampler,
    probe_context,
    sampler_context,
    sampler_for,
    timed_window,
    unmeasured,
    warm_up,
)
from probes.records import ProbeResult
from probes.specs import sku_value

P2P = "p2p_copy"
ALLREDUCE = "allreduce"
UNIT = "GB/s"
P2P_FLOOR = 0.70
P2P_BYTES = 256 * 1024 * 1024
GPU_SIZES = (8 << 20, 64 << 20, 512 << 20)
CPU_SIZES = (1 << 20, 8 << 20)
QUICK_SIZES = (1 << 20,)
CPU_WORLD = 2
RANK_TIMEOUT_S = 120.0


def cuda_device_count() -> tuple[int, str | None]:
    """(visible CUDA devices, why none) without failing on a machine without torch or CUDA."""
    try:
        import torch  # noqa: PLC0415 - optional dependency
    except Exception as error:
        return 0, f"torch not importable: {type(error).__name__}"
    try:
        return (torch.cuda.device_count() if torch.cuda.is_available() else 0), None
    except Exception as error:
        return 0, f"CUDA not usable: {error_text(error)}"


def p2p_metric(src: int, dst: int) -> str:
    return f"p2p_{src}_{dst}_gbps"


def bus_factor(world: int) -> float:
    """nccl-tests' AllReduce bus-bandwidth factor 2(n-1)/n."""
    return 2.0 * (world - 1) / world


def _p2p_seconds(nbytes: int, iterations: int, warmup_s: float, count: int, window: Any) -> tuple[dict, dict]:
    import torch  # noqa: PLC0415 - optional dependency

    seconds: dict[tuple[int, int], list[float]] = {}
    access: dict[str, bool] = {}
    buffers = []
    for index in range(count):
        generator = torch.Generator(device=f"cuda:{index}").manual_seed(index)
        buffers.append(torch.randint(0, 256, (nbytes,), dtype=torch.uint8, device=f"cuda:{index}", generator=generator))
    targets = [torch.empty(nbytes, dtype=torch.uint8, device=f"cuda:{index}") for index in range(count)]
    with window():
        for src in range(count):
            for dst in range(count):
                if src == dst:
                    continue
                access[f"{src}->{dst}"] = bool(torch.cuda.can_device_access_peer(src, dst))
                with torch.cuda.device(src):

                    def step(s: int = src, d: int = dst) -> None:
                        targets[d].copy_(buffers[s], non_blocking=True)

                    warm_up(step, warmup_s / (count * (count - 1)), torch.cuda.synchronize)
                    seconds[(src, dst)] = cuda_event_seconds(torch, step, iterations)
                if not torch.equal(targets[dst][:4096].cpu(), buffers[src][:4096].cpu()):
                    raise RuntimeError(f"p2p copy {src}->{dst} delivered other bytes than it was given")
    return seconds, access


def run_p2p_copy(
    info: RunInfo, nbytes: int = P2P_BYTES, iterations: int = 20, warmup_s: float = 0.5
) -> list[ProbeResult]:
    """One row per ordered GPU pair, or one ``skipped`` row when fewer than 2 GPUs are visible."""
    count, why = cuda_device_count() if is_gpu(info) else (0, "no CUDA device")
    context = probe_context(info, bytes=nbytes, iterations=iterations, warmup_s=warmup_s, cuda_devices=count)
    if count < 2:
        reason = f"needs >= 2 CUDA devices; {count} visible" + (f" ({why})" if why else "")
        return [unmeasured(info, P2P, "p2p_gbps", UNIT, "skipped", reason, context)]
    peak_bps = sku_value(info.backend.sku, "nvlink_bandwidth_bytes_per_s")
    peak = peak_bps / 1e9 if peak_bps else None
    sampler = sampler_for(info)  # samples the run's own GPU; the pair's other end is in the context
    try:
        with open_sampler(sampler):
            seconds, access = _p2p_seconds(nbytes, iterations, warmup_s, count, lambda: timed_window(sampler))
    except Exception as error:
        return [unmeasured(info, P2P, "p2p_gbps", UNIT, "error", error_text(error), context, peak)]
    context.update(sampler_context(sampler, info))
    context["peer_access"] = access
    throttle = sampler.throttle_class if sampler is not None else "unknown"
    rows = []
    for (src, dst), secs in sorted(seconds.items()):
        rates = [nbytes / s / 1e9 for s in secs]
        row = measured(info, P2P, p2p_metric(src, dst), UNIT, rates, context, peak=peak, throttle_class=throttle)
        status, reason = floor_verdict(info, row.fraction_of_peak, P2P_FLOOR)
        row_context = dict(context, src_gpu=src, dst_gpu=dst)
        rows.append(
            measured(
                info,
                P2P,
                p2p_metric(src, dst),
                UNIT,
                rates,
                row_context,
                peak=peak,
                throttle_class=throttle,
                status=status,
                reason=reason,
            )  # fmt: skip
        )
    return rows


def _allreduce_rank(rank: int, world: int, device: str, init: str, sizes: tuple, iterations: int, queue: Any) -> None:
    """One rank (run in its own process): warm up, then per size a barrier and a timed all_reduce."""
    import torch  # noqa: PLC0415 - optional dependency
    import torch.distributed as dist  # noqa: PLC0415

    backend = "nccl" if device == "cuda" else "gloo"
    try:
        if device == "cuda":
            torch.cuda.set_device(rank)
        dist.init_process_group(backend, init_method=init, rank=rank, world_size=world)
        target = f"cuda:{rank}" if device == "cuda" else "cpu"
        sync = torch.cuda.synchronize if device == "cuda" else (lambda: None)
        out: dict[int, list[float]] = {}
        for size in sizes:
            generator = torch.Generator(device=target).manual_seed(rank)
            tensor = torch.randn(size // 4, generator=generator, device=target)
            for _ in range(3):
                dist.all_reduce(tensor)
            sync()
            times = []
            for _ in range(iterations):
                dist.barrier()
                begin = time.perf_counter_ns()
                dist.all_reduce(tensor)
                sync()
                times.append((time.perf_counter_ns() - begin) / 1e9)
            out[size] = times
        check = torch.ones(16, device=target)
        dist.all_reduce(check)
        ok = bool(torch.all(check == world))
        dist.destroy_process_group()
        if rank == 0:
            queue.put({"seconds": out, "sum_check": ok, "backend": backend})
    except Exception as error:  # the parent writes error rows with this text
        queue.put({"error": error_text(error), "rank": rank})


def allreduce_seconds(device: str, world: int, sizes: tuple, iterations: int) -> dict[str, Any]:
    """Spawn ``world`` ranks and return rank 0's ``{"seconds": {size: [s, ...]}, "sum_check", "backend"}``."""
    import torch.multiprocessing as mp  # noqa: PLC0415 - optional dependency

    spawn = mp.get_context("spawn")
    queue = spawn.Queue()
    with tempfile.TemporaryDirectory(prefix="probe-allreduce-") as folder:
        init = "file://" + os.path.join(folder, "rendezvous")
        procs = [
            spawn.Process(target=_allreduce_rank, args=(r, world, device, init, sizes, iterations, queue), daemon=True)
            for r in range(world)
        ]
        for proc in procs:
            proc.start()
        try:
            result = queue.get(timeout=RANK_TIMEOUT_S)
        finally:
            for proc in procs:
                proc.join(timeout=10)
                if proc.is_alive():
                    proc.kill()
    if "error" in result:
        raise RuntimeError(f"rank {result['rank']}: {result['error']}")
    bad = [p.exitcode for p in procs if p.exitcode not in (0, None)]
    if bad:
        raise RuntimeError(f"a rank exited with {bad}")
    return result


def run_allreduce(info: RunInfo, sizes: tuple | None = None, iterations: int | None = None) -> list[ProbeResult]:
    """busbw and algbw rows per message size (NCCL over the visible GPUs, or gloo over 2 CPU processes)."""
    count, _ = cuda_device_count() if is_gpu(info) else (0, None)
    gpu = count >= 2
    sizes = tuple(sizes or (GPU_SIZES if gpu else CPU_SIZES))
    iterations = iterations or (20 if gpu else 10)
    world = count if gpu else CPU_WORLD
    context = probe_context(info, sizes=list(sizes), iterations=iterations, world_size=world, dtype="fp32")
    if info.backend.backend != "torch":
        reason = "needs torch (torch.distributed); the numpy backend has no collectives"
        return [unmeasured(info, ALLREDUCE, "allreduce_busbw_gbps", UNIT, "skipped", reason, context)]
    if not gpu:
        why = "no CUDA device" if not is_gpu(info) else f"{count} CUDA device visible"
        context["fallback"] = f"gloo across {CPU_WORLD} CPU processes ({why}): not a GPU interconnect"
    peak_bps = sku_value(info.backend.sku, "nvlink_bandwidth_bytes_per_s") if gpu else None
    peak = peak_bps / 1e9 if peak_bps else None
    # on a single GPU the gloo fallback runs on the CPU: its rows say cpu, never the GPU's uuid
    row_info = info if gpu or not is_gpu(info) else _cpu_view(info)
    try:
        result = allreduce_seconds("cuda" if gpu else "cpu", world, sizes, iterations)
    except Exception as error:
        return [unmeasured(row_info, ALLREDUCE, "allreduce_busbw_gbps", UNIT, "error", error_text(error), context)]
    context.update(backend_collective=result["backend"], sum_check=result["sum_check"], bus_factor=bus_factor(world))
    rows = []
    for size in sizes:
        secs = result["seconds"][size]
        algbw = [size / s / 1e9 for s in secs]
        busbw = [rate * bus_factor(world) for rate in algbw]
        status, reason = ("pass", None) if result["sum_check"] else ("fail", "all_reduce of ones did not sum to world")
        row_context = dict(context, bytes=size)
        rows.append(
            measured(
                row_info,
                ALLREDUCE,
                f"allreduce_{size}_busbw_gbps",
                UNIT,
                busbw,
                row_context,
                peak=peak,
                status=status,
                reason=reason,
            )  # fmt: skip
        )
        rows.append(measured(row_info, ALLREDUCE, f"allreduce_{size}_algbw_gbps", UNIT, algbw, row_context))
    return rows


def _cpu_view(info: RunInfo) -> RunInfo:
    from probes.backends import cpu_backend  # noqa: PLC0415

    return RunInfo(info.run_id, info.node, info.started_at, cpu_backend("torch", note="allreduce gloo fallback"))
