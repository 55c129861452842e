"""Event rates with exponential decay: importance W (clicks) and signal rate γ.

A URL's events are kept as one decayed count: at reference time ``ref`` (the
latest event) it holds Σ_k exp(−(ref − t_k)/T) over the event times t_k, with
time constant T = ``decay_s``.  Observed since ``start``, the decayed exposure at
``now`` is ∫ exp(−(now − t)/T) dt = T·(1 − exp(−(now − start)/T)), so the rate
has the Gamma–Poisson posterior mean (a + C(now))/(b + E(now)) under a
Gamma(a, b) prior (MATH.md, "Estimating parameters"; paper 004 App. E: "we
directly observe all request events and CI signals").  Two numbers per URL and
per stream, whatever the number of events.
"""

from __future__ import annotations

import math

import numpy as np
from numpy.typing import ArrayLike

from scheduler_core.errors import ParameterError
from scheduler_core.params import FloatArray

__all__ = ["add_event", "decayed_count", "decayed_exposure", "rate_posterior"]


def add_event(mass: float, ref: float | None, t: float, decay_s: float) -> tuple[float, float]:
    """Fold one event at time ``t`` (s) into a decayed count; returns (mass, ref).

    Events may arrive out of order: an event older than ``ref`` adds its decayed
    weight exp(−(ref − t)/T) and leaves ``ref`` where it is.  Both stores apply
    exactly this update (the Redis scripts mirror it).

    Raises
    ------
    ParameterError
        If ``decay_s`` is not positive.

    Examples
    --------
    >>> add_event(0.0, None, 10.0, 5.0)
    (1.0, 10.0)
    >>> m, ref = add_event(1.0, 10.0, 15.0, 5.0)
    >>> round(m, 6), ref
    (1.367879, 15.0)
    """
    if not decay_s > 0:
        raise ParameterError("`decay_s` must be positive")
    if ref is None:
        return 1.0, t
    if t >= ref:
        return mass * math.exp(-(t - ref) / decay_s) + 1.0, t
    return mass + math.exp(-(ref - t) / decay_s), ref


def decayed_count(mass: ArrayLike, ref: ArrayLike, now: float, decay_s: float) -> FloatArray:
    """Decayed counts C(now) = mass · exp(−(now − ref)/T), shape (m,).

    ``ref`` may hold NaN (no event yet: C = 0); a ``ref`` after ``now`` counts as
    ``now`` (an event time slightly ahead of the clock).
    """
    m = np.atleast_1d(np.asarray(mass, dtype=np.float64))
    r = np.atleast_1d(np.asarray(ref, dtype=np.float64))
    has = ~np.isnan(r)
    age = np.where(has, np.maximum(now - np.where(has, r, now), 0.0), 0.0)
    return np.where(has, m * np.exp(-age / decay_s), 0.0)


def decayed_exposure(start: ArrayLike, now: float, decay_s: float) -> FloatArray:
    """Decayed observation time E(now) = T·(1 − exp(−(now − start)/T)), s, shape (m,)."""
    span = np.maximum(now - np.atleast_1d(np.asarray(start, dtype=np.float64)), 0.0)
    return -decay_s * np.expm1(-span / decay_s)


def rate_posterior(
    count: ArrayLike, exposure: ArrayLike, shape: ArrayLike, rate: ArrayLike
) -> tuple[FloatArray, FloatArray]:
    """Posterior mean and shape of a Poisson rate under a Gamma(shape, rate) prior.

    Parameters
    ----------
    count : array_like, shape (m,)
        Decayed event counts C.
    exposure : array_like, shape (m,)
        Decayed exposure E, s.
    shape, rate : array_like, shape (m,)
        Prior Gamma(a, b): mean a/b (1/s), a > 0, b > 0 (rate in s).

    Returns
    -------
    mean : ndarray, shape (m,)
        (a + C)/(b + E), 1/s.
    shape : ndarray, shape (m,)
        a + C: the posterior's shape, a measure of its certainty.

    Raises
    ------
    ParameterError
        If a prior shape or rate is not positive.
    """
    a = np.asarray(shape, dtype=np.float64)
    b = np.asarray(rate, dtype=np.float64)
    if not (np.all(a > 0) and np.all(b > 0)):
        raise ParameterError("prior `shape` and `rate` must be positive")
    c = np.asarray(count, dtype=np.float64)
    e = np.asarray(exposure, dtype=np.float64)
    return (a + c) / (b + e), a + c
