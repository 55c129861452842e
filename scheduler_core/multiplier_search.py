"""Locating Lagrange multipliers to float resolution although the totals jump.

The continuous optima (:mod:`scheduler_core.optimal`,
:mod:`scheduler_core.host_optimum`) put every crawled URL at the threshold
ι(Λ) = V⁻¹(Λ) where its crawl value reaches the multiplier Λ, and choose Λ so
that the total rate Σξ(Λ) = Σ f(ι(Λ)) meets a target: the crawl budget R, or a
host's limit k_h.  Σξ decreases in Λ but jumps where Λ crosses a URL's V(∞)
(W/Δ; less with truncated sums): in double precision V(ι) reaches W/Δ at a
finite ι, so the rate falls from about Δ/40 (with signals: up to γ) to 0
(``MATH.md``, "Numerical traps" 4).  A plain root-finder can then stop with
the target missed.  So this module

- brackets each Λ by expansion down from its cap (Σξ(cap) = 0) and narrows the
  bracket by a *safeguarded Illinois regula falsi*: secant steps on the
  (possibly halved) ends, in ln Λ while the bracket is wide, falling back to
  bisection whenever two steps fail to halve it;
- *probes the jumps*: once a bracket holds a single V(∞) it evaluates Σξ at
  that value and a few ulps below it, where a secant would creep up slowly;
- stops at adjacent doubles lo < hi with Σξ(lo) ≥ target > Σξ(hi), and
- *spends the remainder on the marginal URLs*: rates ξ = ξ(hi) + t·(ξ(lo) −
  ξ(hi)) with t chosen so that Σξ = target, so only the URL(s) whose rate is
  discontinuous there get a rate between their two solutions.

Every search is vectorised over n independent problems (one per host for
the per-host multipliers λ_h).

References
----------
``MATH.md``, "The continuous optimum (BASELINE)" and "Numerical traps" 4;
paper 004, Lemma 2 (V and f monotone).
"""

from __future__ import annotations

import sys
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np
from numpy.typing import ArrayLike, NDArray
from scipy.special import gammaincinv

from scheduler_core.errors import ParameterError
from scheduler_core.params import FloatArray, UrlParams
from scheduler_core.threshold import threshold_for_value
from scheduler_core.value import crawl_frequency, crawl_value

__all__ = [
    "Curves",
    "IntArray",
    "Jumps",
    "TotalRates",
    "locate_group_multipliers",
    "locate_multipliers",
    "spend",
    "spend_per_group",
]

IntArray = NDArray[np.int64]

#: The lower end of a first bracket shrinks by this factor per step.
_EXPAND = 2.0**-10
#: A few ulps, relative: the least step of the secant, and how far below a
#: URL's V(∞) the jump of Σξ is probed.
_ULPS = 2.0**-50

#: Σξ_j(Λ_j) for the problems ``which`` (indices, shape (k,)) at Λ (shape (k,)).
TotalRates = Callable[[FloatArray, IntArray], FloatArray]


@dataclass(frozen=True, slots=True)
class Curves:
    """ι(Λ) = V⁻¹(Λ) and f(ι) of one model: GREEDY in closed form, or GREEDY-NCIS.

    Both are vectorised over URLs; Λ may be one value or one per URL.

    Attributes
    ----------
    signals : bool
        Use the URLs' signals (:mod:`scheduler_core.value`); ``False``: the
        no-signal model, ι = gammaincinv(2, ΛΔ/W)/Δ and f = 1/ι.
    terms : int, optional
        NCIS-APPROX-J truncation of the value sums (``None``: exact).
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
class Jumps:
    """Where each of n totals Σξ_j(Λ) may jump: the distinct V(∞) of its URLs.

    Attributes
    ----------
    problem, values : ndarray, shape (k,)
        The problem j of each jump and where it is, sorted by problem, then value.
    start : ndarray, shape (n,)
        The first index of each problem in ``problem`` and ``values``.
    """

    problem: IntArray
    values: FloatArray
    start: IntArray

    @classmethod
    def of(cls, problem: ArrayLike, values: ArrayLike, n: int) -> Jumps:
        """The jumps of n problems from each URL's problem and V(∞), any order, repeats allowed."""
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


def _expand(
    total_rates: TotalRates, targets: FloatArray, caps: FloatArray, argument: str
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


def locate_multipliers(
    total_rates: TotalRates,
    targets: FloatArray,
    caps: FloatArray,
    jumps: Jumps,
    *,
    start: tuple[FloatArray, FloatArray, FloatArray, FloatArray] | None = None,
    argument: str = "budget_per_s",
) -> tuple[FloatArray, FloatArray]:
    """Adjacent doubles lo_j < hi_j with Σξ_j(lo_j) ≥ target_j > Σξ_j(hi_j), n problems at once.

    Parameters
    ----------
    total_rates : TotalRates
        Σξ_j(Λ) of the problems asked for, each decreasing in Λ.
    targets : ndarray, shape (n,)
        The total rate each problem must meet, crawls per second, > 0.
    caps : ndarray, shape (n,)
        Λ where Σξ_j = 0 (the largest V(∞) of the problem's URLs).
    jumps : Jumps
        Where each Σξ_j may jump.
    start : tuple of 4 ndarrays, shape (n,) each, optional
        A first bracket (lo, hi, g(lo) ≥ 0, g(hi) < 0) with g = Σξ − target;
        by default found by expansion down from ``caps``.
    argument : str, default "budget_per_s"
        The input blamed when the expansion fails.

    Returns
    -------
    lo, hi : ndarray, shape (n,)

    Raises
    ------
    ParameterError
        If a target exceeds Σξ at the least positive normal double.

    Notes
    -----
    A safeguarded Illinois regula falsi narrows each bracket to float
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


def locate_group_multipliers(
    params: UrlParams,
    curves: Curves,
    group_of: IntArray,
    targets: FloatArray,
    groups: IntArray,
    caps: FloatArray,
    *,
    start: tuple[FloatArray, FloatArray, FloatArray, FloatArray] | None = None,
    argument: str = "budget_per_s",
) -> tuple[FloatArray, FloatArray]:
    """Λ_g of n groups of URLs at once, each with Σ_{i∈g} f_i(ι_i(Λ_g)) = target_g.

    Parameters
    ----------
    params : UrlParams
        ``m`` URLs.
    curves : Curves
        The model.
    group_of : ndarray of int, shape (m,)
        The group of each URL (a host), an index into ``targets``.
    targets : ndarray, shape (G,)
        The total rate of each group (k_h), crawls per second.
    groups : ndarray of int, shape (n,)
        The groups to solve, each with a target > 0 and a URL worth crawling.
    caps : ndarray, shape (n,)
        Their largest V(∞) (W/Δ), where their total rate is 0.
    start, argument
        As for :func:`locate_multipliers`.

    Returns
    -------
    lo, hi : ndarray, shape (n,)
        Adjacent doubles with Σ_{i∈g} ξ_i(lo_g) ≥ target_g > Σ_{i∈g} ξ_i(hi_g).
    """
    n = groups.size
    slot_of = np.full(targets.size, -1, dtype=np.int64)
    slot_of[groups] = np.arange(n)
    live = (params.weight > 0) & (params.change_rate > 0)
    members = np.flatnonzero(live & (slot_of[group_of] >= 0))
    slot = slot_of[group_of[members]]
    jumps = Jumps.of(slot, curves.limits(params.take(members)), n)

    def group_rates(lam: FloatArray, which: IntArray) -> FloatArray:
        asked = np.zeros(n, dtype=bool)
        asked[which] = True
        rows = asked[slot]
        value = np.zeros(n)
        value[which] = lam
        sub = params.take(members[rows])
        rates = curves.rates(sub, curves.thresholds(sub, value[slot[rows]]))
        return np.asarray(np.bincount(slot[rows], rates, minlength=n)[which], dtype=np.float64)

    return locate_multipliers(
        group_rates, targets[groups], caps, jumps, start=start, argument=argument
    )


def spend(budget: float, rates_lo: FloatArray, rates_hi: FloatArray) -> FloatArray:
    """Rates between the solutions at the two ends of a bracket that total ``budget``.

    Parameters
    ----------
    budget : float
        The total to meet, crawls per second.
    rates_lo, rates_hi : ndarray, shape (m,)
        ξ(lo) and ξ(hi), with Σξ(lo) ≥ budget > Σξ(hi).

    Returns
    -------
    ndarray, shape (m,)
        ξ = ξ(hi) + t·(ξ(lo) − ξ(hi)) with t ∈ [0, 1] chosen so that Σξ = ``budget``.
    """
    jump = np.maximum(rates_lo - rates_hi, 0.0)
    total = float(jump.sum())
    share = min(max((budget - float(rates_hi.sum())) / total, 0.0), 1.0) if total > 0 else 0.0
    return np.asarray(rates_hi + share * jump, dtype=np.float64)


def spend_per_group(
    targets: FloatArray,
    group_of: IntArray,
    spent: NDArray[np.bool_],
    rates_lo: FloatArray,
    rates_hi: FloatArray,
) -> FloatArray:
    """:func:`spend` within each group: the groups ``spent`` total exactly their target.

    Parameters
    ----------
    targets : ndarray, shape (G,)
        The total rate of each group (k_h), crawls per second.
    group_of : ndarray of int, shape (m,)
        The group of each URL.
    spent : ndarray of bool, shape (G,)
        The groups whose rates are spent.
    rates_lo, rates_hi : ndarray, shape (m,)
        ξ at the two ends of each URL's group's bracket.

    Returns
    -------
    ndarray, shape (m,)
        ξ(hi) + t_g·(ξ(lo) − ξ(hi)), t_g ∈ [0, 1] so that a group ``spent``
        totals its target (as near as t_g allows); ξ(hi) elsewhere.
    """
    n_groups = targets.size
    jump = np.where(spent[group_of], np.maximum(rates_lo - rates_hi, 0.0), 0.0)
    room = targets - np.bincount(group_of, np.where(spent[group_of], rates_hi, 0.0), n_groups)
    widths = np.bincount(group_of, jump, minlength=n_groups)
    with np.errstate(divide="ignore", invalid="ignore"):
        share = np.where(widths > 0, np.clip(room / widths, 0.0, 1.0), 0.0)
    return np.asarray(rates_hi + share[group_of] * jump, dtype=np.float64)
