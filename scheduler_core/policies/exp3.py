"""EXP3 over crawl strategies: Han et al.'s K-armed adversarial bandit (KAB).

Han et al. (WWW 2020) §3.2, Algorithm 1: each arm is a whole strategy of
Table 2.  At step t, with arm weights w_k (initially 1) and exploration γ,

    q_k = (1 − γ)·w_k/Σ_j w_j + γ/K,

one arm A_t ~ q picks the step's crawls, its reward x_t ∈ [0, 1] is observed,
and w_{A_t} ← w_{A_t}·exp(γ/K · x_t/q_{A_t}); the other weights stay.  The
weights are kept as logarithms, shifted so that the largest is 0, so long runs
cannot overflow.

Reward (Han et al. eq. 2): over the URLs S crawled in the step,

    x_t = Σ_{i∈S} W_i·1(i had changed since its previous crawl) / Σ_{i∈S} W_i,

the click-weighted share of the step's crawls that found the copy stale (each
such crawl makes the copy fresh again, a gain of click-weighted freshness).
W is the importance (click rate) from the problem's parameters and the change
indicator is the crawl outcome of :meth:`Exp3Policy.observe_crawls`, so no
clicks are needed.  A step that crawls nothing, or only URLs with W = 0, has
no reward and leaves the weights as they are.

Arms are full policies: by default uniform (round robin), change-weighted,
click-weighted and LambdaCrawl (Han et al.'s KAB with the impression-weighted
arm left out: the model has no impressions), each with a seed drawn from this
policy's generator.  Every arm sees every observation (signals, clicks if any
arm wants them, all crawls) so that its history is the crawler's; only the
chosen arm's :meth:`select` runs, so a round-robin arm advances only when it
is played.

References
----------
Han et al. (WWW 2020) §3.2 (eq. 1, 2; Algorithm 1; γ = 0.1), §5.4;
Auer et al. (2002), EXP3.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

import numpy as np

from scheduler_core.errors import ParameterError
from scheduler_core.params import FloatArray
from scheduler_core.policies.base import BoolArray, IntArray, Policy, Problem
from scheduler_core.policies.lambdacrawl import LambdaCrawlPolicy
from scheduler_core.policies.proportional import ProportionalPolicy, UniformPolicy

__all__ = ["DEFAULT_ARMS", "Exp3Policy"]

ArmFactory = Callable[[int], Policy]


def _uniform(seed: int) -> Policy:
    return UniformPolicy(seed=seed)


def _change_weighted(seed: int) -> Policy:
    return ProportionalPolicy(seed=seed, by="change")


def _click_weighted(seed: int) -> Policy:
    return ProportionalPolicy(seed=seed, by="click")


def _lambdacrawl(seed: int) -> Policy:
    return LambdaCrawlPolicy(seed=seed)


#: Han et al.'s arms without the impression-weighted one: seed → policy.
DEFAULT_ARMS: tuple[ArmFactory, ...] = (_uniform, _change_weighted, _click_weighted, _lambdacrawl)


class Exp3Policy(Policy):
    """EXP3 over whole crawl strategies (Han et al. Algorithm 1).

    Parameters
    ----------
    seed : int
        Seed of the arm draws; the arms' seeds are drawn from it.
    gamma : float
        γ ∈ (0, 1], exploration probability (Han et al. use 0.1).
    arms : sequence of callables, optional
        Factories ``seed -> Policy``, one per arm (default :data:`DEFAULT_ARMS`).

    Attributes
    ----------
    arms : list of Policy
    probabilities : ndarray, shape (K,)
        q of the latest step (uniform before the first).
    chosen : int
        Index of the arm that made the latest selection (-1 before the first).

    Raises
    ------
    ParameterError
        If ``gamma`` lies outside (0, 1] or there are no arms.

    References
    ----------
    Han et al. (WWW 2020) §3.2, Algorithm 1 and eq. (2).
    """

    name = "exp3"

    def __init__(
        self, *, seed: int = 0, gamma: float = 0.1, arms: Sequence[ArmFactory] | None = None
    ) -> None:
        super().__init__(seed=seed)
        if not 0 < gamma <= 1:
            raise ParameterError("`gamma` must lie in (0, 1]")
        factories = DEFAULT_ARMS if arms is None else tuple(arms)
        if not factories:
            raise ParameterError("`arms` must not be empty")
        self.gamma = float(gamma)
        seeds = self.rng.integers(0, 2**63 - 1, size=len(factories))
        self.arms = [make(int(s)) for make, s in zip(factories, seeds, strict=True)]
        self.wants_clicks = any(arm.wants_clicks for arm in self.arms)
        k = len(self.arms)
        self._log_weight: FloatArray = np.zeros(k)
        self.probabilities: FloatArray = np.full(k, 1.0 / k)
        self.chosen = -1
        self._pending = -1

    def start(self, problem: Problem) -> None:
        super().start(problem)
        for arm in self.arms:
            arm.start(problem)
        self._log_weight[:] = 0.0
        self.probabilities = self._distribution()
        self.chosen = self._pending = -1

    def _distribution(self) -> FloatArray:
        w = np.exp(self._log_weight - self._log_weight.max())
        k = w.shape[0]
        return np.asarray((1.0 - self.gamma) * w / w.sum() + self.gamma / k, dtype=np.float64)

    def select(self, now: float, k: int, host_room: IntArray) -> IntArray:
        self.probabilities = q = self._distribution()
        arm = int(self.rng.choice(q.shape[0], p=q))
        self.chosen = self._pending = arm
        return self.arms[arm].select(now, k, host_room)

    def observe_signals(self, url: IntArray, time: FloatArray) -> None:
        super().observe_signals(url, time)
        for arm in self.arms:
            arm.observe_signals(url, time)

    def observe_clicks(self, url: IntArray, time: FloatArray) -> None:
        for arm in self.arms:
            if arm.wants_clicks:
                arm.observe_clicks(url, time)

    def observe_crawls(self, url: IntArray, now: float, changed: BoolArray) -> None:
        super().observe_crawls(url, now, changed)
        for policy in self.arms:
            policy.observe_crawls(url, now, changed)
        arm, self._pending = self._pending, -1
        if arm < 0:
            return
        w = self.problem.params.weight[url]
        total = float(w.sum())
        if total <= 0:
            return
        reward = float(w[changed].sum()) / total
        k = self._log_weight.shape[0]
        self._log_weight[arm] += self.gamma / k * reward / self.probabilities[arm]
        self._log_weight -= self._log_weight.max()
