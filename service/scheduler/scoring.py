"""The bridge from stored URL state to the core's crawl-value functions."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Protocol

import numpy as np
import numpy.typing as npt

from scheduler_core.freshness import freshness_probability
from scheduler_core.params import FloatArray, UrlParams
from scheduler_core.threshold import threshold_for_value
from scheduler_core.value import crawl_value

__all__ = [
    "due_by_revisit_cap",
    "effective_elapsed",
    "freshness_at",
    "params_of",
    "thresholds",
    "values_and_observed",
    "values_at",
    "values_of_columns",
]


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


def params_of_table(table: FloatArray) -> UrlParams:
    """The parameter arrays of URLs given as a table whose first four columns are W
    (1/s), Δ (1/s), recall and ν (1/s), shape (m, ≥ 4) (the stores' ``RescoreColumns``
    and ``EstimateColumns`` params), each (m,).

    Raises
    ------
    ParameterError
        If a value is out of its range (:meth:`UrlParams.create`).
    """
    return UrlParams.create(
        weight=table[:, 0], change_rate=table[:, 1], recall=table[:, 2],
        false_signal_rate=table[:, 3],
    )  # fmt: skip


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


def _shift(state: npt.NDArray[Any]) -> FloatArray:
    """β·n per URL, 0 where n = 0 (whatever β), shape (m,)."""
    n = state["signals_since_crawl"].astype(np.float64)
    out: FloatArray = np.zeros(len(state))
    np.multiply(state["signal_time_equivalent_s"], n, out=out, where=n > 0)
    return out


def values_of_columns(state: npt.NDArray[Any], now: float, terms: int | None) -> FloatArray:
    """Crawl value V(τeff) at ``now`` of URLs given as columns, shape (m,): the same
    numbers as :func:`values_at` on their snapshots, computed on the arrays.

    Parameters
    ----------
    state : ndarray, shape (m,), structured
        The fields of :data:`service.store.columns.URL_COLUMNS` (times Unix s, NaN =
        none; rates 1/s).
    now : float
        Unix s.
    terms : int or None
        Series terms of the crawl value (MATH.md, "Crawl value").
    """
    if len(state) == 0:
        return np.empty(0)
    params = UrlParams.create(
        weight=state["weight"], change_rate=state["change_rate"], recall=state["recall"],
        false_signal_rate=state["false_signal_rate"],
    )  # fmt: skip
    last = state["last_crawl_at"]
    never = np.isnan(last)
    elapsed = np.maximum(now - np.where(never, now, last), 0.0) + _shift(state)
    return crawl_value(params, np.where(never, np.inf, elapsed), terms=terms)


def values_and_observed(
    state: npt.NDArray[Any], now: float, terms: int | None
) -> tuple[FloatArray, FloatArray]:
    """The crawl value of each URL at ``now``, V(τeff) as :func:`values_of_columns`
    gives it, and the value its dispatch tells the multiplier estimates, shape (m,)
    each.  The second is the first, except for a URL that came due at its last
    signal (its value jumped past the threshold ι it was scored for, by up to β),
    which counts as V(ι + now − t_signal): the value it would hold had it reached ι
    at the signal and aged since.  Columns as for :func:`values_of_columns`; times
    Unix s.  Both come from one evaluation of V (its cost is mostly per call).

    At the optimum a URL is dispatched when its value reaches Λ (MATH.md,
    "Estimating the multipliers online"); one a signal made due passed Λ in a jump
    whose height the signal's β sets, not Λ, and counted at its value it pulls the
    estimate of Λ up (docs/model.md, "From values to decisions").  The time it then
    waited for the budget is kept: that is evidence about λ₀.
    """
    last, thr, lsig = state["last_crawl_at"], state["threshold_s"], state["last_signal_at"]
    n = state["signals_since_crawl"].astype(np.float64)
    beta = state["signal_time_equivalent_s"]
    after = _shift(state)  # β·n
    before = np.zeros(len(state))  # β·(n − 1)
    np.multiply(beta, n - 1.0, out=before, where=n > 1)
    with np.errstate(invalid="ignore"):
        # due by value was last + ι − β(n − 1) before the last signal, last + ι − βn after
        jumped = (
            (n > 0) & np.isfinite(thr) & (lsig > last)
            & (last + thr - before > lsig) & (last + thr - after <= lsig)
        )  # fmt: skip
    if not jumped.any():
        values = values_of_columns(state, now, terms)
        return values, values
    pick = state[jumped].copy()
    # V(ι + now − t_signal): as if crawled at t_signal − ι, with no signal since
    pick["last_crawl_at"] = pick["last_signal_at"] - pick["threshold_s"]
    pick["signals_since_crawl"] = 0
    both = values_of_columns(np.concatenate([state, pick]), now, terms)
    values = both[: len(state)]
    observed = values.copy()
    observed[jumped] = both[len(state) :]
    return values, observed


def due_by_revisit_cap(state: npt.NDArray[Any], max_revisit_s: float) -> npt.NDArray[np.bool_]:
    """Which URLs are due only by the revisit cap (their value due time lies beyond last
    crawl + ``max_revisit_s``; MATH.md, "Due time"), shape (m,); never-crawled URLs are
    not.  Columns as for :func:`values_of_columns`."""
    last, thr = state["last_crawl_at"], state["threshold_s"]
    beta, lsig = state["signal_time_equivalent_s"], state["last_signal_at"]
    n = state["signals_since_crawl"]
    with np.errstate(invalid="ignore"):
        by_value = last + thr - _shift(state)
        proven = (n > 0) & np.isinf(beta)
        by_value = np.where(proven, np.where(np.isnan(lsig), last, lsig), by_value)
        by_value = np.where(np.isinf(thr), np.inf, by_value)
        return np.asarray(~np.isnan(last) & (by_value > last + max_revisit_s))


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
