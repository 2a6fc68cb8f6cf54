"""Host and software facts recorded with every result (reference probes.md section 7, a first subset)."""

from __future__ import annotations

import os
import platform
import sys
import time
from typing import Any

from probes import PROBE_VERSION
from probes.backends import Backend, hostname

ENV_ALLOW_LIST = (
    "CUDA_VISIBLE_DEVICES",
    "CUDA_DEVICE_ORDER",
    "CUDA_MODULE_LOADING",
    "CUBLAS_WORKSPACE_CONFIG",
    "OMP_NUM_THREADS",
    "MKL_NUM_THREADS",
    "OPENBLAS_NUM_THREADS",
)


def _loadavg() -> list[float] | None:
    try:
        return [round(x, 2) for x in os.getloadavg()]
    except (OSError, AttributeError):
        return None


def _affinity() -> int | None:
    try:
        return len(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        return None


def _numpy_blas() -> str | None:
    try:
        import numpy as np

        config = np.show_config(mode="dicts")  # numpy >= 1.25
        blas = config["Build Dependencies"]["blas"]
        return f"{blas.get('name')} {blas.get('version')}"
    except Exception:
        return None


def base_context(backend: Backend) -> dict[str, Any]:
    import numpy as np

    context: dict[str, Any] = {
        "probe_version": PROBE_VERSION,
        "hostname": hostname(),
        "python": platform.python_version(),
        "platform": platform.platform(),
        "numpy": np.__version__,
        "numpy_blas": _numpy_blas(),
        "torch": None,
        "backend": backend.backend,
        "backend_note": backend.note,
        "device_kind": backend.device_kind,
        "device_name": backend.device_name,
        "cpu_count": os.cpu_count(),
        "cpu_affinity": _affinity(),
        "env": {name: os.environ[name] for name in ENV_ALLOW_LIST if name in os.environ},
    }
    torch = sys.modules.get("torch")  # imported by the backend choice; never imported here
    if backend.backend == "torch" and torch is not None:
        context["torch"] = torch.__version__
        context["torch_cuda"] = getattr(torch.version, "cuda", None)
        context["torch_num_threads"] = torch.get_num_threads()
        if backend.device_kind == "cuda":
            try:
                props = torch.cuda.get_device_properties(backend.gpu_index)
                context["cudnn"] = torch.backends.cudnn.version()
                context["compute_capability"] = f"{props.major}.{props.minor}"
                context["sm_count"] = props.multi_processor_count
                context["total_memory_bytes"] = props.total_memory
                context["l2_cache_bytes"] = getattr(props, "L2_cache_size", None)
            except Exception as error:  # the probe run reports the failure; the context notes it
                context["device_properties_error"] = f"{type(error).__name__}: {error}"
    return context


class CpuLoad:
    """Contention indicators over a window: load average before/after and the process's CPU time over
    (wall x allowed CPUs), which on a shared VM tells a slow CPU from a busy one (probes.md section 8)."""

    def __enter__(self) -> "CpuLoad":
        self.load_before = _loadavg()
        self._wall = time.perf_counter()
        self._cpu = time.process_time()
        return self

    def __exit__(self, *exc: object) -> None:
        wall = time.perf_counter() - self._wall
        cpu = time.process_time() - self._cpu
        cpus = _affinity() or os.cpu_count() or 1
        self.load_after = _loadavg()
        self.cpu_utilisation = round(cpu / (wall * cpus), 3) if wall > 0 else None

    def summary(self) -> dict[str, Any]:
        return {
            "loadavg_before": self.load_before,
            "loadavg_after": self.load_after,
            "process_cpu_utilisation": self.cpu_utilisation,
        }
