"""One attempt's goodput-recorder events (rank 0), built vectorised: the bulk of the simulated data.

Timeline of an attempt that starts its allocation at `start`:

    job_start, device_init_start/_end, training_prep_start/_end, [ckpt_restore_start/_end if attempt > 1],
    data_loading_start/_end (first batch), then per step: step_start(step) [ckpt_save_start/_end(step)
    every K steps] [custom_start/_end(step, name "eval") every E steps], ..., job_end.

A step's time (the gap to the next step_start, or to job_end for the last step, minus the blocking
ckpt_save and custom intervals inside it) is `nominal x lognormal(0, sigma)`, times the slowdown
factor of every rollout whose instant is at or before the step's start. Blocking events sit between
two step_starts, 2 ms apart from their neighbours so that every timestamp of an attempt is distinct.

Incidents (`incidents.AttemptEffects`, only for attempts that run into one) then multiply each step's
time by the multiplier at its start (iterated, since slower steps move later steps' starts), scale
checkpoint saves, add noise, and put data-loader stalls at the start of some steps as
data_loading_start/_end (step = the step waiting for its batch), which count as step time.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from perf_assets.lib.contracts import STEP_EVENTS
from perf_assets.lib.simulate.incidents import AttemptEffects
from perf_assets.lib.simulate.scenario import JobMix

CODE = {name: index for index, name in enumerate(STEP_EVENTS)}
NO_STEP = -1
EPS_S = 0.002  # between back-to-back events, so that timestamps (ms) stay strictly increasing


@dataclass(frozen=True)
class Timeline:
    """Events of one attempt, sorted by time: integer milliseconds, event codes (STEP_EVENTS), steps."""

    ts_ms: np.ndarray  # int64
    code: np.ndarray  # int8, index into contracts.STEP_EVENTS
    step: np.ndarray  # int64, NO_STEP where the event has no step
    alloc_end: int  # planned end of the allocation (unix s) when the attempt runs to completion
    stalled: bool = False  # data_loading_start/_end inside steps (data-loader stalls)

    def __len__(self) -> int:
        return int(self.ts_ms.size)

    def before(self, t: float) -> "Timeline":
        """The events strictly before `t` (seconds): what an attempt stopped at `t` has recorded."""
        keep = self.ts_ms < int(round(t * 1000))
        return Timeline(self.ts_ms[keep], self.code[keep], self.step[keep], self.alloc_end, self.stalled)

    def last_checkpoint(self, t: float, default: int) -> int:
        """The step of the last checkpoint committed (ckpt_save_end) before `t`, else `default`."""
        saved = (self.code == CODE["ckpt_save_end"]) & (self.ts_ms < int(round(t * 1000)))
        return int(self.step[saved][-1]) if saved.any() else default

    def steps_since_checkpoint(self, t: float) -> int:
        """How many step_starts were recorded before `t` after the last committed checkpoint."""
        cut = int(round(t * 1000))
        saved = (self.code == CODE["ckpt_save_end"]) & (self.ts_ms < cut)
        since = self.ts_ms[saved][-1] if saved.any() else -1
        return int(((self.code == CODE["step_start"]) & (self.ts_ms < cut) & (self.ts_ms > since)).sum())


@dataclass(frozen=True)
class StepPlan:
    """What a job's steps look like (fixed per job)."""

    step_time_s: float  # nominal, before any slowdown
    total_steps: int
    ckpt_every: int
    eval_every: int


def build_timeline(
    plan: StepPlan,
    attempt: int,
    start: int,
    first_step: int,
    slowdowns: tuple[tuple[float, float], ...],
    mix: JobMix,
    rng: np.random.Generator,
    effects: AttemptEffects | None = None,
) -> Timeline:
    """The full planned timeline of an attempt whose allocation starts at `start` (unix seconds)."""
    times: list[float] = []
    codes: list[int] = []
    steps: list[int] = []

    def add(t: float, event: str, step: int = NO_STEP) -> None:
        times.append(t)
        codes.append(CODE[event])
        steps.append(step)

    t = start + rng.uniform(*mix.startup_s)
    add(t, "job_start")
    t += rng.uniform(0.5, 2.0)
    add(t, "device_init_start")
    t += rng.uniform(*mix.device_init_s)
    add(t, "device_init_end")
    t += rng.uniform(0.2, 1.0)
    add(t, "training_prep_start")
    t += rng.uniform(*mix.training_prep_s)
    add(t, "training_prep_end")
    if attempt > 1:
        t += rng.uniform(0.2, 1.0)
        add(t, "ckpt_restore_start", first_step - 1)
        t += rng.uniform(*mix.ckpt_restore_s)
        add(t, "ckpt_restore_end", first_step - 1)
    t += rng.uniform(0.2, 1.0)
    add(t, "data_loading_start", first_step)
    t += rng.uniform(*mix.first_batch_s)
    add(t, "data_loading_end", first_step)
    t_first = t + rng.uniform(0.05, 0.5)

    numbers = np.arange(first_step, plan.total_steps + 1, dtype=np.int64)
    n = numbers.size
    compute = plan.step_time_s * np.exp(rng.normal(0.0, mix.step_noise_sigma, n))
    is_ckpt = (numbers % plan.ckpt_every == 0) & (numbers < plan.total_steps)
    is_eval = (numbers % plan.eval_every == 0) & (numbers < plan.total_steps)
    save = np.where(is_ckpt, rng.uniform(*mix.ckpt_save_s, n), 0.0)
    evaluate = np.where(is_eval, rng.uniform(*mix.eval_s, n), 0.0)
    blocking = save + np.where(is_eval, evaluate + EPS_S, 0.0) + np.where(is_ckpt | is_eval, EPS_S, 0.0)

    def step_starts(compute: np.ndarray) -> np.ndarray:
        gaps = compute + blocking
        return t_first + np.concatenate(([0.0], np.cumsum(gaps[:-1])))

    starts = step_starts(compute)
    for at, factor in slowdowns:  # a step that starts at or after the rollout is slower
        first_slow = int(np.searchsorted(starts, at, side="left"))
        if first_slow < n:
            compute = compute.copy()
            compute[first_slow:] *= factor
            starts = step_starts(compute)

    lead = np.zeros(n)  # stall before the step computes (data loading), with its two event gaps
    if effects is not None and n:
        z, u = effects.rng.normal(0.0, 1.0, n), effects.rng.random(n)
        base, base_save = compute, save
        for _ in range(4):  # the multipliers depend on the starts, which depend on the multipliers
            compute = base * effects.multiplier(starts) * effects.noise_factor(starts, z)
            save = base_save * effects.save_factor(starts)
            stall = effects.stall_seconds(starts, plan.step_time_s, u)
            lead = np.where(stall > 0, stall + 2 * EPS_S, 0.0)
            blocking = save + np.where(is_eval, evaluate + EPS_S, 0.0) + np.where(is_ckpt | is_eval, EPS_S, 0.0)
            starts = step_starts(lead + compute)

    compute_end = starts + lead + compute
    custom_start = compute_end + save + EPS_S
    job_end = float(compute_end[-1]) if n else t_first
    parts_t = [
        np.asarray(times),
        starts,
        compute_end[is_ckpt],
        (compute_end + save)[is_ckpt],
        custom_start[is_eval],
        (custom_start + evaluate)[is_eval],
        np.asarray([job_end]),
    ]
    parts_code = [
        np.asarray(codes),
        np.full(n, CODE["step_start"]),
        np.full(int(is_ckpt.sum()), CODE["ckpt_save_start"]),
        np.full(int(is_ckpt.sum()), CODE["ckpt_save_end"]),
        np.full(int(is_eval.sum()), CODE["custom_start"]),
        np.full(int(is_eval.sum()), CODE["custom_end"]),
        np.asarray([CODE["job_end"]]),
    ]
    parts_step = [
        np.asarray(steps),
        numbers,
        numbers[is_ckpt],
        numbers[is_ckpt],
        numbers[is_eval],
        numbers[is_eval],
        np.asarray([NO_STEP]),
    ]
    stalled = lead > 0
    if stalled.any():
        parts_t += [starts[stalled] + EPS_S, starts[stalled] + lead[stalled] - EPS_S]
        parts_code += [
            np.full(int(stalled.sum()), CODE["data_loading_start"]),
            np.full(int(stalled.sum()), CODE["data_loading_end"]),
        ]
        parts_step += [numbers[stalled], numbers[stalled]]
    ts = np.concatenate(parts_t)
    order = np.argsort(ts, kind="stable")
    ts_ms = np.round(ts[order] * 1000.0).astype(np.int64)
    alloc_end = int(math.ceil(job_end + rng.uniform(*mix.teardown_s)))
    return Timeline(
        ts_ms=ts_ms,
        code=np.concatenate(parts_code).astype(np.int8)[order],
        step=np.concatenate(parts_step).astype(np.int64)[order],
        alloc_end=alloc_end,
        stalled=bool(stalled.any()),
    )
