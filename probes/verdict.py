"""Pass or fail against the physical limit: a gross-failure floor, not the cohort judgement.

Cohort rules (5% below the baseline of the same SKU, driver and software) live in the warehouse; a
probe alone can only say "far below what the silicon can do" (reference probes.md sections 2 and 4).
"""

from __future__ import annotations

FRACTION_FLOOR = 0.6
# GEMM floors per dtype (the probe_rules seed's): DCGM's "75% of the measured reference" on a healthy H200 at its
# 700 W power cap, where GEMM clocks fell to 1290-1620 MHz (docs/probes.md, device checks of 2026-11-29/30):
# measured bf16 0.64-0.66, fp16 0.62-0.64, fp8 0.58-0.61, tf32 0.64-0.75, fp32 0.74-0.77, fp64 0.86 of the dense peak.
GEMM_FLOORS = {"bf16": 0.50, "fp16": 0.50, "fp8": 0.45, "tf32": 0.55, "fp32": 0.55, "fp64": 0.65}
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
