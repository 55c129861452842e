"""The columnar boundary of re-estimation: what the estimators read of some URLs, as
arrays, one row per URL.

A store answers :meth:`~service.store.base.Store.estimate_columns` with an
:class:`EstimateColumns`: the URLs' stored parameters and threshold, their decayed
click and signal counts and their crawl-outcome windows laid end to end (the Redis
store decodes the windows of a whole batch with one ``numpy.frombuffer``; no
per-URL snapshot is built).  :func:`estimate_table` builds the same from objects: snapshots
(:class:`~service.store.base.UrlState`) for callers that hold them (the learner's
pass over a host, ``explain``, tests), or the memory store's own records.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import numpy.typing as npt

from scheduler_core.estimate.learn import windows_end_to_end
from service.store.base import UrlPrior

__all__ = ["ESTIMATE_FIELDS", "EstimateColumns", "estimate_table"]

#: The columns of :attr:`EstimateColumns.params`.
ESTIMATE_FIELDS = (
    "weight", "change_rate", "recall", "false_signal_rate", "threshold_s", "registered_at",
    "scored_lambda", "last_crawl_at",
)  # fmt: skip

FloatArray = npt.NDArray[np.float64]


@dataclass(frozen=True, slots=True)
class EstimateColumns:
    """What re-estimation reads of m URLs (N crawl outcomes in all).

    Attributes
    ----------
    urls, hosts : list of str, length m
    priors : list of UrlPrior, length m
        What each URL was registered with (``fixed``: those are its parameters).
    params : ndarray, shape (m, 8), float64
        W (1/s), Δ (1/s), recall, ν (1/s), the stored ι (s), the registration time
        (Unix s), the Λ that ι was computed for (W·s) and the last crawl (Unix s; NaN:
        never crawled), in that order (:data:`ESTIMATE_FIELDS`).
    clicks, signals : ndarray, shape (m, 2), float64
        Decayed count (mass) and the time it is held at (Unix s; NaN: no event yet).
    outcome_tau, outcome_n : ndarray, shape (N,), float64
        Each outcome's τ (s since the previous fetch) and signals seen in it, URL by
        URL, each URL's oldest first.
    outcome_changed : ndarray, shape (N,), bool
        Whether the fetch found a change.
    outcome_counts : ndarray, shape (m,), int64
        Outcomes of each URL (they sum to N).
    """

    urls: list[str]
    hosts: list[str]
    priors: list[UrlPrior]
    params: FloatArray
    clicks: FloatArray
    signals: FloatArray
    outcome_tau: FloatArray
    outcome_n: FloatArray
    outcome_changed: npt.NDArray[np.bool_]
    outcome_counts: npt.NDArray[np.int64]

    def __len__(self) -> int:
        return len(self.urls)

    @property
    def fixed(self) -> npt.NDArray[np.bool_]:
        """Rows whose parameters were registered as fixed (not estimated), shape (m,)."""
        return np.fromiter((p.fixed for p in self.priors), dtype=bool, count=len(self.priors))

    def take(self, rows: npt.NDArray[np.int64]) -> EstimateColumns:
        """The rows ``rows`` (indices, in that order) with their outcome windows."""
        counts = self.outcome_counts[rows]
        starts = (np.cumsum(self.outcome_counts) - self.outcome_counts)[rows]
        flat = np.repeat(starts - (np.cumsum(counts) - counts), counts) + np.arange(counts.sum())
        return EstimateColumns(
            urls=[self.urls[i] for i in rows.tolist()],
            hosts=[self.hosts[i] for i in rows.tolist()],
            priors=[self.priors[i] for i in rows.tolist()],
            params=self.params[rows],
            clicks=self.clicks[rows],
            signals=self.signals[rows],
            outcome_tau=self.outcome_tau[flat],
            outcome_n=self.outcome_n[flat],
            outcome_changed=self.outcome_changed[flat],
            outcome_counts=counts,
        )


def estimate_table(
    rows: Sequence[Any], observations: Sequence[Any] | None = None
) -> EstimateColumns:
    """:class:`EstimateColumns` of URLs given as objects, in their order: ``rows`` with
    ``url``, ``host``, ``prior`` and the :data:`ESTIMATE_FIELDS` attributes (snapshots,
    :class:`~service.store.base.UrlState`, or a store's own records), ``observations``
    with those of :class:`~service.store.base.Observations` (default: each row's
    ``observations``)."""
    obs = [r.observations for r in rows] if observations is None else observations
    nan = math.nan
    m = len(rows)
    params = np.array(
        [
            (r.weight, r.change_rate, r.recall, r.false_signal_rate, r.threshold_s,
             r.registered_at, r.scored_lambda,
             nan if r.last_crawl_at is None else r.last_crawl_at)
            for r in rows
        ],
        dtype=np.float64,
    ).reshape(m, len(ESTIMATE_FIELDS))  # fmt: skip
    counts = np.array(
        [
            (o.click_mass, nan if o.click_ref is None else o.click_ref, o.signal_mass,
             nan if o.signal_ref is None else o.signal_ref)
            for o in obs
        ],
        dtype=np.float64,
    ).reshape(m, 4)  # fmt: skip
    tau, n, changed, per_url = windows_end_to_end([o.outcomes for o in obs])
    return EstimateColumns(
        urls=[r.url for r in rows], hosts=[r.host for r in rows],
        priors=[r.prior for r in rows], params=params, clicks=counts[:, :2].copy(),
        signals=counts[:, 2:].copy(), outcome_tau=tau, outcome_n=n, outcome_changed=changed,
        outcome_counts=per_url,
    )  # fmt: skip
