"""The model's own view of how fresh the cached copies are.

``MATH.md``, "Quantities": given what was observed since the last crawl, the
copy of URL i is fresh with probability P(fresh) = exp(−α_i τeff_i) (paper 004,
eq. 1).  Weighted by importance, Σ W·P(fresh) / Σ W is the model's estimate of
the share of requests served a fresh copy right now: the quantity the
scheduler maximises, as the scheduler itself believes it stands.
"""

from __future__ import annotations

import math

import numpy as np
from numpy.typing import ArrayLike

from scheduler_core.errors import ParameterError
from scheduler_core.params import FloatArray, as_float_array

__all__ = ["freshness_probability", "weighted_freshness"]


def freshness_probability(
    unsignalled_change_rate: ArrayLike,
    precision: ArrayLike,
    elapsed_s: ArrayLike,
    signals_since_crawl: ArrayLike,
) -> FloatArray:
    """P(copy fresh) = exp(−α τ)·(ν/γ)^n = exp(−α τeff) of each URL.

    Parameters
    ----------
    unsignalled_change_rate : array_like, shape (m,)
        α = (1 − recall)·Δ, 1/s, ≥ 0.
    precision : array_like, shape (m,)
        p = rΔ/γ in [0, 1]: the chance that a signal announces a change
        (ν/γ = 1 − p; p = 1 makes a copy surely stale after one signal).
    elapsed_s : array_like, shape (m,)
        τ, s since the last crawl, ≥ 0; ``inf`` for a URL never fetched (no copy:
        probability 0).
    signals_since_crawl : array_like, shape (m,)
        n, signals counted since the last crawl, ≥ 0.

    Returns
    -------
    ndarray of float64, shape (m,)
        In [0, 1].  Written as exp(−(α τ + n θ)), θ = −ln(1 − p), with
        0·∞ taken as 0: a URL with α = 0 stays fresh however long, one with n = 0
        whatever its precision.

    Raises
    ------
    ParameterError
        If the arrays differ in shape, hold NaN, negative values or a precision
        above 1.

    References
    ----------
    Paper 004, eq. 1; ``MATH.md``, "Quantities".

    Examples
    --------
    >>> inf = float("inf")
    >>> freshness_probability([1e-3, 0.0, 0.0, 1e-3], [0.5, 1.0, 0.5, 0.0],
    ...                       [693.1471805599453, 1e9, 0.0, inf], [0, 1, 2, 0]).round(6)
    array([0.5 , 0.  , 0.25, 0.  ])
    """
    alpha = as_float_array("unsignalled_change_rate", unsignalled_change_rate)
    m = alpha.shape[0]
    p = as_float_array("precision", precision, m)
    tau = as_float_array("elapsed_s", elapsed_s, m)
    n = as_float_array("signals_since_crawl", signals_since_crawl, m)
    if (alpha < 0).any() or (tau < 0).any() or (n < 0).any():
        raise ParameterError("rates, elapsed times and signal counts must be >= 0")
    if ((p < 0) | (p > 1)).any():
        raise ParameterError("`precision` must lie in [0, 1]")
    exponent = np.zeros(m)
    moving = alpha > 0
    exponent[moving] = alpha[moving] * tau[moving]
    signalled = n > 0
    with np.errstate(divide="ignore"):
        exponent[signalled] -= n[signalled] * np.log1p(-p[signalled])
    out = np.exp(-exponent)
    out[np.isinf(tau)] = 0.0  # never fetched: no copy to serve
    return out


def weighted_freshness(weight: ArrayLike, probability: ArrayLike) -> float:
    """Σ W·P(fresh) / Σ W: the expected share of requests served a fresh copy.

    Parameters
    ----------
    weight : array_like, shape (m,)
        Importance W, requests/s (any positive scale), ≥ 0.
    probability : array_like, shape (m,)
        P(fresh) of each URL, in [0, 1] (:func:`freshness_probability`).

    Returns
    -------
    float
        In [0, 1]; NaN when Σ W = 0 (no URL, or none requested).

    Raises
    ------
    ParameterError
        If the arrays differ in shape, or hold NaN or negative weights.

    References
    ----------
    ``MATH.md``, "Quantities" (the objective); paper 004 §6 (accuracy).

    Examples
    --------
    >>> weighted_freshness([3.0, 1.0], [1.0, 0.0])
    0.75
    """
    w = as_float_array("weight", weight)
    p = as_float_array("probability", probability, w.shape[0])
    if (w < 0).any() or not np.isfinite(w).all():
        raise ParameterError("`weight` must be finite and >= 0")
    total = float(w.sum())
    return float(w @ p) / total if total > 0 else math.nan
