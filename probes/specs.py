"""Physical limits per SKU and dtype, from the dbt seed ``gpu_sku_specs.csv`` (the one source of truth).

The path is relative to this package (``<repo>/dbt_project/seeds/gpu_sku_specs.csv``): a GPU host runs
the probes from a checkout of the repository. ``PERFWH_SKU_SPECS`` names another copy of the file.
"""

from __future__ import annotations

import csv
import os
from functools import lru_cache
from pathlib import Path

SPECS_PATH = Path(__file__).resolve().parents[1] / "dbt_project/seeds/gpu_sku_specs.csv"


def specs_path() -> Path:
    override = os.environ.get("PERFWH_SKU_SPECS")
    return Path(override) if override else SPECS_PATH


@lru_cache(maxsize=8)
def _load(path: Path) -> dict[tuple[str, str], dict[str, str]]:
    with open(path, newline="", encoding="utf-8") as handle:
        return {(row["sku"], row["dtype"]): row for row in csv.DictReader(handle)}


def sku_rows(path: Path | None = None) -> dict[tuple[str, str], dict[str, str]]:
    """Every row of the seed, keyed by (sku, dtype)."""
    return _load((path or specs_path()).resolve())


def known_skus(path: Path | None = None) -> set[str]:
    return {sku for sku, _ in sku_rows(path)}


def peak_flops(sku: str | None, dtype: str, path: Path | None = None) -> float | None:
    """Dense peak FLOP/s for (sku, dtype); None when the SKU or dtype is unknown (never 0)."""
    if sku is None:
        return None
    row = sku_rows(path).get((sku, dtype))
    if row is None or not row.get("peak_flops_dense"):
        return None
    return float(row["peak_flops_dense"])


def peak_tflops(sku: str | None, dtype: str, path: Path | None = None) -> float | None:
    """Dense peak in TFLOP/s (the unit of the GEMM probe's value); None when unknown."""
    flops = peak_flops(sku, dtype, path)
    return None if flops is None else flops / 1e12


def sku_value(sku: str | None, column: str, path: Path | None = None) -> float | None:
    """A per-SKU column of the seed (the same on every dtype row: HBM, PCIe, NVLink bandwidth, TDP, ...);
    None when the SKU or the value is unknown (never 0)."""
    if sku is None:
        return None
    for (row_sku, _), row in sorted(sku_rows(path).items()):
        if row_sku == sku and row.get(column):
            return float(row[column])
    return None


def sku_dtype_value(sku: str | None, dtype: str, column: str, path: Path | None = None) -> float | None:
    """A per-(SKU, dtype) column of the seed (``peak_flops_dense``, ``peak_sm_clock_mhz``); None when unknown."""
    if sku is None:
        return None
    row = sku_rows(path).get((sku, dtype))
    if row is None or not row.get(column):
        return None
    return float(row[column])
