"""A served app with URLFrontier's gRPC protocol on a real socket, over each store
(memory, a private Redis), and a client generated from the proto.

The app's lifespan runs as ``crawlsched serve`` runs it (the gRPC server starts in
it, on the test's event loop); HTTP calls go through the same app in process.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable, Iterator
from contextlib import asynccontextmanager
from dataclasses import dataclass
from typing import Any

import grpc
import httpx
import pytest
import redis

from service.app import control_rules, create_app
from service.clock import ManualClock
from service.grpc import urlfrontier_pb2_grpc
from service.settings import Settings
from service.store.base import Store
from service.store.memory import MemoryStore
from service.store.redis import RedisStore
from service.store.redis.local import LocalRedis

T0 = 1_700_000_000.0


@dataclass
class Frontier:
    """A running service: its gRPC stub, an HTTP client of the same app, its clock."""

    stub: Any  # urlfrontier_pb2_grpc.URLFrontierStub
    http: httpx.AsyncClient
    clock: ManualClock
    port: int
    store: Store


def bearer(token: str | None) -> tuple[tuple[str, str], ...]:
    """Call metadata that carries ``token`` (none: no metadata)."""
    return () if token is None else (("authorization", f"Bearer {token}"),)


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


@pytest.fixture(scope="module")
def grpc_redis() -> Iterator[LocalRedis]:
    with LocalRedis() as server:
        yield server


async def _store(kind: str, settings: Settings, server: LocalRedis | None) -> Store:
    options: dict[str, Any] = {
        "shards": settings.shards,
        "default_crawl_delay_s": settings.default_crawl_delay_s,
        "max_revisit_s": settings.max_revisit_s,
        "lease_history": settings.lease_history,
        "controls": control_rules(settings),  # as the app builds its own store
    }
    if kind == "memory":
        return MemoryStore(**options)
    assert server is not None
    with redis.Redis(port=server.port) as client:
        client.flushall()
    return await RedisStore.connect(server.url, **options)


Serve = Callable[..., Any]


@pytest.fixture(params=["memory", "redis"])
def serve(request: pytest.FixtureRequest) -> Serve:
    """``async with serve(**settings) as frontier``: the app served over this store."""

    @asynccontextmanager
    async def serving(**overrides: Any) -> AsyncIterator[Frontier]:
        options: dict[str, Any] = {
            "lease_ttl_s": 60.0, "default_crawl_delay_s": 0.5, "future_tolerance_s": 60.0,
        }  # fmt: skip
        settings = Settings(**(options | overrides))
        server = request.getfixturevalue("grpc_redis") if request.param == "redis" else None
        store = await _store(request.param, settings, server)
        clock = ManualClock(T0)
        app = create_app(settings, clock=clock, store=store, grpc_port=0)
        async with app.router.lifespan_context(app):
            transport = httpx.ASGITransport(app=app)
            async with httpx.AsyncClient(transport=transport, base_url="http://cs") as http:
                port = app.state.grpc_port
                async with grpc.aio.insecure_channel(f"127.0.0.1:{port}") as channel:
                    stub = urlfrontier_pb2_grpc.URLFrontierStub(channel)
                    yield Frontier(stub, http, clock, port, store)

    return serving
