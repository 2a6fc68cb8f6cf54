"""Host and software facts recorded with every result (reference probes.md section 7, a first subset; the
GPU's NUMA node and CPU set and the process's CPU set are the ``topology`` group, probes/topology.py)."""

from __future__ import annotations

import os
import platform
import sys
import time
from functools import lru_cache
from pathlib import Path
from typing import Any

from probes import PROBE_VERSION
from probes.backends import Backend, hostname
from probes.topology import topology_context, torch_pci_bus_id

REPO = Path(__file__).resolve().parents[1]
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


def _read(path: str) -> str | None:
    try:
        with open(path, encoding="utf-8") as handle:
            return handle.read().strip()
    except OSError:
        return None


def git_sha(repo: Path) -> str | None:
    """HEAD's commit of a checkout (a worktree's ``.git`` file and packed refs included), read without git."""
    git = repo / ".git"
    if git.is_file():
        text = _read(str(git)) or ""
        git = Path(text[len("gitdir: ") :]) if text.startswith("gitdir: ") else git
    head = _read(str(git / "HEAD"))
    if not head or not head.startswith("ref: "):
        return head
    ref = head[len("ref: ") :]
    common = _read(str(git / "commondir"))
    for folder in (git, (git / common).resolve() if common else None):
        if folder is None:
            continue
        sha = _read(str(folder / ref))
        if sha:
            return sha
        for line in (_read(str(folder / "packed-refs")) or "").splitlines():
            if line.endswith(" " + ref):
                return line.split()[0]
    return None


@lru_cache(maxsize=1)
def host_facts() -> dict[str, Any]:
    """Facts of the host that do not change within a run (probes.md section 7, host group): CPU model,
    governor, memory, last-level cache, virtualisation flag, and the git SHA of the probe code."""
    meminfo = _read("/proc/meminfo") or ""
    mem_kb = next((int(line.split()[1]) for line in meminfo.splitlines() if line.startswith("MemTotal:")), None)
    cpuinfo = _read("/proc/cpuinfo") or ""
    llc = None
    for index in range(4, -1, -1):  # the highest cache level the kernel lists
        size = _read(f"/sys/devices/system/cpu/cpu0/cache/index{index}/size")
        if size:
            llc = int(size[:-1]) * 1024 if size.endswith("K") else (int(size) if size.isdigit() else None)
            break
    sha = git_sha(REPO)
    return {
        "cpu_model": next(
            (line.split(":", 1)[1].strip() for line in cpuinfo.splitlines() if line.startswith("model name")), None
        ),
        "cpu_governor": _read("/sys/devices/system/cpu/cpu0/cpufreq/scaling_governor"),
        "hypervisor": (" hypervisor" in cpuinfo) if cpuinfo else None,
        "mem_total_bytes": mem_kb * 1024 if mem_kb is not None else None,
        "llc_bytes": llc,
        "probe_git_sha": sha,
    }


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
        "mode": "isolated",
        **host_facts(),
    }
    torch = sys.modules.get("torch")  # imported by the backend choice; never imported here
    torch_bus_id = None
    if backend.backend == "torch" and torch is not None:
        context["torch"] = torch.__version__
        context["torch_cuda"] = getattr(torch.version, "cuda", None)
        context["torch_num_threads"] = torch.get_num_threads()
        try:
            context["torch_cpu_capability"] = torch.backends.cpu.get_cpu_capability()
        except Exception:  # older torch
            context["torch_cpu_capability"] = None
        if backend.device_kind == "cuda":
            try:
                props = torch.cuda.get_device_properties(backend.gpu_index)
                context["cudnn"] = torch.backends.cudnn.version()
                context["compute_capability"] = f"{props.major}.{props.minor}"
                context["sm_count"] = props.multi_processor_count
                context["total_memory_bytes"] = props.total_memory
                context["l2_cache_bytes"] = getattr(props, "L2_cache_size", None)
                torch_bus_id = torch_pci_bus_id(props)
            except Exception as error:  # the probe run reports the failure; the context notes it
                context["device_properties_error"] = f"{type(error).__name__}: {error}"
    # the GPU's NUMA node and CPU set (NVML by UUID, else sysfs) and the process's CPU set (section 7)
    gpu = backend.device_kind == "cuda"
    context["topology"] = topology_context(backend.gpu_uuid if gpu else None, torch_bus_id)
    return context


def _cpu_jiffies() -> tuple[int, int] | None:
    """(steal, total) jiffies of all CPUs from /proc/stat; None where there is no /proc."""
    try:
        with open("/proc/stat", encoding="ascii") as handle:
            fields = [int(x) for x in handle.readline().split()[1:]]
    except (OSError, ValueError):
        return None
    return (fields[7] if len(fields) > 7 else 0), sum(fields[:8])


MAX_PLAUSIBLE_UTILISATION = 1.5  # CPU time over (wall x allowed CPUs) beyond this: the clocks disagree


class CpuLoad:
    """Contention indicators over a window: load average before/after, the process's CPU time over
    (wall x allowed CPUs), which on a shared VM tells a slow CPU from a busy one, and the share of CPU
    time the hypervisor stole (probes.md section 8). Unknown stays None, never 0."""

    def __enter__(self) -> "CpuLoad":
        self.load_before = _loadavg()
        self._jiffies = _cpu_jiffies()
        self._wall = time.perf_counter()
        self._cpu = time.process_time()
        return self

    def __exit__(self, *exc: object) -> None:
        wall = time.perf_counter() - self._wall
        cpu = time.process_time() - self._cpu
        cpus = _affinity() or os.cpu_count() or 1
        self.load_after = _loadavg()
        utilisation = cpu / (wall * cpus) if wall > 0 else None
        # Above 1 only by timer granularity; far above, the CPU-time and wall clocks disagree (a VM paused or its
        # clock slewed between the readings): unknown, not a number no process can reach.
        plausible = utilisation is not None and utilisation <= MAX_PLAUSIBLE_UTILISATION
        self.cpu_utilisation = round(utilisation, 3) if plausible else None
        after = _cpu_jiffies()
        self.steal_share = None
        if self._jiffies is not None and after is not None and after[1] > self._jiffies[1]:
            self.steal_share = round((after[0] - self._jiffies[0]) / (after[1] - self._jiffies[1]), 4)

    def summary(self) -> dict[str, Any]:
        return {
            "loadavg_before": self.load_before,
            "loadavg_after": self.load_after,
            "process_cpu_utilisation": self.cpu_utilisation,
            "cpu_steal_share": self.steal_share,
        }
