"""The rescoring pass goes in slices: the same decisions, with the event loop served."""

from __future__ import annotations

import asyncio

import numpy as np
import pytest

from scheduler_core.multipliers import drift_tolerance
from service.clock import ManualClock
from service.metrics import Metrics
from service.scheduler.context import Context
from service.scheduler.dispatch import dispatch
from service.scheduler.rescoring import rescore_once
from service.settings import Settings
from service.store.base import UrlRecord
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
