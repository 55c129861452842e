"""Running farms: the drawn host plan, the event feed into a served crawlsched, the
round-robin baseline crawler, and the ``crawlsched webfarm`` command."""

from __future__ import annotations

import asyncio
import json
import math
import time
from pathlib import Path

import httpx
import numpy as np
import pytest

from scheduler_core.params import UrlParams
from scheduler_core.sim import CHANGE, CLICK, SIGNAL, EventLog, World, WorldSpec
from service.cli import main
from service.client import CrawlschedClient
from service.clock import AcceleratedClock, ManualClock
from service.loadgen.demo import served_app
from service.webfarm import Farm, FarmOptions, farm_app, plan_hosts
from service.webfarm.baseline import crawl_round_robin
from service.webfarm.feed import feed_events
from service.webfarm.server import ThreadedServer, served_farm


def test_plan_draws_strict_and_flaky_hosts_at_their_shares() -> None:
    world = World.generate(WorldSpec(urls=400, hosts=400, duration_days=400, seed=3))
    options = FarmOptions(strict_share=0.3, down_share=0.5, down_fraction=0.1, down_mean_s=6 * 3600)
    plan = plan_hosts(world, options)
    n = len(world.hosts)
    assert abs(plan.strict.mean() - 0.3) < 4 * math.sqrt(0.3 * 0.7 / n)
    flaky = [o for o in plan.outages if o]
    assert abs(len(flaky) / n - 0.5) < 4 * math.sqrt(0.25 / n)
    down = np.array([sum(w.end_s - w.start_s for w in o) for o in flaky]) / world.duration_s
    # ~1600 outages of mean 6 h in 400 days each: the down share is near 0.1
    assert down.mean() == pytest.approx(0.1, rel=0.1)
    j = next(k for k, o in enumerate(plan.outages) if o)
    first = plan.outages[j][0]
    assert plan.down_until(j, (first.start_s + first.end_s) / 2) == first.end_s
    assert plan.down_until(j, first.end_s) is None
    again = plan_hosts(world, options)  # seeded: the same draws
    assert plan.outages == again.outages and (plan.strict == again.strict).all()


def _feed_world() -> World:
    events = EventLog.merge(
        [
            ([10.0], CHANGE, [0]),
            ([10.0, 20.0], SIGNAL, [0, 1]),
            ([5.0, 15.0, 25.0], CLICK, [0, 0, 1]),
        ]
    )
    return World.from_arrays(
        ["https://a.example/1", "https://b.example/2"], ["a.example", "b.example"], [0, 1],
        UrlParams.create([0.01, 0.01], 0.01), [1.0, 1.0], 0.1, 60.0, 0.0, events=events,
    )  # fmt: skip


@pytest.mark.anyio
async def test_feed_posts_clicks_and_signals_at_their_times() -> None:
    with served_app({"CRAWLSCHED_STORE": "memory"}) as url:
        async with CrawlschedClient(url) as client:
            clock = ManualClock((await client.healthz())["now"] - 60.0)
            farm = Farm(_feed_world(), clock)
            urls = [farm.page_url(i) for i in range(2)]
            assert urls == ["http://a.example/1", "http://b.example/2"]
            await client.register([{"url": u} for u in urls])
            clock.advance(61.0)  # past the world's end: one pass posts everything
            stats = await feed_events(farm, client)
            assert (stats.clicks, stats.signals, stats.accepted) == (3, 2, 5)

            async def counts() -> tuple[int, int, int]:
                first, second = [await client.explain(u) for u in urls]
                return first["clicks"], first["signals"], second["clicks"]

            # accepted once appended: the service's fold loop applies them within its lag
            deadline = time.monotonic() + 30.0
            while await counts() != (2, 1, 1) and time.monotonic() < deadline:
                await asyncio.sleep(0.05)
            assert await counts() == (2, 1, 1)


@pytest.mark.anyio
async def test_round_robin_crawls_every_url_in_turn_at_the_budget() -> None:
    spec = WorldSpec(urls=12, hosts=3, duration_days=1.0, budget_per_day=120.0, seed=5)
    world = World.generate(spec.replace(crawl_delay_s=spec.crawl_delay_s.of("const", value=600)))
    speed = world.duration_s / 3.0  # one day in 3 wall s: 40 fetches a wall second
    farm = Farm(world, AcceleratedClock(speed), options=FarmOptions(strict_share=0, down_share=0))
    with ThreadedServer(farm_app(farm)) as server:
        stats = await crawl_round_robin(server.url)
    score = farm.score()
    assert stats.statuses.keys() == {200}
    # the budget over the time left once the sitemaps were read, give or take the slack
    expected = world.budget_per_s * (world.duration_s - stats.started_at_s)
    assert stats.fetches == pytest.approx(expected, rel=0.08)
    urls, _ = farm.fetches()
    counts = np.bincount(urls, minlength=12)
    assert counts.max() - counts.min() <= 1  # uniform
    assert score.violations == 0
    assert stats.fetches - 1 <= score.crawls <= stats.fetches  # the last may land after the end


def test_webfarm_command_serves_and_reports_on_sigterm(tmp_path: Path) -> None:
    spec = tmp_path / "world.json"
    spec.write_text(json.dumps({"urls": 30, "hosts": 3, "duration_days": 2, "seed": 4}))
    out = tmp_path / "score.json"
    args = ["--world", str(spec), "--wall-seconds", "20", "--json", str(out)]
    with served_farm(args) as url:
        world = httpx.get(f"{url}/_farm/world").json()
        assert world["urls"] == 30 and world["rate"] == pytest.approx(2 * 86_400 / 20)
        host = httpx.get(f"{url}/_farm/hosts").json()[0]["host"]
        with httpx.Client(proxy=url, trust_env=False) as http:
            assert http.get(f"http://{host}/robots.txt").status_code == 200
            index = http.get(f"http://{host}/")
        assert index.status_code == 200 and "/page/" in index.text
    deadline = time.monotonic() + 10
    while not out.exists() and time.monotonic() < deadline:
        time.sleep(0.1)
    score = json.loads(out.read_text())
    assert score["requests"] == {"200": 2} and score["crawls"] == 0  # robots.txt, index


def test_webfarm_command_refuses_feed_without_service() -> None:
    assert main(["webfarm", "--feed"]) == 2
    assert main(["webfarm", "--service", "http://127.0.0.1:9", "--wall-seconds", "5"]) == 2


def test_feed_needs_no_event_loop_of_its_own() -> None:
    # feed_events is a coroutine: it runs on the caller's loop (the farm's, in serve)
    assert asyncio.iscoroutinefunction(feed_events)
