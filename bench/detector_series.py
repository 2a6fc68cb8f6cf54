"""Seeded, labeled series for the change-point detector benchmark (bench/bench_detectors.py).

Each series is a positive, ratio-like fleet metric (a goodput or MFU-like ratio around 0.3..0.9,
daily or hourly) with multiplicative log-normal noise of CV 1..3 % unless the family says
otherwise, and carries the indices of its true changes: the first point of each new regime (the
convention of our detector, of Otava and of ruptures' breakpoints).

Families (``FAMILIES``), every series 30..90 points unless stated:

* ``none``: no change.
* ``step_1pct`` .. ``step_20pct``: one step of exactly 1, 3, 5, 10 or 20 % of the level, up or
  down (alternating, so half each).
* ``two_steps``: two steps of 5, 10 or 20 % each, random signs, at least 10 points apart.
* ``heavy_tail``: Student t noise (df = 3, scale = the CV, so its SD is sqrt(3) x CV); half the
  series have one step of 5, 10 or 20 %, half none.
* ``outliers``: 1..3 single-point spikes of +-10..30 % (not labeled as changes, kept 3 points away
  from a true change); half with one step of 5, 10 or 20 %, half none.
* ``drift``: a linear drift of +-3..10 % over the whole series (not a change); half with one step
  of 5, 10 or 20 %, half none.
* ``short``: 10..20 points; half with one step of 5, 10 or 20 %, half none.

A true change lies at least ``MARGIN`` (5) points from either end (4 in ``short``). Series ``i``
of family ``f`` is drawn from ``numpy.random.default_rng([seed, f, i])`` alone, so it does not
depend on how many series of other families or other indices are generated. Nothing is written
anywhere; the benchmark keeps everything in memory.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass

import numpy as np

__all__ = [
    "FAMILIES",
    "HELD_OUT_SEED",
    "MARGIN",
    "TUNING_SEED",
    "LabeledSeries",
    "generate",
    "make_series",
]

#: Seed of the series on which thresholds are chosen; results are reported on HELD_OUT_SEED.
TUNING_SEED = 101
HELD_OUT_SEED = 202
#: Smallest distance of a true change from either end of a series (30..90 points).
MARGIN = 5
_SHORT_MARGIN = 4
_STEP_CHOICES = (0.05, 0.10, 0.20)


@dataclass(frozen=True)
class LabeledSeries:
    """One generated series and its ground truth."""

    family: str
    seed: int
    number: int  # index within its family
    cadence: str  # "daily" or "hourly" (a label only; the generator has no seasonality)
    values: tuple[float, ...]
    changes: tuple[int, ...]  # first index of each new regime, ascending
    effects: tuple[float, ...]  # relative step of each change (after / before - 1)

    @property
    def key(self) -> str:
        return f"{self.family}/{self.number}"


def _base(rng: np.random.Generator, n: int, heavy: bool = False) -> tuple[np.ndarray, float]:
    """Level 0.3..0.9 and multiplicative noise of CV 1..3 % (Gaussian or Student t, df 3)."""
    level = rng.uniform(0.3, 0.9)
    cv = rng.uniform(0.01, 0.03)
    z = rng.standard_t(3, n) if heavy else rng.standard_normal(n)
    return level * np.exp(cv * z), cv


def _apply_steps(x: np.ndarray, changes: list[int], effects: list[float]) -> np.ndarray:
    factor = np.ones(x.size)
    for at, effect in zip(changes, effects):
        factor[at:] *= 1.0 + effect
    return x * factor


def _one_step(rng: np.random.Generator, n: int, margin: int = MARGIN) -> int:
    return int(rng.integers(margin, n - margin + 1))


def _signed(rng: np.random.Generator, magnitude: float) -> float:
    return magnitude if rng.random() < 0.5 else -magnitude


def _length(rng: np.random.Generator) -> int:
    return int(rng.integers(30, 91))


def _fixed_step(magnitude: float) -> Callable[[np.random.Generator, int], tuple[np.ndarray, list[int], list[float]]]:
    def make(rng: np.random.Generator, number: int) -> tuple[np.ndarray, list[int], list[float]]:
        n = _length(rng)
        x, _ = _base(rng, n)
        at = _one_step(rng, n)
        effect = magnitude if number % 2 == 0 else -magnitude
        return _apply_steps(x, [at], [effect]), [at], [effect]

    return make


def _none(rng: np.random.Generator, number: int) -> tuple[np.ndarray, list[int], list[float]]:
    x, _ = _base(rng, _length(rng))
    return x, [], []


def _two_steps(rng: np.random.Generator, number: int) -> tuple[np.ndarray, list[int], list[float]]:
    n = _length(rng)
    x, _ = _base(rng, n)
    while True:
        a, b = sorted(int(v) for v in rng.integers(MARGIN, n - MARGIN + 1, 2))
        if b - a >= 10:
            break
    effects = [_signed(rng, float(rng.choice(_STEP_CHOICES))) for _ in range(2)]
    return _apply_steps(x, [a, b], effects), [a, b], effects


def _maybe_step(
    rng: np.random.Generator, number: int, x: np.ndarray, margin: int = MARGIN
) -> tuple[np.ndarray, list[int], list[float]]:
    """Even-numbered series get one step of 5, 10 or 20 % (random sign), odd ones none."""
    if number % 2 == 1:
        return x, [], []
    at = _one_step(rng, x.size, margin)
    effect = _signed(rng, float(rng.choice(_STEP_CHOICES)))
    return _apply_steps(x, [at], [effect]), [at], [effect]


def _heavy_tail(rng: np.random.Generator, number: int) -> tuple[np.ndarray, list[int], list[float]]:
    x, _ = _base(rng, _length(rng), heavy=True)
    return _maybe_step(rng, number, x)


def _outliers(rng: np.random.Generator, number: int) -> tuple[np.ndarray, list[int], list[float]]:
    n = _length(rng)
    x, _ = _base(rng, n)
    x, changes, effects = _maybe_step(rng, number, x)
    allowed = [i for i in range(n) if all(abs(i - c) >= 3 for c in changes)]
    spikes = rng.choice(allowed, size=int(rng.integers(1, 4)), replace=False)
    for i in spikes:
        x[i] *= 1.0 + _signed(rng, rng.uniform(0.10, 0.30))
    return x, changes, effects


def _drift(rng: np.random.Generator, number: int) -> tuple[np.ndarray, list[int], list[float]]:
    n = _length(rng)
    x, _ = _base(rng, n)
    total = _signed(rng, rng.uniform(0.03, 0.10))
    x = x * np.exp(np.log1p(total) * np.arange(n) / (n - 1))
    return _maybe_step(rng, number, x)


def _short(rng: np.random.Generator, number: int) -> tuple[np.ndarray, list[int], list[float]]:
    x, _ = _base(rng, int(rng.integers(10, 21)))
    return _maybe_step(rng, number, x, _SHORT_MARGIN)


#: family name -> generator of (values, changes, effects) from (rng, number within the family)
FAMILIES: dict[str, Callable[[np.random.Generator, int], tuple[np.ndarray, list[int], list[float]]]] = {
    "none": _none,
    "step_1pct": _fixed_step(0.01),
    "step_3pct": _fixed_step(0.03),
    "step_5pct": _fixed_step(0.05),
    "step_10pct": _fixed_step(0.10),
    "step_20pct": _fixed_step(0.20),
    "two_steps": _two_steps,
    "heavy_tail": _heavy_tail,
    "outliers": _outliers,
    "drift": _drift,
    "short": _short,
}


def make_series(family: str, seed: int, number: int) -> LabeledSeries:
    """Series ``number`` of ``family`` for ``seed``; a pure function of the three."""
    names = list(FAMILIES)
    rng = np.random.default_rng([seed, names.index(family), number])
    values, changes, effects = FAMILIES[family](rng, number)
    cadence = "daily" if rng.random() < 0.5 else "hourly"
    return LabeledSeries(
        family=family,
        seed=seed,
        number=number,
        cadence=cadence,
        values=tuple(float(v) for v in values),
        changes=tuple(int(c) for c in changes),
        effects=tuple(float(e) for e in effects),
    )


def generate(seed: int, per_family: int, families: Iterable[str] | None = None) -> list[LabeledSeries]:
    """``per_family`` series of each family (all of ``FAMILIES`` by default), family by family."""
    chosen = list(FAMILIES) if families is None else list(families)
    unknown = sorted(set(chosen) - set(FAMILIES))
    if unknown:
        raise ValueError(f"unknown families {unknown}; known: {list(FAMILIES)}")
    return [make_series(family, seed, i) for family in chosen for i in range(per_family)]
