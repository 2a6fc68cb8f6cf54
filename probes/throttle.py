"""Clock-event (throttle) reasons from NVML over a timed window, and their class (probes.md section 5).

``ReasonSampler`` polls ``nvmlDeviceGetCurrentClocksEventReasons`` (older drivers:
``...ThrottleReasons``) and the SM clock in a background thread while the window is open. Without
``pynvml`` or a working NVML the sampler is inert and the class is "unknown", with the error class in
the summary (``NVMLError_LibraryNotFound`` on a machine without the driver).
"""

from __future__ import annotations

import contextlib
import statistics
import threading
import time
from typing import Any, Callable, Iterator, Sequence

GPU_IDLE = 0x1
APPLICATIONS_CLOCKS_SETTING = 0x2
SW_POWER_CAP = 0x4
HW_SLOWDOWN = 0x8
SYNC_BOOST = 0x10
SW_THERMAL_SLOWDOWN = 0x20
HW_THERMAL_SLOWDOWN = 0x40
HW_POWER_BRAKE_SLOWDOWN = 0x80
DISPLAY_CLOCK_SETTING = 0x100

REASON_NAMES = {
    GPU_IDLE: "GpuIdle",
    APPLICATIONS_CLOCKS_SETTING: "ApplicationsClocksSetting",
    SW_POWER_CAP: "SwPowerCap",
    HW_SLOWDOWN: "HwSlowdown",
    SYNC_BOOST: "SyncBoost",
    SW_THERMAL_SLOWDOWN: "SwThermalSlowdown",
    HW_THERMAL_SLOWDOWN: "HwThermalSlowdown",
    HW_POWER_BRAKE_SLOWDOWN: "HwPowerBrakeSlowdown",
    DISPLAY_CLOCK_SETTING: "DisplayClockSetting",
}
UNKNOWN = "unknown"


def reason_names(mask: int) -> list[str]:
    return [name for bit, name in REASON_NAMES.items() if mask & bit]


def classify(masks: Sequence[int], timed: Sequence[int] | None = None) -> str:
    """The window's class from its samples in time order.

    ``masks`` are every sample (warm-up included: more samples make the defect classes sturdier);
    ``timed`` are the samples of the timed window alone (default: ``masks``), whose first and last are
    its edges. thermal / hw_slowdown (defect class, DCGM's failure mask, over every sample) >
    idle_in_window (GpuIdle inside the timed window: the measurement is invalid) > app_clocks >
    power_capped (expected for a large GEMM) > clean. No samples: "unknown".
    """
    if not masks:
        return UNKNOWN
    timed = masks if timed is None else timed
    union = 0
    for mask in masks:
        union |= mask
    if union & (SW_THERMAL_SLOWDOWN | HW_THERMAL_SLOWDOWN):
        return "thermal"
    if union & (HW_SLOWDOWN | HW_POWER_BRAKE_SLOWDOWN):
        return "hw_slowdown"
    if any(mask & GPU_IDLE for mask in timed[1:-1]):
        return "idle_in_window"
    if union & APPLICATIONS_CLOCKS_SETTING:
        return "app_clocks"
    if union & SW_POWER_CAP:
        return "power_capped"
    return "clean"


# cumulative violation-time counters (ns) of the defect reasons: robust to a sampling interval longer than an event
VIOLATION_FIELDS = (269, 270, 271)  # NVML_FI_DEV_CLOCKS_EVENT_REASON_{SW_THERM,HW_THERM,HW_POWER_BRAKE}_SLOWDOWN


class ReasonSampler:
    """Context manager: samples one GPU (by UUID) every ``interval_s`` while open: clock-event reasons,
    SM and memory clocks, power, temperature, and the energy and violation counters at the edges.

    Open it before the warm-up and wrap the timed loop in ``timed()``: the defect classes use every
    sample, the idle check only the timed window's. ``throttle_class`` and ``summary()`` afterwards.
    Every NVML call that fails leaves NULL (None) and the error class, never 0.
    """

    def __init__(self, gpu_uuid: str, interval_s: float = 0.05):
        self.gpu_uuid = gpu_uuid
        self.interval_s = interval_s
        self.masks: list[int] = []
        self.sm_clocks_mhz: list[int] = []
        self.mem_clocks_mhz: list[int | None] = []  # one per sample, like masks and SM clocks (None: unknown)
        self.power_w: list[float] = []
        self.temp_c: list[int] = []
        self.available = False
        self.error: str | None = None
        self.driver: str | None = None
        self.window: tuple[int, int | None] | None = None  # sample indices of the timed window
        self._edges: dict[str, Any] = {}
        self._nvml: Any = None
        self._handle: Any = None
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._lock = threading.Lock()

    def __enter__(self) -> "ReasonSampler":
        try:
            import pynvml  # noqa: PLC0415 - optional (nvidia-ml-py)
        except ImportError:
            self.error = "nvml_binding_missing"
            return self
        try:
            pynvml.nvmlInit()
        except Exception as error:  # NVMLError_LibraryNotFound, DriverNotLoaded, NoPermission, ...
            self.error = type(error).__name__
            return self
        self._nvml = pynvml
        try:
            self._handle = pynvml.nvmlDeviceGetHandleByUUID(self.gpu_uuid)
            driver = pynvml.nvmlSystemGetDriverVersion()
            self.driver = driver.decode() if isinstance(driver, bytes) else str(driver)
            self._sample()
        except Exception as error:
            self.error = type(error).__name__
            self._shutdown()
            return self
        self._edges["start"] = self._counters()
        self._edges["start_s"] = time.perf_counter()
        self.available = True
        self._thread = threading.Thread(target=self._loop, name="probe-nvml-sampler", daemon=True)
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        if self._thread is not None:
            self._stop.set()
            self._thread.join(timeout=5)
            try:
                self._sample()  # the window's closing edge
            except Exception as error:
                self.error = type(error).__name__
            self._edges["end"] = self._counters()
            self._edges["end_s"] = time.perf_counter()
        self._shutdown()

    @contextlib.contextmanager
    def timed(self) -> Iterator["ReasonSampler"]:
        """Mark the timed window (an edge sample at each end, when NVML works)."""
        if self.available:
            with contextlib.suppress(Exception):
                self._sample()
        with self._lock:
            begin = len(self.masks)
        try:
            yield self
        finally:
            if self.available:
                with contextlib.suppress(Exception):
                    self._sample()
            with self._lock:
                self.window = (max(begin - 1, 0), len(self.masks))

    def _reasons(self) -> int:
        nvml = self._nvml
        getter = getattr(nvml, "nvmlDeviceGetCurrentClocksEventReasons", None)
        if getter is not None:
            try:
                return int(getter(self._handle))
            except nvml.NVMLError as error:
                if getattr(error, "value", None) != getattr(nvml, "NVML_ERROR_FUNCTION_NOT_FOUND", 13):
                    raise
        return int(nvml.nvmlDeviceGetCurrentClocksThrottleReasons(self._handle))

    def _optional(self, call: Callable[[], Any]) -> Any:
        try:
            return call()
        except Exception:  # NotSupported, NoPermission: unknown, not 0
            return None

    def _counters(self) -> dict[str, Any]:
        nvml, handle = self._nvml, self._handle
        energy = self._optional(lambda: int(nvml.nvmlDeviceGetTotalEnergyConsumption(handle)))  # mJ

        def violations() -> int | None:
            values = nvml.nvmlDeviceGetFieldValues(handle, list(VIOLATION_FIELDS))
            known = [v.value.ullVal for v in values if getattr(v, "nvmlReturn", 1) == 0]
            return int(sum(known)) if known else None

        return {"energy_mj": energy, "violation_ns": self._optional(violations)}

    def _sample(self) -> None:
        nvml, handle = self._nvml, self._handle
        mask = self._reasons()
        clock = int(nvml.nvmlDeviceGetClockInfo(handle, nvml.NVML_CLOCK_SM))
        mem = self._optional(lambda: int(nvml.nvmlDeviceGetClockInfo(handle, nvml.NVML_CLOCK_MEM)))
        power = self._optional(lambda: nvml.nvmlDeviceGetPowerUsage(handle) / 1000.0)
        temp = self._optional(lambda: int(nvml.nvmlDeviceGetTemperature(handle, nvml.NVML_TEMPERATURE_GPU)))
        with self._lock:
            self.masks.append(mask)
            self.sm_clocks_mhz.append(clock)
            self.mem_clocks_mhz.append(mem)
            if power is not None:
                self.power_w.append(power)
            if temp is not None:
                self.temp_c.append(temp)

    def _loop(self) -> None:
        while not self._stop.wait(self.interval_s):
            try:
                self._sample()
            except Exception as error:  # keep the window's result; note the failure
                self.error = type(error).__name__
                return

    def _shutdown(self) -> None:
        if self._nvml is not None:
            try:
                self._nvml.nvmlShutdown()
            except Exception:
                pass
            self._nvml = None

    def _timed_masks(self) -> list[int] | None:
        if self.window is None:
            return None
        begin, end = self.window
        return self.masks[begin:end]

    def timed_clock_mean(self, which: str = "sm") -> float | None:
        """Mean SM (``"sm"``) or memory (``"mem"``) clock in MHz over the timed window's samples, its two edge
        samples included (section 2's ``f_SM_mean`` of ``eff_clock``); None without NVML, without a timed
        window or when the clock was not readable, never a guess."""
        if self.window is None or not self.available:
            return None
        begin, end = self.window
        clocks = (self.sm_clocks_mhz if which == "sm" else self.mem_clocks_mhz)[begin:end]
        known = [c for c in clocks if c is not None]
        return statistics.fmean(known) if known else None

    @property
    def throttle_class(self) -> str:
        return classify(self.masks, self._timed_masks()) if self.available else UNKNOWN

    def _delta(self, key: str) -> int | None:
        start, end = self._edges.get("start", {}).get(key), self._edges.get("end", {}).get(key)
        return None if start is None or end is None else end - start

    def summary(self) -> dict[str, Any]:
        union = 0
        for mask in self.masks:
            union |= mask
        clocks = self.sm_clocks_mhz
        mem_clocks = [c for c in self.mem_clocks_mhz if c is not None]
        timed = self._timed_masks()
        energy_mj = self._delta("energy_mj")
        seconds = self._edges.get("end_s", 0.0) - self._edges.get("start_s", 0.0) if "end_s" in self._edges else None
        return {
            "nvml_available": self.available,
            "nvml_error": self.error,
            "driver": self.driver,
            "clock_event_mask": union if self.masks else None,
            "clock_event_reasons": reason_names(union) if self.masks else None,
            "nvml_samples": len(self.masks),
            "nvml_samples_timed": len(timed) if timed is not None else None,
            "sm_clock_mhz_min": min(clocks) if clocks else None,
            "sm_clock_mhz_median": statistics.median(clocks) if clocks else None,
            "mem_clock_mhz_median": statistics.median(mem_clocks) if mem_clocks else None,
            "sm_clock_mhz_mean_timed": self.timed_clock_mean("sm"),
            "mem_clock_mhz_mean_timed": self.timed_clock_mean("mem"),
            "power_w_mean": statistics.fmean(self.power_w) if self.power_w else None,
            "power_w_max": max(self.power_w) if self.power_w else None,
            "temp_c_max": max(self.temp_c) if self.temp_c else None,
            "energy_j": energy_mj / 1000.0 if energy_mj is not None else None,
            "energy_power_w_mean": energy_mj / 1000.0 / seconds if energy_mj is not None and seconds else None,
            "defect_reason_ns_delta": self._delta("violation_ns"),
        }
