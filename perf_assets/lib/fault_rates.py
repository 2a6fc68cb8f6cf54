"""Excess fault rates: an entity (node, rack) whose faults per node-day exceed its peers', and since when.

A bad hardware batch shows as scattered one-day availability dips (a node down for a few hours on some
days), which a mean-shift scan over 28 days cannot separate from chance, and whose rate change in time is
not testable either when it begins early in the window (seven faults from day 5 of 28: no events in the
first days has probability (23/28)^7 = 0.25 under a constant rate). Compared with its peers it is plain:
two nodes with 7 faults in 56 node-days against 2 in 308 for the rest of the fleet.

Test: conditional on the fleet's total ``k + K`` faults, under equal rates the entity's count is binomial
with the entity's share of the exposure, ``k ~ Bin(k + K, e / (e + M))`` (``e``, ``M`` node-days of the
entity and of the rest): the exact one-sided p-value ``P(X >= k)``. The rate ratio ``(k / e) / (K / M)``
gets the Clopper-Pearson interval of the binomial share mapped to a ratio. The caller adjusts across
entities (Benjamini-Hochberg).

Onset: the day ``tau`` maximizing the Poisson likelihood of the entity's daily counts with the peers' rate
before ``tau`` and its own maximum-likelihood rate from ``tau`` on. With a low peer rate it lands on the first
excess fault, so it lags the true onset by the wait for that fault (on average 1 / rate). The peer rate is
floored at half an event over the peers' exposure so that one early fault does not make the likelihood
-inf before it. ``start`` corrects that lag: given ``k`` faults from the onset ``tau`` to the window's end
``T``, their times are uniform on ``[tau, T]`` and the first has expectation ``tau + (T - tau) / (k + 1)``,
so ``tau = ((k + 1) t_1 - T) / k`` is unbiased (``t_1`` the first fault, taken at the middle of its day;
floored to a day, at most ``onset``). Its error is still that of one waiting time (two nodes failing at 0.2
a day: a standard deviation of about 2.5 days). A corrected onset on or before the window's first day says
the rate may have been high from before the window, which the window cannot place: ``start`` is then the
first excess fault, the latest onset the data allow. Pure numpy + scipy, no I/O.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
from scipy import stats

PEER_RATE_FLOOR_EVENTS = 0.5


@dataclass(frozen=True)
class ExcessRate:
    events: int  # k: the entity's faults in the window
    exposure: float  # e: its node-days
    peer_events: int  # K
    peer_exposure: float  # M
    rate: float  # k / e
    peer_rate: float  # K / M
    rate_ratio: float  # (k / e) / (K / M); inf when K = 0
    ci_low: float  # of the rate ratio (Clopper-Pearson on the binomial share)
    ci_high: float
    p_value: float  # exact one-sided binomial P(X >= k)
    onset: int  # index of the onset day (into the counts given): the maximum likelihood, the first excess fault
    start: int  # the onset corrected for the wait for the first fault (unbiased under uniform arrivals)
    events_after_onset: int
    exposure_after_onset: float


def excess_rate(
    counts: np.ndarray, exposure: np.ndarray, peer_events: float, peer_exposure: float, confidence: float = 0.95
) -> ExcessRate | None:
    """The entity's daily ``counts`` over ``exposure`` (node-days per day; NaN unknown) against its peers'
    totals. None when the entity has no event or no exposure is known."""
    c = np.asarray(counts, dtype=float)
    e = np.asarray(exposure, dtype=float)
    known = np.isfinite(c) & np.isfinite(e) & (e > 0)
    c, e = np.where(known, c, 0.0), np.where(known, e, 0.0)
    k, exp_total = int(round(c.sum())), float(e.sum())
    big_k, big_m = int(round(peer_events)), float(peer_exposure)
    if k == 0 or exp_total <= 0 or big_m <= 0:
        return None
    n = k + big_k
    share = exp_total / (exp_total + big_m)
    p = float(stats.binom.sf(k - 1, n, share))
    alpha = 1.0 - confidence
    lo = float(stats.beta.ppf(alpha / 2, k, n - k + 1)) if k > 0 else 0.0
    hi = float(stats.beta.ppf(1 - alpha / 2, k + 1, n - k)) if k < n else 1.0

    def ratio(pi: float) -> float:
        return math.inf if pi >= 1.0 else pi / (1.0 - pi) * big_m / exp_total

    peer_rate = big_k / big_m
    base = max(big_k, PEER_RATE_FLOOR_EVENTS) / big_m
    # log-likelihood per onset tau: peers' rate on days < tau, the entity's own MLE rate from tau on
    before_ll = np.concatenate([[0.0], np.cumsum(c * math.log(base) - base * e)])
    after_k = k - np.concatenate([[0.0], np.cumsum(c)])
    after_e = exp_total - np.concatenate([[0.0], np.cumsum(e)])
    with np.errstate(divide="ignore", invalid="ignore"):
        after_ll = np.where(after_k > 0, after_k * np.log(after_k / after_e) - after_k, 0.0)
    ll = np.where((after_e > 0) & (after_k > 0), before_ll + after_ll, -np.inf)[: c.size]
    onset = int(np.argmax(ll))
    k_after = float(after_k[onset])
    corrected = ((k_after + 1) * (onset + 0.5) - c.size) / k_after
    start = int(min(onset, math.floor(corrected))) if corrected >= 1 else onset
    return ExcessRate(
        events=k,
        exposure=exp_total,
        peer_events=big_k,
        peer_exposure=big_m,
        rate=k / exp_total,
        peer_rate=peer_rate,
        rate_ratio=(k / exp_total) / peer_rate if peer_rate > 0 else math.inf,
        ci_low=ratio(lo),
        ci_high=ratio(hi),
        p_value=p,
        onset=onset,
        start=start,
        events_after_onset=int(round(after_k[onset])),
        exposure_after_onset=float(after_e[onset]),
    )
