"""Bounds on every URL's crawl value now, from a few exact values, without evaluating V.

V is increasing in τeff and its slope is known in closed form from the expected
interval ψ (paper 004 App. A; ``MATH.md``, "Crawl value"):

    V′(x) = W·α·e^{−αx}·ψ(x),   with   e^{−γx} ≤ ψ′(x) ≤ 1.

(ψ(x) is the expected time for τeff = t + β·N(t) to reach x: it grows at most as
fast as x, and at least as fast as the chance e^{−γx} that no signal came yet; the
same holds term by term for the sums cut after J terms.)  So one exact *base
point* (c, V(c), ψ(c)) of a URL bounds its value at every later τ = c + d of the
same crawl cycle; with D = α + γ and R¹(y) = 1 − (1 + y)e^{−y},

    V(τ) ≤ V(c) + W·e^{−αc}·(ψ(c)·(1 − e^{−αd}) + R¹(αd)/α),
    V(τ) ≥ V(c) + W·(e^{−αc}·ψ(c)·(1 − e^{−αd}) + α·e^{−Dc}·R¹(Dd)/D²),

the integrals of V′ with ψ(x) replaced by ψ(c) + (x − c) and ψ(c) + (x − c)·e^{−γx}.
Both are exact without signals (γ = 0, ψ(x) = x) and within O(d²) of V otherwise;
V(τ) ≤ V(∞) too.  A crawl resets the base point to (0, 0, 0) (V(0) = ψ(0) = 0).
A signal moves τeff by β, often far past the base point; the *anchors* (nβ, V(nβ),
ψ(nβ)), n = 1..:data:`ANCHORS`, computed once per URL, are base points that hold
after the n-th signal of a cycle (τeff = τ + nβ ≥ nβ).  A URL evaluated exactly
takes its new value as base point.  ``τeff = ∞`` (a signal with β = ∞) has V = V(∞)
exactly.

The bounds carry a relative margin (:data:`MARGIN`) so that rounding in V, ψ and
the bounds themselves never makes a bound wrong.

References
----------
Paper 004, Theorem 1 and App. A (V and V′); ``MATH.md``, "Crawl value".
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

from scheduler_core.params import FloatArray, UrlParams
from scheduler_core.policies.base import IntArray

__all__ = ["ANCHORS", "MARGIN", "ValueBounds"]

#: Anchors per URL: base points at τeff = β, 2β, ..., ANCHORS·β.
ANCHORS = 3
#: Relative margin on every bound (lower bounds × (1 − MARGIN), upper × (1 + MARGIN)).
MARGIN = 1e-6

#: Exact V and ψ of URLs ``(n,)`` at τeff ``(n,)``, each of shape (n,).
Evaluate = Callable[[IntArray, FloatArray], tuple[FloatArray, FloatArray]]


class ValueBounds:
    """Lower and upper bounds on V of ``m`` URLs at their current τeff.

    Parameters
    ----------
    params : UrlParams
        The value model's parameters (rates in 1/s), ``m`` URLs.
    value_at_infinity : ndarray, shape (m,)
        V(∞) of each URL under the model (W/Δ; less for sums cut after J terms).
    evaluate : callable
        Exact V and ψ of some URLs at given τeff; used here only for the anchors.

    Attributes
    ----------
    evaluated : int
        URLs evaluated for the anchors.
    """

    def __init__(
        self, params: UrlParams, value_at_infinity: FloatArray, evaluate: Evaluate
    ) -> None:
        m = params.m
        self.cap = np.asarray(value_at_infinity, dtype=np.float64)
        self.alpha = params.unsignalled_change_rate
        self.decay = self.alpha + params.signal_rate  # D = α + γ = Δ + ν
        self.weight = params.weight
        self.beta = params.signal_time_equivalent
        # the base point of each URL: τeff c, V(c), ψ(c), e^{−αc} and e^{−Dc}
        self.at = np.zeros(m)
        self.value = np.zeros(m)
        self.interval = np.zeros(m)
        self.fade = np.ones(m)
        self.fade_all = np.ones(m)
        with np.errstate(divide="ignore", invalid="ignore"):
            self.share = np.where(self.decay > 0, self.alpha / self.decay, 0.0)  # α/D
        #: Some URL has signals (γ > 0); without, the lower bound is the upper one.
        self.signals = bool((self.decay > self.alpha).any())
        self.anchor_at = np.full((m, ANCHORS), np.inf)
        self.anchor_value = np.zeros((m, ANCHORS))
        self.anchor_interval = np.zeros((m, ANCHORS))
        has = np.flatnonzero(np.isfinite(self.beta) & (self.beta > 0) & (self.cap > 0))
        self.evaluated = 0
        if has.size:
            times = self.beta[has, None] * np.arange(1, ANCHORS + 1, dtype=np.float64)
            urls = np.repeat(has, ANCHORS)
            value, interval = evaluate(urls, times.ravel())
            self.anchor_at[has] = times
            self.anchor_value[has] = value.reshape(has.size, ANCHORS)
            self.anchor_interval[has] = interval.reshape(has.size, ANCHORS)
            self.evaluated = int(urls.size)

    def crawled(self, urls: IntArray) -> None:
        """URLs ``urls`` were crawled: τeff = 0, base point (0, 0, 0)."""
        self._set(urls, np.zeros(urls.size), np.zeros(urls.size), np.zeros(urls.size))

    def signalled(self, urls: IntArray, counts: IntArray) -> None:
        """URLs ``urls`` now have ``counts`` signals counted since their last crawl:
        the anchor at min(count, ANCHORS)·β becomes their base point if it lies past it."""
        j = np.minimum(counts, ANCHORS) - 1
        ok = j >= 0
        urls, j = urls[ok], j[ok]
        at = self.anchor_at[urls, j]
        past = np.isfinite(at) & (at > self.at[urls])  # no anchors where β is 0 or ∞
        urls, j = urls[past], j[past]
        self._set(urls, at[past], self.anchor_value[urls, j], self.anchor_interval[urls, j])

    def record(
        self, urls: IntArray, tau: FloatArray, value: FloatArray, interval: FloatArray
    ) -> None:
        """Exact V and ψ of URLs ``urls`` at their current τeff ``tau`` (finite)."""
        self._set(urls, tau, value, interval)

    def _set(self, urls: IntArray, at: FloatArray, value: FloatArray, interval: FloatArray) -> None:
        self.at[urls] = at
        self.value[urls] = value
        self.interval[urls] = interval
        self.fade[urls] = np.exp(-self.alpha[urls] * at)
        self.fade_all[urls] = np.exp(-self.decay[urls] * at)

    def bounds(self, tau: FloatArray) -> tuple[FloatArray, FloatArray]:
        """Lower and upper bounds on V at τeff ``tau`` (m,), margins included, shape (m,) each.

        ``tau`` must not lie below any URL's base point (τeff only grows within a
        cycle); where it does, the bounds fall back to [0, V(∞)].
        """
        d = tau - self.at
        odd = ~(d < np.inf)  # τeff = ∞, or a NaN from below the base point ...
        odd |= d < 0  # ... or plainly below it
        if odd.any():
            d[odd] = 0.0
        y = self.alpha * d
        rise = -np.expm1(-y) * self.interval  # ψ(c)·(1 − e^{−αd})
        upper = self.value + self.weight * self.fade * (rise + d * _r1_over(y))
        if self.signals:
            lower = self.value + self.weight * (
                self.fade * rise + self.fade_all * self.share * d * _r1_over(self.decay * d)
            )
            lower *= 1.0 - MARGIN
        else:  # γ = 0: both integrals are V itself
            lower = upper * (1.0 - MARGIN)
        # V computed near τ = ∞ may round a unit above V(∞) = W/Δ: the margin goes on last
        np.minimum(upper, self.cap, out=upper)
        upper *= 1.0 + MARGIN
        if odd.any():
            sure = np.isinf(tau)  # V(∞) exactly
            lost = odd & ~sure  # below the base point: no bound (never within a cycle)
            upper[sure], lower[sure] = self.cap[sure], self.cap[sure]
            upper[lost], lower[lost] = self.cap[lost] * (1.0 + MARGIN), 0.0
        return lower, upper


def _r1_over(y: FloatArray) -> FloatArray:
    """R¹(y)/y = (1 − (1 + y)e^{−y})/y for y ≥ 0, shape (n,), to ~1e-13 relative.

    The closed form cancels for small y; below 0.01 its series (truncated after
    y⁷, error < 1e-18 relative) is used.
    """
    safe = np.maximum(y, 0.01)
    out: FloatArray = (-np.expm1(-safe) - safe * np.exp(-safe)) / safe
    small = np.flatnonzero(y < 0.01)
    if small.size:
        x = y[small]
        series = 1 / 840 - x / 5760
        for c in (1 / 144, 1 / 30, 1 / 8, 1 / 3, 1 / 2):
            series = c - x * series
        out[small] = x * series
    return out
