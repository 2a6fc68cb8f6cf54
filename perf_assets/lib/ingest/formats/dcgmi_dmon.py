"""`dcgmi dmon -e <field ids> [-d <ms>]` output saved to a file (reference formats.md 3.2).

    # Entity  GRACT  SMACT  SMOCC  TENSO  DRAMA
          Id
       GPU 0  0.429  0.429  0.364  0.011  0.400
     GPU-I 1  0.750  0.750  0.637  0.020  0.800

Columns are DCGM field tags (mapped to DCGM field names below; an unknown tag is kept as
`dcgmi_dmon:<TAG>`); `N/A` is NULL; the header may repeat. There are no times: the k-th line of an
entity is stamped capture time + k x delay, the capture time from the file name
(`<host>__-__-__<utc-ts>.txt`) and the delay from the name (`....d500.txt`: 500 ms), else from a
sidecar `dcgmi_dmon_command.txt` holding the command line (`-d 500`), else dmon's default 1000 ms.
`GPU n` rows carry the GPU index; `GPU-I n` rows carry the GPU instance (the DCGM entity id, whose
parent GPU dmon does not print: index and UUID are NULL). Other entities (GPU-CI, NvSwitch, Link,
CPU) are counted as unattributed series, not ingested.
"""

from __future__ import annotations

import re
from datetime import timedelta

import pyarrow as pa

from perf_assets.lib.ingest.formats.dcgm_rows import DcgmRows, GpuIdentity, capture_time
from perf_assets.lib.ingest.formats.decompress import sniff
from perf_assets.lib.ingest.formats.errors import QuarantineError
from perf_assets.lib.ingest.formats.prometheus_range import sample_value
from perf_assets.lib.ingest.formats.prometheus_text import read_text_file
from perf_assets.lib.ingest.landing import LandedFile

COMMAND_SIDECAR = "dcgmi_dmon_command.txt"
DEFAULT_DELAY_MS = 1000

# dcgmi short tags (`dcgmi dmon -l`) -> DCGM field names.
TAGS = {
    "SMCLK": "DCGM_FI_DEV_SM_CLOCK",
    "MMCLK": "DCGM_FI_DEV_MEM_CLOCK",
    "MMTMP": "DCGM_FI_DEV_MEMORY_TEMP",
    "TMPTR": "DCGM_FI_DEV_GPU_TEMP",
    "POWER": "DCGM_FI_DEV_POWER_USAGE",
    "TOTEC": "DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION",
    "GPUTL": "DCGM_FI_DEV_GPU_UTIL",
    "MCUTL": "DCGM_FI_DEV_MEM_COPY_UTIL",
    "FBTTL": "DCGM_FI_DEV_FB_TOTAL",
    "FBFRE": "DCGM_FI_DEV_FB_FREE",
    "FBUSD": "DCGM_FI_DEV_FB_USED",
    "GRACT": "DCGM_FI_PROF_GR_ENGINE_ACTIVE",
    "SMACT": "DCGM_FI_PROF_SM_ACTIVE",
    "SMOCC": "DCGM_FI_PROF_SM_OCCUPANCY",
    "TENSO": "DCGM_FI_PROF_PIPE_TENSOR_ACTIVE",
    "DRAMA": "DCGM_FI_PROF_DRAM_ACTIVE",
    "FP64A": "DCGM_FI_PROF_PIPE_FP64_ACTIVE",
    "FP32A": "DCGM_FI_PROF_PIPE_FP32_ACTIVE",
    "FP16A": "DCGM_FI_PROF_PIPE_FP16_ACTIVE",
    "PCITX": "DCGM_FI_PROF_PCIE_TX_BYTES",
    "PCIRX": "DCGM_FI_PROF_PCIE_RX_BYTES",
    "NVLTX": "DCGM_FI_PROF_NVLINK_TX_BYTES",
    "NVLRX": "DCGM_FI_PROF_NVLINK_RX_BYTES",
}

_HEADER = re.compile(r"^#\s*Entity\b", re.IGNORECASE)
_ROW = re.compile(r"^([A-Za-z][\w-]*)\s+(\d+)\s+(\S.*)$")
_NAME_DELAY = re.compile(r"\.d(\d+)(?:ms)?\.", re.IGNORECASE)
_COMMAND_DELAY = re.compile(r"(?:^|\s)(?:-d|--delay)[\s=]+(\d+)")


def looks_like_dmon(head: bytes) -> bool:
    head = sniff(head)  # a gzip export: its decompressed start
    return any(_HEADER.match(line.strip()) for line in head.decode("utf-8", "replace").splitlines()[:5])


def delay_of(landed: LandedFile) -> timedelta:
    """The `-d` delay: from the file name, else the sidecar's command line, else dmon's 1 s default."""
    match = _NAME_DELAY.search(landed.path.name)
    if match is None:
        sidecar = landed.path.parent / COMMAND_SIDECAR
        if sidecar.exists():
            match = _COMMAND_DELAY.search(sidecar.read_text(encoding="utf-8", errors="replace"))
    milliseconds = int(match.group(1)) if match else DEFAULT_DELAY_MS
    if milliseconds <= 0:
        raise QuarantineError(f"delay {milliseconds} ms: dmon rows cannot be placed in time")
    return timedelta(milliseconds=milliseconds)


def _value(text: str, line_number: int, tag: str) -> float | None:
    if text.upper() == "N/A":
        return None
    try:
        return sample_value(text)
    except QuarantineError:
        raise QuarantineError(f"line {line_number}: {tag} value {text!r} is neither a number nor N/A") from None


def parse_dcgmi_dmon(landed: LandedFile) -> pa.Table:
    text = read_text_file(landed.path)
    if landed.host is None:
        raise QuarantineError("no host: dcgmi dmon prints none, so name the file <host>__-__-__<utc-ts>.txt")
    start = capture_time(landed, "dcgmi dmon")
    delay = delay_of(landed)
    tags: list[str] | None = None
    seen: dict[tuple[str, int], int] = {}  # entity -> lines read so far (its sample number)
    unattributed: set[tuple[str, int, str]] = set()
    rows = DcgmRows()
    for line_number, raw in enumerate(text.splitlines(), start=1):
        line = raw.strip()
        if not line or line.lower() == "id":
            continue
        if _HEADER.match(line):
            tags = line.lstrip("#").split()[1:]
            continue
        match = _ROW.match(line)
        if match is None:
            raise QuarantineError(f"line {line_number}: not a dmon row or header: {line[:120]!r}")
        if tags is None:
            raise QuarantineError(f"line {line_number}: a row before any '# Entity' header")
        kind, number, rest = match.group(1), int(match.group(2)), match.group(3).split()
        if len(rest) != len(tags):
            raise QuarantineError(f"line {line_number}: {len(rest)} values, the header names {len(tags)} fields")
        sample_number = seen.get((kind, number), 0)
        seen[(kind, number)] = sample_number + 1
        if kind not in ("GPU", "GPU-I"):
            unattributed.update((kind, number, tag) for tag in tags)
            continue
        gpu = GpuIdentity(
            host=landed.host,
            gpu_uuid=None,
            gpu_index=number if kind == "GPU" else None,
            gpu_instance=number if kind == "GPU-I" else None,
            pci_bus_id=None,
            model_name=None,
        )
        ts = start + sample_number * delay
        for tag, value_text in zip(tags, rest):
            labels = {"entity": f"{kind} {number}", "tag": tag}
            rows.add_series(
                gpu, TAGS.get(tag, f"dcgmi_dmon:{tag}"), labels, [(ts, _value(value_text, line_number, tag))]
            )
    rows.unattributed = len(unattributed)
    return rows.table(landed)
