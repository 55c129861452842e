"""A URL frontier that serves refetch dates, as open-source crawlers run it.

The crawlers engineers deploy today keep one refetch date per URL (Nutch's
``fetchTime``, StormCrawler's ``nextFetchDate``, URLFrontier's
``refetchable_from_date``) and a scheduler that moves it after every fetch.
:class:`RefetchPolicy` is that frontier as a policy of the simulator; its
subclasses (:mod:`~scheduler_core.policies.anchors`) are the schedulers.

Serving, the same for every subclass:

- **due URLs only, most overdue first**: a step takes the URLs whose refetch
  date has passed, earliest date first (ties to the lower index), as
  URLFrontier's ``GetURLs`` hands out a queue's URLs in ``refetchable_from``
  order;
- **idle when nothing is due**: a step with fewer due URLs than crawls leaves
  the rest of the budget unused;
- **politeness as ours**: at most ``host_room[h]`` URLs of host h a step (the
  simulator's per-host token buckets);
- **a change-indicating signal makes its URL due at once** (at the signal's
  arrival), as a sitemap's ``lastmod`` does when the crawler reschedules
  from it; signals that arrive before the URL's last crawl are ignored;
- **the first refetch dates are spread**: every URL counts as fetched at time
  0, and its first refetch date is drawn uniformly in (0, initial interval]
  from the policy's seed, as in a frontier that has run for a while (the
  URLs were discovered at different times) instead of one that refetches
  everything at once.

Time is in the problem's unit (seconds in the simulator); every interval of a
subclass is a parameter in that unit.

References
----------
URLFrontier API (``crawler-commons/url-frontier``, ``urlfrontier.proto``:
``refetchable_from_date``, ``GetURLs``); Apache StormCrawler
``persistence/DefaultScheduler`` and ``persistence/AdaptiveScheduler``;
Apache Nutch ``crawl/AdaptiveFetchSchedule``; ``docs/worlds.md``.
"""

from __future__ import annotations

from abc import abstractmethod

import numpy as np

from scheduler_core.errors import ParameterError
from scheduler_core.params import FloatArray
from scheduler_core.policies.base import BoolArray, IntArray, Policy, Problem, top_k_within_room

__all__ = ["RefetchPolicy"]


class RefetchPolicy(Policy):
    """A frontier of refetch dates, served due-first (see the module docstring).

    Parameters
    ----------
    seed : int
        Seed of the first refetch dates.
    initial_interval_s : float
        Refetch interval every URL starts with, s (> 0).
    tuned : bool
        True: start from URLs ÷ budget (m / R, the best single fixed interval)
        instead of ``initial_interval_s``; the name gets ``-tuned``.
    signals_make_due : bool
        Whether a change-indicating signal makes its URL due at once.

    Attributes
    ----------
    interval_s : ndarray, shape (m,)
        Each URL's current refetch interval, s.
    due_s : ndarray, shape (m,)
        Each URL's refetch date, s (``inf``: never again).

    Raises
    ------
    ParameterError
        If ``initial_interval_s`` is not finite and > 0.
    """

    #: The scheduler's name; ``-tuned`` is appended for the tuned variant.
    base_name = "refetch"

    def __init__(
        self,
        *,
        seed: int = 0,
        initial_interval_s: float,
        tuned: bool = False,
        signals_make_due: bool = True,
    ) -> None:
        super().__init__(seed=seed)
        if not (np.isfinite(initial_interval_s) and initial_interval_s > 0):
            raise ParameterError("`initial_interval_s` must be finite and > 0")
        self.initial_interval_s = float(initial_interval_s)
        self.tuned = bool(tuned)
        self.signals_make_due = bool(signals_make_due)
        self.name = f"{self.base_name}-tuned" if tuned else self.base_name
        self.interval_s: FloatArray = np.empty(0)
        self.due_s: FloatArray = np.empty(0)
        self.start_interval_s = self.initial_interval_s

    def start(self, problem: Problem) -> None:
        super().start(problem)
        m = problem.m
        self.start_interval_s = m / problem.budget_per_s if self.tuned else self.initial_interval_s
        self.interval_s = np.full(m, self.start_interval_s)
        # (0, interval]: 1 − U with U in [0, 1)
        self.due_s = self.start_interval_s * (1.0 - self.rng.random(m))
        self.start_state(m)

    def start_state(self, m: int) -> None:
        """Set up the scheduler's own per-URL state (called by :meth:`start`)."""
        return None  # schedulers with no state beyond the interval

    def select(self, now: float, k: int, host_room: IntArray) -> IntArray:
        due = np.flatnonzero(self.due_s <= now)
        if k <= 0 or due.size == 0:
            return np.empty(0, dtype=np.int64)
        pick = top_k_within_room(-self.due_s[due], k, self.problem.host_of[due], host_room)
        return np.asarray(due[pick], dtype=np.int64)

    def observe_signals(self, url: IntArray, time: FloatArray) -> None:
        if self.signals_make_due and url.size:
            news = time > self.history.last_crawl[url]
            live = np.isfinite(self.due_s[url])  # a URL dropped for errors stays dropped
            keep = news & live
            np.minimum.at(self.due_s, url[keep], time[keep])
        super().observe_signals(url, time)

    def observe_crawls(self, url: IntArray, now: float, changed: BoolArray) -> None:
        super().observe_crawls(url, now, changed)
        if url.size:
            self.reschedule(url, now, np.asarray(changed, dtype=bool))

    def observe_failed_crawls(self, url: IntArray, now: float) -> None:
        if url.size:
            self.retry(url, now)

    @abstractmethod
    def reschedule(self, url: IntArray, now: float, changed: BoolArray) -> None:
        """Set :attr:`interval_s` and :attr:`due_s` of ``url`` (k,) fetched at ``now``
        (s), ``changed`` (k,) telling whether each had changed since its last fetch."""

    @abstractmethod
    def retry(self, url: IntArray, now: float) -> None:
        """Set :attr:`due_s` of ``url`` (k,) whose fetch at ``now`` (s) failed."""
