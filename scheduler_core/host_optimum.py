"""The continuous optimum with a crawl budget and per-host politeness limits.

Choose per-URL crawl rates ξ_i ≥ 0 that maximise Σ_i W_i·F_i(ξ_i) subject to
Σ_i ξ_i ≤ R (budget) and Σ_{i∈h} ξ_i ≤ k_h (politeness of host h).  KKT: every
crawled URL of host h is recrawled when its crawl value reaches
Λ_h = λ₀ + λ_h, V_i(ι_i) = Λ_h; URLs with V_i(∞) ≤ Λ_h are not crawled;
λ_h > 0 only where host h crawls at exactly k_h, and λ₀ > 0 only where the
budget is spent (``MATH.md``, "The continuous optimum (BASELINE)").

With S_h(Λ) = Σ_{i∈h} f_i(ι_i(Λ)), decreasing in Λ (paper 004, Lemma 2):

- *inner*: host h's limit binds at λ₀ iff S_h(λ₀) > k_h, and then Λ_h solves
  S_h(Λ_h) = k_h — a problem of host h alone, independent of λ₀;
- *outer*: host h then crawls min(S_h(λ₀), k_h), so λ₀ solves
  T(λ₀) = Σ_h min(S_h(λ₀), k_h) = R.  Evaluating T needs no inner solve, and
  a host seen over its limit at some λ₀ is over it at every smaller λ₀: its
  URLs are not evaluated again.  Only the hosts over their limit at the
  solution get an inner solve, on their own URLs, all hosts at once, started
  from the brackets the outer search has already seen.
- *slack budget*: S_h(λ) → ∞ as λ → 0, so T(0+) = Σ k_h over the hosts with a
  URL worth crawling.  If that is ≤ R the budget cannot be spent: λ₀ = 0 and
  every such host crawls at its limit.

T and every S_h jump where Λ crosses a URL's V(∞) (``MATH.md``, "Numerical
traps" 4), so each multiplier is located to float resolution by the search of
:mod:`scheduler_core.multiplier_search` and the marginal URL(s) get the
remaining rate: limits and budget are met to rounding.

References
----------
``MATH.md``, "The continuous optimum (BASELINE)", "From values to decisions"
and "Numerical traps" 4; blog post 002 (the KKT thresholds λ₀ + λ_h); paper
004, Theorem 1 and Lemma 2.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from numpy.typing import ArrayLike, NDArray

from scheduler_core.errors import ParameterError
from scheduler_core.multiplier_search import (
    Curves,
    IntArray,
    Jumps,
    locate_group_multipliers,
    locate_multipliers,
    spend,
    spend_per_group,
)
from scheduler_core.optimal import _accuracy, _check_budget, _finish
from scheduler_core.params import FloatArray, UrlParams, as_float_array

__all__ = ["HostOptimum", "solve_host_optimum"]

BoolArray = NDArray[np.bool_]


@dataclass(frozen=True, slots=True)
class HostOptimum:
    """The continuous optimum of ``m`` URLs on ``H`` hosts under budget and politeness.

    Attributes
    ----------
    lambda0 : float
        λ₀, the multiplier of the crawl budget, in value units (W·s); 0 when
        the budget is slack (the host limits cap the total below it) or no
        URL is worth a crawl.
    host_lambdas : ndarray, shape (H,)
        λ_h ≥ 0, the multiplier of each host's limit (W·s); 0 where it does
        not bind.  Host h's URLs are recrawled at value λ₀ + λ_h.
    binding : ndarray of bool, shape (H,)
        λ_h > 0: the host crawls at its limit and would use more.  A host at
        its limit with λ_h = 0 (a marginal host) is not binding.
    thresholds : ndarray, shape (m,)
        ι_i on effective elapsed time τeff, seconds; ``inf`` for a URL that is
        not crawled (and, with signals, for a marginal URL crawled on a share
        of its signals, as in :func:`~scheduler_core.optimal.solve_optimum`).
    rates : ndarray, shape (m,)
        ξ_i, crawls per second.
    host_rates : ndarray, shape (H,)
        Σ_{i∈h} ξ_i, crawls per second; ≤ the host's limit (to rounding).
    freshness : ndarray, shape (m,)
        Time-averaged freshness of each URL at its rate, in [0, 1].
    accuracy : float
        Σ W_i·freshness_i / Σ W_i (1.0 if Σ W = 0).
    """

    lambda0: float
    host_lambdas: FloatArray
    binding: BoolArray
    thresholds: FloatArray
    rates: FloatArray
    host_rates: FloatArray
    freshness: FloatArray
    accuracy: float


def _check_hosts(
    m: int, host_of: ArrayLike, host_limit_per_s: ArrayLike
) -> tuple[IntArray, FloatArray]:
    """Validated (host of each URL, shape (m,); limit of each host, shape (H,))."""
    limits = as_float_array("host_limit_per_s", host_limit_per_s)
    if (limits < 0).any():
        raise ParameterError("`host_limit_per_s` must be >= 0 crawls/s (inf: no limit)")
    hosts = np.asarray(host_of)
    if hosts.shape != (m,):
        raise ParameterError(f"`host_of` must have shape ({m},), got {hosts.shape}")
    if m and not np.issubdtype(hosts.dtype, np.integer):
        raise ParameterError(f"`host_of` must hold integer host indices, got {hosts.dtype}")
    hosts = hosts.astype(np.int64)
    if m and (hosts.min() < 0 or hosts.max() >= limits.size):
        raise ParameterError(
            f"`host_of` must lie in [0, {limits.size}) (one entry of `host_limit_per_s` per host)"
        )
    return hosts, limits


@dataclass(frozen=True, slots=True)
class _Evaluation:
    """T at one λ₀: per-URL thresholds and rates (``inf``/0 on skipped hosts), per-host S_h."""

    lam: float
    thresholds: FloatArray
    rates: FloatArray
    host_rates: FloatArray  # S_h, NaN where the host was skipped
    over: BoolArray  # S_h > k_h (skipped hosts included)
    total: float


class _Outer:
    """T(λ₀) = Σ_h min(S_h(λ₀), k_h) for the outer search; remembers what it saw.

    A host seen over its limit at λ stays over it below λ, so its URLs are
    skipped there.  Keeps S_h of every evaluation (to seed the inner search)
    and the full evaluations at the current ends of the bracket.
    """

    def __init__(
        self,
        params: UrlParams,
        curves: Curves,
        hosts: IntArray,
        limits: FloatArray,
        budget: float,
    ) -> None:
        self.params, self.curves, self.hosts = params, curves, hosts
        self.limits, self.budget = limits, budget
        self.over_down_to = np.full(limits.size, -np.inf)  # largest λ seen over the limit
        self.seen_at: list[float] = []
        self.seen_host_rates: list[FloatArray] = []
        self.lo: _Evaluation | None = None
        self.hi: _Evaluation | None = None

    def evaluate(self, lam: float) -> _Evaluation:
        params, curves, hosts = self.params, self.curves, self.hosts
        skip = self.over_down_to >= lam
        if skip.any():
            urls = np.flatnonzero(~skip[hosts])
            thresholds, rates = np.full(params.m, np.inf), np.zeros(params.m)
            if urls.size:
                sub = params.take(urls)
                thresholds[urls] = curves.thresholds(sub, lam)
                rates[urls] = curves.rates(sub, thresholds[urls])
        else:  # the same arithmetic as optimal.solve_optimum: equal results when nothing binds
            thresholds = curves.thresholds(params, lam)
            rates = curves.rates(params, thresholds)
        host_rates = np.bincount(hosts, rates, minlength=self.limits.size).astype(np.float64)
        over = skip | (host_rates > self.limits)
        free = float(np.where(over[hosts], 0.0, rates).sum())
        total = free + float(self.limits[over].sum())
        host_rates[skip] = np.nan
        return _Evaluation(lam, thresholds, rates, host_rates, over, total)

    def __call__(self, lam: FloatArray, which: IntArray) -> FloatArray:
        found = self.evaluate(float(lam[0]))
        seen_over = found.over & ~np.isnan(found.host_rates)
        self.over_down_to[seen_over] = np.maximum(self.over_down_to[seen_over], found.lam)
        self.seen_at.append(found.lam)
        self.seen_host_rates.append(found.host_rates)
        if found.total >= self.budget:
            if self.lo is None or found.lam > self.lo.lam:
                self.lo = found
        elif self.hi is None or found.lam < self.hi.lam:
            self.hi = found
        return np.array([found.total])

    def at(self, lam: float) -> _Evaluation:
        for end in (self.lo, self.hi):
            if end is not None and end.lam == lam:
                return end
        return self.evaluate(lam)

    def seeds(
        self, bound: IntArray, caps: FloatArray
    ) -> tuple[FloatArray, FloatArray, FloatArray, FloatArray] | None:
        """Brackets (lo, hi, g(lo) ≥ 0, g(hi) < 0) of S_h − k_h for the hosts ``bound``.

        Each is over its limit at some λ seen (where its URLs were evaluated);
        the upper end is the least λ seen above that with S_h < k_h, else the
        host's largest W/Δ, where S_h = 0.  ``None`` if a host lacks a lower end.
        """
        at = np.asarray(self.seen_at)[:, None]
        g = np.stack(self.seen_host_rates)[:, bound] - self.limits[bound]  # NaN: skipped
        cols = np.arange(bound.size)
        lo_at = np.where(g >= 0, at, -np.inf)
        first = lo_at.argmax(axis=0)
        lo, g_lo = lo_at[first, cols], g[first, cols]
        if not np.isfinite(lo).all():
            return None
        hi_at = np.where((g < 0) & (at > lo), at, np.inf)
        first = hi_at.argmin(axis=0)
        hi, g_hi = hi_at[first, cols], g[first, cols]
        none = np.isinf(hi)
        hi[none], g_hi[none] = caps[none], -self.limits[bound][none]
        return lo, hi, g_lo, g_hi


def solve_host_optimum(
    params: UrlParams,
    host_of: ArrayLike,
    host_limit_per_s: ArrayLike,
    budget_per_s: float,
    *,
    signals: bool = True,
    terms: int | None = None,
) -> HostOptimum:
    """The continuous optimum under a crawl budget R and per-host politeness limits k_h.

    Parameters
    ----------
    params : UrlParams
        ``m`` URLs.
    host_of : array_like of int, shape (m,)
        The host of each URL, an index into ``host_limit_per_s``.
    host_limit_per_s : array_like, shape (H,)
        k_h, the most crawls per second host h allows, ≥ 0; ``inf`` for no
        limit.
    budget_per_s : float
        R, crawls per second overall, finite and > 0.
    signals : bool, default True
        Use the URLs' signals (GREEDY-NCIS values, as
        :func:`~scheduler_core.optimal.solve_optimum`); ``False``: the
        no-signal model, ι = gammaincinv(2, ΛΔ/W)/Δ, as
        :func:`~scheduler_core.optimal.baseline` (recall and ν ignored).
    terms : int, optional
        NCIS-APPROX-J truncation of the value sums (``None``: exact); only
        with signals.

    Returns
    -------
    HostOptimum
        Thresholds ι_i = V_i⁻¹(λ₀ + λ_h), rates f_i(ι_i), freshness and the
        multipliers.  Hosts over their limit at λ₀ crawl at exactly k_h
        (to rounding), and Σ rates = R when λ₀ > 0; the marginal URL(s) of
        each search get what remains, their thresholds and freshness as in
        :func:`~scheduler_core.optimal.solve_optimum`.  When no limit binds
        the result equals :func:`~scheduler_core.optimal.solve_optimum`
        (``baseline`` without signals).  URLs with W = 0 or Δ = 0 get rate 0.

    Raises
    ------
    ParameterError
        If ``budget_per_s`` is not finite and positive; ``host_limit_per_s``
        is negative, NaN or not one-dimensional; ``host_of`` has the wrong
        shape, is not integral or names a host outside
        [0, len(host_limit_per_s)); ``terms < 1``; or a rate asked for
        exceeds what the smallest thresholds searched can spend
        (:data:`~scheduler_core.value.THRESHOLD_SPAN`).

    Notes
    -----
    Cost: one outer search on λ₀ (15–35 evaluations of V⁻¹ and f, each on
    the URLs of the hosts not yet seen over their limit), then one inner
    search for all hosts over their limit at once, on their own URLs (20–50
    rounds, most of them on a few hosts), and two evaluations to finish.
    Measured on a shared 2-CPU machine for 10,000 URLs (W ~ U(0, 2)/day,
    Δ ~ U(0, 1)/day, recall ~ Beta(¼, ¼), ν ~ U(0.05, 0.3)/day) on 200
    hosts (uniformly drawn), R = 2,000/day, k_h = R/U(25, 400):

    ==============================  ==============  ==============
    case                            no signals      signals
    ==============================  ==============  ==============
    141 of 200 hosts binding        0.08–0.2 s      15–21 s
    slack budget (R = 2 Σ k_h)      0.08–0.15 s     16–23 s
    no limits (k_h = ∞)             0.07–0.2 s      14 s
    ``solve_optimum``/``baseline``  0.07–0.13 s     10–15 s
    ==============================  ==============  ==============

    With signals nearly all the time is spent in
    :func:`~scheduler_core.threshold.threshold_for_value`.

    References
    ----------
    ``MATH.md``, "The continuous optimum (BASELINE)" and "Numerical traps" 4;
    blog post 002 (recrawl at λ₀ + λ_h); paper 004, Theorem 1 and Lemma 2.

    Examples
    --------
    Two equal URLs; host 0 allows 0.25/s of the budget of 1/s, host 1 no limit:

    >>> p = UrlParams.create(weight=1.0, change_rate=[1.0, 1.0])
    >>> opt = solve_host_optimum(p, [0, 1], [0.25, float("inf")], 1.0)
    >>> opt.rates.tolist(), opt.binding.tolist()
    ([0.25, 0.75], [True, False])
    >>> bool(opt.host_lambdas[0] > 0)
    True
    """
    budget = _check_budget(budget_per_s)
    if terms is not None and terms < 1:
        raise ParameterError("`terms` must be >= 1 (or None for the exact sums)")
    hosts, limits = _check_hosts(params.m, host_of, host_limit_per_s)
    curves = Curves(signals and bool((params.signal_rate > 0).any()), terms)
    n_hosts = limits.size
    live = (params.weight > 0) & (params.change_rate > 0)
    host_cap = np.zeros(n_hosts)  # largest W/Δ of the host's URLs worth crawling
    np.maximum.at(host_cap, hosts[live], params.max_value[live])
    open_hosts = host_cap > 0
    if not live.any():
        fresh = np.where(params.change_rate == 0, 1.0, 0.0)
        zeros = np.zeros(n_hosts)
        return HostOptimum(
            0.0,
            zeros,
            np.zeros(n_hosts, dtype=bool),
            np.full(params.m, np.inf),
            np.zeros(params.m),
            zeros.copy(),
            fresh,
            _accuracy(params, fresh),
        )

    slack = float(limits[open_hosts].sum()) <= budget
    outer: _Outer | None = None
    if slack:  # even λ₀ → 0 leaves every host at its limit and the budget unspent
        lo = hi = lambda0 = 0.0
        in_search = open_hosts.copy()
        thresholds_lo, thresholds_hi = np.full(params.m, np.inf), np.full(params.m, np.inf)
        rates_lo, rates_hi = np.zeros(params.m), np.zeros(params.m)
    else:
        outer = _Outer(params, curves, hosts, limits, budget)
        limits_url = curves.limits(params)[live]
        jumps = Jumps.of(np.zeros(limits_url.size, dtype=np.int64), limits_url, 1)
        cap = np.array([params.max_value[live].max()])
        lo_arr, hi_arr = locate_multipliers(outer, np.array([budget]), cap, jumps)
        lo, hi = float(lo_arr[0]), float(hi_arr[0])
        lambda0 = hi
        at_lo, at_hi = outer.at(lo), outer.at(hi)
        in_search = at_lo.over | at_hi.over
        thresholds_lo, rates_lo = at_lo.thresholds.copy(), at_lo.rates.copy()
        thresholds_hi, rates_hi = at_hi.thresholds.copy(), at_hi.rates.copy()

    # Inner: Λ_h of the hosts over their limit (k_h = 0: any Λ_h ≥ max W/Δ).
    value_lo, value_hi = np.full(n_hosts, lo), np.full(n_hosts, hi)
    closed = in_search & (limits == 0)
    value_lo[closed] = value_hi[closed] = host_cap[closed]
    searched = np.flatnonzero(in_search & (limits > 0))
    if searched.size:
        caps = host_cap[searched]
        start = None if outer is None else outer.seeds(searched, caps)
        value_lo[searched], value_hi[searched] = locate_group_multipliers(
            params, curves, hosts, limits, searched, caps, start=start, argument="host_limit_per_s"
        )
    rows = np.flatnonzero(in_search[hosts])
    thresholds_lo[rows], thresholds_hi[rows] = np.inf, np.inf
    rates_lo[rows], rates_hi[rows] = 0.0, 0.0
    members = rows[live[rows]]
    if members.size:
        sub = params.take(members)
        for value, thresholds, rates in (
            (value_lo, thresholds_lo, rates_lo),
            (value_hi, thresholds_hi, rates_hi),
        ):
            thresholds[members] = curves.thresholds(sub, value[hosts[members]])
            rates[members] = curves.rates(sub, thresholds[members])

    # Each host in the inner search spends exactly k_h between its two ends.
    at_limit = spend_per_group(limits, hosts, in_search, rates_lo, rates_hi)
    binding = in_search & (value_hi > hi)  # still over its limit at λ₀ = hi
    spent_lo = np.where(in_search[hosts], at_limit, rates_lo)
    spent_hi = np.where(binding[hosts], at_limit, rates_hi)
    rates = spent_lo if slack else spend(budget, spent_lo, spent_hi)

    host_lambdas = np.where(binding, value_hi - lambda0, 0.0)
    value = np.where(binding[hosts], value_hi[hosts], lambda0)
    thresholds, fresh = _finish(
        params, curves, value, rates, rates_hi, thresholds_lo, thresholds_hi
    )
    return HostOptimum(
        lambda0,
        host_lambdas,
        binding,
        thresholds,
        rates,
        np.bincount(hosts, rates, minlength=n_hosts).astype(np.float64),
        fresh,
        _accuracy(params, fresh),
    )
