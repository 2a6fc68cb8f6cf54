"""Pass or fail against the physical limit: a gross-failure floor, not the cohort judgement.

Cohort rules (5% below the baseline of the same SKU, driver and software) live in the warehouse; a
probe alone can only say "far below what the silicon can do" (reference probes.md sections 2 and 4).
"""

from __future__ import annotations

FRACTION_FLOOR = 0.6
CPU_REASON = "cpu fallback: no GPU; no physical limit to judge against"


def judge(
    device_kind: str, fraction_of_peak: float | None, *, floor: float = FRACTION_FLOOR, label: str = "this device"
) -> tuple[str, str | None]:
    """(status, reason) for a throughput that ran to the end.

    - CPU: "pass", with the reason saying that nothing was judged.
    - GPU without a known peak (``label`` names what was looked up): "pass", with the reason saying so.
    - GPU below ``floor`` of its peak: "fail", with the fraction and the floor.
    """
    if device_kind == "cpu":
        return "pass", CPU_REASON
    if fraction_of_peak is None:
        return "pass", f"no physical limit known for {label}; not judged"
    if fraction_of_peak < floor:
        return "fail", f"fraction_of_peak {fraction_of_peak:.3f} < floor {floor:.2f}"
    return "pass", None
