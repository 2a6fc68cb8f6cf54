"""`perfwh ingest PATH...`: copy files from outside into landing/<source>/<cluster>/<date>/."""

from __future__ import annotations

import json
import os
import shutil
from datetime import datetime, timezone
from pathlib import Path

from perf_assets.lib.contracts import landing_sources
from perf_assets.lib.ingest.formats.dcgmi_dmon import looks_like_dmon
from perf_assets.lib.ingest.formats.nvidia_smi_bundle import looks_like_bundle
from perf_assets.lib.ingest.landing import sha256_of
from perf_assets.lib.ingest.run import is_landed_file
from perf_assets.lib.paths import DataHome

# Keys that tell our own JSON formats apart (first object of the file).
_JSON_SIGNATURES = [
    ("probe_results", {"probe", "metric", "run_id"}),
    ("inventory", {"gpu_uuid", "sku"}),
    ("node_software", {"node", "driver"}),
    ("node_events", {"node", "state"}),
    ("step_events", {"job_id", "event"}),
    ("pending_queue", {"requested_gpus"}),
    ("job_meta", {"job_id", "workload"}),
    ("job_meta", {"job_id", "model_flops_per_step"}),
]


def sniff_source(path: Path) -> str | None:
    """Which source a file belongs to, from its first bytes; None when it cannot tell."""
    with open(path, "rb") as handle:
        head = handle.read(65536)
    if b'"resultType"' in head:
        return "dcgm"
    if head.startswith(b"SQLite format 3\x00"):
        return "nsys"
    if head.startswith(b"\x1f\x8b") or b'"traceEvents"' in head:
        return "kineto"
    first_line = head.split(b"\n", 1)[0].decode("utf-8", "replace")
    if "|" in first_line and "JobID" in first_line.split("|"):
        return "sacct"
    text = head.decode("utf-8", "replace")
    if ":::MLLOG" in text:
        return "mlperf"
    if "# nThread" in text or "_perf" in text and ("busbw" in text or "NCCL" in text):
        return "nccl_tests"
    if "DCGM_FI_" in text and ("# TYPE" in text or "{" in text):
        return "dcgm"
    if looks_like_dmon(head):
        return "dcgm"  # dcgmi dmon
    if looks_like_bundle(head) or first_line.startswith(("timestamp, ", "name, ", "index, ", "uuid, ")):
        return "nvidia_smi"
    if "nvidia_smi_" in text and "# TYPE" in text:
        return "nvidia_smi"  # nvidia_gpu_exporter text
    if head.lstrip()[:1] in (b"{", b"["):
        try:
            first = json.loads(first_line)
        except json.JSONDecodeError:
            try:
                first = json.loads(path.read_text(encoding="utf-8"))
            except (json.JSONDecodeError, UnicodeDecodeError):
                return None
        if isinstance(first, list):
            first = first[0] if first else {}
        if isinstance(first, dict):
            for source, keys in _JSON_SIGNATURES:
                if keys <= first.keys():
                    return source
    return None


def _files(paths: list[Path]) -> list[tuple[Path, Path | None]]:
    """(file, the folder it was given under) for each file, folders walked recursively."""
    found: list[tuple[Path, Path | None]] = []
    for path in paths:
        if path.is_dir():
            found.extend(
                (child, path)
                for child in sorted(path.rglob("*"))
                if (child.is_file() or child.is_symlink()) and not child.name.startswith(".")
            )
        elif path.is_file():
            found.append((path, None))
        else:
            raise FileNotFoundError(f"no such file or folder: {path}")
    return found


def deliver(
    home: DataHome,
    paths: list[Path],
    *,
    source: str | None = None,
    cluster: str | None = None,
    day: str | None = None,
) -> tuple[list[Path], list[str]]:
    """Land files: those already under landing/ stay; others are copied. Returns (landed, problems)."""
    if source is not None and source not in landing_sources():
        raise ValueError(f"unknown source {source!r}; known: {', '.join(sorted(landing_sources()))}")
    landing = home.landing.resolve()
    landed: list[Path] = []
    problems: list[str] = []
    for path, given_under in _files(paths):
        placed = path.parent.resolve() / path.name  # where it lies: a link is not followed to its target here
        if landing in placed.parents:
            if is_landed_file(landing, placed):
                landed.append(placed)  # ingest quarantines a link that leads out of landing/
            elif given_under is None:
                problems.append(f"{path}: under landing/ but not a landed file (top-level, hidden or a sidecar)")
            continue
        if not path.is_file():
            problems.append(f"{path}: not a file (a link to {os.readlink(path)!r})")
            continue
        if given_under is not None and given_under.resolve() != path.parent.resolve():
            relative = placed.relative_to(given_under.resolve())
            if relative.parts[0] in landing_sources() and len(relative.parts) >= 2:  # a landing-shaped tree
                target = landing / relative
                landed.append(_copy(path, target))
                continue
        file_source = source or sniff_source(path)
        if file_source is None:
            problems.append(
                f"{path}: cannot tell which source this is; pass --source ({', '.join(sorted(landing_sources()))})"
            )
            continue
        capture_day = day or datetime.fromtimestamp(path.stat().st_mtime, tz=timezone.utc).date().isoformat()
        target = landing / file_source / (cluster or "default") / capture_day / path.name
        landed.append(_copy(path, target))
    return landed, problems


def _copy(path: Path, target: Path) -> Path:
    """Copy into landing without ever overwriting a different landed file."""
    target.parent.mkdir(parents=True, exist_ok=True)
    candidate, counter = target, 1
    while candidate.exists():
        if sha256_of(candidate) == sha256_of(path):
            return candidate
        candidate = target.with_name(f"{target.stem}.{counter}{target.suffix}")
        counter += 1
    temp = candidate.with_name(f".tmp-{candidate.name}")
    shutil.copyfile(path, temp)
    temp.replace(candidate)
    return candidate
