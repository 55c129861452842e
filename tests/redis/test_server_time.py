"""Server-side time: two API replicas whose own clocks disagree by 10 s, on one Redis,
still keep every host's crawl delay and never lease a URL while another lease of it is
live, because lease deadlines, lease reclaiming and politeness gates are taken from
Redis's ``TIME`` inside the scripts.

Real parts only: a private ``redis-server``, two apps served by uvicorn on free ports
(one thread each), workers over real sockets.  Every lease is judged by Redis's own
clock: each ``GET /next`` is bracketed by two ``TIME`` calls of the test, so the lease
was issued, in server time, between the two.
"""

from __future__ import annotations

import asyncio
import contextlib
import threading
import time
from collections import defaultdict
from collections.abc import Iterator
from dataclasses import dataclass
from itertools import combinations

import httpx
import pytest
import redis.asyncio
import uvicorn
from fastapi import FastAPI

from service.app import create_app
from service.clock import SystemClock
from service.ports import free_port
from service.settings import Settings
from service.store.redis.local import LocalRedis

pytestmark = [pytest.mark.anyio, pytest.mark.redis]

DELAY_S = 1.0  # crawl delay of every host, s
TTL_S = 2.5  # lease TTL, s: leases expire (nobody settles) and are reclaimed during the run
SKEWS_S = (5.0, -5.0)  # each replica's clock error: one ahead, one behind
HAMMER_S = 5.0
#: Slack for the float round trips of a time through Lua and JSON, s.
EPS_S = 1e-3


class SkewedClock(SystemClock):
    """The system clock of a machine whose wall clock is ``skew_s`` off (a test double
    of a badly synchronised host: its ``time.time()`` is wrong, nothing else)."""

    def __init__(self, skew_s: float) -> None:
        self.skew_s = skew_s

    def now(self) -> float:
        return time.time() + self.skew_s


class _Served:
    """An app under uvicorn in a thread of its own, on a free port."""

    def __init__(self, app: FastAPI) -> None:
        self.port = free_port()
        config = uvicorn.Config(
            app, host="127.0.0.1", port=self.port, log_level="warning", access_log=False
        )
        self.server = uvicorn.Server(config)
        self.thread = threading.Thread(target=self.server.run, daemon=True)

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def __enter__(self) -> _Served:
        self.thread.start()
        deadline = time.monotonic() + 30.0
        while not self.server.started:
            if not self.thread.is_alive() or time.monotonic() > deadline:
                raise RuntimeError("the app did not start")
            time.sleep(0.02)
        return self

    def __exit__(self, *_: object) -> None:
        self.server.should_exit = True
        self.thread.join(timeout=15.0)


@contextlib.contextmanager
def _replicas(redis_url: str) -> Iterator[list[str]]:
    # no in-flight cap: the crawl delay is the limit under test (nothing is settled)
    settings = Settings(
        store=redis_url, shards=4, default_crawl_delay_s=DELAY_S, lease_ttl_s=TTL_S,
        max_in_flight=65_535,
    )  # fmt: skip
    with contextlib.ExitStack() as stack:
        yield [
            stack.enter_context(_Served(create_app(settings, clock=SkewedClock(skew)))).url
            for skew in SKEWS_S
        ]


@dataclass(frozen=True)
class _Lease:
    url: str
    host: str
    deadline: float
    now: float  # the answer's `now`
    sent: float  # Redis TIME, s, read just before the request was sent
    answered: float  # Redis TIME, s, read just after the answer came


async def _server_time(client: redis.asyncio.Redis) -> float:
    sec, usec = await client.time()
    return sec + usec / 1e6


async def _hammer(redis_url: str, bases: list[str]) -> list[_Lease]:
    """Workers ask /next until time is up; nobody settles.  The replica whose clock
    lags does most of the asking: a replica ahead of the others, asked all the time,
    would lease every host first and lock the others out (its gates lie in their
    future), and hide what the others' gates look like to it."""
    leases: list[_Lease] = []

    async def worker(base: str, n: int, pause_s: float) -> None:
        client = redis.asyncio.Redis.from_url(redis_url)
        try:
            async with httpx.AsyncClient(base_url=base, timeout=10.0) as http:
                end = time.monotonic() + HAMMER_S
                while time.monotonic() < end:
                    sent = await _server_time(client)
                    response = await http.get("/next", params={"n": n})
                    answered = await _server_time(client)
                    assert response.status_code == 200, response.text
                    body = response.json()
                    leases.extend(
                        _Lease(x["url"], x["host"], x["deadline"], body["now"], sent, answered)
                        for x in body["leases"]
                    )
                    await asyncio.sleep(pause_s)
        finally:
            await client.aclose()

    ahead, behind = bases
    workers = [worker(behind, 3, 0.0) for _ in range(6)] + [worker(ahead, 1, 0.5)]
    await asyncio.gather(*workers)
    return leases


def _surely_closer(a: _Lease, b: _Lease, gap_s: float) -> bool:
    """True when, by Redis's clock, ``a`` and ``b`` were certainly issued less than
    ``gap_s`` apart (each lies between its two TIME readings)."""
    return max(b.answered - a.sent, a.answered - b.sent) < gap_s


def _politeness_breaches(leases: list[_Lease]) -> list[tuple[_Lease, _Lease]]:
    """Pairs of leases of one host surely issued less than its crawl delay apart."""
    by_host: dict[str, list[_Lease]] = defaultdict(list)
    for x in leases:
        by_host[x.host].append(x)
    return [
        (a, b)
        for group in by_host.values()
        for a, b in combinations(group, 2)
        if _surely_closer(a, b, DELAY_S - EPS_S)
    ]


def _overlapping_leases(leases: list[_Lease]) -> list[tuple[_Lease, _Lease]]:
    """Pairs of leases of one URL surely issued less than the TTL apart: nothing is
    settled, so the first was still live when the second was issued."""
    by_url: dict[str, list[_Lease]] = defaultdict(list)
    for x in leases:
        by_url[x.url].append(x)
    return [
        (a, b)
        for group in by_url.values()
        for a, b in combinations(group, 2)
        if _surely_closer(a, b, TTL_S - EPS_S)
    ]


def _off_server_time(leases: list[_Lease]) -> list[_Lease]:
    """Leases whose `now` or deadline was not read off Redis's clock."""
    return [
        x
        for x in leases
        if not x.sent - EPS_S <= x.now <= x.answered + EPS_S
        or not x.sent + TTL_S - EPS_S <= x.deadline <= x.answered + TTL_S + EPS_S
    ]


async def _run() -> list[_Lease]:
    with LocalRedis() as server, _replicas(server.url) as bases:
        urls = [{"url": f"https://h{i}.example/p{j}"} for i in range(12) for j in range(3)]
        async with httpx.AsyncClient(base_url=bases[0]) as http:
            assert (await http.post("/urls", json={"urls": urls})).status_code == 200
        # FastAPI builds a route's parameter models on its first request, silencing a
        # pydantic warning with warnings.catch_warnings, which is not thread-safe: two
        # replicas in threads of this one process (in production: two processes) could
        # build /next at once and let the warning out (an error under filterwarnings).
        # One refused request each, in turn, builds it without leasing anything.
        for base in bases:
            async with httpx.AsyncClient(base_url=base) as http:
                assert (await http.get("/next", params={"n": 0})).status_code == 422
        return await _hammer(server.url, bases)


async def test_skewed_replicas_keep_politeness_and_single_leases_by_server_time() -> None:
    leases = await _run()
    assert not _off_server_time(leases)
    assert not _politeness_breaches(leases)
    assert not _overlapping_leases(leases)
    # the run exercised both: hosts gave out URLs over and over, leases expired and
    # their URLs went out again
    hosts = {x.host for x in leases}
    urls = {x.url for x in leases}
    assert len(hosts) == 12 and len(leases) >= len(hosts) * HAMMER_S / DELAY_S * 0.5
    assert len(leases) - len(urls) >= len(urls) // 2
