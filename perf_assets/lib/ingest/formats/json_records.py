"""Our own JSON formats (docs/contracts.md): JSON lines, or one JSON object / array per file."""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from datetime import date

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.json as pa_json

from perf_assets.lib.contracts import FORMAT_VERSIONS, NODE_STATES, STEP_EVENTS, TS, RawTable, raw_table
from perf_assets.lib.ingest.formats.errors import QuarantineError
from perf_assets.lib.ingest.formats.timeparse import parse_utc
from perf_assets.lib.ingest.landing import LandedFile


@dataclass(frozen=True)
class JsonRecordSpec:
    """How one of our JSON formats maps onto its raw table."""

    source: str
    required: tuple[str, ...]
    event_time: str | None  # column whose UTC date is the row's event_date; None: the capture date
    renames: dict[str, str] = field(default_factory=dict)  # field in the file -> column
    json_columns: dict[str, str] = field(default_factory=dict)  # object field -> column holding its JSON
    allowed: dict[str, tuple[str, ...]] = field(default_factory=dict)  # column -> its allowed values

    @property
    def table(self) -> RawTable:
        return raw_table(self.source)


def _records(text: str, where: str) -> list[tuple[int, dict]]:
    stripped = text.lstrip()
    if not stripped:
        raise QuarantineError(f"{where}: empty file")
    if stripped[0] in "[{":
        try:
            whole = json.loads(text)
        except json.JSONDecodeError:
            whole = None  # not one document: read it as JSON lines below
        if isinstance(whole, dict):
            return [(1, whole)]
        if isinstance(whole, list):
            return list(enumerate(whole, start=1))
    records = []
    for line_number, line in enumerate(text.splitlines(), start=1):
        if not line.strip():
            continue
        try:
            records.append((line_number, json.loads(line)))
        except json.JSONDecodeError as error:
            raise QuarantineError(f"line {line_number}: invalid JSON ({error.msg} at column {error.colno})") from None
    return records


def parse_json_records(spec: JsonRecordSpec, landed: LandedFile) -> pa.Table:
    """Arrow's JSON-lines reader when the file is clean; on any doubt the checked line-by-line path,
    which names the offending line. Both give the same table for a clean file."""
    fast = _read_clean_json_lines(spec, landed)
    return fast if fast is not None else _parse_line_by_line(spec, landed)


def _read_clean_json_lines(spec: JsonRecordSpec, landed: LandedFile) -> pa.Table | None:
    """Vectorized read and checks; None means "not provably clean": let the careful path decide."""
    if spec.json_columns:
        return None  # objects serialised to JSON text: the careful path does that
    in_file = {column: field for field, column in spec.renames.items()}
    fields = [pa.field("version", pa.int64())]
    fields += [pa.field(in_file.get(f.name, f.name), f.type) for f in spec.table.schema]
    options = pa_json.ParseOptions(explicit_schema=pa.schema(fields), unexpected_field_behavior="ignore")
    try:
        table = pa_json.read_json(landed.path, parse_options=options)
    except (pa.ArrowInvalid, pa.ArrowNotImplementedError, pa.ArrowTypeError, OSError):
        return None
    if table.num_rows == 0:
        return None
    table = table.rename_columns([spec.renames.get(name, name) for name in table.column_names])
    version = table["version"]
    if version.null_count or not pc.all(pc.equal(version, FORMAT_VERSIONS[spec.source])).as_py():
        return None
    for name in spec.required:
        column = table[name]
        if column.null_count:
            return None
        if pa.types.is_string(column.type) and pc.any(pc.equal(column, "")).as_py():
            return None
    for name, allowed in spec.allowed.items():
        if not pc.all(pc.is_in(table[name], value_set=pa.array(allowed))).as_py():
            return None
    table = table.select(spec.table.schema.names)
    if spec.event_time:
        when = table[spec.event_time]
        days = pc.cast(pc.cast(when, pa.timestamp("us")), pa.date32())  # the UTC day
        days = pc.fill_null(days, pa.scalar(landed.default_event_date, pa.date32()))
    else:
        days = pa.array([landed.default_event_date] * table.num_rows, pa.date32())
    return table.append_column("event_date", days)


def _parse_line_by_line(spec: JsonRecordSpec, landed: LandedFile) -> pa.Table:
    try:
        text = landed.path.read_text(encoding="utf-8")
    except UnicodeDecodeError as error:
        raise QuarantineError(f"not UTF-8 text (byte {error.start})") from None
    supported = FORMAT_VERSIONS[spec.source]
    schema = spec.table.schema
    columns: dict[str, list] = {name: [] for name in schema.names}
    event_dates: list[date] = []
    for line_number, record in _records(text, landed.relative_path):
        if not isinstance(record, dict):
            raise QuarantineError(f"line {line_number}: expected a JSON object, got {type(record).__name__}")
        version = record.get("version")
        if version != supported:
            raise QuarantineError(f"line {line_number}: version {version!r} not supported (supported: {supported})")
        row = {spec.renames.get(key, key): value for key, value in record.items()}
        for source_field, column in spec.json_columns.items():
            value = record.get(source_field)
            row[column] = None if value is None else json.dumps(value, sort_keys=True)
        missing = [name for name in spec.required if row.get(name) in (None, "")]
        if missing:
            raise QuarantineError(f"line {line_number}: missing required field(s) {', '.join(missing)}")
        for name, allowed in spec.allowed.items():
            if row.get(name) not in allowed:
                raise QuarantineError(
                    f"line {line_number}: {name} {row.get(name)!r} is not one of {', '.join(allowed)}"
                )
        for column in schema:
            value = row.get(column.name)
            if column.type == TS:
                try:
                    value = parse_utc(value)
                except (TypeError, ValueError):
                    raise QuarantineError(f"line {line_number}: {column.name} is not a timestamp: {value!r}") from None
            columns[column.name].append(value)
        when = columns[spec.event_time][-1] if spec.event_time else None
        event_dates.append(when.date() if when is not None else landed.default_event_date)
    if not event_dates:
        raise QuarantineError("no records")
    arrays = []
    for column in schema:
        try:
            arrays.append(pa.array(columns[column.name], type=column.type))
        except (pa.ArrowInvalid, pa.ArrowTypeError, TypeError, OverflowError) as error:
            raise QuarantineError(f"field {column.name}: wrong type ({error})") from None
    arrays.append(pa.array(event_dates, type=pa.date32()))
    return pa.Table.from_arrays(arrays, names=[*schema.names, "event_date"])


SPECS: dict[str, JsonRecordSpec] = {
    spec.source: spec
    for spec in [
        JsonRecordSpec("inventory", ("gpu_uuid", "node", "cluster", "sku", "valid_from"), "valid_from"),
        JsonRecordSpec("node_software", ("node", "valid_from"), "valid_from"),
        JsonRecordSpec(
            "node_events",
            ("node", "state", "start_at"),
            "start_at",
            renames={"start": "start_at", "end": "end_at"},
            allowed={"state": NODE_STATES},
        ),
        JsonRecordSpec("step_events", ("job_id", "attempt", "event", "ts"), "ts", allowed={"event": STEP_EVENTS}),
        JsonRecordSpec("job_meta", ("job_id",), None),
        JsonRecordSpec("pending_queue", ("ts", "cluster", "job_id", "requested_gpus"), "ts"),
        JsonRecordSpec(
            "probe_results",
            ("run_id", "gpu_uuid", "probe", "metric", "started_at"),
            "started_at",
            json_columns={"context": "context_json"},
        ),
    ]
}
