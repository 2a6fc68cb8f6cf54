"""Clock-normalised efficiency (reference probes.md sections 1 and 2): how much of the work the silicon could
do *at the clock it actually ran at*, which separates "kernel or silicon is slow" (low) from "clocks held
down by power or heat" (normal efficiency, low clock).

    eff_clock     = achieved FLOP/s / (SMs x FLOP/clk/SM x f_SM_mean)
    eff_mem_clock = achieved B/s / (HBM bandwidth x f_mem_mean / f_mem_at_spec)

FLOP/clk/SM = peak_flops_dense / (sm_count x peak_sm_clock_mhz) of the SKU seed ``gpu_sku_specs.csv`` (the
clock the datasheet peak is quoted at: 4096 for Hopper bf16); SMs are the device's own count
(``torch.cuda.get_device_properties``) when the context has it, else the seed's; f_SM_mean and f_mem_mean
are the NVML sampler's means over the probe's timed window (``sm_clock_mhz_mean_timed``,
``mem_clock_mhz_mean_timed``). Each is a row of its own (unit ``ratio``, one observation: no CI) derived
from a measured row; its value is NULL with the reason whenever an input is unknown (no NVML, no SKU
figure), never a guess. On a CPU the row is ``skipped``: there is no SM clock to normalise by.
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any

from probes.records import ProbeResult
from probes.specs import sku_dtype_value, sku_value

UNIT = "ratio"
NO_GPU = "no GPU: clock-normalised efficiency needs a GPU's SM or memory clock"


def flop_per_clock_per_sm(sku: str | None, dtype: str) -> float | None:
    """peak_flops_dense / (sm_count x peak_sm_clock_mhz x 1e6) from the seed; None when a figure is missing."""
    peak = sku_dtype_value(sku, dtype, "peak_flops_dense")
    clock = sku_dtype_value(sku, dtype, "peak_sm_clock_mhz")
    sms = sku_value(sku, "sm_count")
    if not peak or not clock or not sms:
        return None
    return peak / (sms * clock * 1e6)


def eff_clock(
    achieved_tflops: float | None, sku: str | None, dtype: str, sm_clock_mhz: float | None, sm_count: float | None
) -> tuple[float | None, str | None, dict[str, Any]]:
    """(eff_clock, why it is NULL, the inputs) for a GEMM-like figure in TFLOP/s."""
    per_sm = flop_per_clock_per_sm(sku, dtype)
    sms = sm_count or sku_value(sku, "sm_count")
    inputs = {"flop_per_clock_per_sm": per_sm, "sm_count": sms, "sm_clock_mhz_mean_timed": sm_clock_mhz}
    if achieved_tflops is None:
        return None, "the probe measured no throughput", inputs
    if per_sm is None:
        return (
            None,
            f"FLOP/clk/SM unknown: sku {sku!r} has no peak_sm_clock_mhz/sm_count for {dtype} in the seed",
            inputs,
        )
    if not sm_clock_mhz:
        return None, "SM clock over the timed window unknown (no NVML clock samples)", inputs
    return achieved_tflops * 1e12 / (sms * per_sm * sm_clock_mhz * 1e6), None, inputs


def eff_mem_clock(
    achieved_gbps: float | None, sku: str | None, mem_clock_mhz: float | None
) -> tuple[float | None, str | None, dict[str, Any]]:
    """(eff_mem_clock, why it is NULL, the inputs) for a bandwidth in GB/s against the SKU's HBM bandwidth
    scaled to the memory clock the window ran at."""
    bandwidth = sku_value(sku, "hbm_bandwidth_bytes_per_s")
    spec_clock = sku_value(sku, "peak_mem_clock_mhz")
    inputs = {
        "hbm_bandwidth_bytes_per_s": bandwidth,
        "peak_mem_clock_mhz": spec_clock,
        "mem_clock_mhz_mean_timed": mem_clock_mhz,
    }
    if achieved_gbps is None:
        return None, "the probe measured no bandwidth", inputs
    if not bandwidth or not spec_clock:
        return None, f"sku {sku!r} has no hbm_bandwidth_bytes_per_s/peak_mem_clock_mhz in the seed", inputs
    if not mem_clock_mhz:
        return None, "memory clock over the timed window unknown (no NVML clock samples)", inputs
    return achieved_gbps * 1e9 / (bandwidth * mem_clock_mhz / spec_clock), None, inputs


def _row(measured_row: ProbeResult, metric: str, value: float | None, reason: str | None, inputs: dict) -> ProbeResult:
    status = "pass"
    if measured_row.device_kind == "cpu":
        value, reason, status = None, NO_GPU, "skipped"
    context = {**measured_row.context, "derived_from": measured_row.metric, "efficiency_inputs": inputs}
    context.pop("stats", None)  # the samples' statistics belong to the measured row
    return replace(
        measured_row,
        metric=metric,
        unit=UNIT,
        value=value,
        median=value,
        iqr=None,
        ci_low=None,
        ci_high=None,
        peak=None,
        fraction_of_peak=None,
        status=status,
        reason=reason,
        context=context,
    )


def eff_clock_row(measured_row: ProbeResult, metric: str, dtype: str) -> ProbeResult:
    """The ``eff_clock`` row of a measured TFLOP/s row (GEMM, burn), with the clock and SM count of its context."""
    ctx = measured_row.context
    value, reason, inputs = eff_clock(
        measured_row.value, measured_row.sku, dtype, ctx.get("sm_clock_mhz_mean_timed"), ctx.get("sm_count")
    )
    inputs["sm_count_source"] = "device" if ctx.get("sm_count") else "seed"
    return _row(measured_row, metric, value, reason, inputs)


def eff_mem_clock_row(measured_row: ProbeResult, metric: str) -> ProbeResult:
    """The ``eff_mem_clock`` row of a measured GB/s row of hbm_stream."""
    value, reason, inputs = eff_mem_clock(
        measured_row.value, measured_row.sku, measured_row.context.get("mem_clock_mhz_mean_timed")
    )
    return _row(measured_row, metric, value, reason, inputs)
