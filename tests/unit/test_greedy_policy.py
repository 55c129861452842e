"""The GREEDY family: exact argmax of crawl value, value models, T_DELAY."""

from __future__ import annotations

import numpy as np
import pytest

from scheduler_core.errors import ParameterError
from scheduler_core.params import UrlParams
from scheduler_core.policies import GreedyPolicy, make_policy
from scheduler_core.policies.base import IntArray, Problem, top_k_within_room
from scheduler_core.policies.greedy import value_model
from scheduler_core.sim import World, WorldSpec, round_robin_freshness
from scheduler_core.sim.simulator import problem_of, simulate
from scheduler_core.value import crawl_value


class BruteForce(GreedyPolicy):
    """The same policy, evaluating every URL every step (no bounds)."""

    def select(self, now: float, k: int, host_room: IntArray) -> IntArray:
        from scheduler_core.policies.base import top_k_within_room

        values = self.values(now, np.arange(self.problem.m))
        return top_k_within_room(values, k, self.problem.host_of, host_room)


def world(seed: int = 2, **changes: object) -> World:
    spec = WorldSpec(urls=60, hosts=4, duration_days=15, budget_per_day=30.0, seed=seed)
    return World.generate(spec.replace(**changes))


@pytest.mark.parametrize("model", ["greedy", "cis", "ncis", "ncis-approx-2", "cis+"])
@pytest.mark.parametrize("k", [1, 4])
def test_bounds_change_no_decision(model: str, k: int) -> None:
    w = world()
    fast, slow = GreedyPolicy(model), BruteForce(model)
    a = simulate(w, fast, crawls_per_step=k)
    b = simulate(w, slow, crawls_per_step=k)
    np.testing.assert_array_equal(a.crawl_url, b.crawl_url)


class Checked(GreedyPolicy):
    """The policy, checking each of its steps against the exact argmax on its own state:
    the same URLs in the same order as ``top_k_within_room`` of every URL's value."""

    def start(self, problem: Problem) -> None:
        super().start(problem)
        self.steps = 0
        self.wrong = 0

    def select(self, now: float, k: int, host_room: IntArray) -> IntArray:
        exact = top_k_within_room(
            self.values(now, np.arange(self.problem.m)), k, self.problem.host_of, host_room
        )
        picked = super().select(now, k, host_room)
        self.steps += 1
        self.wrong += int(not np.array_equal(picked, exact))
        return picked


@pytest.mark.parametrize(
    ("model", "k", "limits", "discard_s"),
    [
        ("ncis", 1, False, 0.0),
        ("ncis-approx-2", 1, False, 0.0),
        ("cis", 1, False, 0.0),
        ("ncis", 3, True, 0.0),
        ("ncis", 1, False, 7200.0),
        ("greedy", 2, True, 0.0),
    ],
)
def test_every_pick_is_the_exact_argmax(model: str, k: int, limits: bool, discard_s: float) -> None:
    """1,000-odd steps of a 300-URL world with noisy signals (and tight host limits):
    every step's picks, in order, are the argmax of V over all URLs, and most steps
    are decided by the bounds alone."""
    w = world(seed=8, urls=300, hosts=12, duration_days=25, budget_per_day=40.0 * k)
    if limits:
        w = World.from_arrays(
            w.urls, w.hosts, w.host_of, w.params, np.full(len(w.hosts), 3 * 3600.0),
            w.budget_per_s, w.duration_s, w.warmup_s, events=w.events(),
        )  # fmt: skip
    policy = Checked(model, signal_discard_s=discard_s)
    result = simulate(w, policy, crawls_per_step=k, host_limits=limits)
    assert policy.steps == result.steps > 900
    assert policy.wrong == 0
    assert policy.batches < 0.5 * result.steps


def test_bounds_skip_most_urls_on_a_larger_world() -> None:
    w = world(urls=1000, hosts=20, duration_days=10, budget_per_day=100.0)
    policy = GreedyPolicy("ncis")
    result = simulate(w, policy, crawls_per_step=2)
    assert policy.evaluated < 0.05 * 1000 * result.steps


def test_exact_also_when_the_budget_jumps_and_hosts_bind() -> None:
    from scheduler_core.sim import Dist
    from scheduler_core.sim.bandwidth import Bandwidth

    w = world(seed=5, crawl_delay_s=Dist.of("const", value=3 * 3600.0))
    band = Bandwidth.steps(
        [(0.0, 30 / 86_400), (10 * 86_400, 90 / 86_400), (20 * 86_400, 20 / 86_400)]
    )
    a = simulate(w, GreedyPolicy("ncis"), crawls_per_step=3, bandwidth=band, host_limits=True)
    b = simulate(w, BruteForce("ncis"), crawls_per_step=3, bandwidth=band, host_limits=True)
    np.testing.assert_array_equal(a.crawl_url, b.crawl_url)


@pytest.mark.slow
def test_greedy_beats_round_robin_and_signals_help() -> None:
    w = world(seed=3, urls=200, hosts=10, duration_days=60, budget_per_day=40.0)
    rr = round_robin_freshness(w).click_weighted
    greedy = simulate(w, GreedyPolicy("greedy"), crawls_per_step=2)
    ncis = simulate(w, GreedyPolicy("ncis"), crawls_per_step=2)
    se = greedy.report.click_stderr
    assert greedy.accuracy > rr + 3 * se
    assert ncis.accuracy > greedy.accuracy + 3 * se


def test_value_models() -> None:
    p = UrlParams.create(
        weight=[1.0, 1.0], change_rate=[1.0, 1.0], recall=[0.9, 0.3], false_signal_rate=[0.1, 0.5]
    )
    g, _ = value_model("greedy", p)
    assert (g.signal_rate == 0).all()
    cis, _ = value_model("cis", p)
    assert (cis.false_signal_rate == 0).all() and np.isinf(cis.signal_time_equivalent).all()
    plus, _ = value_model("cis+", p)  # URL 0: precision 0.9, recall 0.9; URL 1: poor signals
    assert np.isinf(plus.signal_time_equivalent[0]) and plus.signal_rate[1] == 0
    ncis, terms = value_model("ncis-approx-3", p)
    assert terms == 3 and ncis is p
    with pytest.raises(ParameterError, match="unknown GREEDY model"):
        value_model("ncis-approx-0", p)


def test_names_and_bad_options() -> None:
    assert make_policy("greedy").name == "greedy"
    assert make_policy("greedy-cis+").name == "greedy-cis+"
    assert make_policy("greedy-ncis", signal_discard_s=5.0).name == "greedy-ncis-d"
    with pytest.raises(ParameterError):
        make_policy("greedy-nope")
    with pytest.raises(ParameterError):
        make_policy("nope")
    with pytest.raises(ParameterError):
        GreedyPolicy("ncis", signal_discard_s=-1.0)


def test_signals_within_t_delay_of_a_crawl_are_discarded() -> None:
    p = GreedyPolicy("ncis", signal_discard_s=10.0)
    w = world()
    p.start(problem_of(w))
    p.observe_crawls(np.array([0, 1]), 100.0, np.array([True, False]))
    p.observe_signals(np.array([0, 0, 1, 2]), np.array([105.0, 111.0, 110.0, 50.0]))
    assert p.history.signals[:3].tolist() == [1, 0, 1]
    tau = p.history.effective_elapsed(120.0, w.params)
    assert tau[1] == 20.0 and tau[0] > 20.0
    v = p.values(120.0, np.array([0, 1]))
    expected = crawl_value(w.params.take([0, 1]), tau[:2])
    np.testing.assert_allclose(v, expected)
