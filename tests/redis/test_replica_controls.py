"""Two API processes (real uvicorn subprocesses) on one private Redis: a pause or a
block set through one holds on the next /next of the other, and lifting it does too."""

from __future__ import annotations

import contextlib
import time

import httpx
import pytest

from service.loadgen.demo import served_app
from service.store.redis.local import LocalRedis

pytestmark = [pytest.mark.anyio, pytest.mark.slow]
ENV = {
    "CRAWLSCHED_DEFAULT_CRAWL_DELAY_S": "0.01",
    "CRAWLSCHED_LEASE_TTL_S": "600",
    "CRAWLSCHED_MAX_IN_FLIGHT": "1000",  # nothing is settled: the cap is not under test
    "CRAWLSCHED_MIN_REVISIT_S": "0",
}
HOSTS = ("paused.example", "blocked.example", "open.example")


def _hosts_of(body: dict[str, object]) -> set[str]:
    return {lease["host"] for lease in body["leases"]}  # type: ignore[attr-defined]


async def _next_hosts(http: httpx.AsyncClient) -> set[str]:
    """Hosts of three /next calls a crawl delay apart (each host gives one URL a call)."""
    seen: set[str] = set()
    for _ in range(3):
        response = await http.get("/next", params={"n": 10})
        assert response.status_code == 200, response.text
        seen |= _hosts_of(response.json())
        time.sleep(0.02)
    return seen


async def test_pause_and_block_hold_on_every_replica() -> None:
    with LocalRedis() as server, contextlib.ExitStack() as stack:
        env = {**ENV, "CRAWLSCHED_STORE": server.url}
        one, two = (stack.enter_context(served_app(env)) for _ in range(2))
        urls = [{"url": f"https://{h}/p{j}"} for h in HOSTS for j in range(40)]
        async with httpx.AsyncClient(base_url=one) as a, httpx.AsyncClient(base_url=two) as b:
            assert (await a.post("/urls", json={"urls": urls})).status_code == 200
            assert await _next_hosts(b) == set(HOSTS)

            # pause through one replica: the other gives nothing of the host at once
            assert (await a.patch("/hosts/paused.example", json={"paused": True})).is_success
            # block by a back-off: a 429 with Retry-After reported through the other
            lease = next(
                x
                for x in (await a.get("/next", params={"n": 10})).json()["leases"]
                if x["host"] == "blocked.example"
            )
            result = {"url": lease["url"], "lease_id": lease["lease_id"],
                      "fetched_at": time.time(), "status": 429, "retry_after_s": 3600}  # fmt: skip
            answer = await b.post("/crawl-result", json={"results": [result]})
            assert answer.json()["accepted"] == 1, answer.text
            for http in (a, b):
                assert await _next_hosts(http) == {"open.example"}
            host = (await a.get("/hosts/blocked.example")).json()
            assert host["block_reason"] == "back_off" and host["blocked"]
            assert (await b.get("/hosts/paused.example")).json()["paused"]

            # lifting them through the other replica holds at once too
            assert (await b.patch("/hosts/paused.example", json={"paused": False})).is_success
            assert (await b.patch("/hosts/blocked.example", json={"blocked_until": 0})).is_success
            assert await _next_hosts(a) == set(HOSTS)
