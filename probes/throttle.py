"""Clock-event (throttle) reasons from NVML over a timed window, and their class (probes.md section 5).

``ReasonSampler`` polls ``nvmlDeviceGetCurrentClocksEventReasons`` (older drivers:
``...ThrottleReasons``) and the SM clock in a background thread while the window is open. Without
``pynvml`` or a working NVML the sampler is inert and the class is "unknown", with the error class in
the summary (``NVMLError_LibraryNotFound`` on a machine without the driver).
"""

from __future__ import annotations

import statistics
import threading
from typing import Any, Sequence

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


def classify(masks: Sequence[int]) -> str:
    """The window's class from its samples in time order (first and last are the window's edges).

    thermal / hw_slowdown (defect class, DCGM's failure mask) > idle_in_window (GpuIdle inside the
    window: the measurement is invalid) > app_clocks > power_capped (expected for a large GEMM) >
    clean. No samples: "unknown".
    """
    if not masks:
        return UNKNOWN
    union = 0
    for mask in masks:
        union |= mask
    if union & (SW_THERMAL_SLOWDOWN | HW_THERMAL_SLOWDOWN):
        return "thermal"
    if union & (HW_SLOWDOWN | HW_POWER_BRAKE_SLOWDOWN):
        return "hw_slowdown"
    if any(mask & GPU_IDLE for mask in masks[1:-1]):
        return "idle_in_window"
    if union & APPLICATIONS_CLOCKS_SETTING:
        return "app_clocks"
    if union & SW_POWER_CAP:
        return "power_capped"
    return "clean"


class ReasonSampler:
    """Context manager: samples clock-event reasons and the SM clock of one GPU (by UUID) every
    ``interval_s`` while open. ``throttle_class`` and ``summary()`` afterwards."""

    def __init__(self, gpu_uuid: str, interval_s: float = 0.05):
        self.gpu_uuid = gpu_uuid
        self.interval_s = interval_s
        self.masks: list[int] = []
        self.sm_clocks_mhz: list[int] = []
        self.available = False
        self.error: str | None = None
        self.driver: str | None = None
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
        self._shutdown()

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

    def _sample(self) -> None:
        mask = self._reasons()
        clock = int(self._nvml.nvmlDeviceGetClockInfo(self._handle, self._nvml.NVML_CLOCK_SM))
        with self._lock:
            self.masks.append(mask)
            self.sm_clocks_mhz.append(clock)

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

    @property
    def throttle_class(self) -> str:
        return classify(self.masks) if self.available else UNKNOWN

    def summary(self) -> dict[str, Any]:
        union = 0
        for mask in self.masks:
            union |= mask
        clocks = self.sm_clocks_mhz
        return {
            "nvml_available": self.available,
            "nvml_error": self.error,
            "driver": self.driver,
            "clock_event_mask": union if self.masks else None,
            "clock_event_reasons": reason_names(union) if self.masks else None,
            "nvml_samples": len(self.masks),
            "sm_clock_mhz_min": min(clocks) if clocks else None,
            "sm_clock_mhz_median": statistics.median(clocks) if clocks else None,
        }
