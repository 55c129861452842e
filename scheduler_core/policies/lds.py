"""LDS: Azar et al.'s low-discrepancy schedule of continuous crawl rates.

Azar et al. (PNAS 2018) turn the continuous optimum's rates ξ_i into a discrete
schedule (their Algorithm 3, "LDS" in paper 004 §6.4): URL i gets the ideal
crawl times (j + u_i)/ξ_i, j = 0, 1, 2, …, with an independent offset
u_i ~ U[0, 1); the sequences of all URLs are merged and crawled in time order,
earliest deadline first.  With Σ ξ_i = R the n-th merged time is close to
n/R, so crawling them one after another at R per second keeps every URL
within about one crawl of ξ_i·t (paper 004 App. B, Fig. 7).

What this module implements, step by step: each URL keeps its next ideal time
``due_i`` (initially u_i/ξ_i; ``inf`` when ξ_i = 0).  A step of ``k`` crawls
takes the ``k`` URLs with the earliest ``due_i`` — at most ``host_room[h]`` on
host h, ties to the lower index — and advances each by one period 1/ξ_i.  A
URL held back by its host keeps its due time and goes first once the host has
room.  The schedule follows the merged order, not the clock: a step takes the
next ``k`` ideal times whatever ``now`` is, so a larger budget consumes the
sequence faster (every rate scales by the same factor, no recomputation) and a
smaller one slower.  A step never crawls a URL twice, so a URL with ξ_i above
one crawl per step gets one per step.

:class:`EarliestDueSchedule` is the shared machinery (the round-robin
:class:`~scheduler_core.policies.proportional.UniformPolicy` is the special
case of equal rates and evenly spaced offsets).  Small steps (``k`` up to
about m/1000) use a binary heap, O(k log m) per step; larger ones one
partial sort, O(m).

References
----------
Azar et al. (PNAS 2018), Algorithm 3; paper 004 §6.4 and App. B (LDS with
BASELINE rates); ``MATH.md``, "The continuous optimum (BASELINE)".
"""

from __future__ import annotations

import heapq

import numpy as np
from numpy.typing import ArrayLike

from scheduler_core.errors import ParameterError
from scheduler_core.optimal import baseline
from scheduler_core.params import FloatArray, as_float_array
from scheduler_core.policies.base import IntArray, Policy, Problem, top_k_within_room

__all__ = ["EarliestDueSchedule", "LowDiscrepancyPolicy", "top_k_within_room_prefix"]

#: The heap serves steps of at most m/_HEAP_RATIO crawls (measured crossover).
_HEAP_RATIO = 1000
#: The heap path gives up (and sorts) after setting aside this many URLs per crawl …
_HEAP_SKIP_PER_CRAWL = 8
#: … and is not tried again for this many steps.
_HEAP_REST_STEPS = 32


def top_k_within_room_prefix(
    score: FloatArray, k: int, host_of: IntArray, host_room: IntArray
) -> IntArray:
    """:func:`~scheduler_core.policies.base.top_k_within_room`, faster when hosts bind.

    Same arguments and result.  When some host's room is below ``k`` it ranks
    only a prefix of the order — every URL scoring at least the c-th highest
    score, ties included, c = 2j + 64 with j = min(k, what the hosts can
    take) — and widens the prefix fourfold until j URLs fit.  A prefix gives
    each of its URLs the same rank on its host as the full order, so the
    answer is the same; URLs of hosts without room are ranked last so that
    no prefix holds them.  The cost is O(m) plus a sort of the prefix instead
    of a sort of all ``m``.
    """
    m = score.shape[0]
    if k <= 0 or m == 0 or int(host_room.min(initial=k)) >= k:
        return top_k_within_room(score, k, host_of, host_room)
    fits = np.minimum(np.bincount(host_of, minlength=host_room.shape[0]), host_room)
    want = min(k, int(fits.sum()))  # the size of the answer
    full = host_room[host_of] <= 0
    if full.any():
        score = np.where(full, -np.inf, score)
    c = 2 * want + 64
    while c < m:
        threshold = np.partition(score, m - c)[m - c]
        cand = np.flatnonzero(score >= threshold)
        picked = top_k_within_room(score[cand], k, host_of[cand], host_room)
        if picked.size >= want:
            return np.asarray(cand[picked], dtype=np.int64)
        c *= 4
    return top_k_within_room(score, k, host_of, host_room)


class EarliestDueSchedule:
    """Earliest-due-first over ``m`` periodic sequences of ideal times.

    Parameters
    ----------
    first_due : ndarray, shape (m,)
        Each URL's first ideal time (any unit; ``inf``: never).
    period : ndarray, shape (m,)
        Time between a URL's ideal times, > 0 (``inf``: once).

    Attributes
    ----------
    due : ndarray, shape (m,)
        Each URL's next ideal time.
    """

    def __init__(self, first_due: FloatArray, period: FloatArray) -> None:
        if first_due.shape != period.shape or not (period > 0).all():
            raise ParameterError("`period` must be > 0 and match `first_due`")
        self.due = np.array(first_due, dtype=np.float64)
        self.period = np.array(period, dtype=np.float64)
        # (due, url) entries; an entry whose due is no longer the URL's is stale
        # and skipped (due times only grow).  None: not built.
        self._heap: list[tuple[float, int]] | None = None
        self._heap_rest = 0  # steps to skip the heap after it gave up

    def take(self, k: int, host_of: IntArray, host_room: IntArray) -> IntArray:
        """The ``k`` URLs due first, at most ``host_room[h]`` on host h; advance them.

        Returns
        -------
        ndarray of int64, shape (j,), j ≤ k
            In due order; only URLs with a finite due time.
        """
        m = self.due.shape[0]
        k = min(k, int(host_room.sum()))
        if k <= 0 or m == 0:
            return np.empty(0, dtype=np.int64)
        small = k * _HEAP_RATIO <= m
        if small and self._heap_rest > 0:
            self._heap_rest -= 1
        elif small:
            chosen = self._take_from_heap(k, host_of, host_room)
            if chosen is not None:
                return chosen
            self._heap_rest = _HEAP_REST_STEPS
        chosen = top_k_within_room_prefix(-self.due, k, host_of, host_room)
        chosen = chosen[np.isfinite(self.due[chosen])]
        self.due[chosen] += self.period[chosen]
        if small and self._heap is not None:
            for i in chosen.tolist():
                heapq.heappush(self._heap, (float(self.due[i]), i))
        else:
            self._heap = None  # rebuilt when next needed
        return chosen

    def _take_from_heap(self, k: int, host_of: IntArray, host_room: IntArray) -> IntArray | None:
        """Heap path, O(k log m); ``None`` (nothing taken) if too many hosts are full."""
        if self._heap is None:
            finite = np.flatnonzero(np.isfinite(self.due))
            self._heap = list(zip(self.due[finite].tolist(), finite.tolist(), strict=True))
            heapq.heapify(self._heap)
        heap, due = self._heap, self.due
        chosen: list[tuple[float, int]] = []
        held: list[tuple[float, int]] = []
        used: dict[int, int] = {}
        limit = _HEAP_SKIP_PER_CRAWL * k + 64
        while len(chosen) < k and heap:
            item = heapq.heappop(heap)
            if item[0] != due[item[1]]:
                continue  # stale
            h = int(host_of[item[1]])
            n = used.get(h, 0)
            if n < host_room[h]:
                used[h] = n + 1
                chosen.append(item)
            else:
                held.append(item)
                if len(held) > limit:
                    for back in chosen + held:
                        heapq.heappush(heap, back)
                    return None
        for item in held:
            heapq.heappush(heap, item)
        urls = np.fromiter((i for _, i in chosen), dtype=np.int64, count=len(chosen))
        due[urls] += self.period[urls]
        for i in urls.tolist():
            heapq.heappush(heap, (float(due[i]), i))
        return urls


class LowDiscrepancyPolicy(Policy):
    """LDS: earliest-deadline-first over the ideal times (j + u_i)/ξ_i (Azar et al. Alg. 3).

    Parameters
    ----------
    seed : int
        Seed of the offsets u_i ~ U[0, 1).
    rates : array_like, shape (m,), optional
        ξ_i, crawls per second, ≥ 0 (0: never crawled).  Default: BASELINE's
        continuous optimum for the problem's parameters and budget,
        ``baseline(problem.params, problem.budget_per_s).rates`` (no signals,
        no host limits).

    Raises
    ------
    ParameterError
        From :meth:`start`, if ``rates`` has the wrong shape or holds a
        negative, NaN or infinite rate.

    Notes
    -----
    See the module docstring for the schedule and how host room and a
    changing budget are handled.  Nothing is learned from observations.

    References
    ----------
    Azar et al. (PNAS 2018), Algorithm 3; paper 004 §6.4 and App. B.
    """

    name = "lds"

    def __init__(self, *, seed: int = 0, rates: ArrayLike | None = None) -> None:
        super().__init__(seed=seed)
        self._given_rates = None if rates is None else np.asarray(rates, dtype=np.float64)
        self._schedule = EarliestDueSchedule(np.empty(0), np.empty(0))
        self.rates: FloatArray = np.empty(0)

    def start(self, problem: Problem) -> None:
        super().start(problem)
        if self._given_rates is None:
            rates = baseline(problem.params, problem.budget_per_s).rates
        else:
            rates = as_float_array("rates", self._given_rates, problem.m)
            if not np.isfinite(rates).all() or (rates < 0).any():
                raise ParameterError("`rates` must be finite and >= 0")
        self.rates = rates
        offset = self.rng.random(problem.m)
        positive = rates > 0
        safe = np.where(positive, rates, 1.0)
        period = np.where(positive, 1.0 / safe, np.inf)
        self._schedule = EarliestDueSchedule(np.where(positive, offset / safe, np.inf), period)

    def select(self, now: float, k: int, host_room: IntArray) -> IntArray:
        return self._schedule.take(k, self.problem.host_of, host_room)
