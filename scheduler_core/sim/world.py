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
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from functools import cached_property
from typing import Any

import numpy as np
from numpy.typing import ArrayLike, NDArray

from scheduler_core.errors import ParameterError
from scheduler_core.params import FloatArray, UrlParams
from scheduler_core.sim.spec import WorldSpec

__all__ = ["CHANGE", "CLICK", "DAY_S", "SIGNAL", "ChangeIndex", "EventLog", "World"]

#: Seconds per day.
DAY_S = 86_400.0
#: Event kinds of :class:`EventLog` (``kind`` codes).
CLICK, SIGNAL, CHANGE = 0, 1, 2
_KINDS = (CLICK, SIGNAL, CHANGE)

IntArray = NDArray[np.int64]


@dataclass(frozen=True, slots=True)
class EventLog:
    """Events sorted by time.

    Attributes
    ----------
    time : ndarray of float64, shape (n,)
        Event times, s from the start of the world, nondecreasing.
    kind : ndarray of int8, shape (n,)
        :data:`CLICK`, :data:`SIGNAL` or :data:`CHANGE`.
    url : ndarray of int64, shape (n,)
        Index of the URL the event concerns.
    """

    time: FloatArray
    kind: NDArray[np.int8]
    url: IntArray

    def __len__(self) -> int:
        return int(self.time.shape[0])

    def window(self, t0: float, t1: float) -> EventLog:
        """The events with ``t0 <= time < t1``: views found by binary search, O(log n)."""
        i, j = np.searchsorted(self.time, [t0, t1], side="left")
        return EventLog(self.time[i:j], self.kind[i:j], self.url[i:j])

    @classmethod
    def merge(cls, parts: Sequence[tuple[ArrayLike, int, ArrayLike]]) -> EventLog:
        """Merge ``(time (k,), kind, url (k,))`` groups into one log sorted by time.

        The sort is stable: at equal times, earlier groups come first.

        Raises
        ------
        ParameterError
            If a group's times and URLs differ in length or a kind is unknown.
        """
        times, kinds, urls = [], [], []
        for t, k, u in parts:
            t_arr = np.asarray(t, dtype=np.float64).ravel()
            u_arr = np.asarray(u, dtype=np.int64).ravel()
            if t_arr.shape != u_arr.shape or k not in _KINDS:
                raise ParameterError("each event group needs (time, kind, url) of one length")
            times.append(t_arr)
            urls.append(u_arr)
            kinds.append(np.full(t_arr.size, k, dtype=np.int8))
        if not times:
            return cls(np.empty(0), np.empty(0, np.int8), np.empty(0, np.int64))
        time = np.concatenate(times)
        order = np.argsort(time, kind="stable")
        return cls(time[order], np.concatenate(kinds)[order], np.concatenate(urls)[order])


@dataclass(frozen=True, slots=True)
class ChangeIndex:
    """Change times in CSR layout, URL by URL, with exact integer search keys.

    Attributes
    ----------
    keys : ndarray of int64, shape (k,)
        ``url · stride + rank(change time)``, sorted.
    times : ndarray of float64, shape (k,)
        Change times, s, by URL then time.
    offsets : ndarray of int64, shape (m + 1,)
        URL i's changes are ``times[offsets[i]:offsets[i + 1]]``.
    stride : int
        ``2n + 1`` for an event log of n events (ranks lie in [0, 2n]).
    """

    keys: IntArray
    times: FloatArray
    offsets: IntArray
    stride: int


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

    def __post_init__(self) -> None:
        m, h = len(self.urls), len(self.hosts)
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
            if log.kind.min() < min(_KINDS) or log.kind.max() > max(_KINDS):
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
        sizes (deterministic, :meth:`Dist.shares`), W, Δ, recall, ν (ν_i = draw
        × mean Δ), crawl delays, then the events.  Vectorised: a 1000-URL,
        200-day world (~4e5 events) takes ~0.1 s; 1e5 URLs (~4e7 events) ~6 s.
        The log holds 17 bytes per event; the peak while drawing is ~50.
        Negative draws of rates and delays are clipped to 0, recall to [0, 1].

        References
        ----------
        Paper 004 §6.1 (synthetic setup); ``MATH.md``, "Quantities".
        """
        rng = np.random.default_rng(spec.seed)
        m, n_hosts = spec.urls, spec.hosts
        counts = _host_counts(spec.host_size.shares(n_hosts), m)
        host_of = np.repeat(np.arange(n_hosts, dtype=np.int64), counts)
        hosts = [f"host{j:03d}.example" for j in range(n_hosts)]
        urls = [f"https://{hosts[h]}/page/{i}" for i, h in enumerate(host_of.tolist())]
        weight = np.maximum(spec.weight_per_day.sample(rng, m), 0.0) / DAY_S
        change = np.maximum(spec.change_rate_per_day.sample(rng, m), 0.0) / DAY_S
        if spec.signals:
            recall = np.clip(spec.recall.sample(rng, m), 0.0, 1.0)
            nu = np.maximum(spec.false_signal_rate.sample(rng, m), 0.0) * change.mean()
        else:
            recall, nu = np.zeros(m), np.zeros(m)
        params = UrlParams.create(weight, change, recall, nu)
        delays = np.maximum(spec.crawl_delay_s.sample(rng, n_hosts), 0.0)
        duration = spec.duration_days * DAY_S
        log = _simulate(rng, params, duration, spec if spec.signals else None, clicks=spec.clicks)
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
        )

    # ---------------------------------------------------------------- queries
    def events(self) -> EventLog:
        """Every click, signal and change, sorted by time (the stored log, not a copy)."""
        return self.log

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


def _host_counts(shares: FloatArray, m: int) -> IntArray:
    """URLs per host, shape (H,): one each, the rest by largest remainder of ``shares``."""
    extra = shares * (m - shares.size)
    counts = np.floor(extra).astype(np.int64)
    short = (m - shares.size) - int(counts.sum())
    counts[np.argsort(-(extra - counts), kind="stable")[:short]] += 1
    return counts + 1


def _simulate(
    rng: np.random.Generator,
    params: UrlParams,
    duration: float,
    signals: WorldSpec | None,
    *,
    clicks: bool = True,
) -> EventLog:
    """The events of ``params`` on [0, duration), sorted by time.

    Clicks, changes and false signals are one marked Poisson process: the number
    of events of each (URL, kind) is Poisson(rate · duration); given the counts,
    the times are i.i.d. uniform, so sorted uniform times get a random
    permutation of the labels (no argsort of the whole log).  Announced changes
    then get a signal after a drawn delay, merged in linearly.
    """
    m = params.m
    rates = np.zeros((3, m))
    if clicks:
        rates[CLICK] = params.weight
    rates[CHANGE] = params.change_rate
    if signals is not None:
        rates[SIGNAL] = params.false_signal_rate
    counts = rng.poisson(rates * duration).ravel()
    # label = 4·url + kind; int32 halves the memory of the shuffle when it fits
    codes: NDArray[np.signedinteger[Any]] = np.add.outer(
        np.arange(3, dtype=np.int64), 4 * np.arange(m, dtype=np.int64)
    ).ravel()
    if 4 * m < 2**31:
        codes = codes.astype(np.int32)
    labels = np.repeat(codes, counts)
    del codes, counts
    rng.shuffle(labels)
    time = rng.uniform(0.0, duration, labels.size)
    time.sort()
    _clip_below(time, duration)
    kind = (labels & 3).astype(np.int8)
    url = (labels >> 2).astype(np.int64)
    del labels
    if signals is None:
        return EventLog(time, kind, url)
    changes = np.flatnonzero(kind == CHANGE)
    announced = changes[rng.random(changes.size) < params.recall[url[changes]]]
    delay = np.maximum(signals.signal_delay_s.sample(rng, announced.size), 0.0)
    sig_time = time[announced] + delay
    sig_url = url[announced]
    if (sig_time[1:] < sig_time[:-1]).any():
        order = np.argsort(sig_time, kind="stable")
        sig_time, sig_url = sig_time[order], sig_url[order]
    cut = int(np.searchsorted(sig_time, duration, side="left"))
    return _merge_sorted(EventLog(time, kind, url), sig_time[:cut], SIGNAL, sig_url[:cut])


def _clip_below(time: FloatArray, duration: float) -> None:
    """Move draws that rounded up to ``duration`` just below it (sorted ``time``, in place)."""
    start = int(np.searchsorted(time, duration, side="left"))
    time[start:] = np.nextafter(duration, 0.0)


def _merge_sorted(log: EventLog, time: FloatArray, kind: int, url: IntArray) -> EventLog:
    """Insert sorted events of one ``kind`` into ``log``, after its events of equal time."""
    n, k = len(log), time.size
    at = np.searchsorted(log.time, time, side="right") + np.arange(k, dtype=np.int64)
    keep = np.ones(n + k, dtype=bool)
    keep[at] = False
    out_time = np.empty(n + k)
    out_time[at], out_time[keep] = time, log.time
    out_kind = np.empty(n + k, dtype=np.int8)
    out_kind[at], out_kind[keep] = kind, log.kind
    out_url = np.empty(n + k, dtype=np.int64)
    out_url[at], out_url[keep] = url, log.url
    return EventLog(out_time, out_kind, out_url)
