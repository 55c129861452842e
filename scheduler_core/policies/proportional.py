"""Han et al.'s heuristic strategies: uniform, change-weighted, click-weighted.

Han et al. (WWW 2020) Table 2 gives each strategy as a per-step crawl rate
ρ_i with Σ ρ_i = b, the budget of a step: uniform b/n, change-weighted
b·Δ_i/ΣΔ, click-weighted b·μ_i/Σμ (μ = click rate, W here).  Their crawl
decisions are random — "since the crawl decisions are made stochastically,
we repeat the whole evaluation process 100 times" (§5.2.1) — with ρ_i the
expected crawls of offer i in the step (Algorithm 1, line 8).  So
:class:`SamplingPolicy` crawls URL i in a step with probability π_i, the
rate ρ_i capped at one crawl per step: π_i = min(1, c·w_i) with c such that
Σ π_i = k (what a cap frees goes to the others in proportion to their
weights).  A host may take at most ``host_room[h]`` crawls: where Σ_{i∈h} π_i
would exceed it, that host's URLs get π_i = min(1, c_h·w_i) summing to the
room, and the rest of the budget is spread over the other hosts in the same
way (:func:`inclusion_probabilities`).

The k URLs are drawn by systematic sampling: the URLs are laid end to end on
a line, host by host, each covering a segment of length π_i, and the crawls
are the points u, u + 1, …, u + k − 1 (u ~ U[0, 1)).  Every URL is crawled
with probability exactly π_i, independently across steps, each step crawls
⌊Σπ⌋ or ⌈Σπ⌉ URLs, no URL twice, and a host with Σ_{i∈h} π_i ≤ room gets at
most ⌈Σ_{i∈h} π_i⌉ ≤ room.  (Han et al.'s Bernoulli draws have the same
π_i; a fixed sample size keeps each step within its budget.  Weighted
draws without replacement, ``Generator.choice(replace=False, p=…)``, would
not: their inclusion probabilities are not proportional to the weights.)
With fixed weights and no binding host the segments are laid out once and a
step costs O(k log m).

:class:`UniformPolicy` is not sampled: it revisits the URLs round-robin in
a fixed random order, like a classic frontier (the same rate b/n as Table 2's
uniform strategy, with regular instead of geometric revisit intervals).

References
----------
Han et al. (WWW 2020) Table 2 and §5.2; Cho and Garcia-Molina (2003) on
uniform and proportional refresh.
"""

from __future__ import annotations

from abc import abstractmethod
from collections.abc import Hashable
from dataclasses import dataclass
from typing import Literal

import numpy as np

from scheduler_core.errors import ParameterError
from scheduler_core.params import FloatArray
from scheduler_core.policies.base import BoolArray, IntArray, Policy, Problem
from scheduler_core.policies.lds import EarliestDueSchedule

__all__ = [
    "ProportionalPolicy",
    "SamplingPolicy",
    "UniformPolicy",
    "inclusion_probabilities",
]

#: A host's expected crawls may exceed an integer by this much and still count as it.
_MASS_TOL = 1e-9


class UniformPolicy(Policy):
    """Round-robin revisits in a fixed random order (a classic FIFO frontier).

    Every URL is crawled once per cycle of m crawls, in an order drawn once
    from ``seed``.  A URL whose host has no room keeps its place and goes
    first once the host has room.  This is
    :class:`~scheduler_core.policies.lds.EarliestDueSchedule` with period 1
    and offsets rank/m.

    References
    ----------
    Han et al. (WWW 2020) Table 2 (uniform, rate b/n); Cho and
    Garcia-Molina (2003).
    """

    name = "uniform"

    def __init__(self, *, seed: int = 0) -> None:
        super().__init__(seed=seed)
        self._schedule = EarliestDueSchedule(np.empty(0), np.empty(0))

    def start(self, problem: Problem) -> None:
        super().start(problem)
        m = problem.m
        rank = self.rng.permutation(m)
        self._schedule = EarliestDueSchedule(rank / max(m, 1), np.ones(m))

    def select(self, now: float, k: int, host_room: IntArray) -> IntArray:
        return self._schedule.take(k, self.problem.host_of, host_room)


#: Rounds of iterative capping before :func:`_water_fill` sorts to jump ahead.
_CAP_ROUNDS = 16


def _water_fill(weight: FloatArray, group: IntArray, total: FloatArray) -> FloatArray:
    """π = min(1, c_g·w) with Σ_{i∈g} π_i = min(total[g], #{i ∈ g: w_i > 0}), shape (n,).

    ``weight`` ≥ 0, ``group`` indexes ``total``.  Iterative capping: give
    every uncapped URL c_g·w with c_g = (T_g − capped)/(uncapped weight), cap
    those above 1, repeat.  Capping never has to be undone (c_g only grows),
    so this is exact, and the sums are per group (no cancellation across
    groups).  It usually ends in a few O(n) rounds; after
    :data:`_CAP_ROUNDS` a sort guesses the final capped set and the rounds
    go on from there.
    """
    groups = total.shape[0]
    capped = np.zeros(weight.shape[0], dtype=bool)
    for done in range(weight.shape[0] + _CAP_ROUNDS + 1):
        if done == _CAP_ROUNDS:
            capped = _capped_by_sorting(weight, group, total)
        free = np.bincount(group, weights=np.where(capped, 0.0, weight), minlength=groups)
        left = np.maximum(total - np.bincount(group, weights=capped, minlength=groups), 0.0)
        with np.errstate(divide="ignore", invalid="ignore"):
            c = np.where(free > 0, left / free, 0.0)
        pi = np.where(capped, 1.0, c[group] * weight)
        over = ~capped & (pi > 1.0)
        if not over.any():
            break
        capped |= over
    return np.asarray(np.clip(pi, 0.0, 1.0), dtype=np.float64)


def _capped_by_sorting(weight: FloatArray, group: IntArray, total: FloatArray) -> BoolArray:
    """The URLs :func:`_water_fill` caps at 1, from one sort (to rounding), shape (n,).

    Per group, with the weights in descending order, the first j URLs are
    capped, j the least count for which c·w of the next stays ≤ 1 with
    c = (T − j)/(weight from the next on).
    """
    n = weight.shape[0]
    order = np.lexsort((-weight, group))
    w, g = weight[order], group[order]
    starts = np.flatnonzero(np.r_[True, g[1:] != g[:-1]])
    sizes = np.diff(np.r_[starts, n])
    pos = np.arange(n) - np.repeat(starts, sizes)
    tail = np.cumsum(w[::-1])[::-1]  # Σ_{q ≥ p} w_q over the whole array
    suffix = tail - np.repeat(np.r_[tail, 0.0][starts + sizes], sizes)
    with np.errstate(divide="ignore", invalid="ignore"):
        c = np.where(suffix > 0, np.maximum(total[g] - pos, 0.0) / suffix, 0.0)
    fits = c * w <= 1.0
    first = np.minimum.reduceat(np.where(fits, pos, np.repeat(sizes, sizes)), starts)
    capped = np.zeros(n, dtype=bool)
    capped[order] = (pos < np.repeat(first, sizes)) & (w > 0)
    return capped


def inclusion_probabilities(
    weight: FloatArray, k: int, host_of: IntArray, host_room: IntArray
) -> FloatArray:
    """Per-step crawl probabilities proportional to ``weight``, capped at 1 and by host room.

    Parameters
    ----------
    weight : ndarray, shape (m,)
        w_i ≥ 0 (0: never crawled).
    k : int
        Crawls in the step, ≥ 0.
    host_of : ndarray of int64, shape (m,)
    host_room : ndarray of int64, shape (H,)
        Most crawls host h may take in the step.

    Returns
    -------
    ndarray, shape (m,)
        π_i = min(1, c_h·w_i) with Σ π_i = min(k, what the URLs with w > 0 and
        the rooms allow): c_h = c on hosts whose Σ π stays within their room,
        and the host's own c_h (summing to its room) on the others.

    References
    ----------
    Han et al. (WWW 2020) Table 2 (rates b·w_i/Σw).
    """
    m = weight.shape[0]
    hosts = host_room.shape[0]
    pi = np.zeros(m)
    open_host = np.ones(hosts, dtype=bool)
    budget = float(k)
    positive = weight > 0
    while budget > 0:
        live = np.flatnonzero(positive & open_host[host_of])
        if live.size == 0:
            break
        pi[live] = _water_fill(weight[live], np.zeros(live.size, np.int64), np.array([budget]))
        mass = np.bincount(host_of[live], weights=pi[live], minlength=hosts)
        over = open_host & (mass > host_room + _MASS_TOL)
        if not over.any():
            break
        bound = np.flatnonzero(positive & over[host_of])
        pi[bound] = _water_fill(weight[bound], host_of[bound], host_room.astype(np.float64))
        budget -= float(host_room[over].sum())
        open_host &= ~over
    return pi


@dataclass(frozen=True, slots=True)
class _Layout:
    """Segments of the systematic sample: cumulative π in the line order, host needs."""

    key: Hashable
    weight: FloatArray
    edges: FloatArray  # cumsum of π over the line order, shape (m,)
    need: IntArray  # ⌈Σ_{i∈h} π_i⌉, shape (H,)


class SamplingPolicy(Policy):
    """Crawl each URL with a per-step probability π_i by systematic sampling.

    Subclasses give the weights of a step (:meth:`step_weights`); the
    probabilities are :func:`inclusion_probabilities` of them (or the
    subclass's own when they already sum to k and no host binds).  See the
    module docstring for the sampling scheme.
    """

    def __init__(self, *, seed: int = 0) -> None:
        super().__init__(seed=seed)
        self._line: IntArray = np.empty(0, dtype=np.int64)
        self._layout: _Layout | None = None

    def start(self, problem: Problem) -> None:
        super().start(problem)
        # The line: hosts in random order, each host's URLs together in random order.
        shuffled = self.rng.permutation(problem.m)
        host_rank = self.rng.permutation(problem.hosts_count)[problem.host_of[shuffled]]
        self._line = shuffled[np.argsort(host_rank, kind="stable")]
        self._layout = None

    @abstractmethod
    def step_weights(self, now: float, k: int) -> tuple[Hashable, FloatArray, FloatArray | None]:
        """``(key, weights, probabilities)`` for a step of ``k`` crawls at ``now``.

        ``key`` identifies the weights (equal keys: equal weights, so the
        layout is reused); ``probabilities`` are π without host limits, or
        ``None`` to take :func:`inclusion_probabilities` of the weights.
        """

    def select(self, now: float, k: int, host_room: IntArray) -> IntArray:
        if k <= 0 or self.problem.m == 0:
            return np.empty(0, dtype=np.int64)
        host_of = self.problem.host_of
        key, weight, pi = self.step_weights(now, k)
        layout = self._layout
        if layout is None or layout.key != key:
            if pi is None:
                unlimited = np.full(self.problem.hosts_count, k, dtype=np.int64)
                pi = inclusion_probabilities(weight, k, host_of, unlimited)
            layout = self._lay_out(key, weight, pi)
            self._layout = layout
        if (layout.need <= host_room).all():
            return self._draw(layout.edges, host_room)
        capped = inclusion_probabilities(layout.weight, k, host_of, host_room)
        return self._draw(np.cumsum(capped[self._line]), host_room)

    def _lay_out(self, key: Hashable, weight: FloatArray, pi: FloatArray) -> _Layout:
        mass = np.bincount(self.problem.host_of, weights=pi, minlength=self.problem.hosts_count)
        need = np.ceil(mass - _MASS_TOL).astype(np.int64)
        return _Layout(key, weight, np.cumsum(pi[self._line]), need)

    def _draw(self, edges: FloatArray, host_room: IntArray) -> IntArray:
        """Systematic sample: the URLs whose segments hold u, u + 1, …; within host room."""
        total = float(edges[-1])
        u = float(self.rng.random())
        count = max(int(np.ceil(total - u)), 0)
        at = np.searchsorted(edges, u + np.arange(count), side="right")
        urls = np.unique(self._line[at[at < edges.shape[0]]])
        host = self.problem.host_of[urls]
        if (np.bincount(host, minlength=host_room.shape[0]) > host_room).any():
            # Only rounding can get here: keep each host's first `room` URLs.
            by_host = np.argsort(host, kind="stable")
            sorted_host = host[by_host]
            first = np.searchsorted(sorted_host, sorted_host, side="left")
            keep = by_host[np.arange(urls.size) - first < host_room[sorted_host]]
            urls = np.sort(urls[keep])
        return np.asarray(urls, dtype=np.int64)


class ProportionalPolicy(SamplingPolicy):
    """Change- or click-weighted sampling (Han et al. Table 2).

    Parameters
    ----------
    seed : int
        Seed of the URL line and the draws.
    by : {"change", "click"}
        Weights: the change rate Δ_i ("change-weighted") or the importance
        W_i, the click rate ("click-weighted"), from the problem's parameters.

    Raises
    ------
    ParameterError
        If ``by`` is neither.

    References
    ----------
    Han et al. (WWW 2020) Table 2 (b·Δ_i/ΣΔ, b·μ_i/Σμ) and §5.2.
    """

    def __init__(self, *, seed: int = 0, by: Literal["change", "click"] = "change") -> None:
        super().__init__(seed=seed)
        if by not in ("change", "click"):
            raise ParameterError("`by` must be 'change' or 'click'")
        self.by = by
        self.name = f"{by}-weighted"

    def step_weights(self, now: float, k: int) -> tuple[Hashable, FloatArray, FloatArray | None]:
        params = self.problem.params
        return k, params.change_rate if self.by == "change" else params.weight, None
