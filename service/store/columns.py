"""The columnar boundary of dispatch: a batch of leases as arrays, one row per lease.

A store answers :meth:`~service.store.base.Store.lease_columns` with a
:class:`LeaseColumns`: the leased URLs' stored state as one numpy structured array
(:data:`URL_COLUMNS` fields; the Redis store decodes its script's packed answer into
it with ``numpy.frombuffer``, no per-URL object), the lease ids, URLs and hosts as
lists.  The dispatch use case computes crawl values on the arrays; per-URL
:class:`~service.store.base.UrlState` objects are built only for callers that want
them (:func:`grants_of`: ``lease_next``, tests).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import numpy.typing as npt

from service.store.base import LeaseGrant, UrlState

__all__ = [
    "URL_COLUMNS",
    "LeaseColumns",
    "RescoreColumns",
    "columns_of",
    "grants_of",
]

#: The fields of a leased URL's state, named as in :class:`UrlState`; times are Unix s
#: (NaN: none), rates 1/s.  A store may give more fields (the Redis store's records).
URL_COLUMNS = np.dtype(
    [
        ("weight", "<f8"),
        ("change_rate", "<f8"),
        ("recall", "<f8"),
        ("false_signal_rate", "<f8"),
        ("signal_time_equivalent_s", "<f8"),
        ("threshold_s", "<f8"),
        ("scored_lambda", "<f8"),
        ("registered_at", "<f8"),
        ("last_crawl_at", "<f8"),
        ("last_signal_at", "<f8"),
        ("last_click_at", "<f8"),
        ("due_at", "<f8"),
        ("signals_since_crawl", "<u4"),
        ("clicks", "<u4"),
        ("signals", "<u4"),
        ("crawls", "<u4"),
        ("changes", "<u4"),
        ("fetch_errors", "<u4"),
    ]
)
_FLOATS = ("last_crawl_at", "last_signal_at", "last_click_at")
_NAMES = tuple(n for n in URL_COLUMNS.names or ())


@dataclass(frozen=True, slots=True)
class LeaseColumns:
    """Leases of one ``lease_columns`` call, in dispatch order (m rows).

    Attributes
    ----------
    now : float
        The time the store decided at (its clock; the latest reading when it decided
        in parts), Unix s.
    lease_ids, urls, hosts : list of str, length m
    deadline : ndarray, shape (m,), float64
        Lease deadlines, Unix s.
    gated : ndarray, shape (m,), bool
        The URL was due before its host's politeness gate opened.
    threshold : ndarray, shape (m,), float64
        Λ_h = λ₀ + λ_h of the URL's host when leased.
    state : ndarray, shape (m,), structured
        The URL's stored state as leased, at least the :data:`URL_COLUMNS` fields.
    host_observed : ndarray, shape (m,), bool
        The store folded the dispatch into its host's λ_h itself as it leased it (an
        ungated one, λ₀ known: :class:`~service.store.base.DispatchObservation`).
    """

    now: float
    lease_ids: list[str]
    urls: list[str]
    hosts: list[str]
    deadline: npt.NDArray[np.float64]
    gated: npt.NDArray[np.bool_]
    threshold: npt.NDArray[np.float64]
    state: npt.NDArray[Any]
    host_observed: npt.NDArray[np.bool_]

    def __len__(self) -> int:
        return len(self.lease_ids)


def _opt(x: float) -> float | None:
    return None if math.isnan(x) else x


def grants_of(cols: LeaseColumns) -> list[LeaseGrant]:
    """The leases as :class:`LeaseGrant` objects (states without prior and observations)."""
    rows = cols.state[list(_NAMES)].tolist()
    out = []
    for i, row in enumerate(rows):
        f = dict(zip(_NAMES, row, strict=True))
        for name in _FLOATS:
            f[name] = _opt(f[name])
        deadline = float(cols.deadline[i])
        state = UrlState(
            url=cols.urls[i], host=cols.hosts[i], lease_id=cols.lease_ids[i],
            lease_deadline=deadline, **f,
        )  # fmt: skip
        out.append(
            LeaseGrant(
                cols.lease_ids[i], deadline, state, bool(cols.gated[i]), float(cols.threshold[i])
            )
        )
    return out


def columns_of(now: float, grants: Sequence[LeaseGrant]) -> LeaseColumns:
    """The columns of leases given as objects."""
    nan = math.nan
    state = np.array(
        [
            tuple(
                (nan if v is None else v) if name in _FLOATS else v
                for name in _NAMES
                for v in (getattr(g.state, name),)
            )
            for g in grants
        ],
        dtype=URL_COLUMNS,
    )
    return LeaseColumns(
        now=now,
        lease_ids=[g.lease_id for g in grants],
        urls=[g.state.url for g in grants],
        hosts=[g.state.host for g in grants],
        deadline=np.array([g.deadline for g in grants], dtype=np.float64),
        gated=np.array([g.gated for g in grants], dtype=np.bool_),
        threshold=np.array([g.threshold for g in grants], dtype=np.float64),
        state=state,
        host_observed=np.zeros(len(grants), dtype=np.bool_),
    )


@dataclass(frozen=True, slots=True)
class RescoreColumns:
    """What a rescoring pass reads of some hosts' URLs, as columns: host by host (in the
    order asked), each host's URLs in URL order; m rows over H hosts.

    Attributes
    ----------
    hosts : list of str, length H
    lambdas : ndarray, shape (H,), float64
        The Λ_h each host is rescored for (W·s).
    counts : ndarray, shape (H,), int64
        Rows of each host, in order (they sum to m).
    urls : list of str, length m
    params : ndarray, shape (m, 5), float64
        Per row W (1/s), Δ (1/s), recall, ν (1/s) and the stored ι (s), in that order
        (:data:`RESCORE_FIELDS`).
    never_crawled : int
        The hosts' URLs left out: never crawled, a URL is due at its registration
        whatever its threshold, and gets one when its first crawl is folded
        (:func:`service.scheduler.learning.apply`).
    """

    hosts: list[str]
    lambdas: npt.NDArray[np.float64]
    counts: npt.NDArray[np.int64]
    urls: list[str]
    params: npt.NDArray[np.float64]
    never_crawled: int = 0

    def __len__(self) -> int:
        return len(self.urls)

    def row_lambdas(self) -> npt.NDArray[np.float64]:
        """Λ_h of each row's host, shape (m,)."""
        return np.repeat(self.lambdas, self.counts)


#: The columns of :attr:`RescoreColumns.params`.
RESCORE_FIELDS = ("weight", "change_rate", "recall", "false_signal_rate", "threshold_s")


def rescore_table(
    stale: Sequence[tuple[str, float]], per_host: Sequence[Sequence[Any]]
) -> RescoreColumns:
    """:class:`RescoreColumns` of hosts ``stale`` ((host, Λ_h) pairs) whose URLs are
    ``per_host`` (objects with the :data:`RESCORE_FIELDS` attributes, ``url`` and
    ``last_crawl_at``, one sequence per host, in URL order); the URLs never crawled are
    left out and counted."""
    kept = [[u for u in urls if u.last_crawl_at is not None] for urls in per_host]
    never = sum(len(a) - len(b) for a, b in zip(per_host, kept, strict=True))
    per_host = kept
    rows = [u for urls in per_host for u in urls]
    params = np.array(
        [(u.weight, u.change_rate, u.recall, u.false_signal_rate, u.threshold_s) for u in rows],
        dtype=np.float64,
    ).reshape(len(rows), len(RESCORE_FIELDS))
    return RescoreColumns(
        hosts=[h for h, _ in stale],
        lambdas=np.array([lam for _, lam in stale], dtype=np.float64),
        counts=np.array([len(urls) for urls in per_host], dtype=np.int64),
        urls=[u.url for u in rows],
        params=params,
        never_crawled=never,
    )
