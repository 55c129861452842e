"""A total crawl rate R(t) that changes over time (paper 004 App. D, Fig. 9).

R is piecewise constant: ``rate_per_s[j]`` from ``starts_s[j]`` until the next
start.  The simulator's crawl slots are where the cumulative budget ∫₀ᵗ R
crosses an integer, so a discrete policy crawls at exactly R per second.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from scheduler_core.errors import ParameterError
from scheduler_core.params import FloatArray

__all__ = ["Bandwidth"]


@dataclass(frozen=True)
class Bandwidth:
    """Piecewise-constant total crawl rate.

    Attributes
    ----------
    starts_s : tuple of float
        Start of each segment, s; the first is 0, strictly increasing.
    rates_per_s : tuple of float
        R of each segment, crawls per second, finite and > 0.

    Raises
    ------
    ParameterError
        On construction, if the segments are empty, unsorted, do not start at 0,
        or a rate is not finite and positive.

    Examples
    --------
    >>> b = Bandwidth.steps([(0.0, 1.0), (10.0, 2.0)])
    >>> float(b.crawls_before(15.0)), float(b.time_of_crawls(20.0))
    (20.0, 15.0)
    """

    starts_s: tuple[float, ...]
    rates_per_s: tuple[float, ...]

    def __post_init__(self) -> None:
        s, r = np.asarray(self.starts_s, float), np.asarray(self.rates_per_s, float)
        if s.size == 0 or s.shape != r.shape:
            raise ParameterError("a bandwidth needs one rate per segment start")
        if s[0] != 0 or (np.diff(s) <= 0).any():
            raise ParameterError("segment starts must begin at 0 and increase")
        if not (np.isfinite(r).all() and (r > 0).all()):
            raise ParameterError("`rates_per_s` must be finite and > 0")

    @classmethod
    def constant(cls, rate_per_s: float) -> Bandwidth:
        """R(t) = ``rate_per_s`` for all t."""
        return cls((0.0,), (float(rate_per_s),))

    @classmethod
    def steps(cls, segments: Sequence[tuple[float, float]]) -> Bandwidth:
        """From ``(start_s, rate_per_s)`` pairs, the first starting at 0."""
        return cls(tuple(float(a) for a, _ in segments), tuple(float(b) for _, b in segments))

    def _cumulative(self) -> FloatArray:
        s, r = np.asarray(self.starts_s), np.asarray(self.rates_per_s)
        return np.concatenate([[0.0], np.cumsum(np.diff(s) * r[:-1])])

    def rate_at(self, t: float) -> float:
        """R(t), crawls per second."""
        j = int(np.searchsorted(self.starts_s, t, side="right")) - 1
        return self.rates_per_s[max(j, 0)]

    def crawls_before(self, t: float) -> float:
        """∫₀ᵗ R, crawls (t ≥ 0, s)."""
        j = max(int(np.searchsorted(self.starts_s, t, side="right")) - 1, 0)
        return float(self._cumulative()[j] + (t - self.starts_s[j]) * self.rates_per_s[j])

    def time_of_crawls(self, crawls: float | FloatArray) -> FloatArray:
        """The times t (s) with ∫₀ᵗ R = ``crawls``, same shape (the inverse of
        :meth:`crawls_before`)."""
        c = np.asarray(crawls, dtype=np.float64)
        cum = self._cumulative()
        j = np.maximum(np.searchsorted(cum, c, side="right") - 1, 0)
        starts, rates = np.asarray(self.starts_s), np.asarray(self.rates_per_s)
        return np.asarray(starts[j] + (c - cum[j]) / rates[j], dtype=np.float64)
