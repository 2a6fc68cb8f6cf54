"""What a landed file is: its identity (sha256, file_id) and the context its path and name carry."""

from __future__ import annotations

import hashlib
import os
import re
from dataclasses import dataclass
from datetime import date, datetime, timezone
from pathlib import Path

_DATE_DIR = re.compile(r"^\d{4}-\d{2}-\d{2}$")
_NAME_TS = re.compile(r"^(\d{8})T(\d{6})Z?$")


def sha256_of(path: Path) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as handle:
        for block in iter(lambda: handle.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def file_id_of(sha256: str, relative_path: str) -> str:
    """The same bytes under another landing path are another landed file (contracts: file identity)."""
    return hashlib.sha256(f"{sha256}\0{relative_path}".encode()).hexdigest()[:16]


@dataclass(frozen=True)
class LandedFile:
    """A file under landing/ with what its path and name say about it."""

    path: Path
    relative_path: str  # relative to landing/, with forward slashes
    source: str
    cluster: str | None
    capture_date: date | None
    host: str | None
    job_id: str | None
    rank: str | None
    captured_at: datetime | None
    sha256: str
    size_bytes: int
    link_target: str | None = None  # a symbolic link that leads out of the landing zone: never read

    @property
    def file_id(self) -> str:
        return file_id_of(self.sha256, self.relative_path)

    @property
    def default_event_date(self) -> date:
        """For rows that carry no time of their own: capture time, else the day folder, else today."""
        if self.captured_at is not None:
            return self.captured_at.date()
        if self.capture_date is not None:
            return self.capture_date
        return datetime.now(timezone.utc).date()


def _part(value: str) -> str | None:
    return None if value in ("", "-") else value


def link_out_of_landing(landing_root: Path, path: Path) -> str | None:
    """A symbolic link whose target is not a file inside the landing zone (outside it, missing, a folder):
    the link's text. Such a link is quarantined without being read, so a landed link cannot pull another
    file of the machine into the lake."""
    if not path.is_symlink():
        return None
    target = path.resolve()
    if landing_root.resolve() in target.parents and target.is_file():
        return None
    return os.readlink(path)


def describe(landing_root: Path, path: Path) -> LandedFile:
    """Read a landed file's context from `<source>/<cluster>/<yyyy-mm-dd>/<host>__<job>__<rank>__<ts>.<ext>`.

    The landed path is where the file lies under landing/ (a link's own place, not its target's)."""
    relative = (path.parent.resolve() / path.name).relative_to(landing_root.resolve())
    parts = relative.parts
    source = parts[0]
    cluster = parts[1] if len(parts) >= 3 else None
    capture_date = None
    if len(parts) >= 4 and _DATE_DIR.match(parts[2]):
        capture_date = date.fromisoformat(parts[2])
    host = job_id = rank = None
    captured_at = None
    stem = path.name.split(".", 1)[0]
    name_parts = stem.split("__")
    if len(name_parts) == 4:
        host, job_id, rank = (_part(p) for p in name_parts[:3])
        match = _NAME_TS.match(name_parts[3])
        if match:
            captured_at = datetime.strptime("".join(match.groups()), "%Y%m%d%H%M%S").replace(tzinfo=timezone.utc)
    link_target = link_out_of_landing(landing_root, path)
    if link_target is not None:
        sha256, size_bytes = hashlib.sha256(b"symlink\0" + os.fsencode(link_target)).hexdigest(), 0
    else:
        sha256, size_bytes = sha256_of(path), path.stat().st_size
    return LandedFile(
        path=path,
        relative_path=relative.as_posix(),
        source=source,
        cluster=cluster,
        capture_date=capture_date,
        host=host,
        job_id=job_id,
        rank=rank,
        captured_at=captured_at,
        sha256=sha256,
        size_bytes=size_bytes,
        link_target=link_target,
    )
