"""launch_latency: what one tiny kernel launch costs (probes.md section 2.1).

On a GPU (torch, one-element ``x.add_(1)``):

- ``event_us``: a CUDA event pair around one launch, synchronised each time (SuperBench's event_time);
- ``wall_us``: ``perf_counter_ns`` around the launch plus ``torch.cuda.synchronize()`` (wall_time);
- ``throughput_us``: ``BATCH`` launches queued, one sync, wall / BATCH (the host's dispatch cost);
- ``graph_us``: ``BATCH`` launches captured in a CUDA graph, ``replay()`` timed by events, / BATCH;
- ``event_behind_sleep_us``: the event pair around one launch queued behind a blocking ``torch.cuda._sleep``
  (nvbandwidth's trick), so the host's dispatch happens while the GPU sleeps and the events time the GPU side.

Ceilings (gross failure): ``event_behind_sleep_us`` > 20 µs (SuperBench's event-time ceiling for a raw launch),
``event_us`` or ``wall_us`` > 50 µs. A torch op's plain event pair spans its host dispatch: a healthy H200 read
13.7-20.8 µs on three hosts of the same kind (docs/probes.md), 3.0-3.1 µs behind the sleep. On the CPU the probe measures
``dispatch_us``, the cost of one tiny op (torch or numpy), timed in batches by ``perf_counter_ns``.
"""

from __future__ import annotations

from typing import Any

from probes.common import (
    RunInfo,
    cuda_event_seconds,
    error_text,
    host_seconds,
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

PROBE = "launch_latency"
UNIT = "us"
CEILING_US = {"event_behind_sleep_us": 20.0, "event_us": 50.0, "wall_us": 50.0}
BATCH = 1000
SLEEP_CYCLES = 2_000_000  # ~1 ms at 1980 MHz: longer than the host needs to queue the events and the op
GPU_METRICS = ("event_us", "wall_us", "throughput_us", "graph_us", "event_behind_sleep_us")
CPU_METRICS = ("dispatch_us",)


def _judge(info: RunInfo, metric: str, median_us: float) -> tuple[str, str | None]:
    ceiling = CEILING_US.get(metric)
    if info.backend.device_kind == "cuda" and ceiling is not None and median_us > ceiling:
        return "fail", f"median {median_us:.2f} us > ceiling {ceiling:g} us"
    return "pass", None


def _gpu_samples(iterations: int, warmup_s: float, window: Any) -> dict[str, list[float]]:
    import torch  # noqa: PLC0415 - optional dependency

    x = torch.zeros(1, device="cuda")

    def step() -> None:
        x.add_(1)

    def sleep() -> None:  # queued before the start event: the GPU is busy while the host dispatches the op
        torch.cuda._sleep(SLEEP_CYCLES)

    warm_up(step, warmup_s, torch.cuda.synchronize)
    samples: dict[str, list[float]] = {}
    with window():
        samples["event_us"] = [s * 1e6 for s in cuda_event_seconds(torch, step, iterations)]
        samples["event_behind_sleep_us"] = [
            s * 1e6 for s in cuda_event_seconds(torch, step, min(iterations, 200), before=sleep)
        ]
        samples["wall_us"] = [s * 1e6 for s in host_seconds(step, iterations, sync=torch.cuda.synchronize)]
        batches = max(5, iterations // 50)
        samples["throughput_us"] = [
            s * 1e6 for s in host_seconds(step, batches, repeat=BATCH, sync=torch.cuda.synchronize)
        ]
        try:
            stream = torch.cuda.Stream()
            stream.wait_stream(torch.cuda.current_stream())
            with torch.cuda.stream(stream):
                step()  # warm the side stream before capture
            torch.cuda.current_stream().wait_stream(stream)
            graph = torch.cuda.CUDAGraph()
            with torch.cuda.graph(graph):
                for _ in range(BATCH):
                    step()
            graph.replay()
            samples["graph_us"] = [s * 1e6 / BATCH for s in cuda_event_seconds(torch, graph.replay, batches)]
        except Exception as error:  # graphs unsupported here: the row says so
            samples["graph_us_error"] = [error_text(error)]  # type: ignore[list-item]
    return samples


def _cpu_samples(info: RunInfo, iterations: int, warmup_s: float) -> dict[str, list[float]]:
    if info.backend.backend == "torch":
        import torch  # noqa: PLC0415 - optional dependency

        x = torch.zeros(1)

        def step() -> None:
            torch.add(x, 1, out=x)
    else:
        import numpy as np

        y = np.zeros(1, dtype=np.float32)

        def step() -> None:
            np.add(y, 1, out=y)

    warm_up(step, warmup_s)
    return {"dispatch_us": [s * 1e6 for s in host_seconds(step, iterations, repeat=BATCH)]}


def run_launch_latency(info: RunInfo, iterations: int | None = None, warmup_s: float = 0.5) -> list[ProbeResult]:
    """One row per metric (GPU: event, wall, throughput, graph; CPU: dispatch)."""
    gpu = is_gpu(info)
    iterations = iterations or (2000 if gpu else 50)
    metrics = GPU_METRICS if gpu else CPU_METRICS
    context = probe_context(info, iterations=iterations, warmup_s=warmup_s, batch=BATCH, kernel="x.add_(1), 1 element")
    sampler = sampler_for(info)
    try:
        with open_sampler(sampler):
            if gpu:
                samples = _gpu_samples(iterations, warmup_s, lambda: timed_window(sampler))
            else:
                samples = _cpu_samples(info, iterations, warmup_s)
    except Exception as error:
        return [unmeasured(info, PROBE, m, UNIT, "error", error_text(error), context) for m in metrics]
    context.update(sampler_context(sampler, info))
    throttle = sampler.throttle_class if sampler is not None else "unknown"
    rows = []
    for metric in metrics:
        values = samples.get(metric)
        if not values:
            why = samples.get(f"{metric}_error", ["not measured"])[0]
            rows.append(unmeasured(info, PROBE, metric, UNIT, "error", str(why), context))
            continue
        row = measured(info, PROBE, metric, UNIT, values, context, throttle_class=throttle)
        status, reason = _judge(info, metric, row.median)
        if status != "pass":
            row = measured(
                info, PROBE, metric, UNIT, values, context, throttle_class=throttle, status=status, reason=reason
            )
        rows.append(row)
    return rows
