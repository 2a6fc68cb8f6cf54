"""Fleet simulator: writes landing files in the real formats (docs/contracts.md) plus labels.json.

`simulate(home)` runs a scenario (default `demo`: two 4-node clusters, H100 and A100, two weeks from
2026-11-01, an NCCL rollout on alpha that slows every step by 15 %) and writes under `home.landing`:
inventory, node_software, node_events, step_events, job_meta, pending_queue, sacct, dcgm (range JSON
and exporter text scrapes), probe_results, nccl_tests (after maintenance) and kineto (traces of a few
profiled steps), and `home.labels_file`. The same scenario and seed give byte-identical files: all
randomness comes from `numpy.random.default_rng` streams derived from the seed, and no wall-clock
time is read.

Slurm mapping: the Slurm job name (sacct JobName) carries our job_id; each attempt of a job is one
Slurm allocation with its own numeric JobID, so a requeue after a node fault is a new JobID with the
same JobName. step_events and job_meta use job_id = JobName; step_events carry the attempt number.

Modules: `scenario` (the scenario as frozen data), `catalogue` (the incident kinds a scenario may
list), `incidents` (what they do to the fleet), `steps` (one attempt's events, vectorised), `fleet`
(the discrete-event simulation: jobs, attempts, faults, node states), `telemetry` (DCGM samples and
GEMM/HBM probes), `slurm` (sacct spellings), `labels` (ground truth), `exporter_text` (dcgm-exporter
scrapes), `nccl_logs` (nccl-tests output), `kineto_traces` (profiler traces), `writers` (one per landing
format).
"""

from __future__ import annotations

import datetime as dt
from collections import Counter
from dataclasses import dataclass
from pathlib import Path

from perf_assets.lib.paths import DataHome
from perf_assets.lib.simulate.clock import parse_start
from perf_assets.lib.simulate.fleet import Fleet, NodeFault, simulate_fleet
from perf_assets.lib.simulate.labels import incidents as _incidents
from perf_assets.lib.simulate.scenario import Scenario, get_scenario
from perf_assets.lib.simulate.telemetry import FleetIndex
from perf_assets.lib.simulate.writers import TELEMETRY_WRITERS, WRITERS, Landing, write_labels

__all__ = ["SimulationResult", "simulate", "get_scenario", "Scenario"]


@dataclass(frozen=True)
class SimulationResult:
    scenario: str
    seed: int
    start: dt.date
    days: int
    files: tuple[Path, ...]  # every file written (landing files, then labels.json)
    counts: dict[str, int]  # rows (records) written per source; dcgm counts samples
    file_counts: dict[str, int]  # files written per source
    incidents: tuple[dict, ...]  # the labels (as in labels.json)
    faults: tuple[NodeFault, ...]  # node faults injected (availability events, not labels)
    size_bytes: int

    @property
    def labels_file(self) -> Path:
        return self.files[-1]


def simulate(
    home: DataHome,
    scenario: str | Scenario = "demo",
    seed: int = 7,
    start: dt.date | dt.datetime | str | None = None,
    days: int | None = None,
) -> SimulationResult:
    """Simulate a scenario and land its files under `home.landing`; returns what was written."""
    chosen = get_scenario(scenario) if isinstance(scenario, str) else scenario
    chosen = chosen.with_window(parse_start(start, chosen.start), days)
    if chosen.days < 1:
        raise ValueError("days must be at least 1")
    fleet: Fleet = simulate_fleet(chosen, int(seed))
    out = Landing(home.landing)
    for writer in WRITERS:
        writer(fleet, out)
    index = FleetIndex(fleet)
    for writer in TELEMETRY_WRITERS:
        writer(fleet, index, out)
    write_labels(fleet, home.labels_file, out)
    counts: Counter[str] = Counter()
    file_counts: Counter[str] = Counter()
    for written in out.written:
        counts[written.source] += written.rows
        file_counts[written.source] += 1
    return SimulationResult(
        scenario=chosen.name,
        seed=int(seed),
        start=chosen.start,
        days=chosen.days,
        files=tuple(written.path for written in out.written),
        counts=dict(sorted(counts.items())),
        file_counts=dict(sorted(file_counts.items())),
        incidents=tuple(_incidents(fleet)),
        faults=fleet.faults,
        size_bytes=sum(written.size_bytes for written in out.written),
    )
