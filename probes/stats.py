"""Summary statistics of per-iteration samples (reference probes.md section 4)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Sequence

import numpy as np

BOOTSTRAP_RESAMPLES = 2000
BOOTSTRAP_SEED = 20261101
CONFIDENCE = 0.95


@dataclass(frozen=True)
class Summary:
    median: float
    iqr: float
    ci_low: float
    ci_high: float
    n: int


def summarize(samples: Sequence[float], *, resamples: int = BOOTSTRAP_RESAMPLES, seed: int = BOOTSTRAP_SEED) -> Summary:
    """Median, IQR (q3 - q1, numpy's linear percentiles) and a 95% CI of the median.

    The CI is a **percentile bootstrap** of the median: ``resamples`` (2000) resamples with replacement
    drawn by ``numpy.random.default_rng(seed)`` with a fixed seed, so the same samples always give the
    same interval; the CI is the 2.5th and 97.5th percentiles of the resampled medians. The interval
    is widened, if ever needed, to contain the sample median, so ``ci_low <= median <= ci_high`` always
    holds. One sample gives a zero-width interval. The samples are autocorrelated in practice (clock and
    thermal drift), so the interval is optimistic; across runs, aggregate one median per process.
    """
    values = np.asarray(samples, dtype=float)
    if values.ndim != 1 or values.size == 0:
        raise ValueError("summarize needs a non-empty 1-D sequence of samples")
    if not np.all(np.isfinite(values)):
        raise ValueError("samples must be finite")
    median = float(np.median(values))
    q1, q3 = np.percentile(values, [25, 75])
    if values.size == 1:
        low = high = median
    else:
        rng = np.random.default_rng(seed)
        picks = rng.integers(0, values.size, size=(resamples, values.size))
        medians = np.median(values[picks], axis=1)
        tail = (1.0 - CONFIDENCE) / 2.0
        low, high = (float(x) for x in np.percentile(medians, [100 * tail, 100 * (1 - tail)]))
    return Summary(
        median=median,
        iqr=float(q3 - q1),
        ci_low=min(low, median),
        ci_high=max(high, median),
        n=int(values.size),
    )


def extras(samples: Sequence[float]) -> dict[str, float | None]:
    """The further descriptors section 4 asks for, for the context: quartiles, p5/p95, min/max,
    ``iqr_rel = iqr / median`` (the noise flag's input) and ``drift = median(second half) /
    median(first half)`` (below 0.97 for a throughput: droop within the run)."""
    values = np.asarray(samples, dtype=float)
    if values.size == 0:
        return {}
    q1, q3, p5, p95 = (float(x) for x in np.percentile(values, [25, 75, 5, 95]))
    median = float(np.median(values))
    half = values.size // 2
    drift = (
        float(np.median(values[half:]) / np.median(values[:half])) if half >= 1 and np.median(values[:half]) else None
    )
    return {
        "q1": q1,
        "q3": q3,
        "p5": p5,
        "p95": p95,
        "min": float(values.min()),
        "max": float(values.max()),
        "iqr_rel": (q3 - q1) / median if median else None,
        "drift": drift,
    }
