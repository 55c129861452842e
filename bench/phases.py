"""The timed HTTP phases: (a) dispatch, (c) latency and (b) events.

(a) :func:`dispatch_closed`: ``--workers`` keep-alive connections call ``GET /next``
    back to back; (c) :func:`dispatch_open`: ``GET /next`` on a fixed schedule, latency
    from each request's scheduled start; (b) :func:`post_events`: batched ``POST
    /signal``, ``/click`` and ``/crawl-result`` (bodies from :func:`event_bodies` and
    :func:`result_bodies`, serialised before the clock starts).  Every lease the
    dispatch phases take goes to a shared pool, for the crawl results of (b).
"""

from __future__ import annotations

import asyncio
import itertools
import random
import time
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field

import orjson

from config import Config, url_of
from lean_http import HttpConnection, HttpPool, Refused

#: Leases (b) wants to settle: enough for the mix and /crawl-result alone at ~10k/s.
LEASE_POOL = 100_000


def percentile(xs: Sequence[float], q: float) -> float:
    """The ``q``-quantile (0..1) of ``xs`` by the nearest-rank method; NaN when empty."""
    if not xs:
        return float("nan")
    s = sorted(xs)
    return s[min(len(s) - 1, max(0, round(q * len(s) + 0.5) - 1))]


# -- (a) dispatch, (c) latency --------------------------------------------------------------------
@dataclass
class DispatchResult:
    """Closed-loop dispatch through GET /next."""

    urls: int
    requests: int
    seconds: float
    short: int
    latencies: list[float]

    @property
    def rate(self) -> float:
        """URLs/s."""
        return self.urls / self.seconds

    @property
    def request_rate(self) -> float:
        """Requests/s."""
        return self.requests / self.seconds


async def dispatch_closed(
    base: str, cfg: Config, seconds: float, pool: list[tuple[str, str]], most: int | None = None
) -> DispatchResult:
    """``workers`` connections call GET /next?n=… back to back for ``seconds``, or until
    ``most`` URLs are leased (the phase after needs URLs to lease: a frontier leased
    out answers empty, fast); the leases go to ``pool``."""
    urls = requests = short = 0
    latencies: list[float] = []
    conns = [await HttpConnection.open(base) for _ in range(cfg.workers)]
    path = f"/next?n={cfg.n}"
    t0 = time.perf_counter()
    stop_at = t0 + seconds

    async def worker(conn: HttpConnection) -> None:
        nonlocal urls, requests, short
        while time.perf_counter() < stop_at and (most is None or urls < most):
            t = time.perf_counter()
            leases = orjson.loads(await conn.request("GET", path))["leases"]
            latencies.append(time.perf_counter() - t)
            pool.extend((x["url"], x["lease_id"]) for x in leases)
            urls += len(leases)
            requests += 1
            short += len(leases) < cfg.n

    try:
        await asyncio.gather(*(worker(c) for c in conns))
        elapsed = time.perf_counter() - t0
    finally:
        for c in conns:
            await c.close()
    return DispatchResult(urls, requests, elapsed, short, latencies)


@dataclass
class LatencyResult:
    """Open-loop GET /next at a fixed request rate."""

    rate: float
    sent: int
    seconds: float
    urls: int
    latencies: list[float]
    asked: int  # URLs the requests asked for (sent × n)

    @property
    def full(self) -> bool:
        """Whether the answers leased what was asked (at least 95%): latencies of
        empty answers are not dispatch latencies."""
        return self.urls >= 0.95 * self.asked

    def p(self, q: float) -> float:
        """Latency quantile, ms."""
        return 1000 * percentile(self.latencies, q)


async def dispatch_open(
    base: str, cfg: Config, rate: float, seconds: float, pool: list[tuple[str, str]]
) -> LatencyResult:
    """Start GET /next?n=… every ``1/rate`` s for ``seconds`` whatever the answers do;
    latency from each request's scheduled start to its parsed answer."""
    latencies: list[float] = []
    urls = 0
    http = HttpPool(base)
    path = f"/next?n={cfg.n}"

    async def one(at: float) -> None:
        nonlocal urls
        leases = orjson.loads(await http.request("GET", path))["leases"]
        latencies.append(time.perf_counter() - at)
        pool.extend((x["url"], x["lease_id"]) for x in leases)
        urls += len(leases)

    total = max(1, int(rate * seconds))
    t0 = time.perf_counter() + 0.05
    tasks = []
    try:
        for i in range(total):
            at = t0 + i / rate
            delay = at - time.perf_counter()
            if delay > 0:
                await asyncio.sleep(delay)
            tasks.append(asyncio.create_task(one(at)))
        await asyncio.gather(*tasks)
        elapsed = time.perf_counter() - t0
    finally:
        await http.close()
    return LatencyResult(rate, total, elapsed, urls, latencies, total * cfg.n)


async def top_up(base: str, cfg: Config, pool: list[tuple[str, str]]) -> int:
    """Lease more URLs (untimed) until ``pool`` holds enough leases for the crawl results
    of (b) — ``LEASE_POOL`` or a quarter of the URLs — or ``2 × seconds`` have passed;
    returns how many were added."""
    target = min(LEASE_POOL, cfg.urls // 4)
    before, stop_at = len(pool), time.perf_counter() + 2 * cfg.seconds
    while len(pool) < target and time.perf_counter() < stop_at:
        got = await dispatch_closed(base, cfg, 1.0, pool)
        if got.urls == 0:
            break
    return len(pool) - before


# -- (b) events -----------------------------------------------------------------------------------
ROUTES = {"signal": ("/signal", "signals"), "click": ("/click", "clicks")}
RESULT_ROUTE = "/crawl-result"


def event_bodies(cfg: Config, kind: str, count: int, rng: random.Random) -> list[bytes]:
    """``count`` serialised batches of signals or clicks on random registered URLs."""
    _, key = ROUTES[kind]
    t = time.time() - 1.0
    return [
        orjson.dumps(
            {
                key: [
                    {"url": url_of(rng.randrange(cfg.urls), cfg.per_host), "time": t}
                    for _ in range(cfg.event_batch)
                ]
            }
        )
        for _ in range(count)
    ]


def result_bodies(cfg: Config, pool: Sequence[tuple[str, str]], rng: random.Random) -> list[bytes]:
    """The crawl results of every lease in ``pool``, serialised in batches."""
    t = time.time() - 0.5
    bodies = []
    for start in range(0, len(pool) - cfg.event_batch + 1, cfg.event_batch):
        chunk = pool[start : start + cfg.event_batch]
        results = [
            {
                "url": u,
                "lease_id": lid,
                "fetched_at": t,
                "status": 200,
                "changed": rng.random() < 0.3,
            }
            for u, lid in chunk
        ]
        bodies.append(orjson.dumps({"results": results}))
    return bodies


@dataclass
class EventsResult:
    """One run of event posting."""

    seconds: float
    events: dict[str, int]
    accepted: dict[str, int]
    ran_out: bool = False
    #: events in batches the API refused (503, the fold lagging), by kind; each batch
    #: went again after its ``Retry-After``
    refused: dict[str, int] = field(default_factory=dict)

    @property
    def total(self) -> int:
        """Events sent."""
        return sum(self.events.values())

    @property
    def rate(self) -> float:
        """Events/s."""
        return self.total / self.seconds


async def post_events(
    base: str,
    cfg: Config,
    seconds: float,
    pattern: Sequence[str],
    bodies: dict[str, Iterator[bytes]],
) -> EventsResult:
    """``workers`` connections post batches back to back for ``seconds``, each cycling
    through ``pattern`` (route kinds) from its own offset; a run whose crawl results run
    out of leases ends early (the rate counts the time it ran)."""
    events = dict.fromkeys(pattern, 0)
    accepted = dict.fromkeys(pattern, 0)
    refused = dict.fromkeys(pattern, 0)
    ran_out = False
    conns = [await HttpConnection.open(base) for _ in range(cfg.workers)]
    t0 = time.perf_counter()
    stop_at = t0 + seconds

    async def worker(conn: HttpConnection, offset: int) -> None:
        nonlocal ran_out
        for kind in itertools.islice(itertools.cycle(pattern), offset, None):
            if time.perf_counter() >= stop_at or ran_out:
                return
            body = next(bodies[kind], None)
            if body is None:
                ran_out = True
                return
            path = RESULT_ROUTE if kind == "result" else ROUTES[kind][0]
            while True:
                try:
                    answer = orjson.loads(await conn.request("POST", path, body))
                    break
                except Refused as no:  # backpressure: the same batch after Retry-After
                    refused[kind] += cfg.event_batch
                    wait = min(no.retry_after_s, stop_at - time.perf_counter())
                    if wait <= 0:
                        return
                    await asyncio.sleep(wait)
            events[kind] += answer["accepted"] + len(answer["ignored"])
            accepted[kind] += answer["accepted"]

    try:
        await asyncio.gather(*(worker(c, i) for i, c in enumerate(conns)))
        elapsed = time.perf_counter() - t0
    finally:
        for c in conns:
            await c.close()
    return EventsResult(elapsed, events, accepted, ran_out, refused)
