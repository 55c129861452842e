"""The continuous optimum without host limits: BASELINE and its version with signals.

Choose per-URL crawl rates ξ_i ≥ 0 with Σ ξ_i = R that maximise the
weighted time-averaged freshness Σ W_i·F_i(ξ_i).  At the optimum every crawled
URL has crawl value V_i(ι_i) = λ₀ at its threshold ι_i, and URLs with
W_i/Δ_i ≤ λ₀ are not crawled (KKT; ``MATH.md``, "The continuous optimum").
Σξ(λ₀) decreases in λ₀ but jumps where λ₀ crosses a URL's W/Δ (trap 4): λ₀ is
bisected to float resolution and the *marginal* URLs — those whose rate is
discontinuous at λ₀ — share what remains of the budget.

References
----------
``MATH.md``, "The continuous optimum (BASELINE)" and "Numerical traps" 4;
paper 004 §4 and §6 (BASELINE); Azar et al. (2018), the no-signal problem
G(ξ) = (W/Δ)·ξ·(1 − e^{−Δ/ξ}).
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np
from scipy.special import gammaincinv

from scheduler_core.errors import ParameterError
from scheduler_core.params import FloatArray, UrlParams
from scheduler_core.value import crawl_frequency, freshness_at_threshold, threshold_for_value

__all__ = ["Optimum", "baseline", "no_signal_freshness", "solve_optimum"]


@dataclass(frozen=True, slots=True)
class Optimum:
    """The continuous optimum of one world.

    Attributes
    ----------
    lambda0 : float
        λ₀, the Lagrange multiplier of the crawl budget: the crawl value (W·s,
        weighted fresh requests per crawl) of one more crawl per second.
    thresholds : ndarray, shape (m,)
        ι_i, seconds of effective elapsed time between crawls (``inf``: never).
    rates : ndarray, shape (m,)
        ξ_i, crawls per second; Σ rates = the budget.
    freshness : ndarray, shape (m,)
        Time-averaged freshness of each URL at its rate.
    accuracy : float
        Σ W_i·freshness_i / Σ W_i: the share of requests served fresh (1 if ΣW = 0).
    """

    lambda0: float
    thresholds: FloatArray
    rates: FloatArray
    freshness: FloatArray
    accuracy: float


def no_signal_freshness(params: UrlParams, rates: FloatArray) -> FloatArray:
    """Time-averaged freshness (ξ/Δ)(1 − e^{−Δ/ξ}) of URLs crawled at ``rates`` (1/s), (m,).

    1 where Δ = 0; 0 where ξ = 0 < Δ.  Periodic crawling at rate ξ, no signals
    (Azar et al.; ``MATH.md``, "The continuous optimum").
    """
    d = params.change_rate
    with np.errstate(divide="ignore", invalid="ignore"):
        ratio = np.where(rates > 0, d / rates, np.inf)
        f = np.where(ratio > 0, -np.expm1(-ratio) / ratio, 1.0)
    f = np.where(np.isinf(ratio), 0.0, f)
    return np.asarray(np.where(d == 0, 1.0, f), dtype=np.float64)


def _accuracy(params: UrlParams, freshness: FloatArray) -> float:
    total = float(params.weight.sum())
    return float(params.weight @ freshness / total) if total > 0 else 1.0


def _check_budget(budget_per_s: float) -> None:
    if not math.isfinite(budget_per_s) or budget_per_s <= 0:
        raise ParameterError("`budget_per_s` must be finite and > 0")


def _bisect(total_rate: Callable[[float], float], budget: float, cap: float) -> tuple[float, float]:
    """(lo, hi) around λ₀ with Σξ(lo) ≥ budget > Σξ(hi), hi/lo − 1 at float resolution."""
    hi = cap
    lo = cap * 2.0**-60
    while total_rate(lo) < budget:
        lo *= 2.0**-60
        if lo < 1e-300:
            raise ParameterError("budget exceeds what any crawl rate can use")
    for _ in range(2000):
        mid = math.sqrt(lo * hi)
        if not lo < mid < hi:
            break
        if total_rate(mid) >= budget:
            lo = mid
        else:
            hi = mid
    return lo, hi


def _solve(
    params: UrlParams,
    budget: float,
    rates_at: Callable[[float], FloatArray],
    thresholds_at: Callable[[float], FloatArray],
    freshness_of: Callable[[FloatArray, FloatArray, np.ndarray], FloatArray],
) -> Optimum:
    """Bisect λ₀ so that Σ rates = ``budget``; ``freshness_of(rates, ι, marginal)``."""
    crawlable = (params.weight > 0) & (params.change_rate > 0)
    if not crawlable.any():
        zeros = np.zeros(params.m)
        fresh = freshness_of(zeros, np.full(params.m, np.inf), np.zeros(params.m, dtype=bool))
        return Optimum(0.0, np.full(params.m, np.inf), zeros, fresh, _accuracy(params, fresh))
    cap = float(params.max_value[crawlable].max())

    def total(lam: float) -> float:
        return float(rates_at(lam).sum())

    lo, hi = _bisect(total, budget, cap)
    rates_lo, rates_hi = rates_at(lo), rates_at(hi)
    # Marginal URLs: their rate drops between lo and hi; they share what is left.
    leftover = budget - float(rates_hi.sum())
    jump = rates_lo - rates_hi
    share = jump / jump.sum() if jump.sum() > 0 else np.zeros(params.m)
    rates = rates_hi + share * max(leftover, 0.0)
    iota = thresholds_at(hi)
    fresh = freshness_of(rates, iota, share > 0)
    return Optimum(hi, iota, rates, fresh, _accuracy(params, fresh))


def baseline(params: UrlParams, budget_per_s: float) -> Optimum:
    """BASELINE: the continuous optimum without signals and without host limits.

    Parameters
    ----------
    params : UrlParams
        ``m`` URLs; recall and ν are ignored (the no-signal model).
    budget_per_s : float
        R, crawls per second, > 0.

    Returns
    -------
    Optimum
        ι_i = gammaincinv(2, λ₀Δ_i/W_i)/Δ_i and ξ_i = 1/ι_i for URLs with
        W_i/Δ_i > λ₀; Σ ξ_i = R to float resolution; the marginal URL (trap 4)
        gets the remaining rate (its reported threshold is that at λ₀, ``inf``).
        URLs with W = 0 or Δ = 0 get rate 0.

    Raises
    ------
    ParameterError
        If ``budget_per_s`` is not finite and positive.

    References
    ----------
    ``MATH.md``, "The continuous optimum (BASELINE)", "Numerical traps" 4;
    paper 004 §6 (BASELINE); Azar et al. (2018).
    """
    _check_budget(budget_per_s)
    w, d = params.weight, params.change_rate
    live = (w > 0) & (d > 0)
    safe_w = np.where(live, w, 1.0)

    def thresholds_at(lam: float) -> FloatArray:
        y = np.where(live, lam * d / safe_w, 1.0)
        with np.errstate(divide="ignore", invalid="ignore"):
            iota = np.where(y < 1.0, gammaincinv(2.0, np.minimum(y, 1.0)) / d, np.inf)
        return np.asarray(np.where(live, iota, np.inf), dtype=np.float64)

    def rates_at(lam: float) -> FloatArray:
        with np.errstate(divide="ignore"):
            return np.asarray(1.0 / thresholds_at(lam), dtype=np.float64)

    return _solve(
        params,
        budget_per_s,
        rates_at,
        thresholds_at,
        lambda rates, _iota, _marginal: no_signal_freshness(params, rates),
    )


def solve_optimum(params: UrlParams, budget_per_s: float, *, terms: int | None = None) -> Optimum:
    """The continuous optimum with signals (GREEDY-NCIS values), without host limits.

    Parameters
    ----------
    params : UrlParams
        ``m`` URLs with their signal recall and false-signal rate.
    budget_per_s : float
        R, crawls per second, > 0.
    terms : int, optional
        NCIS-APPROX-J truncation of the value sums (``None``: exact).

    Returns
    -------
    Optimum
        Thresholds ι_i = V_i⁻¹(λ₀) on τeff, rates f_i(ι_i) = 1/ψ_i(ι_i), and the
        freshness w_i/ψ_i.  A marginal URL whose threshold jumps to ∞ at λ₀ gets
        the remaining rate; its freshness is approximated by crawling it
        periodically at that rate (the no-signal formula, a lower bound).  Equal
        to :func:`baseline` when no URL has signals.

    Raises
    ------
    ParameterError
        If ``budget_per_s`` is not finite and positive.

    References
    ----------
    ``MATH.md``, "The continuous optimum (BASELINE)"; paper 004, Theorem 1 and
    Lemma 2 (V and f monotone).
    """
    _check_budget(budget_per_s)
    if not (params.signal_rate > 0).any():
        return baseline(params, budget_per_s)

    def thresholds_at(lam: float) -> FloatArray:
        return threshold_for_value(params, lam, terms=terms)

    def rates_at(lam: float) -> FloatArray:
        return crawl_frequency(params, thresholds_at(lam), terms=terms)

    def freshness_of(rates: FloatArray, iota: FloatArray, marginal: np.ndarray) -> FloatArray:
        exact = freshness_at_threshold(params, iota, terms=terms)
        return np.where(marginal, no_signal_freshness(params, rates), exact)

    return _solve(params, budget_per_s, rates_at, thresholds_at, freshness_of)
