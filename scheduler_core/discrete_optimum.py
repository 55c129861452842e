"""The discrete-time optimum (LambdaCrawl, static optimisation).

Time runs in steps.  In each step URL i changes with probability Δ_i and is
crawled with probability p_i, independently of other URLs and steps; b crawls
per step are available.  Its stationary freshness is p/(p + Δ − Δp), so the
problem is

    maximise Σ_i W_i p_i/(p_i + Δ_i − Δ_i p_i)  subject to  Σ_i p_i = b, 0 ≤ p_i ≤ 1,

whose KKT conditions give p_i(λ) = clip((√(W_iΔ_i/λ) − Δ_i)/(1 − Δ_i), 0, 1)
(``MATH.md``, "Discrete-time variant").  Σ_i p_i(λ) falls in λ; p_i(λ) = 1 for
λ ≤ W_iΔ_i and p_i(λ) = 0 for λ ≥ W_i/Δ_i, and in between
Σ p_i = N₁ + A/√λ − B with sums A, B over the URLs in between.  The solver
sorts these 2m breakpoints, finds the piece on which Σ p_i crosses b and
solves it in closed form: √λ = A/(b − N₁ + B), Han et al.'s Table 2 formula
restricted to the URLs with 0 < p_i < 1.

A URL that surely changes (Δ_i = 1) contributes W_i·p_i, linear: p_i jumps
from 1 to 0 at λ = W_i.  When b falls in such a jump, λ = W_i and those URLs
share what remains of the budget.  Per-step probabilities within
:data:`CERTAIN_CHANGE` of 1 are treated as 1 (their 1/(1 − Δ) would amplify
rounding; the objective changes by less than 1e-6 relative).

References
----------
``MATH.md``, "Discrete-time variant"; Han et al. (WWW 2020), Table 2
(LambdaCrawl); Azar et al. (PNAS 2018), Algorithm 1; Avrachenkov et al.
(ICC 2021) §IV-B, eq. (8) (static optimisation).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from numpy.typing import ArrayLike

from scheduler_core.errors import ParameterError
from scheduler_core.params import FloatArray, as_float_array

__all__ = ["CERTAIN_CHANGE", "DiscreteOptimum", "discrete_freshness", "solve_discrete_optimum"]

#: Per-step change probabilities at or above this are treated as 1.
CERTAIN_CHANGE = 1.0 - 1e-6


@dataclass(frozen=True, slots=True)
class DiscreteOptimum:
    """The discrete-time optimum of ``m`` URLs.

    Attributes
    ----------
    multiplier : float
        λ, the Lagrange multiplier of the budget: W-weighted freshness one more
        crawl per step buys.  0 when the budget covers every URL worth a crawl.
    probabilities : ndarray, shape (m,)
        p_i, probability of crawling URL i in a step, in [0, 1].
    freshness : ndarray, shape (m,)
        Stationary freshness p/(p + Δ − Δp): 1 where Δ = 0, 0 where p = 0 < Δ.
    accuracy : float
        Σ W_i·freshness_i / Σ W_i (1.0 if Σ W = 0).
    """

    multiplier: float
    probabilities: FloatArray
    freshness: FloatArray
    accuracy: float


def discrete_freshness(probabilities: FloatArray, change_probability: FloatArray) -> FloatArray:
    """Stationary freshness p/(p + Δ − Δp) of per-step crawling, shape (m,).

    Parameters
    ----------
    probabilities : ndarray, shape (m,)
        p, per-step crawl probability, in [0, 1].
    change_probability : ndarray, shape (m,)
        Δ, per-step change probability, in [0, 1].

    Returns
    -------
    ndarray, shape (m,)
        1 where Δ = 0 (a copy that never goes stale), 0 where p = 0 < Δ.

    References
    ----------
    ``MATH.md``, "Discrete-time variant"; Avrachenkov et al. (ICC 2021), eq. (8).
    """
    p, d = probabilities, change_probability
    denom = p + d - d * p
    with np.errstate(divide="ignore", invalid="ignore"):
        fresh = np.where(denom > 0, p / np.where(denom > 0, denom, 1.0), 1.0)
    return np.asarray(fresh, dtype=np.float64)


def _validate(
    weight: ArrayLike, change_probability: ArrayLike, budget: float
) -> tuple[FloatArray, FloatArray, float]:
    m = max(np.size(weight), np.size(change_probability))
    w = as_float_array("weight", weight, m)
    d = as_float_array("change_probability", change_probability, m)
    if not np.isfinite(w).all() or (w < 0).any():
        raise ParameterError("`weight` must be finite and >= 0")
    if ((d < 0) | (d > 1)).any():
        raise ParameterError("`change_probability` must lie in [0, 1]")
    b = float(budget)
    if not np.isfinite(b) or b < 0:
        raise ParameterError(f"`budget` must be finite and >= 0, got {budget!r}")
    return w, d, b


def solve_discrete_optimum(
    weight: ArrayLike, change_probability: ArrayLike, budget: float
) -> DiscreteOptimum:
    """Per-step crawl probabilities that maximise the weighted freshness (LambdaCrawl).

    Parameters
    ----------
    weight : array_like, shape (m,)
        W_i ≥ 0, importance (click rate, requests/s, or any scale); a scalar
        broadcasts.
    change_probability : array_like, shape (m,)
        Δ_i ∈ [0, 1], probability that URL i changes within one step (for a
        Poisson change rate Δ′ in 1/s and steps of dt s: 1 − e^{−Δ′·dt}).
    budget : float
        b ≥ 0, crawls per step.

    Returns
    -------
    DiscreteOptimum
        p_i = clip((√(W_iΔ_i/λ) − Δ_i)/(1 − Δ_i), 0, 1) with Σ p_i = b (to
        rounding).  URLs with W_i = 0 or Δ_i = 0 gain nothing from a crawl and
        get p_i = 0; when b is at least the number u of the others, those get
        p_i = 1, λ = 0 and Σ p_i = u ≤ b (one crawl per URL and step at most).
        b = 0 gives p = 0 and λ = max W_i/Δ_i.

    Raises
    ------
    ParameterError
        If a weight is negative or not finite, a change probability lies
        outside [0, 1] or is NaN, the lengths differ, or ``budget`` is negative
        or not finite.

    References
    ----------
    ``MATH.md``, "Discrete-time variant"; Han et al. (WWW 2020), Table 2;
    Azar et al. (PNAS 2018), Algorithm 1; Avrachenkov et al. (ICC 2021) §IV-B.

    Examples
    --------
    >>> opt = solve_discrete_optimum([1.0, 1.0, 1.0, 1.0], 0.5, 1.0)
    >>> opt.probabilities.tolist()  # identical URLs share the budget
    [0.25, 0.25, 0.25, 0.25]
    >>> solve_discrete_optimum([3.0, 2.0, 1.0], 1.0, 1.5).probabilities.tolist()
    [1.0, 0.5, 0.0]
    """
    w, d, b = _validate(weight, change_probability, budget)
    m = w.shape[0]
    p = np.zeros(m)
    useful = (w > 0) & (d > 0)
    n = int(useful.sum())
    if n == 0:
        return _result(0.0, p, w, d)
    idx = np.flatnonzero(useful)
    wu, du = w[idx], d[idx]
    linear = du >= CERTAIN_CHANGE
    if b >= n:
        p[idx] = 1.0
        return _result(0.0, p, w, d)
    if b == 0:
        return _result(float((wu / du).max()), p, w, d)
    lam = _multiplier(wu, du, linear, b)
    p[idx] = _probabilities_at(wu, du, linear, lam, b)
    return _result(lam, p, w, d)


def _multiplier(w: FloatArray, d: FloatArray, linear: np.ndarray, b: float) -> float:
    """λ with Σ p(λ) = b for n useful URLs, 0 < b < n (see the module docstring)."""
    curved = ~linear
    wc, dc = w[curved], d[curved]
    a = np.sqrt(wc * dc) / (1.0 - dc)  # p = a/√λ − c on the middle piece
    c = dc / (1.0 - dc)
    # Events as λ grows: a curved URL leaves p = 1 at WΔ and reaches p = 0 at W/Δ;
    # a linear URL drops from 1 to 0 at W.
    at = np.concatenate([wc * dc, wc / dc, w[linear]])
    ones = np.concatenate(
        [np.full(wc.size, -1.0), np.zeros(wc.size), np.full(int(linear.sum()), -1.0)]
    )
    d_a = np.concatenate([a, -a, np.zeros(int(linear.sum()))])
    d_c = np.concatenate([c, -c, np.zeros(int(linear.sum()))])
    order = np.argsort(at)
    at = at[order]
    first = np.flatnonzero(np.r_[True, at[1:] != at[:-1]])
    lam_g = at[first]
    n1 = w.size + np.cumsum(np.add.reduceat(ones[order], first))
    sum_a = np.cumsum(np.add.reduceat(d_a[order], first))
    sum_c = np.cumsum(np.add.reduceat(d_c[order], first))
    total_after = n1 + np.maximum(sum_a, 0.0) / np.sqrt(lam_g) - sum_c
    total_after = np.minimum.accumulate(total_after)  # nonincreasing but for rounding
    # Last breakpoint after which Σp is still ≥ b (−1: the root lies below the first).
    g = int(np.searchsorted(-total_after, -b, side="right")) - 1
    lo = float(lam_g[g]) if g >= 0 else 0.0
    hi = float(lam_g[g + 1])  # Σp = 0 after the last breakpoint, so g + 1 exists
    # Recompute the piece's sums exactly rather than from running sums.
    mid = 0.5 * (lo + hi)
    inside = (wc * dc < mid) & (wc / dc > mid)
    a_in = float(a[inside].sum())
    n_one = int(((wc * dc) >= hi).sum() + (w[linear] >= hi).sum())
    rest = b - n_one + float(c[inside].sum())
    if a_in <= 0 or rest <= 0:
        return hi  # Σp is flat on the piece: the root is the jump at its right end
    return min(max((a_in / rest) ** 2, lo), hi)


def _probabilities_at(
    w: FloatArray, d: FloatArray, linear: np.ndarray, lam: float, b: float
) -> FloatArray:
    """p(λ), shape (n,); linear URLs with W = λ share what the others leave of b."""
    curved = ~linear
    p = np.empty(w.size)
    wc, dc = w[curved], d[curved]
    p[curved] = np.clip((np.sqrt(wc * dc / lam) - dc) / (1.0 - dc), 0.0, 1.0)
    wl = w[linear]
    p[linear] = np.where(wl > lam, 1.0, 0.0)
    tied = np.flatnonzero(linear)[wl == lam]
    if tied.size:
        share = (b - float(p.sum())) / tied.size
        p[tied] = min(max(share, 0.0), 1.0)
    return p


def _result(lam: float, p: FloatArray, w: FloatArray, d: FloatArray) -> DiscreteOptimum:
    fresh = discrete_freshness(p, d)
    total = float(w.sum())
    accuracy = float(w @ fresh / total) if total > 0 else 1.0
    return DiscreteOptimum(lam, p, fresh, accuracy)
