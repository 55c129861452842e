"""The continuous optimum without host limits: BASELINE and its version with signals.

Choose per-URL crawl rates ξ_i ≥ 0 with Σ ξ_i = R that maximise the weighted
time-averaged freshness Σ W_i·F_i(ξ_i).  At the optimum every crawled URL is
recrawled when its crawl value reaches λ₀, V_i(ι_i) = λ₀, and URLs with
W_i/Δ_i ≤ λ₀ are not crawled (KKT; ``MATH.md``, "The continuous optimum").

Σξ(Λ) decreases in Λ but jumps where Λ crosses a URL's W/Δ (``MATH.md``,
"Numerical traps" 4): in double precision V(ι) reaches W/Δ at a finite ι, so
the rate falls from about Δ/40 (with signals: up to γ) to 0.  λ₀ is therefore
located to float resolution — adjacent doubles lo < hi with Σξ(lo) ≥ R >
Σξ(hi) — and the rates interpolate between the two solutions,
ξ = ξ(hi) + t·(ξ(lo) − ξ(hi)), so that Σξ = R: in effect the *marginal*
URL(s), whose rate is discontinuous at λ₀, get what remains of the budget.
The search is that of :mod:`scheduler_core.multiplier_search`, shared with
:mod:`scheduler_core.host_optimum`; this module reports the thresholds and
freshness of the marginal URL(s).

References
----------
``MATH.md``, "The continuous optimum (BASELINE)" and "Numerical traps" 4;
paper 004 §4 (Theorem 1, Lemma 2) and §6 (BASELINE); Azar et al. (2018), the
no-signal problem G(ξ) = (W/Δ)·ξ·(1 − e^{−Δ/ξ}).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from scheduler_core.errors import ParameterError
from scheduler_core.multiplier_search import Curves, IntArray, Jumps, locate_multipliers, spend
from scheduler_core.params import FloatArray, UrlParams
from scheduler_core.value import _Model, _threshold_span, crawl_frequency, freshness_at_threshold

__all__ = ["Optimum", "baseline", "no_signal_freshness", "solve_optimum"]

#: A rate that differs from f(ι(λ₀)) by more than this (relative) gets its own threshold.
_RATE_RTOL = 1e-10
#: Relative precision of a threshold found from a rate.
_THRESHOLD_RTOL = 1e-13


@dataclass(frozen=True, slots=True)
class Optimum:
    """The continuous optimum of one world of ``m`` URLs.

    Attributes
    ----------
    lambda0 : float
        λ₀, the Lagrange multiplier of the crawl budget, in value units (W·s):
        the weighted fresh requests one more crawl buys.  0 when no URL is
        worth crawling (the budget is then slack).
    thresholds : ndarray, shape (m,)
        ι_i, the threshold on effective elapsed time τeff, seconds; ``inf`` for
        a URL that is not crawled (and for a marginal URL crawled on a share of
        its signals, see :func:`solve_optimum`).
    rates : ndarray, shape (m,)
        ξ_i, crawls per second; Σ rates = the budget (unless no URL is worth it).
    freshness : ndarray, shape (m,)
        Time-averaged freshness of each URL at its rate, in [0, 1].
    accuracy : float
        Σ W_i·freshness_i / Σ W_i, the share of requests served a fresh copy
        (1.0 if Σ W = 0).
    """

    lambda0: float
    thresholds: FloatArray
    rates: FloatArray
    freshness: FloatArray
    accuracy: float


def no_signal_freshness(params: UrlParams, rates: FloatArray) -> FloatArray:
    """Time-averaged freshness G(ξ)/W = (ξ/Δ)(1 − e^{−Δ/ξ}) of periodic crawling, shape (m,).

    Parameters
    ----------
    params : UrlParams
        ``m`` URLs; only the change rate Δ is used (no signals).
    rates : ndarray, shape (m,)
        ξ, crawls per second, ≥ 0.

    Returns
    -------
    ndarray, shape (m,)
        1 where Δ = 0; 0 where ξ = 0 < Δ.

    References
    ----------
    ``MATH.md``, "The continuous optimum (BASELINE)"; Azar et al. (2018).
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


def _check_budget(budget_per_s: float) -> float:
    budget = float(budget_per_s)
    if not math.isfinite(budget) or budget <= 0:
        raise ParameterError(f"`budget_per_s` must be finite and > 0, got {budget_per_s!r}")
    return budget


def _inert(params: UrlParams) -> Optimum:
    """No URL is worth a crawl: nothing is crawled; URLs that never change stay fresh."""
    fresh = np.where(params.change_rate == 0, 1.0, 0.0)
    return Optimum(
        0.0, np.full(params.m, np.inf), np.zeros(params.m), fresh, _accuracy(params, fresh)
    )


def _finish(
    params: UrlParams,
    curves: Curves,
    value: FloatArray,
    rates: FloatArray,
    rates_hi: FloatArray,
    thresholds_lo: FloatArray,
    thresholds_hi: FloatArray,
) -> tuple[FloatArray, FloatArray]:
    """Thresholds and freshness of the final rates, shape (m,) each.

    ``value`` is each URL's Λ = λ₀ + λ_h (reported multiplier, upper end of
    its bracket); ``rates_hi`` and ``thresholds_hi`` the solution there,
    ``thresholds_lo`` that at the lower end.  Without signals the threshold
    is 1/ξ and the freshness G(ξ)/W.  With signals a URL whose rate moved off
    f(ι(hi)) — a marginal URL — gets the threshold where f crosses ξ and
    freshness F(ι) + (ξ − f(ι))·Λ/W (see :func:`solve_optimum`).
    """
    if not curves.signals:
        with np.errstate(divide="ignore"):
            thresholds = np.where(rates > 0, 1.0 / rates, np.inf)
        return thresholds, no_signal_freshness(params, rates)
    terms = curves.terms
    thresholds = thresholds_hi.copy()
    fresh = freshness_at_threshold(params, thresholds, terms=terms)
    moved = np.flatnonzero((rates > 0) & (np.abs(rates - rates_hi) > _RATE_RTOL * rates))
    if moved.size:
        sub = params.take(moved)
        _, top = _threshold_span(_Model.of(sub))
        upper = np.where(np.isfinite(thresholds[moved]), thresholds[moved], top)
        iota = _threshold_for_rate(sub, rates[moved], thresholds_lo[moved], upper, terms)
        # G(ξ) = G(f(ι)) + (ξ − f(ι))·Λ: G′ = V = Λ across a step of f at ι.
        extra = rates[moved] - crawl_frequency(sub, iota, terms=terms)
        gained = freshness_at_threshold(sub, iota, terms=terms) + extra * value[moved] / sub.weight
        thresholds[moved] = iota
        fresh[moved] = np.clip(gained, 0.0, 1.0)
    return thresholds, fresh


def _solve(params: UrlParams, budget: float, curves: Curves) -> Optimum:
    """Locate λ₀, spend the budget exactly, and report (no host limits)."""
    crawlable = (params.weight > 0) & (params.change_rate > 0)
    if not crawlable.any():
        return _inert(params)
    limits = curves.limits(params)[crawlable]
    jumps = Jumps.of(np.zeros(limits.size, dtype=np.int64), limits, 1)
    cap = np.array([params.max_value[crawlable].max()])

    def total_rate(lam: FloatArray, which: IntArray) -> FloatArray:
        return np.array([curves.rates(params, curves.thresholds(params, float(lam[0]))).sum()])

    lo, hi = (float(x[0]) for x in locate_multipliers(total_rate, np.array([budget]), cap, jumps))
    iota_lo, iota_hi = curves.thresholds(params, lo), curves.thresholds(params, hi)
    rates_hi = curves.rates(params, iota_hi)
    rates = spend(budget, curves.rates(params, iota_lo), rates_hi)
    value = np.full(params.m, hi)
    thresholds, fresh = _finish(params, curves, value, rates, rates_hi, iota_lo, iota_hi)
    return Optimum(hi, thresholds, rates, fresh, _accuracy(params, fresh))


def baseline(params: UrlParams, budget_per_s: float) -> Optimum:
    """BASELINE: the continuous optimum without signals and without host limits.

    Parameters
    ----------
    params : UrlParams
        ``m`` URLs; recall and ν are ignored (the no-signal model, GREEDY).
    budget_per_s : float
        R, crawls per second, finite and > 0.

    Returns
    -------
    Optimum
        For Λ the threshold is ι_i(Λ) = gammaincinv(2, ΛΔ_i/W_i)/Δ_i (``inf``
        where Λ ≥ W_i/Δ_i) and the rate ξ_i = 1/ι_i; λ₀ solves Σ ξ_i(λ₀) = R to
        float resolution, and the marginal URL(s) get what remains of the budget,
        so Σ rates = R to rounding.  Reported thresholds are 1/ξ_i (``inf``
        where ξ_i = 0); freshness is G_i(ξ_i)/W_i = (ξ_i/Δ_i)(1 − e^{−Δ_i/ξ_i}).
        URLs with W = 0 or Δ = 0 get rate 0 and use none of the budget
        (freshness 1 where Δ = 0).

    Raises
    ------
    ParameterError
        If ``budget_per_s`` is not finite and positive.

    References
    ----------
    ``MATH.md``, "The continuous optimum (BASELINE)" and "Numerical traps" 4;
    paper 004 §6 (BASELINE); Azar et al. (2018).

    Examples
    --------
    >>> opt = baseline(UrlParams.create(weight=1.0, change_rate=1.0), 1.0)
    >>> float(opt.rates[0]), round(opt.accuracy, 6)  # 1 − 1/e
    (1.0, 0.632121)
    >>> round(opt.lambda0, 6)  # V(1 s) = 1 − 2/e
    0.264241
    """
    return _solve(params, _check_budget(budget_per_s), Curves(signals=False))


def _threshold_for_rate(
    params: UrlParams, rates: FloatArray, lower: FloatArray, upper: FloatArray, terms: int | None
) -> FloatArray:
    """ι with f(ι) = ξ by bisection on ln ι within [lower, upper], shape (n,).

    f(lower) ≥ ξ is assumed (f decreases, paper 004 Lemma 2); ``inf`` where
    f(upper) > ξ (no finite threshold crawls that rarely).
    """
    lo, hi = lower.copy(), upper.copy()
    reachable = crawl_frequency(params, hi, terms=terms) <= rates
    while True:
        todo = np.flatnonzero(reachable & (hi > lo * (1.0 + _THRESHOLD_RTOL)))
        if todo.size == 0:
            break
        mid = np.exp(0.5 * (np.log(lo[todo]) + np.log(hi[todo])))
        fast = crawl_frequency(params.take(todo), mid, terms=terms) > rates[todo]
        lo[todo[fast]] = mid[fast]
        hi[todo[~fast]] = mid[~fast]
    return np.where(reachable, hi, np.inf)


def solve_optimum(params: UrlParams, budget_per_s: float, *, terms: int | None = None) -> Optimum:
    """The continuous optimum with signals (GREEDY-NCIS values), without host limits.

    Parameters
    ----------
    params : UrlParams
        ``m`` URLs with their signal recall and false-signal rate.
    budget_per_s : float
        R, crawls per second, finite and > 0.
    terms : int, optional
        NCIS-APPROX-J truncation of the value sums (``None``: exact).

    Returns
    -------
    Optimum
        Thresholds ι_i = V_i⁻¹(λ₀) on τeff (:func:`~scheduler_core.threshold.threshold_for_value`),
        rates f_i(ι_i) = 1/ψ_i(ι_i) and freshness w_i/ψ_i, with λ₀ solving
        Σ f_i = R to float resolution (the marginal URL(s) get what remains,
        so Σ rates = R to rounding).  A URL whose rate ξ lies strictly between
        f(ι(lo)) and f(ι(hi)) — the marginal URL(s) — gets the threshold where
        f crosses ξ (a root search; f may step there, e.g. at the K-th signal
        when recall → 1) and freshness F(ι) + (ξ − f(ι))·λ₀/W: at λ₀ a unit of
        rate gains λ₀ (V is the marginal gain), so this is exact to rounding
        when λ₀ = W/Δ, the usual case.  When no finite threshold crawls that
        rarely — with signals and no false ones f(ι) ≥ γ — ι stays ``inf``
        (the URL is crawled on a share ξ/γ of its signals) and its freshness
        is ξ·λ₀/W = ξ/Δ.  Equal to :func:`baseline` when
        no URL has signals.

    Raises
    ------
    ParameterError
        If ``budget_per_s`` is not finite and positive, ``terms < 1``, or the
        budget exceeds what the smallest thresholds searched can spend
        (:data:`~scheduler_core.value.THRESHOLD_SPAN`).

    References
    ----------
    ``MATH.md``, "The continuous optimum (BASELINE)" and "Numerical traps" 3–4;
    paper 004, Theorem 1 and Lemma 2 (V and f monotone).
    """
    budget = _check_budget(budget_per_s)
    if terms is not None and terms < 1:
        raise ParameterError("`terms` must be >= 1 (or None for the exact sums)")
    if not (params.signal_rate > 0).any():
        return baseline(params, budget)

    return _solve(params, budget, Curves(signals=True, terms=terms))
