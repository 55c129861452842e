"""A simulated web: URLs on hosts, their parameters, and the events they produce.

Changes and clicks of URL i are Poisson processes of rates Δ_i and W_i; each
change is announced by a change-indicating signal with probability recall_i,
after a drawn delay; false signals are a Poisson process of rate ν_i (paper
004 §3 and §6.1; ``MATH.md``, "Quantities").  The world answers "did URL i
change between t0 and t1", which decides whether a fetch finds new content and
whether a click found a fresh copy.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from functools import cached_property

import numpy as np
from numpy.typing import ArrayLike, NDArray

from scheduler_core.errors import ParameterError
from scheduler_core.params import FloatArray, UrlParams
from scheduler_core.sim.spec import WorldSpec

__all__ = ["CHANGE", "CLICK", "DAY_S", "SIGNAL", "EventLog", "World"]

DAY_S = 86_400.0
#: Event kinds of :class:`EventLog`.
CLICK, SIGNAL, CHANGE = 0, 1, 2

IntArray = NDArray[np.int64]


@dataclass(frozen=True, slots=True)
class EventLog:
    """Events sorted by time: ``time`` (n,) s, ``kind`` (n,) int8, ``url`` (n,) int64."""

    time: FloatArray
    kind: NDArray[np.int8]
    url: IntArray

    def __len__(self) -> int:
        return int(self.time.shape[0])

    def window(self, t0: float, t1: float) -> EventLog:
        """The events with t0 ≤ time < t1 (a view, found by binary search)."""
        i, j = np.searchsorted(self.time, [t0, t1], side="left")
        return EventLog(self.time[i:j], self.kind[i:j], self.url[i:j])

    @classmethod
    def merge(cls, parts: list[tuple[FloatArray, int, IntArray]]) -> EventLog:
        """Merge (time, kind, url) groups into one log sorted by time (stable)."""
        time = np.concatenate([t for t, _, _ in parts]) if parts else np.empty(0)
        kind = np.concatenate([np.full(t.size, k, dtype=np.int8) for t, k, _ in parts])
        url = np.concatenate([u for _, _, u in parts]) if parts else np.empty(0, np.int64)
        order = np.argsort(time, kind="stable")
        return cls(time[order], kind[order], url[order].astype(np.int64))


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
    crawl_delay_s : ndarray, shape (H,)
        Politeness: minimum seconds between fetches on each host.
    budget_per_s : float
        R, crawls per second.
    duration_s, warmup_s : float
        Simulated span [0, duration) and the warm-up before freshness counts.
    seed : int
        The seed the world was drawn with.
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
            raise ParameterError("urls, params and host_of must describe the same URLs")
        if m and (self.host_of.min() < 0 or self.host_of.max() >= h):
            raise ParameterError("host_of must index hosts")
        if self.crawl_delay_s.shape != (h,) or (self.crawl_delay_s < 0).any():
            raise ParameterError("crawl_delay_s must be (H,) and >= 0")
        if not (self.budget_per_s > 0 and self.duration_s > 0):
            raise ParameterError("budget_per_s and duration_s must be > 0")
        if not 0 <= self.warmup_s < self.duration_s:
            raise ParameterError("warmup_s must lie in [0, duration_s)")
        if len(self.log) and (self.log.url.min() < 0 or self.log.url.max() >= m):
            raise ParameterError("events must name URLs of the world")

    # ------------------------------------------------------------------ build
    @classmethod
    def generate(cls, spec: WorldSpec) -> World:
        """Draw a world from ``spec`` (seeded, vectorised; O(m + events) memory)."""
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
        log = _simulate(rng, params, duration, spec)
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
        *,
        urls: list[str],
        hosts: list[str],
        host_of: ArrayLike,
        params: UrlParams,
        crawl_delay_s: ArrayLike,
        budget_per_s: float,
        duration_s: float,
        warmup_s: float,
        events: EventLog,
        seed: int = 0,
    ) -> World:
        """A world with given URLs and a given event log (e.g. a replayed trace).

        Raises
        ------
        ParameterError
            If the arrays disagree in size or the events name unknown URLs.
        """
        return cls(
            urls=list(urls),
            hosts=list(hosts),
            host_of=np.asarray(host_of, dtype=np.int64),
            params=params,
            crawl_delay_s=np.asarray(crawl_delay_s, dtype=np.float64),
            budget_per_s=float(budget_per_s),
            duration_s=float(duration_s),
            warmup_s=float(warmup_s),
            seed=seed,
            log=events,
        )

    # ---------------------------------------------------------------- queries
    def events(self) -> EventLog:
        """Every click, signal and change, sorted by time."""
        return self.log

    @cached_property
    def _changes(self) -> tuple[FloatArray, FloatArray, IntArray]:
        """(sort keys url + t/scale, change times, CSR offsets), by URL then time."""
        is_change = self.log.kind == CHANGE
        url, time = self.log.url[is_change], self.log.time[is_change]
        order = np.lexsort((time, url))
        url, time = url[order], time[order]
        offsets = np.zeros(len(self.urls) + 1, dtype=np.int64)
        np.cumsum(np.bincount(url, minlength=len(self.urls)), out=offsets[1:])
        return url + time / self._scale, time, offsets

    @cached_property
    def _scale(self) -> float:
        return self.duration_s * (1.0 + 1e-9) + 1.0

    def change_times(self, url: int) -> FloatArray:
        """Change times of one URL, sorted, seconds."""
        _, times, offsets = self._changes
        return times[offsets[url] : offsets[url + 1]]

    def changed_between(self, url: ArrayLike, t0: ArrayLike, t1: ArrayLike) -> NDArray[np.bool_]:
        """Whether URL ``url[j]`` changed in (t0[j], t1[j]], shape (k,).

        ``url`` (k,) int, ``t0`` and ``t1`` (k,) seconds (scalars broadcast).
        Times are resolved to ~1e-9 of the duration.
        """
        keys, _, _ = self._changes
        u = np.asarray(url, dtype=np.float64)
        lo = np.searchsorted(keys, u + self._clip(t0) / self._scale, side="right")
        hi = np.searchsorted(keys, u + self._clip(t1) / self._scale, side="right")
        return np.asarray(hi > lo)

    def _clip(self, t: ArrayLike) -> FloatArray:
        """Times clipped to [0, duration]: no change happens outside, keys stay in-URL."""
        return np.clip(np.asarray(t, dtype=np.float64), 0.0, self.duration_s)

    def first_change_after(self, url: ArrayLike, t: ArrayLike) -> FloatArray:
        """Time of URL ``url[j]``'s first change after ``t[j]`` (s, ``inf`` if none), (k,)."""
        keys, times, offsets = self._changes
        u = np.asarray(url, dtype=np.int64)
        j = np.searchsorted(keys, u + self._clip(t) / self._scale, side="right")
        found = j < offsets[u + 1]
        picked = times[np.minimum(j, times.size - 1)] if times.size else np.zeros(u.shape)
        return np.asarray(np.where(found, picked, np.inf), dtype=np.float64)


def _host_counts(shares: FloatArray, m: int) -> IntArray:
    """URLs per host: one each, the rest by largest remainder of ``shares``."""
    extra = shares * (m - shares.size)
    counts = np.floor(extra).astype(np.int64)
    short = (m - shares.size) - int(counts.sum())
    counts[np.argsort(-(extra - counts), kind="stable")[:short]] += 1
    return counts + 1


def _poisson_times(
    rng: np.random.Generator, rates: FloatArray, duration: float
) -> tuple[FloatArray, IntArray]:
    """Times and URLs of independent Poisson processes of ``rates`` on [0, duration)."""
    counts = rng.poisson(rates * duration)
    url = np.repeat(np.arange(rates.size, dtype=np.int64), counts)
    return rng.uniform(0.0, duration, url.size), url


def _simulate(
    rng: np.random.Generator, params: UrlParams, duration: float, spec: WorldSpec
) -> EventLog:
    change_t, change_u = _poisson_times(rng, params.change_rate, duration)
    click_t, click_u = _poisson_times(rng, params.weight, duration)
    parts = [(click_t, CLICK, click_u), (change_t, CHANGE, change_u)]
    if spec.signals:
        announced = rng.random(change_t.size) < params.recall[change_u]
        delay = np.maximum(spec.signal_delay_s.sample(rng, int(announced.sum())), 0.0)
        sig_t = change_t[announced] + delay
        keep = sig_t < duration
        false_t, false_u = _poisson_times(rng, params.false_signal_rate, duration)
        parts.append(
            (
                np.concatenate([sig_t[keep], false_t]),
                SIGNAL,
                np.concatenate([change_u[announced][keep], false_u]),
            )
        )
    return EventLog.merge(parts)
