"""The SDK sends an ``Idempotency-Key`` with every POST batch: one per call, the same on
each retry of it.  Against a small real ASGI app that answers 503 to first attempts
and records the headers it got."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any

import httpx
import pytest
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route

from service.client import CrawlschedClient

pytestmark = pytest.mark.anyio


def _flaky_service(seen: list[tuple[str, str | None]], failures: int) -> Starlette:
    """Answers 503 to the first ``failures`` attempts of each request, then 200."""
    attempts: dict[bytes, int] = {}

    async def batch(request: Request) -> Response:
        body = await request.body()
        seen.append((request.url.path, request.headers.get("idempotency-key")))
        attempts[body] = attempts.get(body, 0) + 1
        if attempts[body] <= failures:
            return JSONResponse({"detail": "Redis unavailable"}, status_code=503)
        return JSONResponse({"accepted": 1, "ignored": [], "created": 1, "updated": 0})

    routes = [Route(p, batch, methods=["POST"]) for p in ("/urls", "/signal", "/click")]
    return Starlette(routes=[*routes, Route("/crawl-result", batch, methods=["POST"])])


async def test_every_batch_has_its_own_key_kept_across_retries() -> None:
    seen: list[tuple[str, str | None]] = []
    transport = httpx.ASGITransport(app=_flaky_service(seen, failures=2))
    http = httpx.AsyncClient(transport=transport, base_url="http://crawlsched")
    calls: list[Callable[[CrawlschedClient], Awaitable[Any]]] = [
        lambda c: c.register([{"url": "https://a.example/"}]),
        lambda c: c.signals([{"url": "https://a.example/", "time": 1.0}]),
        lambda c: c.clicks([{"url": "https://a.example/", "time": 1.0}]),
        lambda c: c.clicks([{"url": "https://a.example/", "time": 2.0}]),
        lambda c: c.results([{"url": "https://a.example/", "lease_id": "x", "fetched_at": 1.0}]),
    ]
    async with http, CrawlschedClient(http=http, retry_for_s=10.0) as client:
        for call in calls:
            await call(client)
    assert len(seen) == 3 * len(calls) and client.stats.retries == 2 * len(calls)
    keys = [key for _, key in seen]
    assert all(key and 16 <= len(key) <= 255 for key in keys)
    for k in range(len(calls)):  # three attempts of one call: one key
        assert len({key for _, key in seen[3 * k : 3 * k + 3]}) == 1
    assert len(set(keys)) == len(calls)  # a new key for every call
