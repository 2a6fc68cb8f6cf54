"""How an alert's size reads to a person: a loss as LOST, a gain (an improvement notice) as GAINED.

The store keeps the signed figure of docs/alerts.md, "Severity": `lost_gpu_hours_per_day` = −ΔG × installed
GPU-hours per day, positive for a loss and negative for a gain. Every place that shows it (the sinks'
payload and Slack text, `perfwh alerts list`, the HTML reports) renders it with these functions, so an
improvement reads "GAINED 12.3 GPU-h/d", never "lost −12.3".
"""

from __future__ import annotations

import math
from typing import Any

GPU_HOURS = "GPU-h/d"
H100_HOURS = "H100-eq h/d"  # H100-equivalent hours per day: when installed GPU-seconds are unknown


def finite_number(value: Any) -> float | None:
    """The value as a finite float, or None (unknown: missing, not a number, NaN or infinite)."""
    try:
        number = float(value)
    except (TypeError, ValueError):
        return None
    return number if math.isfinite(number) else None


def lost_per_day(impact: dict | None) -> tuple[float | None, str]:
    """The signed loss per day and its unit: GPU-hours, else H100-equivalent hours, else (None, GPU-hours)."""
    impact = impact or {}
    lost = finite_number(impact.get("lost_gpu_hours_per_day"))
    if lost is not None:
        return lost, GPU_HOURS
    lost = finite_number(impact.get("lost_h100_equivalent_hours_per_day"))
    return (lost, H100_HOURS) if lost is not None else (None, GPU_HOURS)


def amount_text(lost: float | None, unit: str = GPU_HOURS) -> str:
    """'LOST 12.3 GPU-h/d' for a loss, 'GAINED 12.3 GPU-h/d' for a gain (a negative loss), 'impact unknown'."""
    if lost is None:
        return "impact unknown"
    return f"{'GAINED' if lost < 0 else 'LOST'} {abs(lost):.1f} {unit}"


def impact_text(impact: dict | None) -> str:
    """An alert's impact as it reads: LOST or GAINED, the amount, the unit."""
    return amount_text(*lost_per_day(impact))


def escalation_text(escalation: dict | None) -> str:
    """'ESCALATED major → critical: LOST 42.0 GPU-h/d → LOST 130.0 GPU-h/d', or '' when it never escalated."""
    if not escalation:
        return ""
    unit = escalation.get("unit") or GPU_HOURS
    before = amount_text(finite_number(escalation.get("lost_per_day_before")), unit)
    after = amount_text(finite_number(escalation.get("lost_per_day_after")), unit)
    return f"ESCALATED {escalation.get('from_severity')} → {escalation.get('to_severity')}: {before} → {after}"
