"""Shared fixtures: the anyio backend, a manual clock, settings, an app and its client."""

from __future__ import annotations

from collections.abc import AsyncIterator

import httpx
import pytest

from service.app import create_app
from service.clock import ManualClock
from service.settings import Settings
from service.store.memory import MemoryStore

T0 = 1_700_000_000.0


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


@pytest.fixture
def clock() -> ManualClock:
    return ManualClock(T0)


@pytest.fixture
def settings() -> Settings:
    return Settings(lease_ttl_s=60.0, default_crawl_delay_s=1.0, future_tolerance_s=60.0)


@pytest.fixture
def app_store(settings: Settings) -> MemoryStore:
    return MemoryStore(
        shards=settings.shards,
        default_crawl_delay_s=settings.default_crawl_delay_s,
        max_revisit_s=settings.max_revisit_s,
        lease_history=settings.lease_history,
    )


@pytest.fixture
async def api(
    settings: Settings, clock: ManualClock, app_store: MemoryStore
) -> AsyncIterator[httpx.AsyncClient]:
    app = create_app(settings, clock=clock, store=app_store)
    transport = httpx.ASGITransport(app=app)
    async with httpx.AsyncClient(transport=transport, base_url="http://crawlsched") as client:
        yield client
