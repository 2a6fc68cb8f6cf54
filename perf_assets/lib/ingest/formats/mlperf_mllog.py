"""MLPerf training result logs (`:::MLLOG {json}` lines): one row per distinct event of the run.

Every rank may log the same event (GPT-3 on 512 GPUs: 512 `init_start` lines, each with its own
`time_ms`). An event is identified by (namespace, event_type, key, value, metadata) without its time:
copies are one row with `duplicate_count`, the first time as `ts` and the last as `ts_last`. `srun
--label` and other prefixes before `:::MLLOG` are stripped; lines without `:::MLLOG` (shell traces,
DLLogger, warnings) are ignored and counted; `:::SYSJSON` is kept as the run's system description.
One file is one run: several `run_start` events are quarantined rather than merged. The per-run
figures (time to train, status, throughput) are derived in dbt (fct_mlperf_runs).
"""

from __future__ import annotations

import hashlib
import json
import math
from dataclasses import dataclass
from datetime import datetime, timedelta, timezone

import pyarrow as pa

from perf_assets.lib.contracts import raw_table
from perf_assets.lib.ingest.formats.errors import QuarantineError
from perf_assets.lib.ingest.formats.text_lines import read_lines, strip_srun_label
from perf_assets.lib.ingest.landing import LandedFile

SOURCE = "mlperf"  # landing/mlperf/...
TABLE = "mlperf_events"  # raw_mlperf_events (RAW_TABLES key; fed_by the mlperf folder)
MLLOG = ":::MLLOG"
SYSJSON = ":::SYSJSON"
RUN_START_SPREAD_MS = 60_000  # copies of run_start further apart than this are two runs, not two ranks
_EPOCH = datetime(1970, 1, 1, tzinfo=timezone.utc)
_DECODER = json.JSONDecoder()


def _finite(value):
    """JSON-safe copy: NaN and ±Inf (which json.loads accepts) become strings, so DuckDB can read the text."""
    if isinstance(value, float) and not math.isfinite(value):
        return str(value)
    if isinstance(value, dict):
        return {key: _finite(item) for key, item in value.items()}
    if isinstance(value, list):
        return [_finite(item) for item in value]
    return value


def _canonical(value) -> str:
    return json.dumps(_finite(value), sort_keys=True, separators=(",", ":"))


def _number(value) -> float | None:
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return None
    return float(value) if math.isfinite(value) else None


def _integer(value) -> int | None:
    number = _number(value)
    return int(number) if number is not None and number.is_integer() else None


def _ts(time_ms: int | None) -> datetime | None:
    return None if time_ms is None else _EPOCH + timedelta(milliseconds=time_ms)


@dataclass
class _Event:
    index: int
    line_number: int
    record: dict
    value_json: str
    metadata_json: str
    first_ms: int | None
    last_ms: int | None
    count: int = 1

    def seen_again(self, time_ms: int | None) -> None:
        self.count += 1
        if time_ms is not None:
            self.first_ms = time_ms if self.first_ms is None else min(self.first_ms, time_ms)
            self.last_ms = time_ms if self.last_ms is None else max(self.last_ms, time_ms)


@dataclass
class _Log:
    events: dict[tuple, _Event]
    records: int = 0
    sysjson_lines: int = 0
    other_lines: int = 0
    prefixed_lines: int = 0
    system: dict | None = None


def _decode(line: str, start: int, line_number: int, what: str) -> tuple[object, int]:
    while start < len(line) and line[start].isspace():
        start += 1
    try:
        return _DECODER.raw_decode(line, start)
    except json.JSONDecodeError as error:
        raise QuarantineError(
            f"line {line_number}: {what} is not valid JSON ({error.msg} at column {error.colno}; truncated?)"
        ) from None


def _time_ms(record: dict, line_number: int) -> int | None:
    value = record.get("time_ms")
    if value is None:
        return None
    number = _number(value)
    if number is None:
        raise QuarantineError(f"line {line_number}: time_ms {value!r} is not a number")
    return int(number)


def _add_record(log: _Log, record: object, line_number: int) -> None:
    if not isinstance(record, dict) or not isinstance(record.get("key"), str):
        raise QuarantineError(f"line {line_number}: :::MLLOG record is not an object with a 'key'")
    log.records += 1
    time_ms = _time_ms(record, line_number)
    value_json = _canonical(record.get("value"))
    metadata = record.get("metadata")
    metadata_json = _canonical(metadata if isinstance(metadata, dict) else {})
    identity = (record.get("namespace") or "", record.get("event_type"), record["key"], value_json, metadata_json)
    if identity in log.events:
        log.events[identity].seen_again(time_ms)
    else:
        log.events[identity] = _Event(len(log.events), line_number, record, value_json, metadata_json, time_ms, time_ms)


def read_log(lines: list[str]) -> _Log:
    log = _Log(events={})
    for line_number, raw in enumerate(lines, start=1):
        line, labelled = strip_srun_label(raw)
        position = line.find(MLLOG)
        if position < 0:
            system_at = line.find(SYSJSON)
            if system_at >= 0:
                system, _ = _decode(line, system_at + len(SYSJSON), line_number, ":::SYSJSON")
                log.sysjson_lines += 1
                if log.system is None and isinstance(system, dict):
                    log.system = system
            elif line.strip():
                log.other_lines += 1
            continue
        log.prefixed_lines += labelled or position > 0
        while position >= 0:  # interleaved output may put two records on one line
            record, end = _decode(line, position + len(MLLOG), line_number, ":::MLLOG record")
            _add_record(log, record, line_number)
            position = line.find(MLLOG, end)
    return log


def _check_one_run(log: _Log) -> None:
    starts = [event for event in log.events.values() if event.record["key"] == "run_start"]
    spans = [event.last_ms - event.first_ms for event in starts if event.first_ms is not None]
    if len(starts) > 1 or any(span > RUN_START_SPREAD_MS for span in spans):
        lines = ", ".join(str(event.line_number) for event in starts)
        raise QuarantineError(
            f"more than one run in the file: {len(starts)} distinct run_start events (first at lines {lines}), "
            f"copies up to {max(spans, default=0) / 1000:.0f} s apart; split the result file per run"
        )


def _run_id(log: _Log) -> str:
    """The run's identity from its content: benchmark, submitter, platform and when it started."""
    by_key: dict[str, _Event] = {}
    for event in log.events.values():
        by_key.setdefault(event.record["key"], event)
    anchor_event = by_key.get("init_start") or by_key.get("run_start")
    times = [e.first_ms for e in log.events.values() if e.first_ms is not None]
    anchor = anchor_event.first_ms if anchor_event is not None else (min(times) if times else None)
    names = [
        by_key[key].record.get("value") if key in by_key else None
        for key in ("submission_benchmark", "submission_org", "submission_platform")
    ]
    return hashlib.sha256(json.dumps([*names, anchor], default=str).encode()).hexdigest()[:16]


def parse_mlperf_mllog(landed: LandedFile) -> dict[str, pa.Table]:
    """{'mlperf_events': rows}: the table is not named after the landing folder (contracts: fed_by)."""
    lines = read_lines(landed)
    log = read_log(lines)
    if not log.events:
        raise QuarantineError(f"no :::MLLOG record in {len(lines)} lines: not an MLPerf result log")
    _check_one_run(log)
    run_id = _run_id(log)
    system_json = _canonical(log.system) if log.system is not None else None
    table = raw_table(TABLE)
    names = [*table.schema.names, "event_date"]
    columns: dict[str, list] = {name: [] for name in names}
    for event in sorted(log.events.values(), key=lambda e: e.index):
        record = event.record
        metadata = json.loads(event.metadata_json)
        ts = _ts(event.first_ms)
        identity = [record.get("namespace") or "", record.get("event_type"), record["key"], event.value_json]
        row = {
            "cluster": landed.cluster,
            "host": landed.host,
            "job_id": landed.job_id,
            "run_id": run_id,
            "event_id": hashlib.sha256(json.dumps([*identity, event.metadata_json]).encode()).hexdigest()[:16],
            "event_index": event.index,
            "line_number": event.line_number,
            "namespace": record.get("namespace") or None,
            "event_type": record.get("event_type"),
            "key": record["key"],
            "value_json": event.value_json,
            "value_num": _number(record.get("value")),
            "time_ms": event.first_ms,
            "ts": ts,
            "ts_last": _ts(event.last_ms),
            "metadata_json": event.metadata_json,
            "epoch_num": _number(metadata.get("epoch_num")),
            "step": _integer(metadata.get("step")),
            "samples_count": _integer(metadata.get("samples_count")),
            "status": metadata.get("status") if isinstance(metadata.get("status"), str) else None,
            "duplicate_count": event.count,
            "system_json": system_json,
            "mllog_records": log.records,
            "sysjson_lines": log.sysjson_lines,
            "other_lines": log.other_lines,
            "prefixed_lines": log.prefixed_lines,
            "event_date": ts.date() if ts is not None else landed.default_event_date,
        }
        for name in names:
            columns[name].append(row[name])
    copies = log.records - len(log.events)
    note = (
        f"{log.records} MLLOG records -> {len(log.events)} events ({copies} per-rank copies collapsed); "
        f"{log.other_lines} non-MLLOG lines ignored"
    )
    schema = pa.schema([*table.schema, pa.field("event_date", pa.date32())], metadata={"ingest_note": note})
    return {TABLE: pa.Table.from_pydict(columns, schema=schema)}
