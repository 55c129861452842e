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
The search is vectorised over many such problems; :mod:`scheduler_core.host_optimum`
runs it for the per-host multipliers λ_h of all binding hosts at once.

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
from numpy.typing import ArrayLike, NDArray
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

IntArray = NDArray[np.int64]

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


@dataclass(frozen=True, slots=True)
class _Curves:
    """ι(Λ) = V⁻¹(Λ) and f(ι) of one model: GREEDY in closed form, or GREEDY-NCIS.

    Both are vectorised over URLs; Λ may be one value or one per URL.
    """

    signals: bool
    terms: int | None = None

    def thresholds(self, params: UrlParams, lam: float | FloatArray) -> FloatArray:
        """ι_i(Λ_i) in seconds, shape (m,); ``inf`` where Λ_i ≥ V_i(∞)."""
        if self.signals:
            return threshold_for_value(params, lam, terms=self.terms)
        w, d = params.weight, params.change_rate
        live = (w > 0) & (d > 0)
        cap = params.max_value
        y = np.minimum(np.where(live, lam * d / np.where(live, w, 1.0), 1.0), 1.0)
        iota = gammaincinv(2.0, y) / np.where(live, d, 1.0)
        return np.asarray(np.where(lam < cap, iota, np.inf), dtype=np.float64)

    def rates(self, params: UrlParams, thresholds: FloatArray) -> FloatArray:
        """f_i(ι_i) in crawls per second, shape (m,); 0 where ι = ∞."""
        if self.signals:
            return crawl_frequency(params, thresholds, terms=self.terms)
        with np.errstate(divide="ignore"):
            return np.asarray(1.0 / thresholds, dtype=np.float64)

    def limits(self, params: UrlParams) -> FloatArray:
        """V_i(∞), shape (m,): W/Δ, less with truncated sums; where Σξ(Λ) may jump."""
        limits = params.max_value
        if self.signals and self.terms is not None:  # V_J(∞) = (W/Δ)(1 − q^J) < W/Δ
            live = np.flatnonzero((params.weight > 0) & (params.change_rate > 0))
            limits = limits.copy()
            ends = np.full(live.size, np.inf)
            limits[live] = crawl_value(params.take(live), ends, terms=self.terms)
        return limits


@dataclass(frozen=True, slots=True)
class _Jumps:
    """Where each of n totals Σξ_j(Λ) may jump: the distinct V(∞) of its URLs.

    ``problem`` and ``values``, shape (k,), are sorted by problem, then value;
    ``start``, shape (n,), is the first index of each problem.
    """

    problem: IntArray
    values: FloatArray
    start: IntArray

    @classmethod
    def of(cls, problem: ArrayLike, values: ArrayLike, n: int) -> _Jumps:
        p, v = np.asarray(problem, dtype=np.int64), np.asarray(values, dtype=np.float64)
        order = np.lexsort((v, p))
        p, v = p[order], v[order]
        keep = np.ones(p.size, dtype=bool)
        keep[1:] = (p[1:] != p[:-1]) | (v[1:] != v[:-1])
        p, v = p[keep], v[keep]
        return cls(p, v, np.searchsorted(p, np.arange(n)).astype(np.int64))

    def count_at_most(self, x: FloatArray) -> IntArray:
        """How many of each problem's values are ≤ x_j, shape (n,)."""
        below = self.problem[self.values <= x[self.problem]]
        return np.bincount(below, minlength=self.start.size).astype(np.int64)


def _between(lo: FloatArray, hi: FloatArray) -> FloatArray:
    """A double strictly between lo and hi (0 < lo < hi), preferably the log midpoint; else NaN."""
    with np.errstate(divide="ignore", invalid="ignore"):
        mid = np.exp(0.5 * (np.log(lo) + np.log(hi)))
        plain = lo + 0.5 * (hi - lo)
    plain = np.where((lo < plain) & (plain < hi), plain, np.nan)
    return np.asarray(np.where((lo < mid) & (mid < hi), mid, plain), dtype=np.float64)


def _secant_steps(lo: FloatArray, hi: FloatArray, f_lo: FloatArray, f_hi: FloatArray) -> FloatArray:
    """The regula-falsi points of (lo, f_lo), (hi, f_hi), f_lo ≥ 0 > f_hi; NaN where none.

    Interpolates in ln Λ while the bracket is wide.  A point within 1% of the
    bracket from an end is pushed inwards to twice its distance (at least a
    few ulps), so that a root close to that end gets bracketed tightly.
    """
    with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
        s = f_lo / (f_lo - f_hi)
        log_guess = np.exp(np.log(lo) + s * (np.log(hi) - np.log(lo)))
        guess = np.where(hi > 2.0 * lo, log_guess, lo + s * (hi - lo))
        guess = np.minimum(np.maximum(guess, lo), hi)
        near = 0.01 * (hi - lo)
        down = hi - np.maximum(2.0 * (hi - guess), hi * _ULPS)
        up = lo + np.maximum(2.0 * (guess - lo), lo * _ULPS)
        guess = np.where(hi - guess < near, down, np.where(guess - lo < near, up, guess))
    ok = (f_lo > f_hi) & (lo < guess) & (guess < hi)
    return np.asarray(np.where(ok, guess, np.nan), dtype=np.float64)


#: Σξ_j(Λ_j) for the problems ``which`` (indices, shape (k,)) at Λ (shape (k,)).
_TotalRates = Callable[[FloatArray, IntArray], FloatArray]


def _expand(
    total_rates: _TotalRates, targets: FloatArray, caps: FloatArray, argument: str
) -> tuple[FloatArray, FloatArray, FloatArray, FloatArray]:
    """A first bracket (lo, hi, g(lo) ≥ 0, g(hi) < 0) of g = Σξ − target, from ``caps`` down."""
    hi = np.array(caps, dtype=np.float64)
    g_hi = total_rates(hi, np.arange(hi.size)) - targets
    while (more := np.flatnonzero(g_hi >= 0)).size:  # Σξ(cap) = 0 but for rounding
        hi[more] *= 2.0
        g_hi[more] = total_rates(hi[more], more) - targets[more]
    lo, g_lo = hi.copy(), g_hi.copy()
    pending = np.arange(hi.size)
    while pending.size:
        lo[pending] *= _EXPAND
        if (lo[pending] < sys.float_info.min).any():
            raise ParameterError(
                f"`{argument}` exceeds the largest total crawl rate the model resolves"
            )
        g = total_rates(lo[pending], pending) - targets[pending]
        g_lo[pending] = g
        short = pending[g < 0]
        hi[short], g_hi[short] = lo[short], g_lo[short]
        pending = short
    return lo, hi, g_lo, g_hi


def _locate_multipliers(
    total_rates: _TotalRates,
    targets: FloatArray,
    caps: FloatArray,
    jumps: _Jumps,
    *,
    start: tuple[FloatArray, FloatArray, FloatArray, FloatArray] | None = None,
    argument: str = "budget_per_s",
) -> tuple[FloatArray, FloatArray]:
    """Adjacent doubles lo_j < hi_j with Σξ_j(lo_j) ≥ target_j > Σξ_j(hi_j), shape (n,) each.

    Solves n problems at once, each Σξ_j decreasing in Λ with Σξ_j(cap_j) =
    0; ``jumps`` holds where each may jump (trap 4).  The bracket comes from
    ``start`` — (lo, hi, g(lo), g(hi)) with g = Σξ − target — or by expansion
    from ``caps`` down (``argument`` names the input blamed when that fails).
    Then a safeguarded Illinois regula falsi narrows each bracket to float
    resolution, falling back to bisection whenever two steps fail to halve
    it.  A secant creeps onto a jump slowly, so once a bracket holds a single
    V(∞) it probes that value and a few ulps below it (where rounding may put
    the jump).
    """
    if start is None:
        start = _expand(total_rates, targets, caps, argument)
    lo, hi, f_lo, f_hi = (np.array(a, dtype=np.float64) for a in start)
    n = lo.size
    # Illinois: the secant uses (possibly halved) copies of g at the ends.
    last_side = np.zeros(n, dtype=np.int8)
    stalled = np.zeros(n, dtype=np.int64)
    width = hi - lo
    probed = np.full(n, np.nan)
    probes = np.full((n, 2), np.nan)  # queued probe points, NaN = none
    last = jumps.values.size - 1
    while (active := np.isfinite(mid := _between(lo, hi))).any():
        below = jumps.count_at_most(lo)
        single = jumps.count_at_most(hi) - below == 1
        value = jumps.values[np.minimum(jumps.start + below, last)] if last >= 0 else probed
        new = active & single & (value != probed)
        probed[new] = value[new]
        probes[new] = np.stack([value[new], value[new] * (1.0 - _ULPS)], axis=1)
        for _ in range(2):  # drop queued probes that left the bracket
            gone = ~((lo < probes[:, 0]) & (probes[:, 0] < hi))
            probes[gone] = np.stack([probes[gone, 1], np.full(int(gone.sum()), np.nan)], axis=1)
        probe = active & np.isfinite(probes[:, 0])
        guess = np.where(stalled < 2, _secant_steps(lo, hi, f_lo, f_hi), np.nan)
        lam = np.where(probe, probes[:, 0], np.where(np.isfinite(guess), guess, mid))
        probes[probe] = np.stack([probes[probe, 1], np.full(int(probe.sum()), np.nan)], axis=1)
        which = np.flatnonzero(active)
        g = np.full(n, np.nan)
        g[which] = total_rates(lam[which], which) - targets[which]
        up, down = active & (g >= 0), active & (g < 0)
        lo, f_lo = np.where(up, lam, lo), np.where(up, g, f_lo)
        f_hi = np.where(up & (last_side == 1), 0.5 * f_hi, f_hi)
        hi, f_hi = np.where(down, lam, hi), np.where(down, g, f_hi)
        f_lo = np.where(down & (last_side == -1), 0.5 * f_lo, f_lo)
        last_side = np.where(up, 1, np.where(down, -1, last_side)).astype(np.int8)
        progress = active & ((lam == mid) | (hi - lo <= 0.5 * width))
        width = np.where(progress, hi - lo, width)
        stalled = np.where(progress, 0, np.where(active, stalled + 1, stalled))
    return lo, hi


def _spend(budget: float, rates_lo: FloatArray, rates_hi: FloatArray) -> FloatArray:
    """ξ = ξ(hi) + t·(ξ(lo) − ξ(hi)) with t ∈ [0, 1] chosen so that Σξ = ``budget``."""
    jump = np.maximum(rates_lo - rates_hi, 0.0)
    total = float(jump.sum())
    share = min(max((budget - float(rates_hi.sum())) / total, 0.0), 1.0) if total > 0 else 0.0
    return np.asarray(rates_hi + share * jump, dtype=np.float64)


def _inert(params: UrlParams) -> Optimum:
    """No URL is worth a crawl: nothing is crawled; URLs that never change stay fresh."""
    fresh = np.where(params.change_rate == 0, 1.0, 0.0)
    return Optimum(
        0.0, np.full(params.m, np.inf), np.zeros(params.m), fresh, _accuracy(params, fresh)
    )


def _finish(
    params: UrlParams,
    curves: _Curves,
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
        beta = sub.signal_time_equivalent
        top = np.maximum(MAX_THRESHOLD_S, 64.0 * np.where(np.isfinite(beta), beta, 0.0))
        upper = np.where(np.isfinite(thresholds[moved]), thresholds[moved], top)
        iota = _threshold_for_rate(sub, rates[moved], thresholds_lo[moved], upper, terms)
        # G(ξ) = G(f(ι)) + (ξ − f(ι))·Λ: G′ = V = Λ across a step of f at ι.
        extra = rates[moved] - crawl_frequency(sub, iota, terms=terms)
        gained = freshness_at_threshold(sub, iota, terms=terms) + extra * value[moved] / sub.weight
        thresholds[moved] = iota
        fresh[moved] = np.clip(gained, 0.0, 1.0)
    return thresholds, fresh


def _solve(params: UrlParams, budget: float, curves: _Curves) -> Optimum:
    """Locate λ₀, spend the budget exactly, and report (no host limits)."""
    crawlable = (params.weight > 0) & (params.change_rate > 0)
    if not crawlable.any():
        return _inert(params)
    limits = curves.limits(params)[crawlable]
    jumps = _Jumps.of(np.zeros(limits.size, dtype=np.int64), limits, 1)
    cap = np.array([params.max_value[crawlable].max()])

    def total_rate(lam: FloatArray, which: IntArray) -> FloatArray:
        return np.array([curves.rates(params, curves.thresholds(params, float(lam[0]))).sum()])

    lo, hi = (float(x[0]) for x in _locate_multipliers(total_rate, np.array([budget]), cap, jumps))
    iota_lo, iota_hi = curves.thresholds(params, lo), curves.thresholds(params, hi)
    rates_hi = curves.rates(params, iota_hi)
    rates = _spend(budget, curves.rates(params, iota_lo), rates_hi)
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
    return _solve(params, _check_budget(budget_per_s), _Curves(signals=False))


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

    return _solve(params, budget, _Curves(signals=True, terms=terms))
