"""Exact GREEDY in any time unit: no floor in seconds may enter the argmax.

A world of 1,000 URLs with W, Δ ~ U(0, 1) per unit of time and R = 100 per unit,
once with the unit a second and once a day: the policy's pick at each of 1,000
steps is compared with the brute-force argmax of crawl value on the policy's own
state (same history, every URL evaluated).
"""

from __future__ import annotations

import numpy as np
import pytest

from scheduler_core.policies import GreedyPolicy
from scheduler_core.policies.base import IntArray, Problem, top_k_within_room
from scheduler_core.sim import DAY_S, Dist, World, WorldSpec
from scheduler_core.sim.simulator import simulate


class Checked(GreedyPolicy):
    """The policy, counting the steps where its pick differs from the brute-force argmax."""

    def start(self, problem: Problem) -> None:
        super().start(problem)
        self.wrong = 0
        self.steps = 0

    def select(self, now: float, k: int, host_room: IntArray) -> IntArray:
        values = self.values(now, np.arange(self.problem.m))
        exact = top_k_within_room(values, k, self.problem.host_of, host_room)
        picked = super().select(now, k, host_room)
        self.steps += 1
        self.wrong += int(not np.array_equal(np.sort(picked), np.sort(exact)))
        return picked


def world_in(unit_s: float, *, signals: bool) -> World:
    """1,000 URLs, W and Δ ~ U(0, 1) per ``unit_s`` seconds, R = 100 per unit, 1,000 steps."""
    per_day = DAY_S / unit_s
    spec = WorldSpec(
        urls=1000,
        hosts=20,
        weight_per_day=Dist.of("uniform", low=0.0, high=per_day),
        change_rate_per_day=Dist.of("uniform", low=0.0, high=per_day),
        budget_per_day=100.0 * per_day,
        duration_days=10.005 / per_day,
        signals=signals,
        seed=11,
    )
    return World.generate(spec)


@pytest.mark.parametrize("unit_s", [1.0, DAY_S], ids=["per-second", "per-day"])
@pytest.mark.parametrize("model", ["greedy", "ncis"])
def test_no_wrong_pick_in_any_time_unit(unit_s: float, model: str) -> None:
    world = world_in(unit_s, signals=model != "greedy")
    policy = Checked(model)
    result = simulate(world, policy)
    assert result.steps == policy.steps == 1000
    assert policy.wrong == 0
