"""The rescoring pass goes in slices: the same decisions, with the event loop served."""

from __future__ import annotations

import asyncio
import dataclasses

import numpy as np
import pytest

from scheduler_core.multipliers import drift_tolerance
from service.clock import ManualClock
from service.metrics import Metrics
from service.scheduler.context import Context
from service.scheduler.dispatch import dispatch
from service.scheduler.learning import relearn
from service.scheduler.rescoring import rescore_once
from service.settings import Settings
from service.store.base import CrawlOutcome, EventStatus, UrlPrior, UrlRecord
from service.store.memory import MemoryStore

pytestmark = pytest.mark.anyio
T0 = 1_700_000_000.0
HOSTS, PER_HOST = 24, 10


def _records() -> list[UrlRecord]:
    rng = np.random.default_rng(5)
    return [
        UrlRecord(
            url=f"https://r{h}.example/{j}",
            host=f"r{h}.example",
            weight=float(rng.uniform(0.01, 2.0)) / 86_400,
            change_rate=float(rng.uniform(0.01, 1.0)) / 86_400,
            recall=float(rng.choice([0.0, 0.6])),
            false_signal_rate=float(rng.uniform(0.0, 0.5)) / 86_400,
            signal_time_equivalent_s=0.0,
            threshold_s=float(rng.uniform(1e4, 1e5)),
            scored_lambda=1e-6,
            crawl_delay_s=0.5,
            last_crawled_at=T0 - float(rng.uniform(0, 1e5)),
        )
        for h in range(HOSTS)
        for j in range(PER_HOST)
    ]


async def _drifted(slice_urls: int, batch: int = 20_000) -> tuple[Context, ManualClock]:
    """A store whose hosts' Λ_h drifted from the Λ their thresholds were computed at
    (passes of at most ``batch`` URLs)."""
    store = MemoryStore(shards=4)
    await store.upsert_urls(_records(), T0)
    clock = ManualClock(T0)
    settings = Settings(rescore_slice=slice_urls, rescore_batch=batch)
    ctx = Context(store, clock, settings, Metrics())
    for _ in range(20):
        clock.advance(1.0)
        await dispatch(ctx, 5)
    return ctx, clock


async def _state(ctx: Context) -> list[tuple[object, ...]]:
    urls = [r.url for r in _records()]
    return [
        (s.url, s.threshold_s, s.scored_lambda, s.due_at, s.lease_id is None)
        for s in await ctx.store.get_urls(urls)
        if s is not None
    ]


async def test_slices_decide_what_one_slice_decides() -> None:
    whole, _ = await _drifted(10_000_000)
    sliced, _ = await _drifted(1)
    assert await _state(whole) == await _state(sliced)
    n = await rescore_once(whole)
    assert n > PER_HOST  # several hosts drifted
    assert await rescore_once(sliced) == n
    after = await _state(whole)
    assert after == await _state(sliced)
    assert after != await _state((await _drifted(1))[0])  # the pass changed something


async def test_the_event_loop_runs_between_slices() -> None:
    ctx, _ = await _drifted(PER_HOST)  # one host per slice
    passing = True
    ticks = 0

    async def ticker() -> None:
        nonlocal ticks
        while passing:
            ticks += 1
            await asyncio.sleep(0)

    task = asyncio.create_task(ticker())
    await asyncio.sleep(0)
    start = ticks
    n = await rescore_once(ctx)
    passing = False
    await task
    assert n >= 3 * PER_HOST
    # a turn of the loop before each slice's write-back and after each slice
    assert ticks - start >= 2 * (n // PER_HOST) - 1


async def test_backlog_gauge_counts_what_capped_passes_leave() -> None:
    """With a pass capped at two hosts' URLs, ``crawlsched_rescore_backlog_urls`` shows
    the URLs of the stale hosts each pass leaves, and falls to 0 as passes drain them."""
    ctx, _ = await _drifted(10_000_000, batch=2 * PER_HOST)
    found = await ctx.store.hosts_needing_rescore(ctx.settings.rescore_tolerance, 10**6)
    assert found.urls > 4 * PER_HOST  # more than two passes' worth drifted

    def backlog() -> float | None:
        return ctx.metrics.registry.get_sample_value("crawlsched_rescore_backlog_urls")

    left = [float(found.urls)]
    while (n := await rescore_once(ctx)) > 0:
        assert n == 2 * PER_HOST
        assert backlog() == left[-1] - n
        left.append(left[-1] - n)
    assert backlog() == 0 and len(left) == found.urls // (2 * PER_HOST) + 1


async def test_drifts_within_lambda0_noise_are_not_rescored() -> None:
    """The pass's tolerance is λ₀'s noise where that exceeds the setting: hosts that
    drifted less are left alone, and ``crawlsched_rescore_tolerance`` shows it."""
    ctx, _ = await _drifted(10_000_000)
    lam0 = await ctx.store.lambda0_tracker()
    noise = drift_tolerance(ctx.settings.rescore_tolerance, lam0, ctx.tracker)
    assert noise > 4 * ctx.settings.rescore_tolerance  # W/Δ of these URLs span decades
    hosts = [f"r{h}.example" for h in range(HOSTS)]
    now = await ctx.store.host_thresholds(hosts)
    for k, host in enumerate(hosts):  # even hosts within the noise, odd ones beyond it
        drift = noise / 2 if k % 2 == 0 else 3 * noise
        await ctx.store.set_thresholds(host, {}, now[host] / (1 + drift))
    assert (await ctx.store.hosts_needing_rescore(0.05, 10**6)).urls == HOSTS * PER_HOST
    beyond = await ctx.store.hosts_needing_rescore(noise, 10**6)
    assert sorted(h for h, _ in beyond.hosts) == sorted(hosts[1::2])
    assert await rescore_once(ctx) == beyond.urls == HOSTS * PER_HOST // 2
    assert ctx.metrics.registry.get_sample_value("crawlsched_rescore_tolerance") == noise


async def test_urls_never_crawled_get_a_threshold_with_their_first_crawl() -> None:
    """A pass leaves out the URLs never crawled (due at their registration whatever
    their threshold); the first crawl result folded gives such a URL a threshold at its
    host's Λ_h now, as the pass would have."""
    store = MemoryStore(shards=4)
    fresh = [  # their parameters fixed: a crawl result does not move them
        dataclasses.replace(
            r, last_crawled_at=None, url=r.url + "-new",
            prior=UrlPrior(weight=r.weight, change_rate=r.change_rate, recall=r.recall,
                           false_signal_rate=r.false_signal_rate, fixed=True),
        )
        for r in _records()
        if r.url.endswith("/0")
    ]  # fmt: skip
    alone = [  # a host whose URLs were all never crawled
        dataclasses.replace(r, last_crawled_at=None, url=f"https://new.example/{k}",
                            host="new.example")
        for k, r in enumerate(_records()[:3])
    ]  # fmt: skip
    await store.upsert_urls([*_records(), *fresh, *alone], T0)
    clock = ManualClock(T0)
    ctx = Context(store, clock, Settings(), Metrics())
    for _ in range(20):
        clock.advance(1.0)
        await dispatch(ctx, 5)
    found = await store.hosts_needing_rescore(ctx.settings.rescore_tolerance, 10**6)
    assert found.hosts  # the dispatches moved Λ_h
    before = {s.url: s for s in await store.get_urls([r.url for r in fresh]) if s is not None}
    n = await rescore_once(ctx)
    assert 0 < n <= found.urls - len(fresh) - len(alone)
    assert ctx.metrics.registry.get_sample_value("crawlsched_rescore_backlog_urls") == 0
    # every host is scored at its Λ_h, the one without a URL crawled too
    assert (await store.hosts_needing_rescore(ctx.settings.rescore_tolerance, 10**6)).hosts == []
    after = await store.get_urls(list(before))
    assert [(s.threshold_s, s.scored_lambda) for s in after if s is not None] == [
        (b.threshold_s, b.scored_lambda) for b in before.values()
    ]
    # one of them is crawled: the fold re-thresholds it at its host's Λ_h
    host = next(iter(before.values())).host
    clock.advance(1.0)
    got = await store.lease_host(clock.now(), host, 60.0, dispatch_ahead=True)
    (url,), (lease_id,) = got.urls, got.lease_ids
    assert url in before  # due at its registration, the head of its host's queue
    outcome = CrawlOutcome(url, lease_id, clock.now(), ok=True, changed=False)
    assert await store.settle([outcome], 60.0, 0.0, 64) == [EventStatus.ACCEPTED]
    await relearn(ctx, [url])
    (crawled,) = await store.get_urls([url])
    assert crawled is not None and crawled.weight == before[url].weight  # fixed
    lam = (await store.host_thresholds([host]))[host]
    assert crawled is not None and crawled.scored_lambda == lam != before[url].scored_lambda
    assert crawled.threshold_s != before[url].threshold_s


async def test_a_pass_over_hosts_never_crawled_scores_them_all_the_same() -> None:
    """Hosts whose URLs were all never crawled: a pass rescores no URL, and still
    leaves each host scored at its Λ_h, so the next pass does not read them again."""
    store = MemoryStore(shards=4)
    await store.upsert_urls([dataclasses.replace(r, last_crawled_at=None) for r in _records()], T0)
    clock = ManualClock(T0)
    ctx = Context(store, clock, Settings(), Metrics())
    for _ in range(20):
        clock.advance(1.0)
        await dispatch(ctx, 5)
    tolerance = ctx.settings.rescore_tolerance
    assert (await store.hosts_needing_rescore(tolerance, 10**6)).hosts
    assert await rescore_once(ctx) == 0
    assert (await store.hosts_needing_rescore(tolerance, 10**6)).hosts == []
    assert ctx.metrics.registry.get_sample_value("crawlsched_rescore_backlog_urls") == 0
