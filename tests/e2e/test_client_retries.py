"""The client rides out a service that is not up yet (connection refused), and gives up
when told to; real sockets and a real served app, no mocks."""

from __future__ import annotations

import asyncio

import httpx
import pytest

from service.client import CrawlschedClient
from service.loadgen.demo import served_app
from service.ports import free_port

pytestmark = [pytest.mark.e2e, pytest.mark.anyio]


@pytest.mark.slow
async def test_refused_connections_are_retried_until_the_service_is_up() -> None:
    port = free_port()
    async with CrawlschedClient(f"http://127.0.0.1:{port}", retry_for_s=30.0) as client:
        call = asyncio.create_task(client.healthz())
        await asyncio.sleep(0.3)  # a few refused attempts
        assert not call.done()
        with served_app({"CRAWLSCHED_STORE": "memory"}, port=port):
            health = await asyncio.wait_for(call, timeout=10.0)
            assert health["status"] == "ok"
            answer = await client.clicks([{"url": "https://a.example/1", "time": health["now"]}])
            assert answer == {"accepted": 1, "ignored": []}  # appended; the fold classifies
            await client.aclose()  # before the service stops: no connection to drain
    stats = client.stats
    assert stats.transport_errors >= 2 and stats.retries == stats.transport_errors
    assert stats.requests == stats.transport_errors + 2 and stats.unavailable == 0
    assert not stats.unanswered  # refused connections never reached the service


async def test_no_retries_when_disabled() -> None:
    async with CrawlschedClient(f"http://127.0.0.1:{free_port()}", retry_for_s=0.0) as client:
        with pytest.raises(httpx.ConnectError):
            await client.next(1)
    assert (client.stats.requests, client.stats.retries, client.stats.transport_errors) == (1, 0, 1)
