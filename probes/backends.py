"""Which device and library a probe runs on: torch on CUDA, torch on the CPU, or numpy on the CPU.

torch is imported only here and only when asked (``select_backend``), so the package imports on a
machine without torch (the warehouse's CI) and a probe on such a machine runs on numpy.
"""

from __future__ import annotations

import platform
import socket
from dataclasses import dataclass
from typing import Any

CHOICES = ("auto", "cuda", "torch-cpu", "numpy")


@dataclass(frozen=True)
class Backend:
    """Where a probe runs. ``device_kind`` is "cuda" or "cpu"; ``backend`` is "torch" or "numpy"."""

    device_kind: str
    backend: str
    device_name: str
    gpu_index: int | None
    gpu_uuid: str
    sku: str | None
    note: str | None = None  # why this backend (e.g. why not CUDA), for the context

    @property
    def torch_device(self) -> str:
        return f"cuda:{self.gpu_index}" if self.device_kind == "cuda" else "cpu"


def hostname() -> str:
    """The short host name (no domain): node names never hold a '.'."""
    return socket.gethostname().split(".", 1)[0] or "localhost"


def sku_of(device_name: str) -> str | None:
    """Map a CUDA device name to a ``gpu_sku_specs.csv`` SKU; None when the part is not one we know.

    "NVIDIA H100 80GB HBM3" -> H100-SXM, "NVIDIA H200" -> H200-SXM, "NVIDIA A100-SXM4-80GB" ->
    A100-SXM4-80GB. PCIe and NVL cards (other clocks, power and peaks) are not the SXM parts: None.
    """
    name = device_name.upper()
    if "PCIE" in name or " NVL" in name:
        return None
    if "H200" in name:
        return "H200-SXM"
    if "H100" in name and "HBM3" in name:
        return "H100-SXM"
    if "A100" in name:
        return "A100-SXM4-80GB"
    return None


def cpu_name() -> str:
    try:
        with open("/proc/cpuinfo", encoding="utf-8") as handle:
            for line in handle:
                if line.lower().startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine() or "cpu"


def cpu_backend(backend: str = "numpy", note: str | None = None) -> Backend:
    return Backend(
        device_kind="cpu",
        backend=backend,
        device_name=cpu_name(),
        gpu_index=None,
        gpu_uuid=f"cpu-{hostname()}",
        sku=None,
        note=note,
    )


def cuda_backend(torch: Any, index: int = 0) -> Backend:
    props = torch.cuda.get_device_properties(index)
    raw_uuid = getattr(props, "uuid", None)
    if raw_uuid is None:
        uuid, note = f"cuda-{hostname()}-{index}", "torch exposes no device uuid"
    else:
        text = str(raw_uuid)
        uuid, note = (text if text.startswith("GPU-") else f"GPU-{text}"), None
    return Backend(
        device_kind="cuda",
        backend="torch",
        device_name=str(props.name),
        gpu_index=index,
        gpu_uuid=uuid,
        sku=sku_of(str(props.name)),
        note=note,
    )


def import_torch() -> tuple[Any | None, str | None]:
    """(torch, None), or (None, why it did not import)."""
    try:
        import torch  # noqa: PLC0415 - optional dependency, imported on demand
    except Exception as error:  # ImportError, or a broken install (OSError from its libraries)
        return None, f"torch not importable: {type(error).__name__}: {error}"
    return torch, None


def select_backend(prefer: str = "auto", gpu_index: int = 0) -> Backend:
    """Pick the device. ``auto``: torch on CUDA if torch imports and sees a GPU, else torch on the CPU,
    else numpy on the CPU. ``cuda``, ``torch-cpu`` and ``numpy`` force one (``cuda`` raises when there
    is no GPU, ``torch-cpu`` when torch does not import)."""
    if prefer not in CHOICES:
        raise ValueError(f"backend {prefer!r} is not one of {', '.join(CHOICES)}")
    if prefer == "numpy":
        return cpu_backend("numpy", note="numpy requested")
    torch, why = import_torch()
    if torch is None:
        if prefer != "auto":
            raise RuntimeError(why)
        return cpu_backend("numpy", note=why)
    if prefer == "torch-cpu":
        return cpu_backend("torch", note="torch-cpu requested")
    try:
        available = bool(torch.cuda.is_available())
        count = torch.cuda.device_count() if available else 0
    except Exception as error:  # a CUDA build without a driver can raise here
        available, count, why = False, 0, f"CUDA not usable: {type(error).__name__}: {error}"
    else:
        why = None if available else "torch.cuda.is_available() is False"
    if available and gpu_index >= count:
        raise ValueError(f"gpu_index {gpu_index} out of range: {count} CUDA device(s) visible")
    if available:
        return cuda_backend(torch, gpu_index)
    if prefer == "cuda":
        raise RuntimeError(f"no CUDA device: {why}")
    return cpu_backend("torch", note=why)
