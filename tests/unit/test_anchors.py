"""The anchors' refetch rules against hand-computed values, and how their frontier serves.

Nutch ``AdaptiveFetchSchedule`` and StormCrawler ``AdaptiveScheduler`` /
``DefaultScheduler`` with their shipped defaults (``docs/worlds.md``, "The anchors").
"""

from __future__ import annotations

import math

import numpy as np
import pytest

from scheduler_core.errors import ParameterError
from scheduler_core.params import UrlParams
from scheduler_core.policies import (
    ANCHOR_NAMES,
    FixedIntervalPolicy,
    NutchAdaptivePolicy,
    StormCrawlerAdaptivePolicy,
    make_policy,
)
from scheduler_core.policies.anchors import nutch_adaptive_update, stormcrawler_adaptive_update
from scheduler_core.policies.base import Problem
from scheduler_core.policies.frontier import RefetchPolicy

DAY, HOUR = 86_400.0, 3_600.0


def problem(m: int = 6, hosts: int = 2, budget_per_s: float = 1e-3) -> Problem:
    rng = np.random.default_rng(3)
    params = UrlParams.create(rng.uniform(0, 1, m), rng.uniform(0.1, 1, m))
    host_of = np.arange(m, dtype=np.int64) % hosts
    return Problem(params, host_of, np.full(hosts, np.inf), budget_per_s, duration_s=400 * DAY)


def nutch(now: float, interval: float, modified: float, changed: bool, **kw: float) -> tuple:
    i, due, mod = nutch_adaptive_update(
        now, np.array([interval]), np.array([modified]), np.array([changed]), **kw
    )
    return float(i[0]), float(due[0]), float(mod[0])


# --- Nutch AdaptiveFetchSchedule --------------------------------------------------------


def test_nutch_unchanged_then_changed_then_unchanged_with_sync_delta() -> None:
    # unchanged at day 100, no change seen yet: ×1.4, counted from the fetch
    i, due, mod = nutch(100 * DAY, 30 * DAY, math.nan, False)
    assert (i / DAY, due / DAY) == pytest.approx((42.0, 142.0)) and math.isnan(mod)
    # changed at day 142: ×0.8, the change time becomes the fetch time (δ = 0)
    i, due, mod = nutch(142 * DAY, i, mod, True)
    assert (i / DAY, due / DAY, mod / DAY) == pytest.approx((33.6, 175.6, 142.0))
    # unchanged at 175.6: ×1.4 = 47.04; δ = 33.6 days, next counted from fetch − 0.3·δ
    i, due, mod = nutch(175.6 * DAY, i, mod, False)
    assert (i / DAY, due / DAY, mod / DAY) == pytest.approx((47.04, 175.6 - 10.08 + 47.04, 142))


def test_nutch_sync_delta_lifts_the_interval_to_the_time_since_the_change() -> None:
    i, due, _ = nutch(50 * DAY, 1 * DAY, 40 * DAY, False)
    assert (i / DAY, due / DAY) == pytest.approx((10.0, 50 - 3 + 10))
    i, due, _ = nutch(50 * DAY, 1 * DAY, 40 * DAY, False, sync_delta=False)
    assert (i / DAY, due / DAY) == pytest.approx((1.4, 51.4))


def test_nutch_clamps_to_min_and_max() -> None:
    i, mod = 100.0, math.nan
    seen = []
    for step in range(4):
        i, _, mod = nutch(1e6 + step, i, mod, True)
        seen.append(i)
    assert seen == pytest.approx([80.0, 64.0, 60.0, 60.0])  # 51.2 clamped to 60 s
    i, due, _ = nutch(10 * DAY, 300 * DAY, math.nan, False)
    assert (i / DAY, due / DAY) == pytest.approx((365.0, 375.0))


def test_nutch_sync_offset_beyond_the_maximum_is_scaled() -> None:
    now, changed_at = 2000 * DAY, 1 * DAY  # δ = 1999 days: 0.3·δ > 365 days
    i, due, _ = nutch(now, 30 * DAY, changed_at, False)
    assert i == pytest.approx(365 * DAY)  # δ lifts it, the clamp holds it
    assert due == pytest.approx(now - 0.3 * 365 * DAY + 365 * DAY)


def test_nutch_policy_follows_the_rule_and_its_failures() -> None:
    pol = NutchAdaptivePolicy(seed=0)
    pol.start(problem())
    url = np.array([0, 1])
    pol.observe_crawls(url, 40 * DAY, np.array([True, False]))
    np.testing.assert_allclose(pol.interval_s[url] / DAY, [24.0, 42.0])
    np.testing.assert_allclose(pol.due_s[url] / DAY, [64.0, 82.0])
    # failures: a day later, twice; the third in a row: the page-gone schedule
    for k, t in enumerate((50.0, 51.0)):
        pol.observe_failed_crawls(np.array([0]), t * DAY)
        assert pol.due_s[0] == pytest.approx((t + 1) * DAY) and pol.failures[0] == k + 1
    pol.observe_failed_crawls(np.array([0]), 52 * DAY)
    assert pol.interval_s[0] / DAY == pytest.approx(36.0)  # 24 × 1.5
    assert pol.due_s[0] / DAY == pytest.approx(88.0)
    pol.interval_s[1] = 70 * DAY  # × 1.5 would pass 90 days: 0.9 × 90 instead
    pol.failures[1] = 2
    pol.observe_failed_crawls(np.array([1]), 60 * DAY)
    assert pol.interval_s[1] / DAY == pytest.approx(81.0)
    pol.observe_crawls(np.array([0]), 90 * DAY, np.array([False]))  # success resets
    assert pol.failures[0] == 0


# --- StormCrawler AdaptiveScheduler and DefaultScheduler ------------------------------------


def test_stormcrawler_changed_sequence_approaches_the_minimum() -> None:
    interval, seen = np.array([24 * HOUR]), []
    for _ in range(12):
        interval = stormcrawler_adaptive_update(interval, np.array([True]))
        seen.append(float(interval[0]) / HOUR)
    assert seen[:3] == pytest.approx([12.5, 6.75, 3.875])
    assert all(a > b > 1.0 for a, b in zip(seen, seen[1:], strict=False))
    assert seen[-1] == pytest.approx(1.0 + 23.0 / 2**12)


def test_stormcrawler_unchanged_sequence_grows_to_the_maximum() -> None:
    interval, seen = np.array([24 * HOUR]), []
    for _ in range(8):
        interval = stormcrawler_adaptive_update(interval, np.array([False]))
        seen.append(float(interval[0]) / HOUR)
    assert seen == pytest.approx([36, 54, 81, 121.5, 182.25, 273.375, 336, 336])


def test_stormcrawler_policy_resets_after_an_error_and_drops_after_three() -> None:
    pol = StormCrawlerAdaptivePolicy(seed=0)
    pol.start(problem())
    pol.observe_crawls(np.array([0]), 10 * DAY, np.array([False]))
    assert pol.interval_s[0] == pytest.approx(36 * HOUR)
    pol.observe_failed_crawls(np.array([0]), 12 * DAY)
    assert pol.due_s[0] == pytest.approx(12 * DAY + 2 * HOUR)
    # the next success starts again from the default interval, changed or not
    pol.observe_crawls(np.array([0]), 13 * DAY, np.array([True]))
    assert pol.interval_s[0] == pytest.approx(DAY) and pol.due_s[0] == pytest.approx(14 * DAY)
    for t in (20.0, 21.0, 22.0):
        pol.observe_failed_crawls(np.array([0]), t * DAY)
    assert pol.due_s[0] == np.inf  # ERROR: never refetched
    pol.observe_signals(np.array([0]), np.array([23 * DAY]))
    assert pol.due_s[0] == np.inf  # a signal does not revive it
    assert 0 not in pol.select(30 * DAY, 6, np.full(2, 6))


def test_fixed_interval_refetches_every_day_or_every_m_over_r() -> None:
    prob = problem(m=6, budget_per_s=6 / (3 * DAY))  # m / R = 3 days
    shipped, tuned = FixedIntervalPolicy(seed=0), FixedIntervalPolicy(seed=0, tuned=True)
    for pol, interval in ((shipped, DAY), (tuned, 3 * DAY)):
        pol.start(prob)
        assert pol.start_interval_s == pytest.approx(interval)
        pol.observe_crawls(np.array([2, 4]), 5 * DAY, np.array([True, False]))
        np.testing.assert_allclose(pol.due_s[[2, 4]], 5 * DAY + interval)


# --- the frontier: how due URLs are served ------------------------------------------------


def test_first_refetch_dates_spread_over_the_initial_interval_by_seed() -> None:
    prob = problem(m=4000, hosts=4)
    firsts = []
    for seed in (1, 2):
        pol = NutchAdaptivePolicy(seed=seed)
        pol.start(prob)
        firsts.append(pol.due_s.copy())
        assert 0 < pol.due_s.min() and pol.due_s.max() <= 30 * DAY
        # uniform on (0, 30 days]: mean 15 days within 4 standard errors
        se = 30 * DAY / math.sqrt(12 * prob.m)
        assert abs(pol.due_s.mean() - 15 * DAY) < 4 * se
    assert not np.array_equal(*firsts)
    tuned = NutchAdaptivePolicy(seed=1, tuned=True)
    tuned.start(prob)
    assert tuned.due_s.max() <= prob.m / prob.budget_per_s == tuned.start_interval_s


def test_due_urls_are_served_most_overdue_first_and_capacity_is_left_idle() -> None:
    pol = FixedIntervalPolicy(seed=0)
    pol.start(problem(m=6, hosts=2))
    room = np.full(2, 10, dtype=np.int64)
    assert pol.select(2.0, 5, room).size == 0  # nothing due yet: the step stays idle
    pol.observe_signals(np.array([0, 1, 3]), np.array([5.0, 3.0, 4.0]))
    assert pol.select(10.0, 2, room).tolist() == [1, 3]
    assert pol.select(10.0, 5, room).tolist() == [1, 3, 0]  # only 3 due: 2 crawls idle
    # politeness: URLs 1 and 3 share host 1, which has room for one
    assert pol.select(10.0, 5, np.array([10, 1])).tolist() == [1, 0]
    pol.observe_crawls(np.array([1]), 10.0, np.array([True]))
    assert pol.select(11.0, 5, room).tolist() == [3, 0]
    assert pol.due_s[1] == pytest.approx(10.0 + DAY)


def test_signals_before_the_last_crawl_do_not_make_a_url_due() -> None:
    pol = StormCrawlerAdaptivePolicy(seed=0)
    pol.start(problem())
    pol.observe_crawls(np.array([2]), 100.0, np.array([False]))
    pol.observe_signals(np.array([2]), np.array([90.0]))
    assert 2 not in pol.select(200.0, 6, np.full(2, 6))
    pol.observe_signals(np.array([2]), np.array([150.0]))
    assert 2 in pol.select(200.0, 6, np.full(2, 6))
    off = StormCrawlerAdaptivePolicy(seed=0, signals_make_due=False)
    off.start(problem())
    off.observe_crawls(np.array([2]), 100.0, np.array([False]))
    off.observe_signals(np.array([2]), np.array([150.0]))
    assert 2 not in off.select(200.0, 6, np.full(2, 6))


@pytest.mark.parametrize("name", ANCHOR_NAMES)
def test_every_anchor_is_a_refetch_policy_by_name(name: str) -> None:
    pol = make_policy(name, seed=4)
    assert isinstance(pol, RefetchPolicy) and pol.name == name
    assert pol.tuned == name.endswith("-tuned")


@pytest.mark.parametrize(
    ("make", "match"),
    [
        (lambda: NutchAdaptivePolicy(initial_interval_s=0.0), "initial_interval_s"),
        (lambda: NutchAdaptivePolicy(dec_rate=1.5), "dec_rate"),
        (lambda: NutchAdaptivePolicy(min_interval_s=10.0, max_interval_s=5.0), "min_interval_s"),
        (lambda: NutchAdaptivePolicy(retry_max=0), "retry_max"),
        (lambda: StormCrawlerAdaptivePolicy(inc_rate=-1.0), "inc_rate"),
        (lambda: FixedIntervalPolicy(max_fetch_errors=0), "max_fetch_errors"),
        (lambda: FixedIntervalPolicy(fetch_error_interval_s=math.inf), "fetch_error"),
    ],
)
def test_bad_settings_are_named(make: object, match: str) -> None:
    with pytest.raises(ParameterError, match=match):
        make()  # type: ignore[operator]
