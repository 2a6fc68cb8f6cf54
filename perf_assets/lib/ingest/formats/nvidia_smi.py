"""`nvidia-smi --query-gpu=... --format=csv[,noheader][,nounits]` and `nvidia-smi dmon` text -> raw_nvidia_smi.

Long format: one row per (GPU line, query field). The identity columns of the query (`timestamp`,
`uuid`, `index`, `pci.bus_id`, `name`, `hostname`) become the row's columns, every other field a
row: `value` is the number (unit stripped; hex bitmasks such as `clocks_event_reasons.active`
parsed too), `unit` comes from the header (`power.draw [W]`) or, without a header, from the value
(`631.95 W`), `text_value` keeps what is not a plain number (`P0`, `Enabled`, `0x...`). Bracket
sentinels (`[N/A]`, `[Not Supported]`, `[Requested functionality has been deprecated]`, ...), `N/A`
and empty cells are NULL in both. Without a header the field names come from a sidecar
`nvidia_smi_format.txt` (the `--query-gpu=` list). `timestamp` is host local time without a zone:
read as UTC unless a sidecar `timezone.txt` names an IANA zone (`Europe/Berlin`).
"""

from __future__ import annotations

import csv
import re
from dataclasses import dataclass
from datetime import datetime, timedelta, timezone, tzinfo
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

import pyarrow as pa

from perf_assets.lib.contracts import raw_table
from perf_assets.lib.ingest.formats.errors import QuarantineError
from perf_assets.lib.ingest.formats.gpu_identity import (
    int_or_none,
    normalise_bus_id,
    normalise_model_name,
    normalise_uuid,
    text_or_none,
)
from perf_assets.lib.ingest.formats.prometheus_text import read_text_file
from perf_assets.lib.ingest.landing import LandedFile

FORMAT_SIDECAR = "nvidia_smi_format.txt"
TIMEZONE_SIDECAR = "timezone.txt"
IDENTITY_FIELDS = ("timestamp", "uuid", "index", "pci.bus_id", "name", "hostname")
# Identifiers and versions that look like numbers but are not quantities: text only.
TEXT_FIELDS = {"serial", "driver_version", "kmd_version", "vbios_version", "platform.chassis_serial_number"}
TEXT_PREFIXES = ("inforom.",)

_HEADER_CELL = re.compile(r"^[A-Za-z_][\w.]*(?: \[[^\]]+\])?$")
_NUMBER_WITH_UNIT = re.compile(r"^([-+]?\d+(?:\.\d+)?(?:[eE][-+]?\d+)?)(?:\s+(\S+))?$")
_HEX = re.compile(r"^0x[0-9a-fA-F]+$")
_TIME_FORMATS = ("%Y/%m/%d %H:%M:%S.%f", "%Y/%m/%d %H:%M:%S")


@dataclass(frozen=True)
class SmiGpu:
    host: str
    gpu_uuid: str | None
    gpu_index: int | None
    pci_bus_id: str | None
    model_name: str | None


class SmiRows:
    """Collects raw_nvidia_smi rows of one landed file; `table()` adds cluster and event_date."""

    IDENTITY = ("host", "gpu_uuid", "gpu_index", "pci_bus_id", "model_name")

    def __init__(self) -> None:
        self.columns: dict[str, list] = {name: [] for name in raw_table("nvidia_smi").schema.names}
        self.unattributed = 0  # GPU lines (or series) with no GPU identity: counted, not ingested

    def add(self, gpu: SmiGpu, field: str, ts: datetime, cell: tuple, section: str) -> None:
        value, unit, text_value = cell
        for name in self.IDENTITY:
            self.columns[name].append(getattr(gpu, name))
        for name, item in (("field", field), ("ts", ts), ("value", value), ("unit", unit)):
            self.columns[name].append(item)
        self.columns["text_value"].append(text_value)
        self.columns["section"].append(section)

    def __len__(self) -> int:
        return len(self.columns["ts"])

    def table(self, landed: LandedFile) -> pa.Table:
        if not len(self):
            raise QuarantineError(
                f"no rows with a GPU identity ({self.unattributed} without uuid, index or bus id)"
                if self.unattributed
                else "no GPU rows"
            )
        self.columns["cluster"] = [landed.cluster] * len(self)
        self.columns["event_date"] = [ts.date() for ts in self.columns["ts"]]
        schema = pa.schema([*raw_table("nvidia_smi").schema, pa.field("event_date", pa.date32())])
        table = pa.Table.from_pydict({name: self.columns[name] for name in schema.names}, schema=schema)
        return table.replace_schema_metadata({"unattributed_series": str(self.unattributed)})


def cell_value(field: str, text: str, header_unit: str | None) -> tuple[float | None, str | None, str | None]:
    """(value, unit, text_value) of one cell; sentinels and empty cells are (None, unit, None)."""
    cleaned = text_or_none(text)
    if cleaned is None:
        return None, header_unit, None
    if field in TEXT_FIELDS or field.startswith(TEXT_PREFIXES):
        return None, header_unit, cleaned
    if _HEX.match(cleaned):
        return float(int(cleaned, 16)), header_unit, cleaned
    match = _NUMBER_WITH_UNIT.match(cleaned)
    if match:
        return float(match.group(1)), header_unit or match.group(2), None
    return None, header_unit, cleaned


def split_header_cell(cell: str) -> tuple[str, str | None]:
    """`power.draw [W]` -> ("power.draw", "W"); `pstate` -> ("pstate", None)."""
    name, _, unit = cell.strip().partition(" [")
    return name.strip(), unit.rstrip("]").strip() or None


def is_header(cells: list[str]) -> bool:
    return bool(cells) and all(_HEADER_CELL.match(cell.strip()) for cell in cells)


def field_list(text: str) -> list[str]:
    """Field names from `--query-gpu=a,b,c --format=csv` or a plain comma/newline separated list."""
    names = []
    text = re.sub(r"--format=\S*", " ", text).replace("--query-gpu=", " ")
    for token in re.split(r"[\s,]+", text):
        if token and not token.startswith("-") and not token.startswith("nvidia-smi"):
            names.append(token)
    return names


def local_zone(landed: LandedFile) -> tzinfo:
    """The zone of nvidia-smi's local timestamps: sidecar `timezone.txt` (IANA name), else UTC."""
    sidecar = landed.path.parent / TIMEZONE_SIDECAR
    if not sidecar.exists():
        return timezone.utc
    name = sidecar.read_text(encoding="utf-8", errors="replace").strip()
    try:
        return ZoneInfo(name)
    except (ZoneInfoNotFoundError, ValueError):
        raise QuarantineError(f"{TIMEZONE_SIDECAR} names {name!r}, not an IANA time zone (Europe/Berlin)") from None


def parse_local_time(text: str, zone: tzinfo, line_number: int) -> datetime:
    for pattern in _TIME_FORMATS:
        try:
            return datetime.strptime(text.strip(), pattern).replace(tzinfo=zone).astimezone(timezone.utc)
        except ValueError:
            continue
    raise QuarantineError(f"line {line_number}: timestamp {text.strip()!r} is not YYYY/MM/DD HH:MM:SS.mmm")


@dataclass
class QueryRead:
    """What one query-gpu block yielded: its GPUs by index (for dmon rows) and its latest time."""

    gpus: dict[int, SmiGpu]
    latest: datetime | None


def read_query_block(
    lines: list[tuple[int, str]],
    names: list[str] | None,
    landed: LandedFile,
    zone: tzinfo,
    section: str,
    rows: SmiRows,
) -> QueryRead:
    """Rows of one query-gpu CSV block (numbered lines); `names` is used when there is no header."""
    try:
        parsed = list(csv.reader([text for _, text in lines], skipinitialspace=True))
    except csv.Error as error:  # e.g. a field past the csv module's limit (a huge line)
        raise QuarantineError(f"{section}: not readable as CSV ({error})") from None
    if parsed and is_header(parsed[0]):
        columns = [split_header_cell(cell) for cell in parsed[0]]
        body, named_by = list(zip(lines[1:], parsed[1:])), "the header"
    elif names:
        columns = [(name, None) for name in names]
        body, named_by = list(zip(lines, parsed)), f"the field list ({FORMAT_SIDECAR} or command)"
    else:
        first = lines[0][0] if lines else 1
        raise QuarantineError(
            f"line {first}: no header line and no {FORMAT_SIDECAR} beside the file: the fields are unknown"
        )
    fields = [name for name, _ in columns]
    read = QueryRead({}, None)
    for (line_number, _), cells in body:
        if len(cells) != len(columns):
            raise QuarantineError(f"line {line_number}: {len(cells)} values, {named_by} names {len(columns)} fields")
        record = dict(zip(fields, cells))
        host = text_or_none(record.get("hostname")) or landed.host
        if host is None:
            raise QuarantineError(
                f"line {line_number}: no host (hostname [N/A] or absent): name the file <host>__-__-__<utc-ts>.csv"
            )
        gpu = SmiGpu(
            host=host,
            gpu_uuid=normalise_uuid(record.get("uuid")),
            gpu_index=int_or_none(record.get("index")),
            pci_bus_id=normalise_bus_id(record.get("pci.bus_id")),
            model_name=normalise_model_name(record.get("name")),
        )
        if gpu.gpu_uuid is None and gpu.gpu_index is None and gpu.pci_bus_id is None:
            rows.unattributed += 1
            continue
        if "timestamp" in record:
            ts = parse_local_time(record["timestamp"], zone, line_number)
        elif landed.captured_at is not None:
            ts = landed.captured_at
        else:
            raise QuarantineError(
                f"line {line_number}: no timestamp field and no capture time in the file name "
                "(<host>__-__-__<utc-ts>.csv)"
            )
        for (name, unit), cell in zip(columns, cells):
            if name not in IDENTITY_FIELDS:
                rows.add(gpu, name, ts, cell_value(name, cell, unit), section)
        if gpu.gpu_index is not None:
            read.gpus[gpu.gpu_index] = gpu
        read.latest = ts if read.latest is None else max(read.latest, ts)
    return read


def read_dmon_block(
    lines: list[tuple[int, str]],
    gpus: dict[int, SmiGpu],
    host: str,
    start: datetime,
    delay: timedelta,
    section: str,
    rows: SmiRows,
) -> None:
    """`nvidia-smi dmon` lines: `# gpu pwr ...` names, `# Idx W ...` units, then one line per GPU and
    interval; `-` is NULL. Line k of a GPU is stamped start + k x delay."""
    names: list[str] | None = None
    units: list[str | None] = []
    seen: dict[int, int] = {}
    for line_number, text in lines:
        tokens = text.lstrip("#").split()
        if text.startswith("#"):
            if tokens and tokens[0].lower() == "gpu":
                names, units = tokens, []
            elif names is not None and tokens:
                units = [None if unit in ("Idx", "#", "-") else unit for unit in tokens]
            continue
        if names is None:
            raise QuarantineError(f"line {line_number}: a dmon row before its '# gpu ...' header")
        if len(tokens) != len(names):
            raise QuarantineError(f"line {line_number}: {len(tokens)} values, the dmon header names {len(names)}")
        index = int_or_none(tokens[0])
        if index is None:
            raise QuarantineError(f"line {line_number}: gpu {tokens[0]!r} is not an index")
        gpu = gpus.get(index) or SmiGpu(host, None, index, None, None)
        sample_number = seen.get(index, 0)
        seen[index] = sample_number + 1
        ts = start + sample_number * delay
        for position, (name, cell) in enumerate(zip(names[1:], tokens[1:]), start=1):
            unit = units[position] if position < len(units) else None
            value = None if cell == "-" else cell_value(name, cell, unit)[0]
            rows.add(gpu, f"dmon.{name}", ts, (value, unit, None), section)


def parse_nvidia_smi_csv(landed: LandedFile) -> pa.Table:
    """A standalone `--query-gpu ... --format=csv` file (with or without header and units)."""
    text = read_text_file(landed.path)
    lines = [(number, line) for number, line in enumerate(text.splitlines(), start=1) if line.strip()]
    sidecar = landed.path.parent / FORMAT_SIDECAR
    names = field_list(sidecar.read_text(encoding="utf-8", errors="replace")) if sidecar.exists() else None
    rows = SmiRows()
    read_query_block(lines, names, landed, local_zone(landed), "query-gpu", rows)
    if not len(rows) and not rows.unattributed:
        raise QuarantineError("header only, no GPU lines")
    return rows.table(landed)
