"""One writer per landing format: fleet records -> files under `landing/<source>/<cluster>/<day>/`.

File names are `<host>__<job>__<rank>__<utc-ts>.<ext>` with `-` for a part that does not apply;
`utc-ts` is the start of the UTC day for daily files, else the instant the file describes (a job's
start, a probe run, a rollout). No file is written empty: a day without rows has no file (the
ingestors quarantine empty files and header-only sacct output).

Landed files are never changed: writing a file that exists with the same bytes is a no-op, with other
bytes an error. Files are written to a dot-file beside the target and renamed into place.
"""

from __future__ import annotations

import dataclasses
import datetime as dt
import gzip
import json
import os
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from perf_assets.lib.contracts import STEP_EVENTS
from perf_assets.lib.simulate.clock import DAY_S, day_of, file_stamp, rfc3339, rfc3339_ms
from perf_assets.lib.simulate.exporter_text import exposition, scrape_indices
from perf_assets.lib.simulate.fleet import Fleet
from perf_assets.lib.simulate.ids import gpu_uuid
from perf_assets.lib.simulate.kineto_traces import traces
from perf_assets.lib.simulate.labels import labels_document, software_history
from perf_assets.lib.simulate.nccl_logs import runs_after_maintenance
from perf_assets.lib.simulate.slurm import SACCT_HEADER, sacct_rows
from perf_assets.lib.simulate.steps import NO_STEP
from perf_assets.lib.simulate.telemetry import FleetIndex, dcgm_node_day, probe_rows

_JSON = {"separators": (",", ":"), "ensure_ascii": False}


def dumps(record: dict) -> str:
    return json.dumps(record, **_JSON)


def file_name(t: float, ext: str, host: str = "-", job: str = "-", rank: str = "-") -> str:
    return f"{host}__{job}__{rank}__{file_stamp(t)}.{ext}"


@dataclass(frozen=True)
class WrittenFile:
    path: Path
    source: str
    rows: int
    size_bytes: int


class Landing:
    """Writes files under landing/ and remembers what it wrote."""

    def __init__(self, root: Path):
        self.root = root
        self.written: list[WrittenFile] = []

    def write(self, source: str, cluster: str, day: dt.date, name: str, text: str, rows: int) -> Path:
        path = self.root / source / cluster / day.isoformat() / name
        self.put(path, text.encode("utf-8"), source, rows)
        return path

    def put(self, path: Path, data: bytes, source: str, rows: int) -> None:
        if path.exists():
            if path.read_bytes() != data:
                raise FileExistsError(f"{path} exists with other content; landed files are never changed")
        else:
            path.parent.mkdir(parents=True, exist_ok=True)
            temporary = path.with_name(f".{path.name}.tmp")
            temporary.write_bytes(data)
            os.replace(temporary, path)
        self.written.append(WrittenFile(path, source, rows, len(data)))


def _jsonl(records: list[dict]) -> str:
    return "".join(dumps(record) + "\n" for record in records)


def _day_starts(fleet: Fleet) -> range:
    return range(fleet.t0, fleet.t1, DAY_S)


# --------------------------------------------------------------------------- inventory, software


def write_inventory(fleet: Fleet, out: Landing) -> None:
    """One file per cluster on the first day: every GPU installed from the window start."""
    for cluster in fleet.scenario.clusters:
        rows = [
            {
                "version": 1,
                "gpu_uuid": gpu_uuid(fleet.seed, node, index),
                "node": node,
                "rack": cluster.rack_of(node),
                "cluster": cluster.name,
                "sku": cluster.sku.name,
                "valid_from": rfc3339(fleet.t0),
                "valid_to": None,
            }
            for node in cluster.nodes
            for index in range(cluster.gpus_per_node)
        ]
        out.write("inventory", cluster.name, day_of(fleet.t0), file_name(fleet.t0, "jsonl"), _jsonl(rows), len(rows))


def _software_row(node: str, at: int, stack, power_limit_w: float) -> dict:
    return {
        "version": 1,
        "node": node,
        "valid_from": rfc3339(at),
        **dataclasses.asdict(stack),
        "power_limit_w": power_limit_w,
    }


def write_node_software(fleet: Fleet, out: Landing) -> None:
    """The stack of every node from the window start; each change instant (a rollout on a cluster, an
    incident's change on some nodes) adds a file with the new rows of the nodes it changed."""
    for cluster in fleet.scenario.clusters:
        history = software_history(fleet, cluster.name)
        for at in sorted({at for changes in history.values() for at, _, _ in changes}):
            rows = [
                _software_row(node, at, stack, limit)
                for node in cluster.nodes
                for when, stack, limit in history[node]
                if when == at
            ]
            out.write("node_software", cluster.name, day_of(at), file_name(at, "jsonl"), _jsonl(rows), len(rows))


def write_node_events(fleet: Fleet, out: Landing) -> None:
    """Intervals out of service, in the file of the day they start; end null if open at the window end."""
    for cluster in fleet.scenario.clusters:
        by_day: dict[int, list[dict]] = {}
        for interval in fleet.intervals:
            if interval.cluster != cluster.name or interval.start >= fleet.t1:
                continue
            end = None if interval.end is None or interval.end > fleet.t1 else rfc3339(interval.end)
            record = {
                "version": 1,
                "node": interval.node,
                "state": interval.state,
                "reason": interval.reason,
                "start": rfc3339(interval.start),
                "end": end,
            }
            day = fleet.t0 + (interval.start - fleet.t0) // DAY_S * DAY_S
            by_day.setdefault(day, []).append(record)
        for day in sorted(by_day):
            rows = sorted(by_day[day], key=lambda r: (r["start"], r["node"], r["state"]))
            out.write("node_events", cluster.name, day_of(day), file_name(day, "jsonl"), _jsonl(rows), len(rows))


# --------------------------------------------------------------------------- jobs

_EVENT_JSON = [f'"{name}"' for name in STEP_EVENTS]
_NAME_JSON = ['"eval"' if name.startswith("custom_") else "null" for name in STEP_EVENTS]  # custom events are evals


def write_step_events(fleet: Fleet, out: Landing) -> None:
    """Rank 0's events, one file per job and UTC day (all attempts of that day in one file)."""
    for job in fleet.jobs:
        started = [a for a in job.attempts if a.timeline is not None and len(a.timeline)]
        if not started:
            continue
        ts_ms = np.concatenate([a.timeline.ts_ms for a in started])
        code = np.concatenate([a.timeline.code for a in started]).tolist()
        step = np.concatenate([a.timeline.step for a in started]).tolist()
        attempt = np.concatenate([np.full(len(a.timeline), a.attempt) for a in started]).tolist()
        stamps = rfc3339_ms(ts_ms)
        prefix = f'{{"version":1,"job_id":"{job.job_id}","attempt":'
        lines = [
            f'{prefix}{attempt[i]},"rank":0,"event":{_EVENT_JSON[code[i]]},'
            f'"step":{"null" if step[i] == NO_STEP else step[i]},"ts":"{stamps[i]}","name":{_NAME_JSON[code[i]]}}}\n'
            for i in range(len(code))
        ]
        day_index = (ts_ms // 1000 - fleet.t0) // DAY_S
        bounds = np.flatnonzero(np.diff(day_index)) + 1
        for lo, hi in zip(np.concatenate(([0], bounds)), np.concatenate((bounds, [len(lines)]))):
            day = fleet.t0 + int(day_index[lo]) * DAY_S
            name = file_name(day, "jsonl", job=job.job_id, rank="0")
            out.write("step_events", job.cluster, day_of(day), name, "".join(lines[lo:hi]), int(hi - lo))


def write_job_meta(fleet: Fleet, out: Landing) -> None:
    """One JSON object per job that started, in the day folder of its first start."""
    for job in fleet.jobs:
        first = job.attempts[0]
        if first.start is None:
            continue
        record = {
            "version": 1,
            "job_id": job.job_id,
            "model_flops_per_step": job.flops_per_step,
            "dtype": "bf16",
            "dp": job.dp,
            "tp": job.tp,
            "pp": 1,
            "cp": 1,
            "workload": job.workload,
            "owner": job.owner,
        }
        name = file_name(first.start, "json", job=job.job_id)
        out.write("job_meta", job.cluster, day_of(first.start), name, dumps(record) + "\n", 1)


def write_pending_queue(fleet: Fleet, out: Landing) -> None:
    """Hourly snapshots of the attempts submitted and not started, one file per cluster-day."""
    every = fleet.scenario.pending_snapshot_s
    for cluster in fleet.scenario.clusters:
        by_day: dict[int, list[dict]] = {}
        for attempt in sorted(
            (a for a in fleet.attempts if a.job.cluster == cluster.name), key=lambda a: (a.submit, a.slurm_id)
        ):
            first = fleet.t0 + -(-(attempt.submit - fleet.t0) // every) * every
            until = fleet.t1 if attempt.start is None else min(attempt.start, fleet.t1)
            for ts in range(first, until, every):
                record = {
                    "version": 1,
                    "ts": rfc3339(ts),
                    "cluster": cluster.name,
                    "job_id": attempt.job_id,
                    "requested_gpus": attempt.job.n_gpus,
                    "eligible_since": rfc3339(attempt.eligible),
                }
                by_day.setdefault(fleet.t0 + (ts - fleet.t0) // DAY_S * DAY_S, []).append(record)
        for day in sorted(by_day):
            rows = sorted(by_day[day], key=lambda r: r["ts"])
            out.write("pending_queue", cluster.name, day_of(day), file_name(day, "jsonl"), _jsonl(rows), len(rows))


def write_sacct(fleet: Fleet, out: Landing) -> None:
    """sacct --parsable2 with header, per cluster-day: the allocations that ended that day; those still
    running at the window end are in the last day's file (State RUNNING, End Unknown)."""
    last_day = fleet.t1 - DAY_S
    for cluster in fleet.scenario.clusters:
        by_day: dict[int, list] = {}
        for attempt in fleet.attempts:
            if attempt.job.cluster != cluster.name or attempt.start is None:
                continue
            day = last_day if attempt.end is None else fleet.t0 + (attempt.end - fleet.t0) // DAY_S * DAY_S
            by_day.setdefault(day, []).append(attempt)
        for day in sorted(by_day):
            attempts = sorted(by_day[day], key=lambda a: a.slurm_id)
            lines = [SACCT_HEADER] + [row for a in attempts for row in sacct_rows(a, cluster)]
            text = "\n".join(lines) + "\n"
            out.write("sacct", cluster.name, day_of(day), file_name(day, "txt"), text, len(lines) - 1)


# --------------------------------------------------------------------------- telemetry


_PATTERNS = {
    "DCGM_FI_DEV_GPU_UTIL": "{:.0f}",
    "DCGM_FI_DEV_POWER_USAGE": "{:.1f}",
    "DCGM_FI_DEV_SM_CLOCK": "{:.0f}",
    "DCGM_FI_DEV_GPU_TEMP": "{:.0f}",
    "DCGM_FI_DEV_THERMAL_VIOLATION": "{:.0f}",
}


def _format(field: str, values: np.ndarray) -> list[str]:
    pattern = _PATTERNS.get(field, "{:.3f}")
    return ["NaN" if value != value else "0" if value == 0 else pattern.format(value) for value in values.tolist()]


def write_dcgm(fleet: Fleet, index: FleetIndex, out: Landing) -> None:
    """Prometheus range-query JSON, one file per node-day, every field of every GPU of the node; and
    `exports.exporter_scrapes_per_node_day` dcgm-exporter text scrapes of the same node-day, at grid
    instants, with the same formatted values (exporter_text.py)."""
    scrapes = fleet.scenario.exports.exporter_scrapes_per_node_day
    fields = fleet.scenario.dcgm_fields
    for cluster in fleet.scenario.clusters:
        for node in cluster.nodes:
            for day in _day_starts(fleet):
                sample = dcgm_node_day(fleet, index, cluster, node, day)
                times = [str(t) for t in sample.times.tolist()]
                series = []
                formatted: dict[str, list[list[str]]] = {field: [] for field in fields}
                labels_of_gpu = []
                for gpu in sample.gpus:
                    labels = {
                        "gpu": str(gpu.index),
                        "UUID": gpu.uuid,
                        "device": f"nvidia{gpu.index}",
                        "modelName": cluster.sku.model_name,
                        "Hostname": node,
                    }
                    labels_of_gpu.append(labels)
                    for field in fields:
                        metric = {
                            "__name__": field,
                            "gpu": labels["gpu"],
                            "UUID": gpu.uuid,
                            "Hostname": node,
                            "modelName": cluster.sku.model_name,
                            "device": labels["device"],
                        }
                        texts = _format(field, gpu.values[field])
                        formatted[field].append(texts)
                        values = ",".join(f'[{t},"{v}"]' for t, v in zip(times, texts))
                        series.append(f'{{"metric":{dumps(metric)},"values":[{values}]}}')
                text = '{"status":"success","data":{"resultType":"matrix","result":[' + ",".join(series) + "]}}\n"
                name = file_name(day, "json", host=node)
                out.write("dcgm", cluster.name, day_of(day), name, text, len(series) * len(times))
                if not scrapes:
                    continue
                in_service = ~np.isnan(sample.gpus[0].values[fields[0]])
                for at in scrape_indices(fleet.seed, node, day, in_service, scrapes):
                    scraped = int(sample.times[at])
                    text = exposition(fields, labels_of_gpu, formatted, at)
                    rows = len(fields) * len(labels_of_gpu)
                    out.write("dcgm", cluster.name, day_of(day), file_name(scraped, "txt", host=node), text, rows)


def write_probe_results(fleet: Fleet, index: FleetIndex, out: Landing) -> None:
    """The daily GEMM probe, one file per node-day (none for a day the node is out at probe time)."""
    for cluster in fleet.scenario.clusters:
        for node in cluster.nodes:
            for day in _day_starts(fleet):
                started, rows = probe_rows(fleet, index, cluster, node, day)
                if rows:
                    name = file_name(started, "jsonl", host=node)
                    out.write("probe_results", cluster.name, day_of(day), name, _jsonl(rows), len(rows))


def write_nccl_tests(fleet: Fleet, out: Landing) -> None:
    """An all_reduce_perf log per node after each maintenance window (nccl_logs.py), when enabled."""
    if not fleet.scenario.exports.nccl_tests_after_maintenance:
        return
    histories = {cluster.name: software_history(fleet, cluster.name) for cluster in fleet.scenario.clusters}

    def software_at(cluster: str, node: str, t: int):
        return [stack for when, stack, _ in histories[cluster][node] if when <= t][-1]

    for cluster, run in runs_after_maintenance(fleet, software_at):
        name = file_name(run.at, "log", host=run.node)
        out.write("nccl_tests", cluster.name, day_of(run.at), name, run.text, run.text.count("  float  "))


def write_kineto_traces(fleet: Fleet, out: Landing) -> None:
    """Gzipped Kineto traces of a few profiled steps of a few jobs, one per traced rank (kineto_traces.py)."""
    for trace in traces(fleet):
        name = file_name(trace.at, "json.gz", host=trace.node, job=trace.job_id, rank=str(trace.rank))
        path = out.root / "kineto" / trace.cluster / day_of(trace.at).isoformat() / name
        out.put(path, gzip.compress(trace.data, compresslevel=6, mtime=0), "kineto", trace.events)


def write_labels(fleet: Fleet, path: Path, out: Landing) -> None:
    document = labels_document(fleet)
    text = json.dumps(document, indent=2) + "\n"
    out.put(path, text.encode("utf-8"), "labels", len(document["incidents"]))


WRITERS = (
    write_inventory,
    write_node_software,
    write_node_events,
    write_step_events,
    write_job_meta,
    write_pending_queue,
    write_sacct,
    write_nccl_tests,
    write_kineto_traces,
)
TELEMETRY_WRITERS = (write_dcgm, write_probe_results)
