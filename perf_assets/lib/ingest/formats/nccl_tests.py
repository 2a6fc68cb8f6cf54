"""nccl-tests text output (all_reduce_perf and friends): one row per (test run, row of its table, placement).

A file may hold several tests back to back. Each test is a run with its own header (version, test
name, nThread line, rank map), its results table and its trailer (`# Avg bus bandwidth`). A run that
printed `Test ... failure` lines, reported out-of-bounds values, or stopped before its trailer is kept
as a **failed** run with its error text (its measured rows too). A file with no test at all but
launcher errors is a failed launch when it names an nccl-tests binary or NCCL; otherwise it is
quarantined. The format has no timestamps: time comes from the file name or the day folder.
Rules and what is not handled: docs/formats/benchmarks.md.
"""

from __future__ import annotations

import hashlib
import json
import re
from collections import Counter
from dataclasses import dataclass, field

import pyarrow as pa

from perf_assets.lib.contracts import raw_table
from perf_assets.lib.ingest.formats.errors import QuarantineError
from perf_assets.lib.ingest.formats.nccl_tests_ops import TableRow, infer_op, nccl_version, op_of_test
from perf_assets.lib.ingest.formats.text_lines import read_lines, strip_srun_label
from perf_assets.lib.ingest.landing import LandedFile

SOURCE = "nccl_tests"
MAX_ERROR_LINES = 20  # distinct error lines kept per run; the rest are counted in the text

_VERSION = re.compile(r"^#\s*nccl-tests version\s+(\S+)(.*)$")
_LIBRARY = re.compile(r"nccl-library=(\d+)")
_STARTING = re.compile(r"^#\s*Collective test starting:\s*(\S+)")
_CONCLUDED = re.compile(r"^#\s*Collective test concluded:\s*(\S+)")
_NTHREAD = re.compile(r"^#\s*nThread\s+(\d+)\s+nGpus\s+(\d+)\s+minBytes\s+(\d+)\s+maxBytes\s+(\d+)(.*)$")
_SETTING = re.compile(r"(warmup iters|agg iters|iters|validation|graph|step):\s*(\S+)")
_USING = re.compile(r"^#\s*Using devices")
_RANK = re.compile(
    r"^#\s*Rank\s+(\d+)\s+(?:Group\s+(\d+)\s+)?Pid\s+(\d+)\s+on\s+(\S+)\s+device\s+(\d+)\s+\[([^\]]*)\]\s*(.*?)\s*$"
)
_REDUCING = re.compile(r"^#\s*Reducing maxBytes to (\d+)")
_OOB = re.compile(r"^#\s*Out of bounds values\s*:\s*(\d+)\s*(\S*)")
_AVG = re.compile(r"^#\s*Avg bus bandwidth\s*:\s*(\S+)")
_ROW = re.compile(r"^\d+\s+\d+(\s|$)")  # size and count: a results row, maybe cut short
_DEBUG = re.compile(r"\bNCCL (INFO|WARN|TRACE)\b")
_TEST_FAILURE = re.compile(r"Test (?:NCCL |CUDA )?failure")
_LAUNCHER_ERROR = re.compile(
    r"launch failed|\bPMI|\bCXI\b|prterun|mpirun|srun: error|MPI_ABORT|exited on signal|Killed|"
    r"Segmentation fault|core dumped|\bORTE\b|\babort|\berror\b",
    re.IGNORECASE,
)
_BINARY = re.compile(r"\b([a-z][a-z0-9_]*_perf)\b")
_PCI_BUS = re.compile(r"^([0-9a-fA-F]{4}):([0-9a-fA-F]{2}):([0-9a-fA-F]{2})(?:\.([0-7]))?$")

_PREFIX_COLUMNS = ("size", "count", "type", "redop", "root")
_GROUP_COLUMNS = ("time", "algbw", "busbw", "#wrong")
_DEFAULT_PLACEMENTS = ("out_of_place", "in_place")

# Phases of one test's output, in order: a header line of a phase already passed starts the next test.
_PHASE_VERSION, _PHASE_STARTING, _PHASE_NTHREAD, _PHASE_DEVICES, _PHASE_TABLE = 0, 1, 2, 3, 4


@dataclass
class _Layout:
    """The results table's columns, from its header line (or the layout every known build prints)."""

    prefix: tuple[str, ...] = _PREFIX_COLUMNS
    placements: tuple[str, ...] = _DEFAULT_PLACEMENTS

    @property
    def width(self) -> int:
        return len(self.prefix) + len(_GROUP_COLUMNS) * len(self.placements)


@dataclass
class _Run:
    index: int
    phase: int = -1
    nccl_tests_version: str | None = None
    nccl_version: str | None = None
    test_name: str | None = None
    settings: dict = field(default_factory=dict)
    ranks: list[dict] = field(default_factory=list)
    rank_lines: list[str] = field(default_factory=list)
    reduced_to: int | None = None
    layout: _Layout = field(default_factory=_Layout)
    placement_names: tuple[str, ...] | None = None
    rows: list[dict] = field(default_factory=list)
    oob_values: int | None = None
    oob_ok: bool | None = None
    avg_busbw: float | None = None
    errors: list[str] = field(default_factory=list)
    has_test_failure: bool = False
    debug_lines: int = 0
    other_lines: int = 0

    @property
    def complete(self) -> bool:
        return self.avg_busbw is not None


def _bus_id(raw: str) -> str | None:
    """`0000:1b:00` -> `0000:1b:00.0` (the warehouse's dddd:bb:dd.f); the short `0x07` form stays unknown."""
    match = _PCI_BUS.match(raw.strip())
    if match is None:
        return None
    domain, bus, device, function = match.groups()
    return f"{domain}:{bus}:{device}.{function or '0'}".lower()


def _int(text: str, what: str, line_number: int) -> int:
    try:
        return int(text)
    except ValueError:
        raise QuarantineError(f"line {line_number}: {what} {text!r} is not an integer") from None


def _float(text: str, what: str, line_number: int) -> float:
    try:
        return float(text)
    except ValueError:
        raise QuarantineError(f"line {line_number}: {what} {text!r} is not a number") from None


def _table_header(stripped: str, run: _Run, line_number: int) -> None:
    tokens = stripped.lstrip("#").split()
    first_time = tokens.index("time") if "time" in tokens else len(tokens)
    prefix, groups = tuple(tokens[:first_time]), tokens[first_time:]
    n_groups = len(groups) // len(_GROUP_COLUMNS)
    if (
        not set(prefix) <= set(_PREFIX_COLUMNS)
        or "size" not in prefix
        or n_groups == 0
        or groups != list(_GROUP_COLUMNS) * n_groups
    ):
        raise QuarantineError(f"line {line_number}: unknown results table header {stripped!r}")
    placements = run.placement_names if run.placement_names and len(run.placement_names) == n_groups else None
    default = _DEFAULT_PLACEMENTS if n_groups == 2 else tuple(f"group_{i}" for i in range(n_groups))
    run.layout = _Layout(prefix=prefix, placements=placements or default)


def _table_row(stripped: str, run: _Run, line_number: int) -> None:
    tokens = stripped.split()
    layout = run.layout
    if len(tokens) != layout.width:
        raise QuarantineError(
            f"line {line_number}: results row has {len(tokens)} fields, the table has {layout.width} "
            "(truncated file or unknown layout)"
        )
    prefix = dict(zip(layout.prefix, tokens))
    common = {
        "size_bytes": _int(prefix["size"], "size", line_number),
        "count_elements": _int(prefix["count"], "count", line_number) if "count" in prefix else None,
        "data_type": prefix.get("type"),
        "redop": prefix.get("redop"),
        "root": _int(prefix["root"], "root", line_number) if "root" in prefix else None,
    }
    offset = len(layout.prefix)
    for group, placement in enumerate(layout.placements):
        time_us, algbw, busbw, wrong = tokens[offset + 4 * group : offset + 4 * group + 4]
        run.rows.append(
            common
            | {
                "placement": placement,
                "time_us": _float(time_us, "time", line_number),
                "algbw_gbps": _float(algbw, "algbw", line_number),
                "busbw_gbps": _float(busbw, "busbw", line_number),
                "wrong": None if wrong == "N/A" else _int(wrong, "#wrong", line_number),
            }
        )


def _header_line(stripped: str, run: _Run, line_number: int) -> bool:
    """Read a `#` line of the current run's header or trailer; False when it is none of them."""
    if match := _RANK.match(stripped):
        rank, group, pid, host, device, bus, gpu = match.groups()
        run.ranks.append(
            {
                "rank": int(rank),
                "group": int(group) if group is not None else None,
                "pid": int(pid),
                "host": host,
                "device": int(device),
                "bus": bus,
                "bus_id": _bus_id(bus),
                "gpu": gpu or None,
            }
        )
        run.rank_lines.append(stripped)
    elif match := _REDUCING.match(stripped):
        run.reduced_to = int(match.group(1))
    elif _USING.match(stripped):
        pass
    elif "out-of-place" in stripped:
        run.placement_names = tuple(token.replace("-", "_") for token in stripped.lstrip("#").split())
    elif stripped.lstrip("#").split()[:1] == ["size"]:
        _table_header(stripped, run, line_number)
    elif "(B)" in stripped:
        pass  # the units line under the table header
    elif match := _OOB.match(stripped):
        run.oob_values = int(match.group(1))
        run.oob_ok = match.group(2).upper() != "FAILED"
        if not run.oob_ok:
            run.errors.append(stripped.lstrip("# ").strip())
    elif match := _AVG.match(stripped):
        run.avg_busbw = _float(match.group(1), "Avg bus bandwidth", line_number)
    elif match := _CONCLUDED.match(stripped):
        run.test_name = run.test_name or match.group(1)
    else:
        return False
    return True


def _start_marker(stripped: str) -> tuple[int, re.Match] | None:
    for phase, pattern in ((_PHASE_VERSION, _VERSION), (_PHASE_STARTING, _STARTING), (_PHASE_NTHREAD, _NTHREAD)):
        if match := pattern.match(stripped):
            return phase, match
    return None


def _apply_start(phase: int, match: re.Match, run: _Run) -> None:
    if phase == _PHASE_VERSION:
        run.nccl_tests_version = match.group(1)
        library = _LIBRARY.search(match.group(2))
        run.nccl_version = nccl_version(int(library.group(1))) if library else None
    elif phase == _PHASE_STARTING:
        run.test_name = match.group(1)
    else:
        threads, gpus, min_bytes, max_bytes, rest = match.groups()
        settings = {"n_threads": int(threads), "n_gpus": int(gpus), "min_bytes": int(min_bytes)}
        settings["max_bytes"] = int(max_bytes)
        for name, value in _SETTING.findall(rest):
            settings[name.replace(" ", "_")] = value
        run.settings = settings


@dataclass
class _Loose:
    """Lines that belong to no run yet: launcher errors between tests, or a whole launcher-only file."""

    errors: list[str] = field(default_factory=list)
    has_test_failure: bool = False
    debug_lines: int = 0
    other_lines: int = 0

    def hand_to(self, run: _Run) -> None:
        run.errors[:0] = self.errors
        run.has_test_failure |= self.has_test_failure
        run.debug_lines += self.debug_lines
        run.other_lines += self.other_lines
        self.errors, self.has_test_failure, self.debug_lines, self.other_lines = [], False, 0, 0

    @property
    def empty(self) -> bool:
        return not self.errors and not self.has_test_failure


def read_runs(lines: list[str]) -> tuple[list[_Run], _Loose]:
    """Split the file into test runs; lines that no run owns are left in the returned _Loose."""
    runs: list[_Run] = []
    loose = _Loose()
    current: _Run | None = None
    for line_number, raw in enumerate(lines, start=1):
        line, _ = strip_srun_label(raw)
        stripped = line.strip()
        if not stripped:
            continue
        if start := _start_marker(stripped):
            phase, match = start
            if current is None or current.phase >= phase:
                current = _Run(index=len(runs))
                runs.append(current)
                loose.hand_to(current)
            _apply_start(phase, match, current)
            current.phase = phase
            continue
        if stripped.startswith("#"):
            if current is not None and _header_line(stripped, current, line_number):
                current.phase = max(current.phase, _PHASE_DEVICES)
            elif current is None and (_RANK.match(stripped) or stripped.lstrip("#").split()[:1] == ["size"]):
                raise QuarantineError(
                    f"line {line_number}: test output before any test header (file cut at the start?)"
                )
            elif stripped.strip("# "):
                (current or loose).other_lines += 1
            continue
        if _ROW.match(stripped):
            if current is None:
                raise QuarantineError(
                    f"line {line_number}: results row before any test header (file cut at the start?)"
                )
            _table_row(stripped, current, line_number)
            current.phase = _PHASE_TABLE
            continue
        owner = current if current is not None and not current.complete else loose
        if _DEBUG.search(stripped):
            owner.debug_lines += 1
            if "NCCL WARN" in stripped:
                owner.errors.append(stripped)
        elif _TEST_FAILURE.search(stripped):
            owner.errors.append(stripped)
            owner.has_test_failure = True
        elif _LAUNCHER_ERROR.search(stripped):
            owner.errors.append(stripped)
        else:
            owner.other_lines += 1
    return runs, loose


def _error_text(errors: list[str]) -> str | None:
    if not errors:
        return None
    counts = Counter(errors)
    distinct = list(dict.fromkeys(errors))
    shown = [line if counts[line] == 1 else f"{line} (x{counts[line]})" for line in distinct[:MAX_ERROR_LINES]]
    if len(distinct) > MAX_ERROR_LINES:
        shown.append(f"... and {len(distinct) - MAX_ERROR_LINES} more distinct lines")
    return "\n".join(shown)


def _status(run: _Run) -> tuple[str, str | None]:
    """ok, or failed with its reason: failure lines, out-of-bounds values, or no trailer."""
    failed = run.has_test_failure or run.oob_ok is False or not run.complete
    if not failed:
        return "ok", None
    text = _error_text(run.errors)
    if text is None:
        text = "no '# Avg bus bandwidth' trailer and no error message: the test ended early (killed, timed out?)"
    return "failed", text


def _run_id(landed: LandedFile, run: _Run) -> str:
    """Stable across re-ingests and renames of the same capture; another capture time is another run."""
    when = landed.captured_at.isoformat() if landed.captured_at else str(landed.capture_date)
    material = [when, landed.cluster, run.index, run.test_name, run.rank_lines or run.errors]
    return hashlib.sha256(json.dumps(material).encode()).hexdigest()[:16]


def _as_int(value: str | None) -> int | None:
    return int(value) if value is not None and value.isdigit() else None


def _op(run: _Run) -> tuple[str | None, str | None]:
    """(op, how it is known): from the test name, else inferred from the table's shape, else unknown."""
    if run.test_name:
        return op_of_test(run.test_name), "header"
    out_of_place = [
        TableRow(
            row["size_bytes"],
            row["count_elements"] or 0,
            row["data_type"],
            row["redop"],
            row["root"],
            row["algbw_gbps"],
            row["busbw_gbps"],
        )
        for row in run.rows
        if row["placement"] == "out_of_place" and row["data_type"] is not None and row["redop"] is not None
    ]
    op = infer_op(out_of_place, len(run.ranks) or None)
    return op, "inferred" if op else None


def _run_columns(landed: LandedFile, run: _Run) -> dict:
    status, error_text = _status(run)
    op, op_source = _op(run)
    gpus = {rank["gpu"] for rank in run.ranks}
    hosts = list(dict.fromkeys(rank["host"] for rank in run.ranks))
    settings = run.settings
    return {
        "cluster": landed.cluster,
        "host": landed.host,
        "job_id": landed.job_id,
        "captured_at": landed.captured_at,
        "run_id": _run_id(landed, run),
        "run_index": run.index,
        "test_name": run.test_name,
        "op": op,
        "op_source": op_source,
        "nccl_tests_version": run.nccl_tests_version,
        "nccl_version": run.nccl_version,
        "n_threads": settings.get("n_threads"),
        "n_gpus": settings.get("n_gpus"),
        "min_bytes": settings.get("min_bytes"),
        "max_bytes": settings.get("max_bytes"),
        "max_bytes_reduced_to": run.reduced_to,
        "step": settings.get("step"),
        "warmup_iters": _as_int(settings.get("warmup_iters")),
        "iters": _as_int(settings.get("iters")),
        "agg_iters": _as_int(settings.get("agg_iters")),
        "validation": _as_int(settings.get("validation")),
        "graph": _as_int(settings.get("graph")),
        "n_ranks": len(run.ranks) or None,
        "n_hosts": len(hosts) or None,
        "hosts": hosts,
        "gpu_name": gpus.pop() if len(gpus) == 1 else None,
        "rank_map_json": json.dumps(sorted(run.ranks, key=lambda rank: rank["rank"])) if run.ranks else None,
        "avg_bus_bandwidth_gbps": run.avg_busbw,
        "out_of_bounds_values": run.oob_values,
        "status": status,
        "error_text": error_text,
        "nccl_debug_lines": run.debug_lines,
        "other_lines": run.other_lines,
    }


_EMPTY_ROW = {
    "placement": None,
    "size_bytes": None,
    "count_elements": None,
    "data_type": None,
    "redop": None,
    "root": None,
    "time_us": None,
    "algbw_gbps": None,
    "busbw_gbps": None,
    "wrong": None,
}


def _launch_only(lines: list[str], loose: _Loose) -> _Run:
    """A file without any test: a failed launch if it is clearly nccl-tests, else quarantined."""
    text = "\n".join(lines)
    binary = _BINARY.search(text)
    if binary is None and "nccl" not in text.lower():
        first = next(line.strip() for line in lines if line.strip())
        raise QuarantineError(
            "no nccl-tests output (no '# nThread' header) and nothing names an nccl-tests binary or NCCL: "
            f"not recognisably an nccl-tests launch (first line: {first[:120]!r})"
        )
    run = _Run(index=0, test_name=binary.group(1) if binary else None)
    loose.hand_to(run)
    if not run.errors:
        run.errors.append("no nccl-tests output: the launch printed no test header")
    return run


def parse_nccl_tests(landed: LandedFile) -> pa.Table:
    lines = read_lines(landed)
    runs, loose = read_runs(lines)
    if not runs:
        runs = [_launch_only(lines, loose)]
    elif not loose.empty:  # errors after the last complete test: a further launch that printed no header
        named = [match.group(1) for line in loose.errors if (match := _BINARY.search(line))]
        trailing = _Run(index=len(runs), test_name=named[0] if named else None)
        loose.hand_to(trailing)
        runs.append(trailing)
    else:
        loose.hand_to(runs[-1])  # counts of trailing noise lines
    table = raw_table(SOURCE)
    names = [*table.schema.names, "event_date"]
    columns: dict[str, list] = {name: [] for name in names}
    event_date = landed.default_event_date
    for run in runs:
        shared = _run_columns(landed, run) | {"event_date": event_date}
        for row in run.rows or [_EMPTY_ROW]:
            record = shared | row
            for name in names:
                columns[name].append(record[name])
    failed = sum(_status(run)[0] == "failed" for run in runs)
    skipped = sum(run.debug_lines + run.other_lines for run in runs)
    note = f"{len(runs)} test runs ({failed} failed); {skipped} NCCL debug or unread lines skipped"
    schema = pa.schema([*table.schema, pa.field("event_date", pa.date32())], metadata={"ingest_note": note})
    return pa.Table.from_pydict(columns, schema=schema)


def accepts(landed: LandedFile, head: bytes) -> bool:
    """Every text file under landing/nccl_tests/ except derived summary tables (.csv: skipped, not parsed)."""
    return landed.path.suffix.lower() != ".csv"
