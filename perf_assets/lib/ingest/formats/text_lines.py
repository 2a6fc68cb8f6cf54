"""Reading a landed text log: UTF-8 lines, or a quarantine reason that names the line."""

from __future__ import annotations

import re

from perf_assets.lib.ingest.formats.errors import QuarantineError
from perf_assets.lib.ingest.landing import LandedFile

# `srun --label` (and `mpirun --tag-output` reduced to its rank) put "<rank>: " before each line.
_SRUN_LABEL = re.compile(r"^\s*(\d+):\s")


def read_lines(landed: LandedFile) -> list[str]:
    """The file's lines without line ends. Non-UTF-8 bytes and empty files are quarantined."""
    data = landed.path.read_bytes()
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as error:
        line = data[: error.start].count(b"\n") + 1
        raise QuarantineError(f"line {line}: not UTF-8 text (byte {error.start})") from None
    if not text.strip():
        raise QuarantineError("empty file: a writer delivers no file rather than an empty one")
    return text.splitlines()


def strip_srun_label(line: str) -> tuple[str, bool]:
    """`0: # nThread 1 ...` -> (`# nThread 1 ...`, True); other lines unchanged."""
    match = _SRUN_LABEL.match(line)
    if match is None:
        return line, False
    return line[match.end() :], True
