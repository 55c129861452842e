"""Registering the synthetic frontier before the timed phases.

The URLs go through ``POST /urls`` (batches of ``LOAD_BATCH``, httpx) for at most
``--load-budget`` seconds; the rest through the same use case in the bench process
(``registry.register`` → ``RedisStore.upsert_urls``: the API's code minus HTTP).
:class:`LoadResult` says how many went each way, and how fast.
"""

from __future__ import annotations

import asyncio
import json
import random
import time
from dataclasses import dataclass

import httpx

from config import CRAWL_DELAY_S, LOAD_BATCH, MAX_IN_FLIGHT, Config, spec_of
from service.app import open_store
from service.clock import SystemClock
from service.metrics import Metrics
from service.scheduler.context import Context
from service.scheduler.registry import register
from service.schemas import UrlIn
from service.settings import Settings

JSON_HEADERS = {"content-type": "application/json"}


@dataclass
class LoadResult:
    """How the URLs got in, and how fast."""

    api_urls: int = 0
    api_seconds: float = 0.0
    direct_urls: int = 0
    direct_seconds: float = 0.0

    def rate(self, via: str) -> float:
        """URLs/s through ``api`` or ``direct``."""
        urls, secs = (
            (self.api_urls, self.api_seconds)
            if via == "api"
            else (self.direct_urls, self.direct_seconds)
        )
        return urls / secs if secs else float("nan")


async def load_via_api(base: str, cfg: Config, result: LoadResult) -> None:
    """POST /urls in batches of 10,000 with ``load_workers`` connections until every URL
    is in or ``load_budget`` seconds have passed (the rest is left to :func:`load_direct`)."""
    batches = iter(range(0, cfg.urls, LOAD_BATCH))
    stop_at = time.perf_counter() + cfg.load_budget
    t0 = time.perf_counter()

    async def worker(client: httpx.AsyncClient) -> None:
        for start in batches:
            rng = random.Random(cfg.seed * 1_000_003 + start)
            stop = min(cfg.urls, start + LOAD_BATCH)
            body = json.dumps({"urls": [spec_of(i, cfg.per_host, rng) for i in range(start, stop)]})
            r = await client.post("/urls", content=body, headers=JSON_HEADERS)
            r.raise_for_status()
            result.api_urls += stop - start
            if time.perf_counter() >= stop_at:
                return

    async with httpx.AsyncClient(base_url=base, timeout=300) as client:
        await asyncio.gather(*(worker(client) for _ in range(cfg.load_workers)))
    result.api_seconds = time.perf_counter() - t0


async def load_direct(redis_url: str, cfg: Config, result: LoadResult) -> None:
    """Register the URLs :func:`load_via_api` left out, in this process, through the
    API's own use case (``registry.register`` → ``RedisStore.upsert_urls``)."""
    if result.api_urls >= cfg.urls:
        return
    # the API's rules (a store opened with others would write those to the shards)
    settings = Settings(
        store=redis_url, default_crawl_delay_s=CRAWL_DELAY_S, max_in_flight=MAX_IN_FLIGHT
    )
    store = await open_store(settings)
    ctx = Context(store, SystemClock(), settings, Metrics())
    batches = iter(range(result.api_urls, cfg.urls, LOAD_BATCH))
    t0 = time.perf_counter()

    async def worker() -> None:
        for start in batches:
            rng = random.Random(cfg.seed * 1_000_003 + start)
            stop = min(cfg.urls, start + LOAD_BATCH)
            items = [UrlIn(**spec_of(i, cfg.per_host, rng)) for i in range(start, stop)]
            await register(ctx, items)
            result.direct_urls += stop - start

    try:
        await asyncio.gather(worker(), worker())
    finally:
        await store.close()
    result.direct_seconds = time.perf_counter() - t0
