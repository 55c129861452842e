"""Scoring a schedule against a world: brute force, exact ties, closed form."""

from __future__ import annotations

import math
from collections.abc import Callable

import numpy as np
import pytest

from scheduler_core.errors import ParameterError
from scheduler_core.params import UrlParams
from scheduler_core.sim import (
    CHANGE,
    CLICK,
    DAY_S,
    SIGNAL,
    EventLog,
    World,
    WorldSpec,
    fresh_clicks_by_url,
    freshness_over_time,
    round_robin_freshness,
    round_robin_schedule,
    schedule_freshness,
)


@pytest.fixture(scope="module")
def world() -> World:
    return World.generate(WorldSpec(urls=60, hosts=4, duration_days=40, budget_per_day=20, seed=2))


def brute_click_freshness(world: World, crawl_url: np.ndarray, crawl_time: np.ndarray) -> float:
    """One click at a time: last crawl at or before it (0 if none), then any change since."""
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


def brute_time_freshness(world: World, crawl_url: np.ndarray, crawl_time: np.ndarray) -> float:
    """Walk each URL's crawls and changes in order, adding up fresh time after the warm-up."""
    w0, t_end = world.warmup_s, world.duration_s
    total = 0.0
    for u in range(len(world.urls)):
        crawls = np.sort(np.concatenate([[0.0], crawl_time[crawl_url == u]]))
        changes = world.change_times(u)
        fresh_time = 0.0
        for j, start in enumerate(crawls):
            end = crawls[j + 1] if j + 1 < crawls.size else t_end
            later = changes[changes > start]
            stale = min(end, later[0]) if later.size else end
            fresh_time += max(0.0, min(stale, t_end) - max(start, w0))
        total += world.params.weight[u] * fresh_time
    return total / (world.params.weight.sum() * (t_end - w0))


def test_matches_brute_force(world: World) -> None:
    rng = np.random.default_rng(1)
    crawl_url = rng.integers(0, 60, 800)
    crawl_time = rng.uniform(0, world.duration_s, 800)  # unsorted on purpose
    report = schedule_freshness(world, crawl_url, crawl_time)
    assert report.click_weighted == pytest.approx(
        brute_click_freshness(world, crawl_url, crawl_time), abs=1e-12
    )
    assert report.time_weighted == pytest.approx(
        brute_time_freshness(world, crawl_url, crawl_time), rel=1e-9
    )
    assert report.crawls == 800
    log = world.events()
    assert report.clicks == int(((log.kind == CLICK) & (log.time >= world.warmup_s)).sum())
    p = report.click_weighted
    assert report.click_stderr == pytest.approx(math.sqrt(p * (1 - p) / report.clicks))


def test_crawling_right_after_every_change_is_always_fresh(world: World) -> None:
    log = world.events()
    ch = log.kind == CHANGE
    report = schedule_freshness(world, log.url[ch], log.time[ch])
    assert report.click_weighted == 1.0
    assert report.click_stderr == 0.0
    assert report.time_weighted == pytest.approx(1.0)


def test_never_crawling_is_stale_after_the_first_change(world: World) -> None:
    report = schedule_freshness(world, np.empty(0, np.int64), np.empty(0))
    assert report.crawls == 0
    assert 0.0 <= report.click_weighted < 0.2
    assert report.time_weighted < 0.2
    none = np.empty(0, np.int64)
    assert report.click_weighted == pytest.approx(brute_click_freshness(world, none, np.empty(0)))


def _log(changes: list[float], clicks: list[float]) -> EventLog:
    return EventLog.merge(
        [
            (np.array(changes), CHANGE, np.zeros(len(changes), np.int64)),
            (np.array(clicks), CLICK, np.zeros(len(clicks), np.int64)),
        ]
    )


@pytest.mark.parametrize(
    ("crawls", "fresh"),
    [
        ([], False),  # change at 5 after the fetch at 0
        ([5.0], True),  # a crawl at the change's time fetches the change
        ([10.0], True),  # a crawl at the click's time serves it
        ([3.0, 10.5], False),  # a crawl after the click does not help it
        ([4.999], False),
        ([10.001], False),
    ],
)
def test_ties_and_near_ties(
    crawls: list[float], fresh: bool, one_url_world: Callable[..., World]
) -> None:
    world = one_url_world(_log([5.0], [10.0]))
    report = schedule_freshness(world, np.zeros(len(crawls), np.int64), np.array(crawls))
    assert report.clicks == 1 and report.click_weighted == float(fresh)


def test_change_at_the_click_time_makes_it_stale(one_url_world: Callable[..., World]) -> None:
    world = one_url_world(_log([10.0], [10.0]))
    assert schedule_freshness(world, [0], [9.0]).click_weighted == 0.0
    assert schedule_freshness(world, [0], [10.0]).click_weighted == 1.0


def test_only_clicks_after_the_warm_up_count(one_url_world: Callable[..., World]) -> None:
    world = one_url_world(_log([5.0], [1.0, 2.0, 50.0, 60.0]), warmup=20.0)
    report = schedule_freshness(world, [0], [55.0])
    assert report.clicks == 2 and report.click_weighted == 0.5
    # fresh over [20, 100): stale until the crawl at 55, fresh after it
    assert report.time_weighted == pytest.approx(45.0 / 80.0)


def test_signals_do_not_refresh(world: World) -> None:
    """Signals are ignored by the scorer: dropping them changes nothing."""
    log = world.events()
    keep = log.kind != SIGNAL
    bare = World.from_arrays(
        world.urls,
        world.hosts,
        world.host_of,
        world.params,
        world.crawl_delay_s,
        world.budget_per_s,
        world.duration_s,
        world.warmup_s,
        events=EventLog(log.time[keep], log.kind[keep], log.url[keep]),
    )
    url, time = round_robin_schedule(world)
    assert schedule_freshness(bare, url, time) == schedule_freshness(world, url, time)


def test_round_robin_single_url_closed_form() -> None:
    """One URL crawled at rate ξ: freshness (1 − e^{−Δ/ξ})·ξ/Δ, within the standard error."""
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
        ["https://a.example/"],
        ["a.example"],
        [0],
        UrlParams.create(1.0 / DAY_S, delta),
        [0.0],
        1.0 / period,
        duration,
        0.0,
        events=events,
    )
    url, time = round_robin_schedule(world)
    assert (url == 0).all() and np.allclose(np.diff(time), period)
    report = round_robin_freshness(world)
    x = delta * period  # Δ/ξ
    expected = -math.expm1(-x) / x
    # per-period freshness has sd ≤ 0.5; ~2000 periods
    assert report.time_weighted == pytest.approx(expected, abs=4 * 0.5 / math.sqrt(2000))
    assert report.click_weighted == pytest.approx(expected, abs=4 * report.click_stderr + 0.02)


def test_round_robin_spends_the_budget(world: World) -> None:
    url, time = round_robin_schedule(world)
    assert url.size == pytest.approx(world.budget_per_s * world.duration_s, abs=1)
    assert np.bincount(url).max() - np.bincount(url).min() <= 1
    assert time[0] == pytest.approx(1 / world.budget_per_s) and time[-1] < world.duration_s
    assert round_robin_freshness(world) == schedule_freshness(world, url, time)


def test_bad_schedules(world: World) -> None:
    with pytest.raises(ParameterError, match="index"):
        schedule_freshness(world, np.array([99]), np.array([1.0]))
    with pytest.raises(ParameterError, match="duration"):
        schedule_freshness(world, np.array([0]), np.array([-1.0]))
    with pytest.raises(ParameterError, match="duration"):
        schedule_freshness(world, np.array([0]), np.array([world.duration_s + 1]))
    with pytest.raises(ParameterError, match="length"):
        schedule_freshness(world, np.array([0, 1]), np.array([1.0]))


def test_fresh_clicks_by_url_match_brute_force_url_by_url(world: World) -> None:
    rng = np.random.default_rng(4)
    crawl_url = rng.integers(0, 60, 500)
    crawl_time = rng.uniform(0, world.duration_s, 500)
    fresh, clicks = fresh_clicks_by_url(world, crawl_url, crawl_time)
    assert fresh.shape == clicks.shape == (60,) and (fresh <= clicks).all()
    log = world.events()
    counted = (log.kind == CLICK) & (log.time >= world.warmup_s)
    for u in range(60):
        mine_clicks = log.time[counted & (log.url == u)]
        assert clicks[u] == mine_clicks.size
        found = 0
        for t in mine_clicks.tolist():
            mine = crawl_time[(crawl_url == u) & (crawl_time <= t)]
            last = mine.max() if mine.size else 0.0
            changes = world.change_times(u)
            found += not ((changes > last) & (changes <= t)).any()
        assert fresh[u] == found
    # some URLs were fresh at some clicks and stale at others: the counts tell them apart
    assert ((fresh > 0) & (fresh < clicks)).any()
    total = schedule_freshness(world, crawl_url, crawl_time)
    assert clicks.sum() == total.clicks
    assert fresh.sum() / clicks.sum() == pytest.approx(total.click_weighted, abs=1e-12)
    with pytest.raises(ParameterError, match="length"):
        fresh_clicks_by_url(world, np.array([0, 1]), np.array([1.0]))


def test_freshness_over_time_matches_brute_force_span_by_span(world: World) -> None:
    rng = np.random.default_rng(3)
    crawl_url = rng.integers(0, 60, 800)
    crawl_time = rng.uniform(0, world.duration_s, 800)
    edges, share, clicks = freshness_over_time(world, crawl_url, crawl_time, 7)
    assert edges[0] == world.warmup_s and edges[-1] == world.duration_s and edges.size == 8
    log = world.events()
    for k in range(7):
        # brute force on the world's clicks of span k only
        in_span = (log.kind == CLICK) & (log.time >= edges[k])
        in_span &= log.time < edges[k + 1] if k < 6 else log.time <= edges[k + 1]
        fresh = []
        for t, u in zip(log.time[in_span].tolist(), log.url[in_span].tolist(), strict=True):
            mine = crawl_time[(crawl_url == u) & (crawl_time <= t)]
            last = mine.max() if mine.size else 0.0
            changes = world.change_times(u)
            fresh.append(not ((changes > last) & (changes <= t)).any())
        assert clicks[k] == len(fresh)
        assert share[k] == pytest.approx(np.mean(fresh), abs=1e-12)
    # the spans add up to the whole
    total = schedule_freshness(world, crawl_url, crawl_time)
    assert clicks.sum() == total.clicks
    assert float(np.nansum(share * clicks)) / clicks.sum() == pytest.approx(total.click_weighted)
    with pytest.raises(ParameterError, match="bins"):
        freshness_over_time(world, crawl_url, crawl_time, 0)
