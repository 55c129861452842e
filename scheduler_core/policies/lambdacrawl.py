"""LambdaCrawl: per-step crawl probabilities from the discrete-time optimum.

Han et al. (WWW 2020) §5.3 apply Azar et al.'s Algorithm 1 (the discrete-time
optimum, Table 2's LambdaCrawl row) to the click-weighted freshness and crawl
stochastically with the resulting rates, as for the heuristic strategies
(§5.2.1; :mod:`scheduler_core.policies.proportional`).  Here a step of ``k``
crawls lasting ``dt`` seconds has budget b = k and per-step change
probabilities Δ_i = 1 − e^{−Δ′_i·dt} (Δ′_i the change rate, 1/s); the
probabilities p_i of :func:`~scheduler_core.discrete_optimum.solve_discrete_optimum`
(Σ p_i = k, each ≤ 1) are the per-step inclusion probabilities of a
systematic sample.  Hosts short of room get their p_i scaled down to the room
and the rest spread over the others in proportion to p
(:func:`~scheduler_core.policies.proportional.inclusion_probabilities`).

``dt`` is the time since the previous step (the last ``now`` seen by
:meth:`~LambdaCrawlPolicy.select` or :meth:`~LambdaCrawlPolicy.observe_crawls`),
or ``k / budget_per_s`` at the first step.  The optimum is solved again only
when ``k`` or ``dt`` (to a relative 1e-9) changes.

References
----------
Han et al. (WWW 2020) Table 2 and §5.3; Azar et al. (PNAS 2018), Algorithm 1;
``MATH.md``, "Discrete-time variant".
"""

from __future__ import annotations

import math
from collections.abc import Hashable

import numpy as np

from scheduler_core.discrete_optimum import solve_discrete_optimum
from scheduler_core.params import FloatArray
from scheduler_core.policies.base import BoolArray, IntArray, Problem
from scheduler_core.policies.proportional import SamplingPolicy

__all__ = ["LambdaCrawlPolicy"]

#: Step lengths within this relative distance share one solution.
_DT_RTOL = 1e-9


class LambdaCrawlPolicy(SamplingPolicy):
    """Sample each step's crawls with LambdaCrawl's optimal per-step probabilities.

    Parameters
    ----------
    seed : int
        Seed of the URL line and the draws.

    Notes
    -----
    W and Δ are the problem's parameters (signals are ignored).  The last
    solution is kept as :attr:`probabilities` (shape (m,)) and
    :attr:`multiplier` (λ).

    References
    ----------
    Han et al. (WWW 2020) Table 2 and §5.3; Azar et al. (PNAS 2018),
    Algorithm 1; Avrachenkov et al. (ICC 2021) §IV-B.
    """

    name = "lambdacrawl"

    def __init__(self, *, seed: int = 0) -> None:
        super().__init__(seed=seed)
        self._previous: float | None = None
        self._solved: tuple[int, float] | None = None
        self.probabilities: FloatArray = np.empty(0)
        self.multiplier = math.nan

    def start(self, problem: Problem) -> None:
        super().start(problem)
        self._previous = None
        self._solved = None

    def step_weights(self, now: float, k: int) -> tuple[Hashable, FloatArray, FloatArray | None]:
        previous = self._previous
        dt = now - previous if previous is not None and now > previous else math.nan
        if not dt > 0:
            dt = k / self.problem.budget_per_s
        self._previous = now
        solved = self._solved
        if solved is None or solved[0] != k or abs(dt - solved[1]) > _DT_RTOL * solved[1]:
            change = -np.expm1(-self.problem.params.change_rate * dt)
            opt = solve_discrete_optimum(self.problem.params.weight, change, float(k))
            self.probabilities, self.multiplier = opt.probabilities, opt.multiplier
            self._solved = solved = (k, dt)
        return solved, self.probabilities, self.probabilities

    def observe_crawls(self, url: IntArray, now: float, changed: BoolArray) -> None:
        super().observe_crawls(url, now, changed)
        self._previous = now
