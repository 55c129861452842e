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

References
----------
``MATH.md``, "The continuous optimum (BASELINE)" and "Numerical traps" 4;
paper 004 §4 (Theorem 1, Lemma 2) and §6 (BASELINE); Azar et al. (2018), the
no-signal problem G(ξ) = (W/Δ)·ξ·(1 − e^{−Δ/ξ}).
"""

from __future__ import annotations

import math
import sys
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np
from scipy.special import gammaincinv

from scheduler_core.errors import ParameterError
from scheduler_core.params import FloatArray, UrlParams
from scheduler_core.value import (
    MAX_THRESHOLD_S,
    crawl_frequency,
    crawl_value,
    freshness_at_threshold,
    threshold_for_value,
)

__all__ = ["Optimum", "baseline", "no_signal_freshness", "solve_optimum"]

#: A rate that differs from f(ι(λ₀)) by more than this (relative) gets its own threshold.
_RATE_RTOL = 1e-10
#: Relative precision of a threshold found from a rate.
_THRESHOLD_RTOL = 1e-13
#: The lower end of the λ₀ bracket shrinks by this factor per step.
_EXPAND = 2.0**-10
#: A few ulps, relative: the least step of the secant, and how far below a
#: URL's W/Δ the jump of Σξ is probed.
_ULPS = 2.0**-50


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


def _between(lo: float, hi: float) -> float | None:
    """A double strictly between ``lo`` and ``hi`` (0 < lo < hi), preferring the log midpoint."""
    mid = math.exp(0.5 * (math.log(lo) + math.log(hi)))
    if lo < mid < hi:
        return mid
    mid = lo + 0.5 * (hi - lo)
    return mid if lo < mid < hi else None


def _secant_step(lo: float, hi: float, f_lo: float, f_hi: float) -> float | None:
    """The regula-falsi point of (lo, f_lo), (hi, f_hi), f_lo ≥ 0 > f_hi; ``None`` if none.

    Interpolates in ln Λ while the bracket is wide.  A point within 1% of the
    bracket from an end is pushed inwards to twice its distance (at least a
    few ulps), so that a root close to that end gets bracketed tightly.
    """
    if not f_lo > f_hi:
        return None
    s = f_lo / (f_lo - f_hi)
    if hi > 2.0 * lo:
        guess = math.exp(math.log(lo) + s * (math.log(hi) - math.log(lo)))
    else:
        guess = lo + s * (hi - lo)
    guess = min(max(guess, lo), hi)
    near = 0.01 * (hi - lo)
    if hi - guess < near:
        guess = hi - max(2.0 * (hi - guess), hi * _ULPS)
    elif guess - lo < near:
        guess = lo + max(2.0 * (guess - lo), lo * _ULPS)
    return guess if lo < guess < hi else None


def _locate_multiplier(
    total_rate: Callable[[float], float], budget: float, cap: float, jumps: FloatArray
) -> tuple[float, float]:
    """Adjacent doubles lo < hi with Σξ(lo) ≥ ``budget`` > Σξ(hi).

    Σξ(``cap``) = 0 for ``cap`` = max W/Δ.  ``jumps`` are the URLs' V(∞) =
    W/Δ, sorted: where Σξ may jump (trap 4).  The lower end is found by
    expansion; then a safeguarded Illinois regula falsi narrows the bracket to
    float resolution, falling back to bisection whenever two steps fail to
    halve it.  A secant creeps onto a jump slowly, so once the bracket holds a
    single W/Δ it probes that value and a few ulps below it (where rounding
    may put the jump).
    """
    hi = cap
    while (g_hi := total_rate(hi) - budget) >= 0:  # Σξ(cap) = 0 but for rounding
        hi *= 2.0
    lo = hi
    while True:
        lo *= _EXPAND
        if lo < sys.float_info.min:
            raise ParameterError(
                "`budget_per_s` exceeds the largest total crawl rate the model resolves"
            )
        g_lo = total_rate(lo) - budget
        if g_lo >= 0:
            break
        hi, g_hi = lo, g_lo
    # Illinois: the secant uses (possibly halved) copies of g at the ends.
    f_lo, f_hi = g_lo, g_hi
    last_side = 0
    stalled = 0
    width = hi - lo
    probed = math.nan
    probes: list[float] = []
    while (mid := _between(lo, hi)) is not None:
        inside = jumps[
            np.searchsorted(jumps, lo, side="right") : np.searchsorted(jumps, hi, "right")
        ]
        if inside.size == 1 and inside[0] != probed:
            probed = float(inside[0])
            probes = [probed, probed * (1.0 - _ULPS)]
        while probes and not lo < probes[0] < hi:
            probes.pop(0)
        if probes:
            lam = probes.pop(0)
        else:
            guess = _secant_step(lo, hi, f_lo, f_hi) if stalled < 2 else None
            lam = mid if guess is None else guess
        g = total_rate(lam) - budget
        if g >= 0:
            lo, f_lo = lam, g
            if last_side == 1:
                f_hi *= 0.5
            last_side = 1
        else:
            hi, f_hi = lam, g
            if last_side == -1:
                f_lo *= 0.5
            last_side = -1
        if lam == mid or hi - lo <= 0.5 * width:
            width, stalled = hi - lo, 0
        else:
            stalled += 1
    return lo, hi


@dataclass(frozen=True, slots=True)
class _Bracket:
    """The solutions at the two ends of the λ₀ bracket, and the interpolated rates."""

    hi: float
    thresholds_lo: FloatArray
    thresholds_hi: FloatArray
    rates_hi: FloatArray
    rates: FloatArray


def _bracket(
    params: UrlParams,
    budget: float,
    thresholds_at: Callable[[float], FloatArray],
    rates_of: Callable[[FloatArray], FloatArray],
    limits: FloatArray,
) -> _Bracket | None:
    """Locate λ₀ and spend the budget exactly; ``None`` when no URL is worth a crawl.

    ``limits`` are the URLs' V(∞), shape (m,): W/Δ, less with truncated sums.
    """
    crawlable = (params.weight > 0) & (params.change_rate > 0)
    if not crawlable.any():
        return None
    cap = float(params.max_value[crawlable].max())
    jumps = np.unique(limits[crawlable])

    def total_rate(lam: float) -> float:
        return float(rates_of(thresholds_at(lam)).sum())

    lo, hi = _locate_multiplier(total_rate, budget, cap, jumps)
    iota_lo, iota_hi = thresholds_at(lo), thresholds_at(hi)
    rates_lo, rates_hi = rates_of(iota_lo), rates_of(iota_hi)
    jump = np.maximum(rates_lo - rates_hi, 0.0)
    share = min(max((budget - float(rates_hi.sum())) / float(jump.sum()), 0.0), 1.0)
    return _Bracket(hi, iota_lo, iota_hi, rates_hi, rates_hi + share * jump)


def _inert(params: UrlParams) -> Optimum:
    """No URL is worth a crawl: nothing is crawled; URLs that never change stay fresh."""
    fresh = np.where(params.change_rate == 0, 1.0, 0.0)
    return Optimum(
        0.0, np.full(params.m, np.inf), np.zeros(params.m), fresh, _accuracy(params, fresh)
    )


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
    budget = _check_budget(budget_per_s)
    w, d = params.weight, params.change_rate
    live = (w > 0) & (d > 0)
    safe_w = np.where(live, w, 1.0)
    safe_d = np.where(live, d, 1.0)
    cap = params.max_value

    def thresholds_at(lam: float) -> FloatArray:
        y = np.minimum(np.where(live, lam * d / safe_w, 1.0), 1.0)
        iota = gammaincinv(2.0, y) / safe_d
        return np.asarray(np.where(lam < cap, iota, np.inf), dtype=np.float64)

    def rates_of(iota: FloatArray) -> FloatArray:
        with np.errstate(divide="ignore"):
            return np.asarray(1.0 / iota, dtype=np.float64)

    found = _bracket(params, budget, thresholds_at, rates_of, cap)
    if found is None:
        return _inert(params)
    rates = found.rates
    with np.errstate(divide="ignore"):
        thresholds = np.where(rates > 0, 1.0 / rates, np.inf)
    fresh = no_signal_freshness(params, rates)
    return Optimum(found.hi, thresholds, rates, fresh, _accuracy(params, fresh))


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
        Thresholds ι_i = V_i⁻¹(λ₀) on τeff (:func:`~scheduler_core.value.threshold_for_value`),
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
        budget exceeds what thresholds down to
        :data:`~scheduler_core.value.MIN_THRESHOLD_S` can spend.

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

    def thresholds_at(lam: float) -> FloatArray:
        return threshold_for_value(params, lam, terms=terms)

    def rates_of(iota: FloatArray) -> FloatArray:
        return crawl_frequency(params, iota, terms=terms)

    limits = params.max_value
    if terms is not None:  # V_J(∞) = (W/Δ)(1 − q^J) < W/Δ
        live = np.flatnonzero((params.weight > 0) & (params.change_rate > 0))
        limits = limits.copy()
        limits[live] = crawl_value(params.take(live), np.full(live.size, np.inf), terms=terms)
    found = _bracket(params, budget, thresholds_at, rates_of, limits)
    if found is None:
        return _inert(params)
    lam0, rates = found.hi, found.rates
    thresholds = found.thresholds_hi.copy()
    fresh = freshness_at_threshold(params, thresholds, terms=terms)
    moved = np.flatnonzero((rates > 0) & (np.abs(rates - found.rates_hi) > _RATE_RTOL * rates))
    if moved.size:
        sub = params.take(moved)
        beta = sub.signal_time_equivalent
        top = np.maximum(MAX_THRESHOLD_S, 64.0 * np.where(np.isfinite(beta), beta, 0.0))
        upper = np.where(np.isfinite(thresholds[moved]), thresholds[moved], top)
        iota = _threshold_for_rate(sub, rates[moved], found.thresholds_lo[moved], upper, terms)
        # G(ξ) = G(f(ι)) + (ξ − f(ι))·λ₀: G′ = V = λ₀ across a step of f at ι.
        extra = rates[moved] - crawl_frequency(sub, iota, terms=terms)
        gained = freshness_at_threshold(sub, iota, terms=terms) + extra * lam0 / sub.weight
        thresholds[moved] = iota
        fresh[moved] = np.clip(gained, 0.0, 1.0)
    return Optimum(lam0, thresholds, rates, fresh, _accuracy(params, fresh))
