"""Where a GPU sits relative to the host's CPUs (reference probes.md section 7, host group, and section 2.1's
NUMA binding): the GPU's NUMA node, the CPUs NVML calls ideal for it, the process's own CPU set, and a
context manager that binds the calling thread to the GPU's CPUs for a measurement and restores it after.

Sources, in order: ``nvmlDeviceGetNumaNodeId`` then the PCI device's sysfs ``numa_node`` (the bus id from
``nvmlDeviceGetPciInfo`` or from torch's device properties); ``nvmlDeviceGetCpuAffinity`` (a bitmask, 64 CPUs
per word) then sysfs ``local_cpulist``. The NVML handle is found by the GPU's UUID, never by index. Whatever
cannot be read stays None with its reason under ``errors`` (a sysfs ``numa_node`` of -1 means the platform
reports none: unknown, not node 0). CPU sets are written as Linux CPU lists (``0-15,32-47``).
"""

from __future__ import annotations

import contextlib
import math
import os
from functools import lru_cache
from pathlib import Path
from typing import Any, Iterable, Iterator

SYSFS = Path("/sys")
NO_GPU = "not applicable: no GPU"


def cpu_list(cpus: Iterable[int]) -> str:
    """A CPU set as a Linux CPU list: ``{0, 1, 2, 5}`` -> ``"0-2,5"``."""
    ordered = sorted(set(cpus))
    ranges: list[str] = []
    start = prev = None
    for cpu in ordered:
        if prev is not None and cpu == prev + 1:
            prev = cpu
            continue
        if start is not None:
            ranges.append(f"{start}-{prev}" if prev != start else str(start))
        start = prev = cpu
    if start is not None:
        ranges.append(f"{start}-{prev}" if prev != start else str(start))
    return ",".join(ranges)


def parse_cpu_list(text: str) -> set[int]:
    """The inverse of ``cpu_list`` (sysfs ``local_cpulist``): ``"0-2,5"`` -> ``{0, 1, 2, 5}``."""
    cpus: set[int] = set()
    for part in text.strip().split(","):
        if not part:
            continue
        low, _, high = part.partition("-")
        cpus.update(range(int(low), int(high or low) + 1))
    return cpus


def cpus_from_mask(words: Iterable[int], bits_per_word: int = 64) -> set[int]:
    """CPUs set in an NVML affinity bitmask (word i holds CPUs i*64 .. i*64+63)."""
    return {
        i * bits_per_word + bit for i, word in enumerate(words) for bit in range(bits_per_word) if int(word) >> bit & 1
    }


def process_cpus() -> set[int] | None:
    """The calling thread's allowed CPUs (``os.sched_getaffinity(0)``); None where the OS has no such call."""
    try:
        return set(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        return None


def sysfs_bus_id(bus_id: str) -> str:
    """NVML's ``00000000:18:00.0`` (8-digit domain, upper case) as sysfs names it: ``0000:18:00.0``."""
    domain, _, rest = bus_id.strip().partition(":")
    return f"{int(domain, 16):04x}:{rest.lower()}" if rest else bus_id.lower()


def _read(path: Path) -> str | None:
    try:
        return path.read_text(encoding="ascii").strip()
    except OSError:
        return None


def _nvml_facts(nvml: Any, gpu_uuid: str, errors: dict[str, str]) -> dict[str, Any]:
    facts: dict[str, Any] = {}
    try:
        nvml.nvmlInit()
    except Exception as error:  # NVMLError_LibraryNotFound, DriverNotLoaded, ...
        errors["nvml"] = type(error).__name__
        return facts
    try:
        handle = nvml.nvmlDeviceGetHandleByUUID(gpu_uuid)
    except Exception as error:
        errors["nvml"] = type(error).__name__
        with contextlib.suppress(Exception):
            nvml.nvmlShutdown()
        return facts
    try:
        try:
            bus = nvml.nvmlDeviceGetPciInfo(handle).busId
            facts["pci_bus_id"] = sysfs_bus_id(bus.decode() if isinstance(bus, bytes) else str(bus))
        except Exception as error:
            errors["pci_bus_id"] = type(error).__name__
        try:
            facts["numa_node"] = int(nvml.nvmlDeviceGetNumaNodeId(handle))
        except Exception as error:  # NotSupported on many x86 hosts, FunctionNotFound on old drivers
            errors["numa_node_nvml"] = type(error).__name__
        try:
            words = nvml.nvmlDeviceGetCpuAffinity(handle, max(1, math.ceil((os.cpu_count() or 1) / 64)))
            cpus = cpus_from_mask(words)
            if cpus:
                facts["cpus"] = cpus
            else:
                errors["cpu_set_nvml"] = "empty affinity mask"
        except Exception as error:
            errors["cpu_set_nvml"] = type(error).__name__
    finally:
        with contextlib.suppress(Exception):
            nvml.nvmlShutdown()
    return facts


@lru_cache(maxsize=16)
def _gpu_topology(gpu_uuid: str, torch_bus_id: str | None, sysfs: Path, nvml: Any) -> tuple[tuple[str, Any], ...]:
    errors: dict[str, str] = {}
    if nvml is None:
        try:
            import pynvml as nvml  # noqa: PLC0415 - optional (nvidia-ml-py)
        except ImportError:
            errors["nvml"] = "nvml_binding_missing"
    facts = _nvml_facts(nvml, gpu_uuid, errors) if nvml is not None else {}
    bus_id = facts.get("pci_bus_id") or torch_bus_id
    numa_node, numa_source = facts.get("numa_node"), "nvml" if "numa_node" in facts else None
    cpus, cpus_source = facts.get("cpus"), "nvml" if "cpus" in facts else None
    device = sysfs / "bus/pci/devices" / bus_id if bus_id else None
    if numa_node is None or numa_node < 0:
        numa_node, numa_source = None, None
        text = _read(device / "numa_node") if device else None
        if text is None:
            errors["numa_node_sysfs"] = "no PCI bus id" if device is None else f"{device}/numa_node unreadable"
        elif int(text) < 0:
            errors["numa_node_sysfs"] = f"sysfs numa_node {text}: the platform reports no NUMA node"
        else:
            numa_node, numa_source = int(text), "sysfs"
    if cpus is None:
        text = _read(device / "local_cpulist") if device else None
        if text:
            cpus, cpus_source = parse_cpu_list(text), "sysfs"
        else:
            errors["cpu_set_sysfs"] = "no PCI bus id" if device is None else f"{device}/local_cpulist unreadable"
    return (
        ("pci_bus_id", bus_id),
        ("gpu_numa_node", numa_node),
        ("gpu_numa_node_source", numa_source),
        ("gpu_cpus", frozenset(cpus) if cpus else None),
        ("gpu_cpu_set_source", cpus_source),
        ("errors", tuple(sorted(errors.items()))),
    )


def torch_pci_bus_id(props: Any) -> str | None:
    """``dddd:bb:dd.0`` from torch's device properties (``pci_domain_id``/``pci_bus_id``/``pci_device_id``)."""
    try:
        return f"{int(props.pci_domain_id):04x}:{int(props.pci_bus_id):02x}:{int(props.pci_device_id):02x}.0"
    except (AttributeError, TypeError, ValueError):
        return None


def gpu_cpus(gpu_uuid: str, torch_bus_id: str | None = None, nvml: Any = None, sysfs: Path = SYSFS) -> set[int] | None:
    """The CPUs ideal for the GPU (NVML, else sysfs), or None when neither says."""
    cpus = dict(_gpu_topology(gpu_uuid, torch_bus_id, sysfs, nvml))["gpu_cpus"]
    return set(cpus) if cpus else None


def topology_context(
    gpu_uuid: str | None, torch_bus_id: str | None = None, nvml: Any = None, sysfs: Path = SYSFS
) -> dict[str, Any]:
    """The ``topology`` group of a row's context: the GPU's NUMA node and CPU set (cached per UUID), the
    process's CPU set now, and whether the process runs only on the GPU's CPUs. ``gpu_uuid`` None: a CPU
    run, whose GPU fields are None with the reason."""
    process = process_cpus()
    out: dict[str, Any] = {"process_cpu_set": cpu_list(process) if process is not None else None}
    if gpu_uuid is None:
        out.update(
            gpu_uuid=None, pci_bus_id=None, gpu_numa_node=None, gpu_numa_node_source=None, gpu_cpu_set=None,
            gpu_cpu_set_source=None, process_within_gpu_cpu_set=None, errors={"gpu": NO_GPU},
        )  # fmt: skip
        return out
    facts = dict(_gpu_topology(gpu_uuid, torch_bus_id, sysfs, nvml))
    cpus = facts.pop("gpu_cpus")
    out.update(
        gpu_uuid=gpu_uuid,
        pci_bus_id=facts["pci_bus_id"],
        gpu_numa_node=facts["gpu_numa_node"],
        gpu_numa_node_source=facts["gpu_numa_node_source"],
        gpu_cpu_set=cpu_list(cpus) if cpus else None,
        gpu_cpu_set_source=facts["gpu_cpu_set_source"],
        process_within_gpu_cpu_set=(process <= cpus) if cpus and process is not None else None,
        errors=dict(facts["errors"]),
    )
    return out


@contextlib.contextmanager
def bound_to(cpus: set[int] | None) -> Iterator[dict[str, Any]]:
    """Bind the calling thread to ``cpus`` (``os.sched_setaffinity(0, cpus)``) for the block and restore its
    CPU set afterwards. Yields what the row records: ``numa_bound`` (True, or False with the reason when the
    GPU's CPUs are unknown or the call failed), ``cpu_set`` (the CPU set in force during the block, read back) and
    ``numa_bind_reason``. Threads started inside the block inherit the binding; threads already running
    (the NVML sampler, the CUDA driver's) keep theirs. Memory allocated inside the block is first touched
    by the bound thread, so its pages land on the GPU's node under the default policy."""
    bound_cpus: set[int] | None = None
    record: dict[str, Any] = {"numa_bound": False, "cpu_set": None, "numa_bind_reason": None}
    saved = process_cpus()
    if cpus is None:
        record["numa_bind_reason"] = "the GPU's CPU set is unknown (NVML and sysfs gave none): not bound"
    elif saved is None:
        record["numa_bind_reason"] = "os.sched_setaffinity is not available on this OS: not bound"
    else:
        try:
            os.sched_setaffinity(0, cpus)
        except OSError as error:  # EINVAL: none of the GPU's CPUs is allowed here (cgroup cpuset)
            record["numa_bind_reason"] = f"os.sched_setaffinity to {cpu_list(cpus)} failed: {error}; not bound"
        else:
            record["numa_bound"] = True
            now = process_cpus()
            if now is not None and now != cpus:
                record["numa_bind_reason"] = f"bound to the allowed part {cpu_list(now)} of {cpu_list(cpus)}"
            bound_cpus = now
    current = bound_cpus if record["numa_bound"] else saved
    record["cpu_set"] = cpu_list(current) if current is not None else None
    try:
        yield record
    finally:
        if record["numa_bound"] and saved is not None:
            os.sched_setaffinity(0, saved)
