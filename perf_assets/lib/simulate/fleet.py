"""The event-level fleet simulation: jobs, attempts, node states. Pure: scenario + seed -> records.

Each cluster is a small discrete-event simulation with a FIFO Slurm-like scheduler:

- Demand: one new job is in flight at a time. When a job starts, the next one is drawn: a size
  (1, 2 or 4 whole nodes) among those that could fit soon, and a submit time around the moment
  it could fit (from an hour before to a few hours after), which leaves idle gaps between jobs.
- Scheduling: the oldest eligible job starts on the first free nodes once it fits; a node runs at
  most one job; a node with a maintenance window before the job's time limit runs out is not used.
- Faults: random node faults (Poisson per node-day) plus one forced fault on a node that is running
  a job. The attempt's events stop at the fault; the allocation hangs until the scheduler notices
  (NODE_FAIL), then the node is `down` and in `repair` for a few hours, and the job is requeued as a
  new attempt that resumes from its last committed checkpoint (steps after it are run again).
- Rollouts: from a rollout's instant every step of its cluster is slower by its factor.
- The incident catalogue (`incidents.Effects`): per-node slowdowns, stalls and save factors reach an
  attempt's timeline, stranded nodes the scheduler, demand shifts the submit times, bad batches more
  faults, decoy maintenances more windows. A cluster without incidents draws exactly as before.

Slurm mapping: the Slurm job name carries our job_id; each attempt is one Slurm allocation with its
own numeric JobID (a requeue is a new JobID with the same JobName).
"""

from __future__ import annotations

import heapq
import math
from dataclasses import dataclass, field

import numpy as np

from perf_assets.lib.simulate.clock import DAY_S, HOUR_S, epoch_of
from perf_assets.lib.simulate.ids import stream
from perf_assets.lib.simulate.incidents import AttemptEffects, Effects
from perf_assets.lib.simulate.scenario import Cluster, Scenario
from perf_assets.lib.simulate.steps import StepPlan, Timeline, build_timeline


@dataclass
class Job:
    job_id: str
    cluster: str
    n_nodes: int
    n_gpus: int
    plan: StepPlan
    flops_per_step: float
    mfu: float  # useful FLOPs / (GPUs x peak x nominal step time)
    time_limit_s: int
    owner: str
    user: str
    workload: str
    dp: int
    tp: int
    submit: int
    cancel_fraction: float | None  # the user cancels attempt 1 this far into its planned run
    attempts: list["Attempt"] = field(default_factory=list)
    ckpt_step: int = 0  # last committed checkpoint step


@dataclass
class Attempt:
    job: Job
    attempt: int
    slurm_id: int
    submit: int
    eligible: int
    start: int | None = None
    end: int | None = None  # allocation end; None while running at the end of the window
    nodes: tuple[str, ...] = ()
    state: str = "PENDING"  # PENDING | RUNNING | COMPLETED | NODE_FAIL | CANCELLED
    timeline: Timeline | None = None  # events recorded (cut at a fault, a cancel or the window end)
    stop_at: int | None = None  # fault or cancel: no events from here; the allocation ends at `end`
    stop_reason: str | None = None  # fault | cancel
    failed_node: str | None = None
    effects: AttemptEffects | None = None  # the incidents its steps run into (None: none)

    @property
    def job_id(self) -> str:
        return self.job.job_id


@dataclass(frozen=True)
class NodeInterval:
    """A node state other than in_service, [start, end); end None = still open at the window end."""

    cluster: str
    node: str
    state: str  # down | repair | maintenance | drain
    reason: str
    start: int
    end: int | None


@dataclass(frozen=True)
class NodeFault:
    cluster: str
    node: str
    at: int
    reason: str
    job_id: str | None  # the job whose attempt it killed
    forced: bool


@dataclass(frozen=True)
class AppliedRollout:
    incident_id: str
    cluster: str
    at: int
    changes: tuple[tuple[str, str], ...]
    cause_component: str
    step_time_factor: float


@dataclass(frozen=True)
class Fleet:
    scenario: Scenario
    seed: int
    t0: int
    t1: int
    jobs: tuple[Job, ...]
    intervals: tuple[NodeInterval, ...]
    faults: tuple[NodeFault, ...]
    rollouts: tuple[AppliedRollout, ...]
    effects: Effects

    @property
    def attempts(self) -> list[Attempt]:
        return [attempt for job in self.jobs for attempt in job.attempts]

    def slowdowns(self, cluster: str) -> tuple[tuple[float, float], ...]:
        return tuple((r.at, r.step_time_factor) for r in self.rollouts if r.cluster == cluster)


# event priorities at one instant: free resources first, then faults, submissions, scheduling
_RELEASE, _MAINT, _FAULT, _SUBMIT, _SCHED = range(5)


class _ClusterSim:
    TICK_S = 600

    def __init__(self, scenario: Scenario, cluster: Cluster, seed: int, t0: int, t1: int, slowdowns, effects: Effects):
        self.sc = scenario
        self.effects = effects
        self.touched = effects.touches(cluster.name)
        self.mix = scenario.jobs
        self.cluster = cluster
        self.seed = seed
        self.t0, self.t1 = t0, t1
        self.slowdowns = slowdowns
        self.rng = stream(seed, "fleet", cluster.name)
        self.nodes = cluster.nodes
        self.status = {node: "idle" for node in self.nodes}  # idle | busy | down | repair | maintenance
        self.running: dict[str, Attempt | None] = {node: None for node in self.nodes}
        self.back_at = {node: t0 for node in self.nodes}  # when a node not idle is expected back
        self.maint = {node: [] for node in self.nodes}
        self.queue: list[Attempt] = []
        self.heap: list = []
        self.seq = 0
        self.job_number = 0
        self.next_slurm_id = cluster.slurm_id_base
        self.jobs: list[Job] = []
        self.intervals: list[NodeInterval] = []
        self.faults: list[NodeFault] = []

    # ------------------------------------------------------------------ plumbing
    def push(self, t: float, priority: int, kind: str, payload=None) -> None:
        self.seq += 1
        heapq.heappush(self.heap, (int(t), priority, self.seq, kind, payload))

    def uniform(self, bounds: tuple[float, float]) -> float:
        return float(self.rng.uniform(*bounds))

    def latency(self) -> float:
        return self.uniform(self.mix.sched_latency_s)

    # ------------------------------------------------------------------ setup
    def seed_events(self) -> None:
        faults = self.sc.faults
        days = (self.t1 - self.t0) / DAY_S
        for node in self.nodes:
            count = int(self.rng.poisson(faults.rate_per_node_day * days))
            for at in np.sort(self.rng.integers(self.t0, self.t1, count)):
                reason = str(self.rng.choice(faults.reasons))
                self.push(int(at), _FAULT, "fault", (node, reason, False))
        if faults.forced_cluster == self.cluster.name:
            at = self.t0 + faults.forced_at_fraction * (self.t1 - self.t0)
            self.push(at, _FAULT, "forced_fault", None)
        decoys = self.effects.maintenances(self.cluster.name) if self.touched else []
        for window in (*self.sc.maintenances, *decoys):
            if window.cluster != self.cluster.name:
                continue
            start = int(self.t0 + window.offset_h * HOUR_S)
            end = int(start + window.duration_h * HOUR_S)
            if start < self.t1:
                self.maint[window.node].append((start, end, window.reason))
                self.push(start, _MAINT, "maint_start", (window.node, end, window.reason))
        if self.touched:
            for at, node, reason in self.effects.extra_faults(self.seed, self.cluster.name, faults.reasons):
                self.push(at, _FAULT, "fault", (node, reason, False))
        for tick in range(self.t0, self.t1, self.TICK_S):  # the scheduler's periodic pass
            self.push(tick, _SCHED, "sched")
        self.plan_demand(self.t0)

    # ------------------------------------------------------------------ demand
    def draw_job(self) -> dict:
        """A job's model and plan; everything but its size (so the size can be chosen to fit)."""
        mix, sku, rng = self.mix, self.cluster.sku, self.rng
        step_time = self.uniform(mix.step_time_s)
        low, high = sku.mfu_range  # near the band's middle: a cluster's P barely moves with its job mix
        mfu = float(np.clip((low + high) / 2 * math.exp(rng.normal(0.0, mix.mfu_sigma)), low, high))
        ckpt_every = max(1, round(self.uniform(mix.ckpt_interval_min) * 60 / step_time))
        eval_every = max(1, round(mix.eval_every_h * HOUR_S / step_time))
        duration = self.uniform(mix.duration_h) * HOUR_S
        per_step = step_time + np.mean(mix.ckpt_save_s) / ckpt_every + np.mean(mix.eval_s) / eval_every
        total_steps = max(10, int((duration - 400.0) / per_step))
        worst = math.prod(factor for _, factor in self.slowdowns) * math.exp(4 * mix.step_noise_sigma)
        save_worst = 1.0
        if self.touched:
            worst *= self.effects.worst_step_factor(self.cluster.name)
            save_worst = self.effects.worst_save_factor(self.cluster.name)
        prologue = sum(b for _, b in (mix.startup_s, mix.device_init_s, mix.training_prep_s, mix.ckpt_restore_s))
        estimate = (
            prologue
            + mix.first_batch_s[1]
            + mix.teardown_s[1]
            + total_steps
            * (step_time * worst + mix.ckpt_save_s[1] * save_worst / ckpt_every + mix.eval_s[1] / eval_every)
        )
        owner, user = mix.owners[int(rng.integers(len(mix.owners)))]
        names, weights = zip(*mix.workloads)
        return {
            "plan": StepPlan(step_time, total_steps, ckpt_every, eval_every),
            "mfu": mfu,
            "time_limit_s": int(math.ceil(estimate * 1.1 / HOUR_S) * HOUR_S),
            "owner": owner,
            "user": user,
            "workload": str(rng.choice(names, p=np.asarray(weights) / sum(weights))),
            "cancel_fraction": self.uniform((0.2, 0.8)) if rng.random() < mix.cancel_probability else None,
        }

    def make_job(self, drawn: dict, size: int, submit: int) -> Job:
        sku = self.cluster.sku
        self.job_number += 1
        n_gpus = size * self.cluster.gpus_per_node
        step_time = drawn["plan"].step_time_s
        flops = float(f"{drawn['mfu'] * n_gpus * sku.peak_bf16_flops * step_time:.4g}")
        job = Job(
            job_id=f"{self.cluster.name}-{self.job_number:06d}",
            cluster=self.cluster.name,
            n_nodes=size,
            n_gpus=n_gpus,
            plan=drawn["plan"],
            flops_per_step=flops,
            mfu=flops / (n_gpus * sku.peak_bf16_flops * step_time),
            time_limit_s=drawn["time_limit_s"],
            owner=drawn["owner"],
            user=drawn["user"],
            workload=drawn["workload"],
            dp=n_gpus // self.mix.tp,
            tp=self.mix.tp,
            submit=submit,
            cancel_fraction=drawn["cancel_fraction"],
        )
        self.jobs.append(job)
        return job

    def fit_time(self, size: int, now: int, time_limit: int) -> int:
        """When `size` nodes are expected to be free together for a job of this time limit."""
        margin = max(0.0, self.mix.submit_offset_h[1]) * HOUR_S  # it may be submitted that much later
        back = {node: now if self.status[node] == "idle" else max(now, self.back_at[node]) for node in self.nodes}
        ends = {end for node in self.nodes for _, end, _ in self.maint[node] if end > now}
        candidates = sorted(set(back.values()) | ends)
        for t in candidates:
            free = [
                node
                for node in self.nodes
                if back[node] <= t
                and not any(start < t + time_limit + margin and end > t for start, end, _ in self.maint[node])
            ]
            if len(free) >= size:
                return t
        return self.t1

    def plan_demand(self, now: int) -> None:
        """Draw the next job: a size that fits soon, submitted around the time it fits."""
        mix = self.mix
        drawn = self.draw_job()
        fits = {size: self.fit_time(size, now, drawn["time_limit_s"]) for size in mix.sizes if size <= len(self.nodes)}
        soonest = min(fits.values())
        slack_h = mix.fit_slack_h
        if self.touched and self.effects.receives_work(self.cluster.name, now):
            slack_h = 0.0  # a cluster receiving work always has a job that fits first
        allowed = [size for size in fits if fits[size] <= soonest + slack_h * HOUR_S]
        weights = np.asarray([mix.size_weights[mix.sizes.index(size)] for size in allowed])
        size = int(self.rng.choice(allowed, p=weights / weights.sum()))
        offset_h = self.uniform(mix.submit_offset_h)
        if self.touched:
            offset_h = self.effects.submit_shift_h(self.cluster.name, now, offset_h, mix.submit_offset_h[1])
        offset = offset_h * HOUR_S
        submit = int(max(now + 60, fits[size] + offset))
        if self.touched:
            submit = self.effects.receiving_submit(self.cluster.name, now, submit)
        if submit >= self.t1:
            return
        job = self.make_job(drawn, size, submit)
        self.push(submit, _SUBMIT, "submit", self.new_attempt(job, submit, submit))

    def new_attempt(self, job: Job, submit: int, eligible: int) -> Attempt:
        attempt = Attempt(job, len(job.attempts) + 1, 0, submit, eligible)  # JobID given at submit
        job.attempts.append(attempt)
        return attempt

    # ------------------------------------------------------------------ scheduling
    def usable(self, node: str, now: int, time_limit: int) -> bool:
        if self.status[node] != "idle":
            return False
        return not any(start < now + time_limit and end > now for start, end, _ in self.maint[node])

    def schedule(self, now: int) -> None:
        while True:
            eligible = [a for a in self.queue if a.eligible <= now]
            if not eligible:
                return
            head = eligible[0]  # FIFO: the queue is kept in job submit order
            free = [node for node in self.nodes if self.usable(node, now, head.job.time_limit_s)]
            stranded = self.effects.stranded(self.cluster.name, now) if self.touched else 0
            if stranded:  # fragmentation: some idle nodes cannot be given to this job
                free = free[: max(0, len(free) - stranded)]
            if len(free) < head.job.n_nodes:
                return
            self.start(head, tuple(free[: head.job.n_nodes]), now)

    def start(self, attempt: Attempt, nodes: tuple[str, ...], now: int) -> None:
        job = attempt.job
        self.queue.remove(attempt)
        effects = None
        if self.touched:
            effects = self.effects.for_attempt(self.seed, self.cluster.name, nodes, job.job_id, attempt.attempt)
        timeline = build_timeline(
            job.plan, attempt.attempt, now, job.ckpt_step + 1, self.slowdowns, self.mix, self.rng, effects
        )
        attempt.effects = effects
        if timeline.alloc_end > now + job.time_limit_s:
            raise AssertionError(f"{job.job_id}: planned run exceeds its time limit; widen the estimate")
        attempt.start, attempt.nodes, attempt.state, attempt.timeline = now, nodes, "RUNNING", timeline
        for node in nodes:
            self.status[node] = "busy"
            self.running[node] = attempt
            self.back_at[node] = timeline.alloc_end
        if attempt.attempt == 1 and job.cancel_fraction is not None:
            self.push(now + job.cancel_fraction * (timeline.alloc_end - now), _RELEASE, "cancel", attempt)
        else:
            self.push(timeline.alloc_end, _RELEASE, "complete", attempt)
        if attempt.attempt == 1:
            self.plan_demand(now)

    def release(self, attempt: Attempt, now: int) -> None:
        for node in attempt.nodes:
            if self.running[node] is attempt:
                self.running[node] = None
                self.status[node] = "idle"
        self.push(now + self.latency(), _SCHED, "sched")

    def out_of_service(self, node: str, now: int, reason: str) -> None:
        """down for a few hours, then repair, then back in service."""
        faults = self.sc.faults
        down_end = int(now + self.uniform(faults.down_h) * HOUR_S)
        repair_end = int(down_end + self.uniform(faults.repair_h) * HOUR_S)
        repair_reason = str(self.rng.choice(faults.repair_reasons))
        self.intervals.append(NodeInterval(self.cluster.name, node, "down", reason, now, down_end))
        self.intervals.append(NodeInterval(self.cluster.name, node, "repair", repair_reason, down_end, repair_end))
        self.status[node] = "down"
        self.running[node] = None
        self.back_at[node] = repair_end
        self.push(repair_end, _RELEASE, "node_back", node)

    # ------------------------------------------------------------------ handlers
    def on_fault(self, now: int, node: str, reason: str, forced: bool) -> None:
        status = self.status[node]
        attempt = self.running[node]
        if status in ("down", "repair", "maintenance") or (attempt is not None and attempt.stop_at is not None):
            return  # already out, or its job is already going away
        if status == "idle":
            self.faults.append(NodeFault(self.cluster.name, node, now, reason, None, forced))
            self.out_of_service(node, now, reason)
            return
        job = attempt.job
        hang = self.uniform(self.sc.faults.hang_s)
        attempt.stop_at, attempt.end, attempt.state = now, int(now + hang), "NODE_FAIL"
        attempt.failed_node, attempt.stop_reason = node, "fault"
        job.ckpt_step = attempt.timeline.last_checkpoint(now, job.ckpt_step)
        self.faults.append(NodeFault(self.cluster.name, node, now, reason, job.job_id, forced))
        self.push(attempt.end, _RELEASE, "requeue", (attempt, reason))

    def on_forced_fault(self, now: int) -> None:
        """Kill a running job that has made progress since its last checkpoint (wasted progress)."""
        candidates = [
            node
            for node in self.nodes
            if self.status[node] == "busy"
            and self.running[node].stop_at is None
            and self.running[node].timeline.steps_since_checkpoint(now) > 0
        ]
        if not candidates:
            self.push(now + 1800, _FAULT, "forced_fault", None)
            return
        node = candidates[int(self.rng.integers(len(candidates)))]
        self.on_fault(now, node, self.sc.faults.forced_reason, True)

    def on_requeue(self, now: int, attempt: Attempt, reason: str) -> None:
        for node in attempt.nodes:
            if node == attempt.failed_node:
                self.out_of_service(node, now, reason)
            elif self.running[node] is attempt:
                self.running[node] = None
                self.status[node] = "idle"
        eligible = int(now + self.uniform(self.sc.faults.requeue_delay_s))
        retry = self.new_attempt(attempt.job, now, eligible)
        self.submit(retry, now)
        self.push(eligible + self.latency(), _SCHED, "sched")

    def submit(self, attempt: Attempt, now: int) -> None:
        attempt.slurm_id = self.next_slurm_id  # Slurm numbers jobs in submission order
        self.next_slurm_id += 1
        self.queue.append(attempt)
        self.queue.sort(key=lambda a: (a.job.submit, a.job.job_id))
        self.push(now + self.latency(), _SCHED, "sched")

    def on_maintenance(self, now: int, node: str, end: int, reason: str) -> None:
        if self.status[node] != "idle":  # down already (a fault): the window is not taken
            self.maint[node] = [window for window in self.maint[node] if window[0] != now]
            self.push(now + self.latency(), _SCHED, "sched")
            return
        self.intervals.append(NodeInterval(self.cluster.name, node, "maintenance", reason, now, end))
        self.status[node] = "maintenance"
        self.back_at[node] = end
        self.push(end, _RELEASE, "node_back", node)

    # ------------------------------------------------------------------ run
    def run(self) -> None:
        self.seed_events()
        while self.heap:
            now, _, _, kind, payload = heapq.heappop(self.heap)
            if now >= self.t1:
                break
            if kind == "submit":
                self.submit(payload, now)
            elif kind == "sched":
                self.schedule(now)
            elif kind == "complete":
                if payload.state == "RUNNING" and payload.stop_at is None:
                    payload.end, payload.state = now, "COMPLETED"
                    self.release(payload, now)
            elif kind == "cancel":
                if payload.state == "RUNNING" and payload.stop_at is None:
                    payload.stop_at, payload.state, payload.stop_reason = now, "CANCELLED", "cancel"
                    payload.end = int(now + self.uniform(self.mix.teardown_s))
                    self.push(payload.end, _RELEASE, "release", payload)
            elif kind == "release":
                self.release(payload, now)
            elif kind == "requeue":
                self.on_requeue(now, *payload)
            elif kind == "fault":
                self.on_fault(now, *payload)
            elif kind == "forced_fault":
                self.on_forced_fault(now)
            elif kind == "maint_start":
                self.on_maintenance(now, *payload)
            elif kind == "node_back":
                self.status[payload] = "idle"
                self.push(now + self.latency(), _SCHED, "sched")
        self.close_window()

    def close_window(self) -> None:
        """What the records say at the window end: running attempts are RUNNING, events are cut."""
        for job in self.jobs:
            for attempt in job.attempts:
                if attempt.start is None:
                    continue
                if attempt.end is None or attempt.end >= self.t1:
                    attempt.state, attempt.end = "RUNNING", None  # the scheduler has not seen it end
                cut = min(self.t1, attempt.stop_at if attempt.stop_at is not None else self.t1)
                attempt.timeline = attempt.timeline.before(cut)


def simulate_fleet(scenario: Scenario, seed: int) -> Fleet:
    t0 = epoch_of(scenario.start)
    t1 = t0 + scenario.days * DAY_S
    rollouts = tuple(
        AppliedRollout(
            r.incident_id, r.cluster, int(t0 + r.offset_h * HOUR_S), r.changes, r.cause_component, r.step_time_factor
        )
        for r in scenario.rollouts
        if t0 + r.offset_h * HOUR_S < t1
    )
    jobs: list[Job] = []
    intervals: list[NodeInterval] = []
    faults: list[NodeFault] = []
    effects = Effects(scenario, t0, t1)
    for cluster in scenario.clusters:
        slowdowns = tuple((r.at, r.step_time_factor) for r in rollouts if r.cluster == cluster.name)
        sim = _ClusterSim(scenario, cluster, seed, t0, t1, slowdowns, effects)
        sim.run()
        jobs += sim.jobs
        intervals += sorted(sim.intervals, key=lambda i: (i.start, i.node, i.state))
        faults += sim.faults
    return Fleet(scenario, seed, t0, t1, tuple(jobs), tuple(intervals), tuple(faults), rollouts, effects)
