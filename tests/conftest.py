"""Shared fixtures: the anyio backend, a manual clock, settings, an app and its client;
``store_api``, the app over each store (the memory store, a private Redis), for the
routes whose behaviour the stores share; ``fold``, which folds the signals and clicks
those apps appended (as their fold loop would, deterministically)."""

from __future__ import annotations

from collections.abc import AsyncIterator, Awaitable, Callable, Iterator

import httpx
import pytest
import redis
from fastapi import FastAPI

from service.app import control_rules, create_app
from service.clock import ManualClock
from service.scheduler.fold import fold_now
from service.settings import Settings
from service.store.base import Store
from service.store.memory import MemoryStore
from service.store.redis import RedisStore
from service.store.redis.local import LocalRedis

T0 = 1_700_000_000.0


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


@pytest.fixture
def clock() -> ManualClock:
    return ManualClock(T0)


@pytest.fixture
def settings() -> Settings:
    # no minimum revisit: the tests of dispatch lease a URL again at once (the frontier
    # controls' tests set their own, tests/api/test_controls.py)
    # no backpressure: these apps run no fold loop, the tests fold by hand (`fold`);
    # tests/api/test_backpressure.py tests it
    return Settings(
        lease_ttl_s=60.0,
        default_crawl_delay_s=1.0,
        future_tolerance_s=60.0,
        min_revisit_s=0.0,
        ingest_backpressure=False,
    )


@pytest.fixture
def app_store(settings: Settings) -> MemoryStore:
    return MemoryStore(
        shards=settings.shards,
        default_crawl_delay_s=settings.default_crawl_delay_s,
        max_revisit_s=settings.max_revisit_s,
        lease_history=settings.lease_history,
        controls=control_rules(settings),
    )


@pytest.fixture
def built_apps() -> list[FastAPI]:
    """The apps the client fixtures of a test built."""
    return []


@pytest.fixture
def fold(built_apps: list[FastAPI]) -> Callable[[], Awaitable[int]]:
    """``await fold()`` folds what the test's apps appended and re-estimates the URLs
    (:func:`service.scheduler.fold.fold_now`); returns the parts folded."""

    async def run() -> int:
        return sum([await fold_now(app.state.context) for app in built_apps])

    return run


@pytest.fixture
async def api(
    settings: Settings, clock: ManualClock, app_store: MemoryStore, built_apps: list[FastAPI]
) -> AsyncIterator[httpx.AsyncClient]:
    app = create_app(settings, clock=clock, store=app_store)
    built_apps.append(app)
    transport = httpx.ASGITransport(app=app)
    async with httpx.AsyncClient(transport=transport, base_url="http://crawlsched") as client:
        yield client


@pytest.fixture(scope="module")
def api_redis() -> Iterator[LocalRedis]:
    with LocalRedis() as server:
        yield server


async def _open_store(kind: str, settings: Settings, server: LocalRedis | None) -> Store:
    """An empty store of ``kind`` (``memory`` or ``redis``) as ``settings`` describe it."""
    options = {
        "shards": settings.shards,
        "default_crawl_delay_s": settings.default_crawl_delay_s,
        "max_revisit_s": settings.max_revisit_s,
        "lease_history": settings.lease_history,
        "controls": control_rules(settings),
    }
    if kind == "memory":
        return MemoryStore(**options)  # type: ignore[arg-type]
    assert server is not None
    with redis.Redis(port=server.port) as client:
        client.flushall()
    return await RedisStore.connect(server.url, **options)


@pytest.fixture
def open_empty_store() -> Callable[[str, Settings, LocalRedis | None], Awaitable[Store]]:
    """``await open_empty_store(kind, settings, server)``: an empty store of ``kind``
    (``memory`` or ``redis``, on ``server``) as ``settings`` describe it."""
    return _open_store


@pytest.fixture(params=["memory", "redis"])
async def store_api(
    request: pytest.FixtureRequest,
    settings: Settings,
    clock: ManualClock,
    built_apps: list[FastAPI],
) -> AsyncIterator[httpx.AsyncClient]:
    server = request.getfixturevalue("api_redis") if request.param == "redis" else None
    store = await _open_store(request.param, settings, server)
    app = create_app(settings, clock=clock, store=store)
    built_apps.append(app)
    transport = httpx.ASGITransport(app=app)
    try:
        async with httpx.AsyncClient(transport=transport, base_url="http://crawlsched") as client:
            yield client
    finally:
        await store.close()
