"""A simulated web: URLs on hosts, their parameters, and the events they produce.

Changes and clicks of URL i are Poisson processes of rates Δ_i and W_i; each
change is announced by a change-indicating signal with probability recall_i,
after a drawn delay; false signals are a Poisson process of rate ν_i (paper
004 §3 and §6.1; ``MATH.md``, "Quantities").  The world answers "did URL i
change in (t0, t1]", which decides whether a fetch finds new content and
whether a click found a fresh copy.

Time comparisons are exact.  Every time t is mapped to the integer rank
``#events < t + #events ≤ t`` of the world's event log: for an event time e and
any time t the ranks compare as e and t do (including equality), so change
lookups search integer keys ``url · stride + rank`` with no rounding.

Hosts may go down for a while (:class:`~scheduler_core.sim.outages.HostOutages`):
:meth:`World.host_down` says when a fetch fails.  Drawing a world from its spec
is :mod:`scheduler_core.sim.draw`; the event types are
:mod:`scheduler_core.sim.events`.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from functools import cached_property

import numpy as np
from numpy.typing import ArrayLike, NDArray

from scheduler_core.errors import ParameterError
from scheduler_core.params import FloatArray, UrlParams
from scheduler_core.sim.draw import draw_events, draw_signal_quality, host_counts
from scheduler_core.sim.events import (
    CHANGE,
    CLICK,
    DAY_S,
    KINDS,
    SIGNAL,
    ChangeIndex,
    EventLog,
    IntArray,
)
from scheduler_core.sim.outages import HostOutages
from scheduler_core.sim.spec import WorldSpec

__all__ = [
    "CHANGE",
    "CLICK",
    "DAY_S",
    "SIGNAL",
    "ChangeIndex",
    "EventLog",
    "HostOutages",
    "IntArray",
    "World",
]


@dataclass(eq=False)
class World:
    """A simulated web; build with :meth:`generate` or :meth:`from_arrays`.

    Attributes
    ----------
    urls : list of str
        The m URLs (``https://host017.example/page/123``).
    hosts : list of str
        The H host names.
    host_of : ndarray of int64, shape (m,)
        Host index of each URL.
    params : UrlParams
        W, Δ, recall, ν per URL, in 1/s.
    crawl_delay_s : ndarray of float64, shape (H,)
        Politeness: minimum seconds between two fetches on each host.
    budget_per_s : float
        R, crawls per second.
    duration_s : float
        The world spans [0, duration_s), s.
    warmup_s : float
        Freshness counts from here on, s.
    seed : int
        The seed the world was drawn with.
    log : EventLog
        Every click, signal and change (see :meth:`events`).
    spec : WorldSpec or None
        The spec the world was drawn from (None for a replayed trace).
    outages : HostOutages or None
        When each host is down (None: never); see :meth:`host_down`.

    Raises
    ------
    ParameterError
        If the arrays disagree in size, events are unsorted, of unknown kind,
        outside [0, duration) or name unknown URLs.
    """

    urls: list[str]
    hosts: list[str]
    host_of: IntArray
    params: UrlParams
    crawl_delay_s: FloatArray
    budget_per_s: float
    duration_s: float
    warmup_s: float
    seed: int
    log: EventLog = field(repr=False)
    spec: WorldSpec | None = None
    outages: HostOutages | None = None

    def __post_init__(self) -> None:
        m, h = len(self.urls), len(self.hosts)
        if self.outages is not None and self.outages.start_s.shape != (h,):
            raise ParameterError("`outages` must give one span per host")
        if self.params.m != m or self.host_of.shape != (m,):
            raise ParameterError("`urls`, `params` and `host_of` must describe the same URLs")
        if m and (self.host_of.min() < 0 or self.host_of.max() >= h):
            raise ParameterError("`host_of` must index `hosts`")
        if self.crawl_delay_s.shape != (h,) or not (self.crawl_delay_s >= 0).all():
            raise ParameterError("`crawl_delay_s` must have shape (H,) and be >= 0")
        if not (0 < self.budget_per_s < np.inf and 0 < self.duration_s < np.inf):
            raise ParameterError("`budget_per_s` and `duration_s` must be finite and > 0")
        if not 0 <= self.warmup_s < self.duration_s:
            raise ParameterError("`warmup_s` must lie in [0, duration_s)")
        log, n = self.log, len(self.log)
        if log.kind.shape != (n,) or log.url.shape != (n,):
            raise ParameterError("event `time`, `kind` and `url` must have one length")
        if n:
            if (log.time[1:] < log.time[:-1]).any():
                raise ParameterError("events must be sorted by time")
            if not (np.isfinite(log.time).all() and log.time[0] >= 0):
                raise ParameterError("event times must be finite and >= 0")
            if not log.time[-1] < self.duration_s:
                raise ParameterError("event times must lie in [0, duration_s)")
            if log.kind.min() < min(KINDS) or log.kind.max() > max(KINDS):
                raise ParameterError("event kinds must be CLICK, SIGNAL or CHANGE")
            if log.url.min() < 0 or log.url.max() >= m:
                raise ParameterError("events must name URLs of the world")
        if m * (2 * n + 1) * 4 >= 2**62:
            raise ParameterError("too many URLs × events for 64-bit search keys")

    # ------------------------------------------------------------------ build
    @classmethod
    def generate(cls, spec: WorldSpec) -> World:
        """Draw a world and its events on [0, duration) from ``spec``.

        Everything comes from one ``np.random.default_rng(spec.seed)``: host
        sizes (deterministic, :meth:`Dist.shares`), W, Δ, recall and ν
        (:func:`~scheduler_core.sim.draw.draw_signal_quality`), crawl delays,
        the events, then the outages (so a world with outages has the events of
        the same world without).  Vectorised: a 1000-URL,
        200-day world (~4e5 events) takes ~0.1 s; 1e5 URLs (~4e7 events) ~6 s.
        The log holds 17 bytes per event; the peak while drawing is ~50.
        Negative draws of rates and delays are clipped to 0, recall to [0, 1].

        References
        ----------
        Paper 004 §6.1 (synthetic setup); ``MATH.md``, "Quantities".
        """
        rng = np.random.default_rng(spec.seed)
        m, n_hosts = spec.urls, spec.hosts
        counts = host_counts(spec.host_size.shares(n_hosts), m)
        host_of = np.repeat(np.arange(n_hosts, dtype=np.int64), counts)
        hosts = [f"host{j:03d}.example" for j in range(n_hosts)]
        urls = [f"https://{hosts[h]}/page/{i}" for i, h in enumerate(host_of.tolist())]
        weight = np.maximum(spec.weight_per_day.sample(rng, m), 0.0) / DAY_S
        change = np.maximum(spec.change_rate_per_day.sample(rng, m), 0.0) / DAY_S
        if spec.signals:
            recall, nu = draw_signal_quality(rng, spec, change, host_of)
        else:
            recall, nu = np.zeros(m), np.zeros(m)
        params = UrlParams.create(weight, change, recall, nu)
        delays = np.maximum(spec.crawl_delay_s.sample(rng, n_hosts), 0.0)
        duration = spec.duration_days * DAY_S
        log = draw_events(rng, params, duration, spec if spec.signals else None, clicks=spec.clicks)
        outages = None
        if spec.outage_share > 0:
            outages = HostOutages.draw(rng, n_hosts, spec.outage_share, spec.outage_days, duration)
        return cls(
            urls=urls,
            hosts=hosts,
            host_of=host_of,
            params=params,
            crawl_delay_s=delays,
            budget_per_s=spec.budget_per_day / DAY_S,
            duration_s=duration,
            warmup_s=spec.warmup_fraction * duration,
            seed=spec.seed,
            log=log,
            spec=spec,
            outages=outages,
        )

    @classmethod
    def from_arrays(
        cls,
        urls: Sequence[str],
        hosts: Sequence[str],
        host_of: ArrayLike,
        params: UrlParams,
        crawl_delay_s: ArrayLike,
        budget_per_s: float,
        duration_s: float,
        warmup_s: float,
        seed: int = 0,
        *,
        events: EventLog | None = None,
        change_times_by_url: Sequence[ArrayLike] | None = None,
        outages: HostOutages | None = None,
    ) -> World:
        """A world with given URLs and given events (e.g. a replayed trace).

        Parameters
        ----------
        urls, hosts : sequence of str, lengths m and H
        host_of : array_like of int, shape (m,)
        params : UrlParams
            Per-second rates of the m URLs.
        crawl_delay_s : array_like, shape (H,)
            Seconds between two fetches on each host.
        budget_per_s, duration_s, warmup_s : float
            R (1/s), the span [0, duration_s) and the warm-up, s.
        seed : int
            Recorded only.
        events : EventLog, optional
            Clicks, signals and changes, sorted by time.
        change_times_by_url : sequence of array_like, optional
            Instead of ``events``: URL i's change times (s); the world then has
            changes only.
        outages : HostOutages, optional
            When each host is down (default: never).

        Raises
        ------
        ParameterError
            If both or neither of ``events`` and ``change_times_by_url`` are
            given, or as :class:`World`.
        """
        if (events is None) == (change_times_by_url is None):
            raise ParameterError("give exactly one of `events` and `change_times_by_url`")
        if change_times_by_url is not None:
            if len(change_times_by_url) != len(urls):
                raise ParameterError("`change_times_by_url` needs one array per URL")
            times = [np.asarray(t, dtype=np.float64).ravel() for t in change_times_by_url]
            url = np.repeat(np.arange(len(times), dtype=np.int64), [t.size for t in times])
            events = EventLog.merge([(np.concatenate([np.empty(0), *times]), CHANGE, url)])
        assert events is not None
        return cls(
            urls=list(urls),
            hosts=list(hosts),
            host_of=np.asarray(host_of, dtype=np.int64),
            params=params,
            crawl_delay_s=np.asarray(crawl_delay_s, dtype=np.float64),
            budget_per_s=float(budget_per_s),
            duration_s=float(duration_s),
            warmup_s=float(warmup_s),
            seed=int(seed),
            log=events,
            outages=outages,
        )

    # ---------------------------------------------------------------- queries
    def events(self) -> EventLog:
        """Every click, signal and change, sorted by time (the stored log, not a copy)."""
        return self.log

    def host_down(self, url: ArrayLike, t: float) -> NDArray[np.bool_]:
        """Whether the host of URL ``url[j]`` is down at ``t`` (s), shape (k,): a
        fetch of it then fails."""
        u = self._url_array(url)
        if self.outages is None:
            return np.zeros(u.shape, dtype=bool)
        return self.outages.down(self.host_of[u], t)

    def time_rank(self, t: ArrayLike) -> IntArray:
        """Integer rank ``#events < t + #events ≤ t`` of times ``t`` (s), same shape.

        Order-exact against event times: for an event time e, ``rank(t) <=
        rank(e)`` iff ``t <= e`` and ``rank(t) < rank(e)`` iff ``t < e``.
        """
        times = self.log.time
        t_arr = np.asarray(t, dtype=np.float64)
        left = np.searchsorted(times, t_arr, side="left")
        return np.asarray(left + np.searchsorted(times, t_arr, side="right"), dtype=np.int64)

    def event_rank(self, position: IntArray) -> IntArray:
        """:meth:`time_rank` of the events at ``position`` (k,) of the log, shape (k,).

        Faster than :meth:`time_rank` on event times: only tied times are searched.
        """
        times, n = self.log.time, len(self.log)
        pos = np.asarray(position, dtype=np.int64)
        t = times[pos]
        left, right = pos.copy(), pos + 1
        tie_left = (pos > 0) & (times[np.maximum(pos - 1, 0)] == t)
        tie_right = (pos < n - 1) & (times[np.minimum(pos + 1, n - 1)] == t)
        if tie_left.any():
            left[tie_left] = np.searchsorted(times, t[tie_left], side="left")
        if tie_right.any():
            right[tie_right] = np.searchsorted(times, t[tie_right], side="right")
        return np.asarray(left + right, dtype=np.int64)

    @cached_property
    def change_index(self) -> ChangeIndex:
        """The changes of every URL, CSR by URL then time (built once, cached)."""
        m, n = len(self.urls), len(self.log)
        stride = 2 * n + 1
        position = np.flatnonzero(self.log.kind == CHANGE)
        count = position.size
        rank = self.event_rank(position)
        # Sort (url, time order) by sorting packed integers: much faster than argsort.
        packed = self.log.url[position] * max(count, 1) + np.arange(count, dtype=np.int64)
        packed.sort()
        url, j = np.divmod(packed, max(count, 1))
        offsets = np.zeros(m + 1, dtype=np.int64)
        np.cumsum(np.bincount(url, minlength=m), out=offsets[1:])
        times = np.asarray(self.log.time[position[j]], dtype=np.float64)
        return ChangeIndex(url * stride + rank[j], times, offsets, stride)

    def change_times(self, url: int) -> FloatArray:
        """Change times of URL ``url``, sorted, s (a view)."""
        idx = self.change_index
        return idx.times[idx.offsets[url] : idx.offsets[url + 1]]

    def changed_between(self, url: ArrayLike, t0: ArrayLike, t1: ArrayLike) -> NDArray[np.bool_]:
        """Whether URL ``url[j]`` changed at least once in (t0[j], t1[j]].

        Parameters
        ----------
        url : array_like of int, shape (k,)
            URL indices.
        t0, t1 : array_like of float, shape (k,)
            Interval ends, s (scalars broadcast).  Exact: a change at t0 does
            not count, one at t1 does.

        Returns
        -------
        ndarray of bool, shape (k,)

        Raises
        ------
        ParameterError
            If a URL index is out of range.
        """
        idx = self.change_index
        base = self._url_array(url) * idx.stride
        lo = np.searchsorted(idx.keys, base + self.time_rank(t0), side="right")
        hi = np.searchsorted(idx.keys, base + self.time_rank(t1), side="right")
        return np.asarray(hi > lo)

    def fresh_at(self, url: ArrayLike, last_crawl: ArrayLike, t: ArrayLike) -> NDArray[np.bool_]:
        """Whether a copy of ``url[j]`` fetched at ``last_crawl[j]`` is fresh at ``t[j]``.

        ``~changed_between(url, last_crawl, t)``; shapes (k,), times in s.
        """
        return ~self.changed_between(url, last_crawl, t)

    def first_change_after(self, url: ArrayLike, t: ArrayLike) -> FloatArray:
        """Time of URL ``url[j]``'s first change strictly after ``t[j]``, s; ``inf`` if none.

        ``url`` and ``t`` have shape (k,) (scalars broadcast); returns shape (k,).
        """
        idx = self.change_index
        u = self._url_array(url)
        j = np.searchsorted(idx.keys, u * idx.stride + self.time_rank(t), side="right")
        found = j < idx.offsets[u + 1]
        picked = idx.times[np.minimum(j, max(idx.times.size - 1, 0))] if idx.times.size else 0.0
        return np.asarray(np.where(found, picked, np.inf), dtype=np.float64)

    def _url_array(self, url: ArrayLike) -> IntArray:
        u = np.asarray(url, dtype=np.int64)
        if u.size and (u.min() < 0 or u.max() >= len(self.urls)):
            raise ParameterError("`url` must index the world's URLs")
        return u
