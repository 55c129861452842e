"""Host outages: spans of time when a host answers no fetch.

A host is down on one half-open span [start, end) at most.  A crawl of a URL
on a host that is down fails: the crawler gets no new copy, so the cached one
stays as stale (or fresh) as it was, and the crawl still spends its share of
the budget and of the host's politeness.  The simulator tells the policy
(:meth:`~scheduler_core.policies.base.Policy.observe_failed_crawls`); how it
backs off is the policy's business.

``docs/worlds.md`` ("Host outages") describes the model.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from numpy.typing import ArrayLike, NDArray

from scheduler_core.errors import ParameterError
from scheduler_core.params import FloatArray
from scheduler_core.sim.dist import Dist
from scheduler_core.sim.events import DAY_S, IntArray

__all__ = ["HostOutages"]


@dataclass(frozen=True, slots=True, eq=False)
class HostOutages:
    """When each host is down: host h is unavailable on [start_s[h], end_s[h]).

    Attributes
    ----------
    start_s, end_s : ndarray of float64, shape (H,)
        Outage span of each host, s; ``inf`` for both: no outage.

    Raises
    ------
    ParameterError
        If the shapes differ, a time is NaN or negative, or an end precedes its start.
    """

    start_s: FloatArray
    end_s: FloatArray

    def __post_init__(self) -> None:
        if self.start_s.ndim != 1 or self.start_s.shape != self.end_s.shape:
            raise ParameterError("outage `start_s` and `end_s` must be (H,) arrays")
        if not (self.start_s >= 0).all() or not (self.end_s >= self.start_s).all():
            raise ParameterError("outages need 0 <= start_s <= end_s")

    @classmethod
    def none(cls, hosts: int) -> HostOutages:
        """No host ever down."""
        return cls(np.full(hosts, np.inf), np.full(hosts, np.inf))

    @classmethod
    def of(cls, start_s: ArrayLike, end_s: ArrayLike) -> HostOutages:
        """From array-likes of shape (H,), s."""
        return cls(np.asarray(start_s, dtype=np.float64), np.asarray(end_s, dtype=np.float64))

    @classmethod
    def draw(
        cls,
        rng: np.random.Generator,
        hosts: int,
        share: float,
        length_days: Dist,
        duration_s: float,
    ) -> HostOutages:
        """round(share × hosts) hosts, drawn at random, each down once.

        Parameters
        ----------
        rng : numpy.random.Generator
        hosts : int
            H.
        share : float
            Share of hosts with an outage, in [0, 1].
        length_days : Dist
            Length of an outage, days (negative draws count as 0).
        duration_s : float
            The world's span [0, duration_s); an outage starts uniformly in it.

        Returns
        -------
        HostOutages
        """
        out = cls.none(hosts)
        count = int(round(share * hosts))
        if count == 0:
            return out
        down = rng.choice(hosts, size=count, replace=False)
        start = rng.uniform(0.0, duration_s, count)
        out.start_s[down] = start
        out.end_s[down] = start + np.maximum(length_days.sample(rng, count), 0.0) * DAY_S
        return out

    @property
    def hosts_down_ever(self) -> int:
        """Number of hosts with an outage of positive length."""
        return int(np.count_nonzero(self.end_s > self.start_s))

    def down(self, host: IntArray, t: float | FloatArray) -> NDArray[np.bool_]:
        """Whether host ``host[j]`` is down at time ``t`` (s), shape (k,)."""
        return np.asarray((self.start_s[host] <= t) & (t < self.end_s[host]))
