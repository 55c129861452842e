"""Two API processes on one Redis: no URL leased twice at once, politeness held across
processes, one λ₀ for both."""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections import defaultdict

import httpx
import pytest

from service.loadgen.demo import served_app
from service.store.redis.local import LocalRedis

pytestmark = pytest.mark.anyio
DELAY_S = 0.3
TTL_S = 600.0
#: A lease's issue time is read back as deadline − TTL: exact to a few ulps of a Unix
#: time (~2.4e-7 s each), s.
ISSUE_EPS_S = 1e-6


async def _hammer(base_urls: list[str], seconds: float) -> list[dict[str, object]]:
    """Workers alternating between the processes ask /next until time is up."""
    grants: list[dict[str, object]] = []

    async def worker(k: int) -> None:
        async with httpx.AsyncClient(base_url=base_urls[k % len(base_urls)]) as http:
            end = time.monotonic() + seconds
            while time.monotonic() < end:
                body = (await http.get("/next", params={"n": 4})).json()
                grants.extend({**lease, "now": body["now"]} for lease in body["leases"])

    await asyncio.gather(*(worker(k) for k in range(6)))
    return grants


@pytest.mark.slow
async def test_two_processes_share_leases_politeness_and_lambda() -> None:
    env = {
        "CRAWLSCHED_DEFAULT_CRAWL_DELAY_S": str(DELAY_S),
        "CRAWLSCHED_LEASE_TTL_S": str(TTL_S),
        "CRAWLSCHED_MAX_IN_FLIGHT": "1000",  # nothing is settled: politeness is under test
    }
    with LocalRedis() as server, contextlib.ExitStack() as stack:
        env["CRAWLSCHED_STORE"] = server.url
        bases = [stack.enter_context(served_app(env)) for _ in range(2)]
        urls = [{"url": f"https://h{i}.example/p{j}"} for i in range(6) for j in range(8)]
        async with httpx.AsyncClient(base_url=bases[0]) as http:
            assert (await http.post("/urls", json={"urls": urls})).status_code == 200
        grants = await _hammer(bases, seconds=1.6)

        # nothing is settled and leases outlive the test: each URL at most once
        leased = [g["url"] for g in grants]
        assert len(leased) == len(set(leased))
        # each host gave out URLs at least the crawl delay apart, whichever process asked,
        # by the store's clock (a lease's issue time; the answer's `now` is the latest
        # time the store read for the whole call)
        by_host: dict[object, list[float]] = defaultdict(list)
        for g in grants:
            issued = float(g["deadline"]) - TTL_S  # type: ignore[arg-type]
            assert issued <= float(g["now"]) + ISSUE_EPS_S  # type: ignore[arg-type]
            by_host[g["host"]].append(issued)
        for times in by_host.values():
            times.sort()
            gaps = [b - a for a, b in zip(times, times[1:], strict=False)]
            assert min(gaps, default=DELAY_S) >= DELAY_S - ISSUE_EPS_S
        assert sum(len(t) for t in by_host.values()) >= 6 * 3  # politeness, not starvation
        # one λ₀, kept in Redis, seen by both processes
        seen = []
        for base in bases:
            async with httpx.AsyncClient(base_url=base) as http:
                body = (await http.get(f"/urls/{urls[0]['url']}")).json()
                seen.append(body["lambda0"])
        assert seen[0] is not None and seen[0] == seen[1]
