"""health_snapshot: NVML health counters before and after a probe run, stored as rows (probes.md section 6).

``HealthWatch.start()`` reads the counters and registers for critical XID / ECC events;
``stop()`` reads them again and drains the events. ``rows()`` gives one row per metric (probe
``health``): deltas of the volatile ECC totals (``ecc_sbe_delta``, ``ecc_dbe_delta``), row remapping
(``remap_pending``, ``remap_failure``, ``remap_uncorrectable_rows``), retired pages pending
(pre-Ampere; NotSupported on Hopper, so NULL), ``pcie_replay_delta``, ``xid_critical_events`` and the
enforced ``power_limit_w``. An uncorrectable delta, a pending or failed remap or a critical XID
fails; a call NVML does not support leaves NULL with the reason (never 0). Without NVML every row is
``skipped`` with the NVML error class. ``nvml`` can be injected (tests use a scripted fake).
"""

from __future__ import annotations

from typing import Any, Callable

from probes.common import RunInfo, probe_context, single, unmeasured
from probes.records import ProbeResult

PROBE = "health"
CRITICAL_XIDS = frozenset({48, 63, 64, 74, 79, 92, 94, 95, 119, 120})
# metric -> (unit, fails when value > 0)
METRICS: dict[str, tuple[str, bool]] = {
    "ecc_sbe_delta": ("count", False),
    "ecc_dbe_delta": ("count", True),
    "remap_pending": ("count", True),
    "remap_failure": ("count", True),
    "remap_uncorrectable_rows": ("count", False),
    "retired_pages_pending": ("count", True),
    "pcie_replay_delta": ("count", False),
    "xid_critical_events": ("count", True),
    "power_limit_w": ("W", False),
}


def _try(call: Callable[[], Any], errors: dict[str, str], key: str) -> Any:
    try:
        return call()
    except Exception as error:  # NotSupported, NoPermission, ...: unknown, with the reason
        errors[key] = type(error).__name__
        return None


def snapshot(nvml: Any, handle: Any) -> dict[str, Any]:
    """The counters now; a key is None when NVML cannot say (its error class under ``errors``)."""
    errors: dict[str, str] = {}
    volatile = getattr(nvml, "NVML_VOLATILE_ECC", 0)
    aggregate = getattr(nvml, "NVML_AGGREGATE_ECC", 1)
    corrected = getattr(nvml, "NVML_MEMORY_ERROR_TYPE_CORRECTED", 0)
    uncorrected = getattr(nvml, "NVML_MEMORY_ERROR_TYPE_UNCORRECTED", 1)
    ecc = lambda kind, counter: int(nvml.nvmlDeviceGetTotalEccErrors(handle, kind, counter))  # noqa: E731
    remap = _try(lambda: tuple(int(x) for x in nvml.nvmlDeviceGetRemappedRows(handle)), errors, "remapped_rows")
    snap: dict[str, Any] = {
        "ecc_sbe_volatile": _try(lambda: ecc(corrected, volatile), errors, "ecc_sbe_volatile"),
        "ecc_dbe_volatile": _try(lambda: ecc(uncorrected, volatile), errors, "ecc_dbe_volatile"),
        "ecc_dbe_aggregate": _try(lambda: ecc(uncorrected, aggregate), errors, "ecc_dbe_aggregate"),
        "remap_corrected_rows": remap[0] if remap else None,
        "remap_uncorrectable_rows": remap[1] if remap else None,
        "remap_pending": remap[2] if remap else None,
        "remap_failure": remap[3] if remap else None,
        "retired_pages_pending": _try(
            lambda: int(nvml.nvmlDeviceGetRetiredPagesPendingStatus(handle)), errors, "retired_pages_pending"
        ),
        "pcie_replay": _try(lambda: int(nvml.nvmlDeviceGetPcieReplayCounter(handle)), errors, "pcie_replay"),
        "power_limit_w": _try(lambda: nvml.nvmlDeviceGetEnforcedPowerLimit(handle) / 1000.0, errors, "power_limit_w"),
        "sm_clock_mhz": _try(lambda: int(nvml.nvmlDeviceGetClockInfo(handle, nvml.NVML_CLOCK_SM)), errors, "sm_clock"),
        "sm_clock_max_mhz": _try(
            lambda: int(nvml.nvmlDeviceGetMaxClockInfo(handle, nvml.NVML_CLOCK_SM)), errors, "sm_clock_max"
        ),
        "pcie_gen": _try(lambda: int(nvml.nvmlDeviceGetCurrPcieLinkGeneration(handle)), errors, "pcie_gen"),
        "pcie_gen_max": _try(lambda: int(nvml.nvmlDeviceGetMaxPcieLinkGeneration(handle)), errors, "pcie_gen_max"),
        "pcie_width": _try(lambda: int(nvml.nvmlDeviceGetCurrPcieLinkWidth(handle)), errors, "pcie_width"),
        "pcie_width_max": _try(lambda: int(nvml.nvmlDeviceGetMaxPcieLinkWidth(handle)), errors, "pcie_width_max"),
        "temp_c": _try(lambda: int(nvml.nvmlDeviceGetTemperature(handle, nvml.NVML_TEMPERATURE_GPU)), errors, "temp"),
    }
    snap["errors"] = errors
    return snap


def _delta(before: dict[str, Any], after: dict[str, Any], key: str) -> float | None:
    if before.get(key) is None or after.get(key) is None:
        return None
    return float(after[key] - before[key])


class HealthWatch:
    """Before/after health of one GPU (by UUID). On a CPU or without NVML it only records why."""

    def __init__(self, info: RunInfo, nvml: Any = None):
        self.info = info
        self._nvml = nvml
        self._handle: Any = None
        self._events: Any = None
        self.error: str | None = None
        self.before: dict[str, Any] | None = None
        self.after: dict[str, Any] | None = None
        self.xids: list[int] | None = None

    def start(self) -> "HealthWatch":
        if self.info.backend.device_kind != "cuda":
            self.error = "no CUDA device"
            return self
        try:
            if self._nvml is None:
                import pynvml as nvml  # noqa: PLC0415 - optional (nvidia-ml-py)

                self._nvml = nvml
            self._nvml.nvmlInit()
            self._handle = self._nvml.nvmlDeviceGetHandleByUUID(self.info.backend.gpu_uuid)
        except Exception as error:  # ImportError, NVMLError_LibraryNotFound, ...
            self.error = type(error).__name__
            self._nvml = None
            return self
        self.before = snapshot(self._nvml, self._handle)
        self._register_events()
        return self

    def _register_events(self) -> None:
        nvml = self._nvml
        try:
            mask = nvml.nvmlEventTypeXidCriticalError | nvml.nvmlEventTypeDoubleBitEccError
            self._events = nvml.nvmlEventSetCreate()
            nvml.nvmlDeviceRegisterEvents(self._handle, mask, self._events)
            self.xids = []
        except Exception as error:
            self._events = None
            self.before["errors"]["xid_events"] = type(error).__name__

    def _drain_events(self) -> None:
        nvml = self._nvml
        while self._events is not None:
            try:
                data = nvml.nvmlEventSetWait_v2(self._events, 0)
            except Exception:  # Timeout: nothing more queued
                break
            self.xids.append(int(getattr(data, "eventData", 0)))
        if self._events is not None:
            try:
                nvml.nvmlEventSetFree(self._events)
            except Exception:
                pass

    def stop(self) -> "HealthWatch":
        if self._nvml is None or self.before is None:
            return self
        try:
            self._drain_events()
            self.after = snapshot(self._nvml, self._handle)
        finally:
            try:
                self._nvml.nvmlShutdown()
            except Exception:
                pass
        return self

    def values(self) -> dict[str, float | None]:
        before, after = self.before or {}, self.after or {}
        xids = None if self.xids is None else float(sum(1 for x in self.xids if x in CRITICAL_XIDS))
        return {
            "ecc_sbe_delta": _delta(before, after, "ecc_sbe_volatile"),
            "ecc_dbe_delta": _delta(before, after, "ecc_dbe_volatile"),
            "remap_pending": _float(after.get("remap_pending")),
            "remap_failure": _float(after.get("remap_failure")),
            "remap_uncorrectable_rows": _float(after.get("remap_uncorrectable_rows")),
            "retired_pages_pending": _float(after.get("retired_pages_pending")),
            "pcie_replay_delta": _delta(before, after, "pcie_replay"),
            "xid_critical_events": xids,
            "power_limit_w": _float(after.get("power_limit_w")),
        }

    def rows(self) -> list[ProbeResult]:
        context = probe_context(self.info, health_before=self.before, health_after=self.after, xids=self.xids)
        if self.after is None:
            why = f"NVML unavailable: {self.error}" if self.error else "health not read"
            status = "skipped" if self.info.backend.device_kind == "cpu" or self.error else "error"
            return [unmeasured(self.info, PROBE, m, unit, status, why, context) for m, (unit, _) in METRICS.items()]
        errors = {**(self.before or {}).get("errors", {}), **self.after.get("errors", {})}
        rows = []
        for metric, value in self.values().items():
            unit, fails = METRICS[metric]
            status, reason = "pass", None
            if value is None:
                reason = "unknown: " + (", ".join(f"{k}={v}" for k, v in sorted(errors.items())) or "not read")
            elif fails and value > 0:
                status, reason = "fail", f"{metric} = {value:g} > 0"
            elif value > 0 and metric != "power_limit_w":
                reason = f"{metric} = {value:g} > 0 (warn)"
            rows.append(single(self.info, PROBE, metric, unit, value, context, n=1, status=status, reason=reason))
        return rows


def _float(value: Any) -> float | None:
    return None if value is None else float(value)
