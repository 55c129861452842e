"""The in-process simulator: steps, bandwidth, politeness, event delivery, scoring."""

from __future__ import annotations

import numpy as np
import pytest

from scheduler_core.errors import ParameterError
from scheduler_core.params import FloatArray
from scheduler_core.policies.base import BoolArray, IntArray, Policy, Problem
from scheduler_core.sim import DAY_S, SIGNAL, Dist, World, WorldSpec, round_robin_freshness
from scheduler_core.sim.bandwidth import Bandwidth
from scheduler_core.sim.simulator import problem_of, simulate


class Cyclic(Policy):
    """URL j mod m at the j-th crawl: round robin in index order; records what it sees."""

    name = "cyclic"

    def start(self, problem: Problem) -> None:
        super().start(problem)
        self.next = 0
        self.signals: list[tuple[int, float]] = []
        self.steps: list[float] = []
        self.changed: list[bool] = []

    def select(self, now: float, k: int, host_room: IntArray) -> IntArray:
        m = self.problem.m
        out: list[int] = []
        room = host_room.copy()
        for j in range(self.next, self.next + m):
            if len(out) == k:
                break
            i = j % m
            h = self.problem.host_of[i]
            if room[h] > 0 and i not in out:
                out.append(i)
                room[h] -= 1
        self.next = (out[-1] + 1) if out else self.next
        self.steps.append(now)
        return np.asarray(out, dtype=np.int64)

    def observe_signals(self, url: IntArray, time: FloatArray) -> None:
        super().observe_signals(url, time)
        self.signals.extend(zip(url.tolist(), time.tolist(), strict=True))

    def observe_crawls(self, url: IntArray, now: float, changed: BoolArray) -> None:
        super().observe_crawls(url, now, changed)
        self.changed.extend(changed.tolist())


class Greedy(Policy):
    """Asks for every URL of host 0 each step (to test the politeness check)."""

    def select(self, now: float, k: int, host_room: IntArray) -> IntArray:
        return np.flatnonzero(self.problem.host_of == 0)[:k].astype(np.int64)


def small_world(**changes: object) -> World:
    spec = WorldSpec(urls=30, hosts=3, duration_days=20, budget_per_day=15.0, seed=4)
    return World.generate(spec.replace(**changes))


def test_bandwidth_inverts_its_cumulative_budget() -> None:
    b = Bandwidth.steps([(0.0, 2.0), (5.0, 4.0), (9.0, 1.0)])
    assert b.crawls_before(5.0) == pytest.approx(10.0)
    assert b.crawls_before(10.0) == pytest.approx(27.0)
    t = np.array([0.0, 3.0, 10.0, 26.0, 27.0, 30.0])
    back = [b.crawls_before(x) for x in b.time_of_crawls(t)]
    np.testing.assert_allclose(back, t)
    assert b.rate_at(4.99) == 2.0 and b.rate_at(5.0) == 4.0


@pytest.mark.parametrize(
    "segments", [[], [(1.0, 1.0)], [(0.0, 1.0), (0.0, 2.0)], [(0.0, 0.0)], [(0.0, np.inf)]]
)
def test_bandwidth_rejects_nonsense(segments: list[tuple[float, float]]) -> None:
    with pytest.raises(ParameterError):
        Bandwidth.steps(segments)


def test_one_crawl_a_step_is_round_robin_exactly() -> None:
    world = small_world()
    result = simulate(world, Cyclic())
    url, t = result.crawl_url, result.crawl_time
    rate = world.budget_per_s
    expected_t = np.arange(1, t.size + 1) / rate
    np.testing.assert_allclose(t, expected_t, rtol=1e-12)
    np.testing.assert_array_equal(url, np.arange(t.size) % len(world.urls))
    assert result.report == round_robin_freshness(world)


def test_policy_sees_each_signal_once_before_the_step_it_precedes() -> None:
    world = small_world()
    policy = Cyclic()
    simulate(world, policy, crawls_per_step=3)
    log = world.events()
    sig = log.kind == SIGNAL
    last_step = policy.steps[-1]
    seen = log.time[sig] <= last_step
    assert [u for u, _ in policy.signals] == log.url[sig][seen].tolist()
    times = np.array([t for _, t in policy.signals])
    steps = np.array(policy.steps)
    # each signal arrives after the previous step and at or before the next one
    at = np.searchsorted(steps, times, side="left")
    assert (times <= steps[at]).all()
    assert (at == 0).all() or (times[at > 0] > steps[at[at > 0] - 1]).all()


def test_changed_flags_are_the_worlds_changes() -> None:
    world = small_world()
    policy = Cyclic()
    result = simulate(world, policy)
    last = np.zeros(len(world.urls))
    expected = []
    for u, t in zip(result.crawl_url.tolist(), result.crawl_time.tolist(), strict=True):
        expected.append(bool(world.changed_between([u], [last[u]], [t])[0]))
        last[u] = t
    assert policy.changed == expected


def test_batched_steps_crawl_at_the_budget() -> None:
    world = small_world()
    result = simulate(world, Cyclic(), crawls_per_step=4)
    total = world.budget_per_s * world.duration_s
    assert total - 4 <= result.report.crawls <= total
    assert np.unique(result.crawl_time).size == result.steps


def test_changing_bandwidth_changes_the_crawl_rate() -> None:
    world = small_world()
    band = Bandwidth.steps([(0.0, 10 / DAY_S), (5 * DAY_S, 30 / DAY_S), (10 * DAY_S, 10 / DAY_S)])
    result = simulate(world, Cyclic(), bandwidth=band)
    per_day = np.bincount((result.crawl_time // DAY_S).astype(int), minlength=20)
    assert per_day[1:5].tolist() == [10] * 4
    assert per_day[6:10].tolist() == [30] * 4
    assert per_day[11:19].tolist() == [10] * 8


def test_host_limits_hold_crawls_to_each_hosts_rate() -> None:
    delay = 4 * 3600.0  # 6 crawls a day per host
    world = small_world(crawl_delay_s=Dist.of("const", value=delay), budget_per_day=30.0)
    result = simulate(world, Cyclic(), host_limits=True, crawls_per_step=2)
    hosts = world.host_of[result.crawl_url]
    for h in range(len(world.hosts)):
        t = result.crawl_time[hosts == h]
        # a token bucket of depth max(1, k_h·dt): over any span at most rate·span + depth
        for span in (DAY_S, 5 * DAY_S):
            counts = np.searchsorted(t, t + span, side="left") - np.arange(t.size)
            assert counts.max() <= span / delay + 1
    assert result.report.crawls <= 3 * 6 * 20 + 3


def test_a_selection_over_a_hosts_room_is_an_error() -> None:
    world = small_world(crawl_delay_s=Dist.of("const", value=DAY_S))
    with pytest.raises(ParameterError, match="host 0"):
        simulate(world, Greedy(), host_limits=True, crawls_per_step=5)


def test_problem_of_reports_limits_and_believed_params() -> None:
    world = small_world(crawl_delay_s=Dist.of("const", value=10.0))
    assert np.isinf(problem_of(world).host_limit_per_s).all()
    limited = problem_of(world, host_limits=True, params_seen=world.params.without_signals())
    np.testing.assert_allclose(limited.host_limit_per_s, 0.1)
    assert (limited.params.recall == 0).all()
    with pytest.raises(ParameterError):
        problem_of(world, params_seen=world.params.take([0, 1]))
    with pytest.raises(ParameterError):
        simulate(world, Cyclic(), crawls_per_step=0)


def test_worlds_without_clicks_are_scored_by_time() -> None:
    world = small_world(clicks=False)
    result = simulate(world, Cyclic())
    assert result.report.clicks == 0
    assert result.accuracy == result.report.time_weighted
    assert 0 < result.accuracy < 1
