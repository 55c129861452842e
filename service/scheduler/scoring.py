"""The bridge from stored URL state to the core's crawl-value functions."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Protocol

import numpy as np

from scheduler_core.freshness import freshness_probability
from scheduler_core.params import FloatArray, UrlParams
from scheduler_core.threshold import threshold_for_value
from scheduler_core.value import crawl_value

__all__ = ["effective_elapsed", "freshness_at", "params_of", "thresholds", "values_at"]


class _HasParams(Protocol):
    @property
    def weight(self) -> float: ...
    @property
    def change_rate(self) -> float: ...
    @property
    def recall(self) -> float: ...
    @property
    def false_signal_rate(self) -> float: ...


class _HasState(_HasParams, Protocol):
    @property
    def last_crawl_at(self) -> float | None: ...
    @property
    def signals_since_crawl(self) -> int: ...
    @property
    def signal_time_equivalent_s(self) -> float: ...


def params_of(states: Sequence[_HasParams]) -> UrlParams:
    """The (m,) parameter arrays of stored URLs."""
    return UrlParams.create(
        weight=[s.weight for s in states],
        change_rate=[s.change_rate for s in states],
        recall=[s.recall for s in states],
        false_signal_rate=[s.false_signal_rate for s in states],
    )


def effective_elapsed(states: Sequence[_HasState], now: float) -> FloatArray:
    """τeff = τ + β·n at ``now`` (s), shape (m,); ``inf`` for never-crawled URLs."""
    last = np.array([np.nan if s.last_crawl_at is None else s.last_crawl_at for s in states])
    n = np.array([s.signals_since_crawl for s in states], dtype=np.float64)
    beta = np.array([s.signal_time_equivalent_s for s in states], dtype=np.float64)
    out = np.full(len(states), np.inf)
    crawled = ~np.isnan(last)
    shift = np.zeros(len(states))
    signalled = crawled & (n > 0)  # β·0 is 0 even where β is infinite
    shift[signalled] = beta[signalled] * n[signalled]
    out[crawled] = np.maximum(now - last[crawled], 0.0) + shift[crawled]
    return out


def freshness_at(states: Sequence[_HasState], now: float) -> FloatArray:
    """P(copy fresh) = exp(−α τeff) of each URL at ``now``, shape (m,) (MATH.md,
    "Quantities"); 0 for URLs never fetched."""
    if not states:
        return np.empty(0)
    p = params_of(states)
    last = np.array([np.nan if s.last_crawl_at is None else s.last_crawl_at for s in states])
    elapsed = np.where(np.isnan(last), np.inf, np.maximum(now - last, 0.0))
    n = [s.signals_since_crawl for s in states]
    return freshness_probability(p.unsignalled_change_rate, p.precision, elapsed, n)


def values_at(states: Sequence[_HasState], now: float, terms: int | None) -> FloatArray:
    """Crawl value V(τeff) of each URL at ``now``, shape (m,)."""
    if not states:
        return np.empty(0)
    return crawl_value(params_of(states), effective_elapsed(states, now), terms=terms)


def thresholds(
    params: UrlParams,
    lambdas: FloatArray,
    terms: int | None,
    previous: Sequence[float] | FloatArray | None = None,
) -> FloatArray:
    """ι = V⁻¹(Λ) per URL (s, ``inf`` = not worth crawling), shape (m,); the search
    starts from ``previous`` thresholds where they are known (same result, less work)."""
    if params.m == 0:
        return np.empty(0)
    return threshold_for_value(params, lambdas, terms=terms, guess=previous)
