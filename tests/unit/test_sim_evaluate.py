"""Scoring a schedule against a world: brute force, limits, closed form."""

from __future__ import annotations

import math

import numpy as np
import pytest

from scheduler_core.errors import ParameterError
from scheduler_core.params import UrlParams
from scheduler_core.sim import (
    CHANGE,
    CLICK,
    DAY_S,
    EventLog,
    World,
    WorldSpec,
    round_robin_freshness,
    round_robin_schedule,
    schedule_freshness,
)


@pytest.fixture(scope="module")
def world() -> World:
    return World.generate(WorldSpec(urls=60, hosts=4, duration_days=40, budget_per_day=20, seed=2))


def brute_click_freshness(world: World, crawl_url: np.ndarray, crawl_time: np.ndarray) -> float:
    log = world.events()
    fresh = []
    for t, k, u in zip(log.time.tolist(), log.kind.tolist(), log.url.tolist(), strict=True):
        if k != CLICK or t < world.warmup_s:
            continue
        mine = crawl_time[(crawl_url == u) & (crawl_time <= t)]
        last = mine.max() if mine.size else 0.0
        changes = world.change_times(u)
        fresh.append(not ((changes > last) & (changes <= t)).any())
    return float(np.mean(fresh))


def test_matches_brute_force(world: World) -> None:
    rng = np.random.default_rng(1)
    crawl_url = rng.integers(0, 60, 800)
    crawl_time = np.sort(rng.uniform(0, world.duration_s, 800))
    report = schedule_freshness(world, crawl_url, crawl_time)
    assert report.click_weighted == pytest.approx(
        brute_click_freshness(world, crawl_url, crawl_time)
    )
    assert report.crawls == 800
    p = report.click_weighted
    assert report.click_stderr == pytest.approx(math.sqrt(p * (1 - p) / report.clicks))


def test_crawling_right_after_every_change_is_always_fresh(world: World) -> None:
    log = world.events()
    ch = log.kind == CHANGE
    report = schedule_freshness(world, log.url[ch], log.time[ch])
    assert report.click_weighted == 1.0
    assert report.time_weighted == pytest.approx(1.0)


def test_never_crawling_is_stale_after_the_first_change(world: World) -> None:
    report = schedule_freshness(world, np.empty(0, np.int64), np.empty(0))
    assert 0.0 <= report.click_weighted < 0.2
    assert report.time_weighted < 0.2


def test_time_weighted_single_url_closed_form() -> None:
    """One URL crawled every T: freshness (1 − e^{−ΔT})/(ΔT), within the standard error."""
    rng = np.random.default_rng(3)
    delta, period, duration = 1.0 / DAY_S, 2.0 * DAY_S, 4000.0 * DAY_S
    changes = np.sort(rng.uniform(0, duration, rng.poisson(delta * duration)))
    clicks = np.sort(rng.uniform(0, duration, 20_000))
    events = EventLog.merge(
        [
            (changes, CHANGE, np.zeros(changes.size, np.int64)),
            (clicks, CLICK, np.zeros(clicks.size, np.int64)),
        ]
    )
    world = World.from_arrays(
        urls=["https://a.example/"],
        hosts=["a.example"],
        host_of=[0],
        params=UrlParams.create(1.0 / DAY_S, delta),
        crawl_delay_s=[0.0],
        budget_per_s=1.0 / period,
        duration_s=duration,
        warmup_s=0.0,
        events=events,
    )
    url, time = round_robin_schedule(world)
    assert (url == 0).all() and np.allclose(np.diff(time), period)
    report = round_robin_freshness(world)
    x = delta * period
    expected = -math.expm1(-x) / x
    # per-period freshness has sd ≤ 0.5; ~2000 periods
    assert report.time_weighted == pytest.approx(expected, abs=4 * 0.5 / math.sqrt(2000))
    assert report.click_weighted == pytest.approx(expected, abs=4 * report.click_stderr + 0.02)


def test_round_robin_spends_the_budget(world: World) -> None:
    url, time = round_robin_schedule(world)
    assert url.size == pytest.approx(world.budget_per_s * world.duration_s, abs=1)
    assert np.bincount(url).max() - np.bincount(url).min() <= 1


def test_bad_schedules(world: World) -> None:
    with pytest.raises(ParameterError, match="index"):
        schedule_freshness(world, np.array([99]), np.array([1.0]))
    with pytest.raises(ParameterError, match="duration"):
        schedule_freshness(world, np.array([0]), np.array([-1.0]))
    with pytest.raises(ParameterError, match="length"):
        schedule_freshness(world, np.array([0, 1]), np.array([1.0]))
