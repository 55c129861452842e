"""The per-URL model: importance, change rate and signal quality.

Every quantity is a float64 array of shape ``(m,)``, one entry per URL.  Rates are
per second, times in seconds.  See ``MATH.md``, "Quantities".
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from numpy.typing import ArrayLike, NDArray

from scheduler_core.errors import ParameterError

__all__ = ["MAX_RECALL_WITH_FALSE_SIGNALS", "FloatArray", "UrlParams", "as_float_array"]

FloatArray = NDArray[np.float64]

#: recall is clipped to this when false signals exist (MATH.md, "Numerical traps" 2).
MAX_RECALL_WITH_FALSE_SIGNALS = 1.0 - 1e-9


def as_float_array(name: str, value: ArrayLike, m: int | None = None) -> FloatArray:
    """Return ``value`` as a finite-or-inf float64 array of shape ``(m,)``.

    Parameters
    ----------
    name : str
        Argument name, used in error messages.
    value : array_like
        Scalar or array; a scalar is broadcast to ``(m,)`` when ``m`` is given.
    m : int, optional
        Expected length.

    Raises
    ------
    ParameterError
        If ``value`` holds NaN, is not one-dimensional, or has the wrong length.
    """
    arr = np.asarray(value, dtype=np.float64)
    if m is not None and arr.ndim == 0:
        arr = np.full(m, float(arr))
    arr = np.atleast_1d(arr)
    if arr.ndim != 1:
        raise ParameterError(f"`{name}` must be one-dimensional, got shape {arr.shape}")
    if m is not None and arr.shape[0] != m:
        raise ParameterError(f"`{name}` must have shape ({m},), got {arr.shape}")
    if np.isnan(arr).any():
        raise ParameterError(f"`{name}` must not contain NaN")
    return arr


@dataclass(frozen=True, slots=True)
class UrlParams:
    """Model parameters of ``m`` URLs (``MATH.md``, "Quantities"; paper 004 §3).

    Build with :meth:`create`, which validates.  Attributes are ``(m,)`` float64
    arrays.

    Attributes
    ----------
    weight : ndarray, shape (m,)
        Importance W: request (click) rate, requests/s, or any positive scale.
    change_rate : ndarray, shape (m,)
        Δ, Poisson rate of content changes, 1/s.
    recall : ndarray, shape (m,)
        r, probability that a change is announced by a change-indicating signal.
    false_signal_rate : ndarray, shape (m,)
        ν, Poisson rate of signals that announce no change, 1/s.

    Examples
    --------
    >>> p = UrlParams.create(weight=[1.0, 2.0], change_rate=[0.5, 1.0], recall=0.5,
    ...                      false_signal_rate=0.25)
    >>> p.signal_rate.tolist()
    [0.5, 0.75]
    >>> p.precision.round(4).tolist()
    [0.5, 0.6667]
    """

    weight: FloatArray
    change_rate: FloatArray
    recall: FloatArray
    false_signal_rate: FloatArray

    @classmethod
    def create(
        cls,
        weight: ArrayLike,
        change_rate: ArrayLike,
        recall: ArrayLike = 0.0,
        false_signal_rate: ArrayLike = 0.0,
    ) -> UrlParams:
        """Validate and broadcast the parameters of ``m`` URLs.

        ``m`` is the length of the longest argument; scalars broadcast.  Recall
        is clipped to :data:`MAX_RECALL_WITH_FALSE_SIGNALS` where ν > 0
        (``MATH.md``, "Numerical traps" 2).

        Raises
        ------
        ParameterError
            If a weight, change rate or false-signal rate is negative or not
            finite, a recall lies outside [0, 1], or the lengths disagree.
        """
        given = [np.asarray(v, dtype=np.float64) for v in (weight, change_rate, recall,
                                                          false_signal_rate)]  # fmt: skip
        m = max(a.size for a in given)
        if all(a.ndim == 0 or a.shape == (m,) for a in given):
            # the common case in one pass over the four: all finite and >= 0, recall <= 1
            table = np.empty((4, m))
            for row, a in zip(table, given, strict=True):
                row[...] = a
            if np.isfinite(table).all() and (table >= 0).all() and (table[2] <= 1).all():
                w, d, r, nu = table
                r = np.where(nu > 0, np.minimum(r, MAX_RECALL_WITH_FALSE_SIGNALS), r)
                return cls(w, d, r, nu)
        # otherwise field by field, for the error that names the first bad one
        w = as_float_array("weight", weight, m)
        d = as_float_array("change_rate", change_rate, m)
        r = as_float_array("recall", recall, m)
        nu = as_float_array("false_signal_rate", false_signal_rate, m)
        for name, arr in (("weight", w), ("change_rate", d), ("false_signal_rate", nu)):
            if not np.isfinite(arr).all() or (arr < 0).any():
                raise ParameterError(f"`{name}` must be finite and >= 0")
        if ((r < 0) | (r > 1)).any():
            raise ParameterError("`recall` must lie in [0, 1]")
        r = np.where(nu > 0, np.minimum(r, MAX_RECALL_WITH_FALSE_SIGNALS), r)
        return cls(w, d, r, nu)

    @property
    def m(self) -> int:
        """Number of URLs."""
        return int(self.weight.shape[0])

    @property
    def signal_rate(self) -> FloatArray:
        """γ = rΔ + ν, rate of all signals, 1/s, shape (m,)."""
        return self.recall * self.change_rate + self.false_signal_rate

    @property
    def unsignalled_change_rate(self) -> FloatArray:
        """α = (1 − r)Δ, rate of changes no signal announces, 1/s, shape (m,)."""
        return (1.0 - self.recall) * self.change_rate

    @property
    def precision(self) -> FloatArray:
        """p = rΔ/γ, probability that a signal announces a real change (0 where γ = 0)."""
        gamma = self.signal_rate
        with np.errstate(divide="ignore", invalid="ignore"):
            p = np.where(gamma > 0, self.recall * self.change_rate / gamma, 0.0)
        return np.asarray(p, dtype=np.float64)

    @property
    def signal_time_equivalent(self) -> FloatArray:
        """β = −ln(1 − p)/α, seconds of silence one signal is worth, shape (m,).

        0 where signals carry no information (rΔ = 0), ``inf`` where a signal
        proves a change (ν = 0 < rΔ) or every change is signalled (α = 0 < ν).
        −ln(1 − p) is computed with ``log1p`` for p < 1/2 (``MATH.md``, "Numerical
        traps" 1) and as ln(γ/ν) above, where 1 − p = ν/γ would round to 0.
        """
        informative = self.recall * self.change_rate
        gamma = self.signal_rate
        alpha = self.unsignalled_change_rate
        out = np.zeros(self.m)
        certain = (informative > 0) & (self.false_signal_rate == 0)
        out[certain] = np.inf
        noisy = (informative > 0) & (self.false_signal_rate > 0)
        p = informative[noisy] / gamma[noisy]
        small = p < 0.5
        neg_log = np.empty_like(p)
        neg_log[small] = -np.log1p(-p[small])
        neg_log[~small] = np.log(gamma[noisy][~small] / self.false_signal_rate[noisy][~small])
        with np.errstate(divide="ignore"):  # α = 0: one signal is worth endless silence
            out[noisy] = neg_log / alpha[noisy]
        return out

    @property
    def max_value(self) -> FloatArray:
        """V(∞) = W/Δ, the value of a surely stale copy (0 where Δ = 0), shape (m,)."""
        with np.errstate(divide="ignore", invalid="ignore"):
            v = np.where(self.change_rate > 0, self.weight / self.change_rate, 0.0)
        return np.asarray(v, dtype=np.float64)

    def without_signals(self) -> UrlParams:
        """The same URLs with no signals (r = ν = 0): the GREEDY / BASELINE model."""
        zeros = np.zeros(self.m)
        return UrlParams(self.weight, self.change_rate, zeros, zeros.copy())

    def take(self, index: ArrayLike) -> UrlParams:
        """The parameters of a subset of URLs (integer or boolean ``index``)."""
        idx = np.asarray(index)
        return UrlParams(
            self.weight[idx], self.change_rate[idx], self.recall[idx], self.false_signal_rate[idx]
        )
