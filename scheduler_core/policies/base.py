"""One interface for every crawl policy the simulator runs.

A policy is told the problem once (:meth:`Policy.start`), then, step by step,
what it observed (signals, clicks, its own crawls' outcomes) and asked which
URLs to crawl now (:meth:`Policy.select`).  Each policy takes a ``seed`` and
builds its own ``np.random.Generator``, so runs are reproducible and policies
never share a random stream (house style 13, after river's bandit policies).

The simulator (:mod:`scheduler_core.sim.simulator`) calls, at each step time
``now`` (nondecreasing):

1. ``observe_signals`` / ``observe_clicks`` with the events that arrived since
   the previous step (times in (previous step, now]);
2. ``select(now, k, host_room)``, which returns at most ``k`` distinct URL
   indices, at most ``host_room[h]`` of them on host ``h``;
3. ``observe_crawls`` with those URLs, ``now`` and whether each had changed
   since its previous crawl (what a fetch that compares content reveals);
   ``observe_failed_crawls`` first with those whose host was down (no copy
   fetched: they are not in ``observe_crawls``).

Every URL counts as crawled at time 0.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from dataclasses import dataclass, field

import numpy as np
from numpy.typing import NDArray

from scheduler_core.errors import ParameterError
from scheduler_core.params import FloatArray, UrlParams

__all__ = [
    "BoolArray",
    "CrawlHistory",
    "IntArray",
    "Policy",
    "Problem",
    "check_selection",
    "top_k_within_room",
]

IntArray = NDArray[np.int64]
BoolArray = NDArray[np.bool_]


@dataclass(frozen=True)
class Problem:
    """What a policy is told before the first step.

    Attributes
    ----------
    params : UrlParams
        The parameters the policy believes, ``m`` URLs (the truth for an oracle
        policy; corrupted or estimated ones otherwise).  Rates in 1/s.
    host_of : ndarray of int64, shape (m,)
        Host index of each URL, in [0, H).
    host_limit_per_s : ndarray of float64, shape (H,)
        k_h, most crawls per second on host h (``inf``: no limit).
    budget_per_s : float
        R at the start, crawls per second (it may change later; the policy sees
        the change only through ``k`` in :meth:`Policy.select`).
    duration_s : float
        Length of the run, s.
    urls : tuple of str
        URL names (for policies that talk to a URL frontier by name).
    hosts : tuple of str
        Host names, length H.
    """

    params: UrlParams
    host_of: IntArray
    host_limit_per_s: FloatArray
    budget_per_s: float
    duration_s: float
    urls: tuple[str, ...] = field(default=(), repr=False)
    hosts: tuple[str, ...] = field(default=(), repr=False)

    def __post_init__(self) -> None:
        m = self.params.m
        if self.host_of.shape != (m,):
            raise ParameterError("`host_of` must have shape (m,)")
        h = self.host_limit_per_s.shape[0] if self.host_limit_per_s.ndim == 1 else -1
        if h < 1 or (m and not 0 <= self.host_of.min() <= self.host_of.max() < h):
            raise ParameterError("`host_of` must index `host_limit_per_s`")
        if not (self.host_limit_per_s > 0).all():
            raise ParameterError("`host_limit_per_s` must be > 0")
        if not (0 < self.budget_per_s < np.inf and 0 < self.duration_s < np.inf):
            raise ParameterError("`budget_per_s` and `duration_s` must be finite and > 0")
        if self.urls and len(self.urls) != m:
            raise ParameterError("`urls` must name the m URLs")
        if self.hosts and len(self.hosts) != h:
            raise ParameterError("`hosts` must name the H hosts")

    @property
    def m(self) -> int:
        """Number of URLs."""
        return self.params.m

    @property
    def hosts_count(self) -> int:
        """Number of hosts H."""
        return int(self.host_limit_per_s.shape[0])


class CrawlHistory:
    """What a policy knows of each URL: last crawl time and signals since it.

    Attributes
    ----------
    last_crawl : ndarray, shape (m,)
        Time of each URL's last crawl, s (0 at the start).
    signals : ndarray of int64, shape (m,)
        Signals counted since the last crawl.
    crawls : ndarray of int64, shape (m,)
        Crawls so far.
    signal_discard_s : float
        T_DELAY: a signal that arrives within this long after the URL's last
        crawl is not counted (paper 004 App. C; ``MATH.md``, "Delayed signals").
    """

    def __init__(self, m: int, signal_discard_s: float = 0.0) -> None:
        if signal_discard_s < 0:
            raise ParameterError("`signal_discard_s` must be >= 0")
        self.last_crawl = np.zeros(m)
        self.signals = np.zeros(m, dtype=np.int64)
        self.crawls = np.zeros(m, dtype=np.int64)
        self.signal_discard_s = float(signal_discard_s)

    def add_signals(self, url: IntArray, time: FloatArray) -> None:
        """Count signals ``url`` (k,) arriving at ``time`` (k,), s, unless they come
        at or before the URL's last crawl, or within T_DELAY after it."""
        if url.size:
            keep = time > self.last_crawl[url] + self.signal_discard_s
            np.add.at(self.signals, url[keep], 1)

    def add_crawls(self, url: IntArray, now: float) -> None:
        """URLs ``url`` (k,) were crawled at ``now``: τ and n reset."""
        self.last_crawl[url] = now
        self.signals[url] = 0
        self.crawls[url] += 1

    def elapsed(self, now: float) -> FloatArray:
        """τ, s since each URL's last crawl, shape (m,)."""
        return np.maximum(now - self.last_crawl, 0.0)

    def effective_elapsed(self, now: float, params: UrlParams) -> FloatArray:
        """τeff = τ + β·n, s, shape (m,) (``inf`` after a signal when β = ∞)."""
        beta = params.signal_time_equivalent
        with np.errstate(invalid="ignore"):
            shift = np.where(self.signals > 0, beta * self.signals, 0.0)
        return np.asarray(self.elapsed(now) + shift, dtype=np.float64)


class Policy(ABC):
    """A crawl policy: picks which URLs to crawl at each step.

    Parameters
    ----------
    seed : int
        Seed of the policy's own ``np.random.Generator`` (``self.rng``).

    Subclasses set :attr:`name`, implement :meth:`select`, and override the
    ``observe_*`` hooks they need (the defaults keep :attr:`history`).
    :attr:`wants_clicks` tells the simulator whether to pass clicks at all
    (they are the bulk of the events).
    """

    name: str = "policy"
    wants_clicks: bool = False
    #: True for a policy that enforces politeness itself (the service, by its
    #: hosts' crawl delays): the simulator then does not hold it to ``host_room``.
    own_politeness: bool = False

    def __init__(self, *, seed: int = 0) -> None:
        self.seed = int(seed)
        self.rng = np.random.default_rng(self.seed)
        self._problem: Problem | None = None
        self.history = CrawlHistory(0)

    @property
    def problem(self) -> Problem:
        """The problem given to :meth:`start`.

        Raises
        ------
        RuntimeError
            Before :meth:`start`.
        """
        if self._problem is None:
            raise RuntimeError(f"{self.name}: start() was not called")
        return self._problem

    def start(self, problem: Problem) -> None:
        """Take the problem; called once before the first step."""
        self._problem = problem
        self.history = CrawlHistory(problem.m, self.signal_discard_s)

    #: T_DELAY of :class:`CrawlHistory` (a subclass or instance may set it).
    signal_discard_s: float = 0.0

    @abstractmethod
    def select(self, now: float, k: int, host_room: IntArray) -> IntArray:
        """The URLs to crawl at ``now`` (s).

        Parameters
        ----------
        now : float
            Current time, s.
        k : int
            Crawls this step may use (≥ 0).
        host_room : ndarray of int64, shape (H,)
            Most crawls each host may take this step (politeness).

        Returns
        -------
        ndarray of int64, shape (j,), j ≤ k
            Distinct URL indices, at most ``host_room[h]`` on host h.
        """

    def observe_signals(self, url: IntArray, time: FloatArray) -> None:
        """Change-indicating signals ``url`` (k,) that arrived at ``time`` (k,), s."""
        self.history.add_signals(url, time)

    def observe_clicks(self, url: IntArray, time: FloatArray) -> None:
        """Requests (clicks) on ``url`` (k,) at ``time`` (k,), s; only if :attr:`wants_clicks`."""
        return None  # most policies ignore clicks

    def observe_crawls(self, url: IntArray, now: float, changed: BoolArray) -> None:
        """The URLs ``url`` (k,) selected at ``now`` were fetched; ``changed`` (k,) says
        whether each had changed since its previous crawl."""
        self.history.add_crawls(url, now)

    def observe_failed_crawls(self, url: IntArray, now: float) -> None:
        """The URLs ``url`` (k,) selected at ``now`` could not be fetched (their host
        was down): no copy came back.  The default keeps :attr:`history` as it was,
        so the URL looks as stale as before (a policy with no back-off may pick it
        again at once)."""
        return None

    def finish(self) -> None:
        """The run is over (release resources; called once by the simulator)."""
        return None  # most policies hold nothing to release


def check_selection(
    selected: IntArray, k: int, host_of: IntArray, host_room: IntArray, m: int
) -> None:
    """Raise ParameterError unless ``selected`` is a valid answer of :meth:`Policy.select`.

    Valid: a 1-d integer array of at most ``k`` distinct indices in [0, m), with
    at most ``host_room[h]`` on each host h.
    """
    if selected.ndim != 1 or not np.issubdtype(selected.dtype, np.integer):
        raise ParameterError("a selection must be a 1-d integer array")
    if selected.size > k:
        raise ParameterError(f"selected {selected.size} URLs, more than k = {k}")
    if selected.size == 0:
        return
    if selected.min() < 0 or selected.max() >= m:
        raise ParameterError("a selection must index the problem's URLs")
    if np.unique(selected).size != selected.size:
        raise ParameterError("a selection must not repeat a URL")
    per_host = np.bincount(host_of[selected], minlength=host_room.size)
    if (per_host > host_room).any():
        h = int(np.flatnonzero(per_host > host_room)[0])
        raise ParameterError(f"host {h} got {per_host[h]} crawls, room for {host_room[h]}")


def top_k_within_room(
    score: FloatArray, k: int, host_of: IntArray, host_room: IntArray
) -> IntArray:
    """The ``k`` URLs of highest ``score`` with at most ``host_room[h]`` on host h.

    Parameters
    ----------
    score : ndarray, shape (m,)
        Any ordering key (crawl value, priority); ``-inf`` URLs come last, NaN
        is not allowed.  Ties go to the lower index.
    k : int
        Most URLs to return (≥ 0).
    host_of : ndarray of int64, shape (m,)
    host_room : ndarray of int64, shape (H,)

    Returns
    -------
    ndarray of int64, shape (j,), j = min(k, URLs that fit)
        In descending score order.
    """
    m = score.shape[0]
    if k <= 0 or m == 0:
        return np.empty(0, dtype=np.int64)
    if int(host_room.min(initial=k)) >= k:  # no host limit can bind: a partial sort
        if k < m:
            cut = np.partition(-score, k - 1)[k - 1]  # minus the k-th highest score
            above = np.flatnonzero(-score < cut)
            tied = np.flatnonzero(-score == cut)[: k - above.size]  # lower indices first
            part = np.concatenate([above, tied])
            top = part[np.lexsort((part, -score[part]))]
        else:
            top = np.lexsort((np.arange(m), -score))
        return np.asarray(top, dtype=np.int64)
    order = np.lexsort((np.arange(m), -score))
    h = host_of[order]
    by_host = np.argsort(h, kind="stable")
    sorted_h = h[by_host]
    starts = np.flatnonzero(np.r_[True, sorted_h[1:] != sorted_h[:-1]])
    sizes = np.diff(np.r_[starts, m])
    rank = np.empty(m, dtype=np.int64)
    rank[by_host] = np.arange(m) - np.repeat(starts, sizes)
    return np.asarray(order[rank < host_room[h]][:k], dtype=np.int64)
