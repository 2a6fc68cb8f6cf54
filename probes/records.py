"""The `probe_results` row (docs/contracts.md, "Our own formats"), its JSON line and landing path."""

from __future__ import annotations

import hashlib
import json
import math
import os
import tempfile
from dataclasses import asdict, dataclass, field
from datetime import datetime, timezone
from pathlib import Path
from typing import Any, Iterable

FORMAT_VERSION = 1
SOURCE = "probe_results"  # the landing folder
DEVICE_KINDS = ("cuda", "cpu")
STATUSES = ("pass", "fail", "error", "skipped")  # skipped: a GPU-only probe on a CPU, with the reason


@dataclass(frozen=True)
class ProbeResult:
    """One row: one metric of one probe run on one GPU (or on the CPU), with its uncertainty and verdict.

    Exactly the fields of the contract, in its order. ``value`` is the headline number (the median of
    the per-iteration samples); ``peak`` is in ``unit`` too; ``fraction_of_peak = value / peak``.
    ``peak`` and ``fraction_of_peak`` are None when no physical limit is known (never 0).
    """

    run_id: str
    node: str
    gpu_uuid: str
    gpu_index: int | None
    sku: str | None
    device_kind: str  # cuda | cpu
    probe: str
    metric: str
    value: float | None
    unit: str
    median: float | None
    iqr: float | None
    ci_low: float | None
    ci_high: float | None
    n: int | None
    throttle_class: str | None
    peak: float | None
    fraction_of_peak: float | None
    status: str  # pass | fail | error | skipped
    reason: str | None
    started_at: datetime  # timezone-aware; written as UTC with Z
    context: dict[str, Any] = field(default_factory=dict)

    def __post_init__(self) -> None:
        if self.device_kind not in DEVICE_KINDS:
            raise ValueError(f"device_kind {self.device_kind!r} is not one of {', '.join(DEVICE_KINDS)}")
        if self.status not in STATUSES:
            raise ValueError(f"status {self.status!r} is not one of {', '.join(STATUSES)}")
        if self.started_at.tzinfo is None:
            raise ValueError("started_at must be timezone-aware")
        for name in ("run_id", "gpu_uuid", "probe", "metric"):
            if not getattr(self, name):
                raise ValueError(f"{name} is required")

    def to_dict(self) -> dict[str, Any]:
        """The JSON object: ``"version"`` first, datetimes as RFC 3339 UTC with Z, non-finite floats null."""
        record: dict[str, Any] = {"version": FORMAT_VERSION}
        record.update(_jsonable(asdict(self)))
        return record

    def to_json_line(self) -> str:
        """One line of JSON (no trailing newline)."""
        return json.dumps(self.to_dict(), separators=(",", ":"), ensure_ascii=False, allow_nan=False)


def rfc3339(moment: datetime) -> str:
    """UTC, whole seconds kept as they are, with a Z: ``2026-11-01T00:00:00Z`` (``.ffffff`` if any)."""
    if moment.tzinfo is None:
        raise ValueError("timestamps must be timezone-aware")
    utc = moment.astimezone(timezone.utc)
    text = utc.strftime("%Y-%m-%dT%H:%M:%S")
    if utc.microsecond:
        text += f".{utc.microsecond:06d}"
    return text + "Z"


def file_stamp(moment: datetime) -> str:
    """The `utc-ts` part of a landed file name: ``20261101T000000Z``."""
    return moment.astimezone(timezone.utc).strftime("%Y%m%dT%H%M%SZ")


def utc_now() -> datetime:
    """Now, in UTC, to the whole second (the resolution of the landing file name)."""
    return datetime.now(timezone.utc).replace(microsecond=0)


def make_run_id(node: str, started_at: datetime) -> str:
    """Deterministic run id: the first 16 hex digits of sha256(node NUL started_at-as-RFC-3339)."""
    return hashlib.sha256(f"{node}\0{rfc3339(started_at)}".encode()).hexdigest()[:16]


def landing_path(landing_root: str | os.PathLike[str], cluster: str, node: str, started_at: datetime) -> Path:
    """``landing_root/probe_results/<cluster>/<yyyy-mm-dd>/<node>__-__-__<YYYYMMDDTHHMMSSZ>.jsonl``.

    ``landing_root`` is the ``landing/`` folder under PERFWH_HOME; the day folder is the UTC day of
    ``started_at``, so ingestion reads host and capture time from the path (docs/contracts.md).
    """
    if not cluster or "/" in cluster or cluster in (".", ".."):
        raise ValueError(f"cluster {cluster!r} cannot be a folder name")
    if not node or "/" in node or "__" in node or "." in node:
        # ingestion reads the host from the file name up to its first '.' and splits it on '__'
        raise ValueError(f"node {node!r} cannot be a file-name part (empty, or holds '/', '__' or '.')")
    utc = started_at.astimezone(timezone.utc)
    return Path(landing_root) / SOURCE / cluster / utc.date().isoformat() / f"{node}__-__-__{file_stamp(utc)}.jsonl"


def write_jsonl(results: Iterable[ProbeResult], path: str | os.PathLike[str], *, overwrite: bool = False) -> Path:
    """Write the results as JSON lines, atomically (a temp file beside the target, then os.replace).

    Landed files are never changed: if ``path`` exists with the same bytes this is a no-op, with other
    bytes a FileExistsError (unless ``overwrite``). Writing no results is an error: an empty file
    cannot be told from a truncated one, so ingestion quarantines it.
    """
    lines = [result.to_json_line() for result in results]
    if not lines:
        raise ValueError("no results to write: writers deliver no file rather than an empty one")
    return land_bytes(Path(path), ("\n".join(lines) + "\n").encode("utf-8"), overwrite=overwrite)


def land_bytes(target: Path, data: bytes, *, overwrite: bool = False) -> Path:
    """Write ``data`` to ``target`` atomically and durably (temp file beside it, fsync, os.replace).

    The same bytes already there: a no-op. Other bytes there: FileExistsError, unless ``overwrite``
    (landed files never change).
    """
    if target.exists() and not overwrite:
        if target.read_bytes() == data:
            return target
        raise FileExistsError(f"{target} exists with other content; landed files are never changed")
    target.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{target.name}.", suffix=".tmp", dir=target.parent)
    try:
        with os.fdopen(fd, "wb") as handle:
            handle.write(data)
            handle.flush()
            os.fsync(handle.fileno())
        os.replace(tmp, target)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
    return target


def _jsonable(value: Any) -> Any:
    if isinstance(value, datetime):
        return rfc3339(value)
    if isinstance(value, float):
        return value if math.isfinite(value) else None
    if isinstance(value, dict):
        return {str(key): _jsonable(item) for key, item in value.items()}
    if isinstance(value, (list, tuple)):
        return [_jsonable(item) for item in value]
    if hasattr(value, "item") and callable(value.item):  # numpy scalars
        return _jsonable(value.item())
    if isinstance(value, Path):
        return str(value)
    return value
