"""Reading a landed text log: UTF-8 lines, or a quarantine reason that names the line."""

from __future__ import annotations

import re

from perf_assets.lib.ingest.formats.decompress import read_text
from perf_assets.lib.ingest.landing import LandedFile

# `srun --label` (and `mpirun --tag-output` reduced to its rank) put "<rank>: " before each line.
_SRUN_LABEL = re.compile(r"^\s*(\d+):\s")


def read_lines(landed: LandedFile) -> list[str]:
    """The file's lines without line ends (gunzipped, bounded, when gzip). Non-UTF-8 and empty files are quarantined."""
    return read_text(landed.path).splitlines()


def strip_srun_label(line: str) -> tuple[str, bool]:
    """`0: # nThread 1 ...` -> (`# nThread 1 ...`, True); other lines unchanged."""
    match = _SRUN_LABEL.match(line)
    if match is None:
        return line, False
    return line[match.end() :], True
