"""Durability: ``kill -9`` of redis-server (AOF, ``appendfsync always``) in the middle of
a load-generator run, then a restart on the same port and data directory, loses no
acknowledged event, no URL and no lease, and counts no event twice: the client's
retries carry the batch's idempotency key, so a batch answered 503 after Redis applied
(or appended) part of it applies the rest, once; signals and clicks appended are folded
once, by the worker or, for what it left when it stopped, by the test.  The service
answers 503 while Redis is down and recovers by itself.

Real processes only: a private ``redis-server``, the service under uvicorn (accelerated
clock), the load generator over HTTP.  The world is seeded; the moment of the kill is
a wall time, so the counts differ from run to run, but every check holds for any of
them.
"""

from __future__ import annotations

import asyncio
import math
import struct
import time
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass
from typing import cast

import httpx
import pytest
import redis

from scheduler_core.sim import World, WorldSpec
from service.client import CrawlschedClient
from service.loadgen.demo import served_app
from service.loadgen.ledger import EventKind, EventLedger
from service.loadgen.report import LoadgenReport
from service.loadgen.runner import LoadgenOptions, run_loadgen
from service.settings import Settings
from service.store.base import UrlState, ready_score
from service.store.redis import RedisStore
from service.store.redis.keys import ShardKeys, expand_url
from service.store.redis.local import LocalRedis
from service.store.redis.records import HOST, HOST_CTL, URL, unpack_entry
from service.urls import canonical_url

pytestmark = [pytest.mark.anyio, pytest.mark.redis]

SHARDS = 4
#: Wall seconds the world replays in; Redis is killed KILL_AFTER_S into the run
#: (registration and warm-up done) and is down for DOWN_S.
WALL_S = 14.0
KILL_AFTER_S = 4.0
DOWN_S = 3.0
#: Lease TTL, wall s: shorter than the outage, so leases outstanding at the kill
#: expire while Redis is down and must come back (redelivered or settled late).
LEASE_TTL_WALL_S = 2.0
#: Lease record layout (``lua/lib.lua``): status, deadline, issue time, then
#: "nonce host url-key".
_LEASE_HEAD = struct.Struct("<Bdd")
_ACTIVE = 1


@dataclass(frozen=True)
class _Lease:
    status: int
    deadline: float
    host: str
    ukey: str


def _lease(blob: bytes) -> _Lease:
    status, deadline, _ = _LEASE_HEAD.unpack_from(blob)
    _, host, ukey = blob[_LEASE_HEAD.size :].decode().split(" ")
    return _Lease(status, deadline, host, ukey)


def _deadlines(members: dict[str, float]) -> dict[int, float]:
    """Each lease seq a deadline set covers, with its score: a member is "<first>:<n>"
    (the seqs of one lease call in the shard) or one seq."""
    out: dict[int, float] = {}
    for member, score in members.items():
        first, _, n = member.partition(":")
        for seq in range(int(first), int(first) + int(n or 1)):
            out[seq] = score
    return out


def _hash(client: redis.Redis, key: str) -> dict[str, bytes]:
    return {k.decode(): v for k, v in cast(dict[bytes, bytes], client.hgetall(key)).items()}


def _zset(client: redis.Redis, key: str) -> dict[str, float]:
    items = cast(list[tuple[bytes, float]], client.zrange(key, 0, -1, withscores=True))
    return {k.decode(): v for k, v in items}


def check_integrity(client: redis.Redis, now: float) -> set[str]:
    """Read the store's raw keys (names from :mod:`service.store.redis.keys`, layouts
    from ``lua/lib.lua``) and assert that no URL and no lease is lost or dangling.

    Every URL is either unleased and queued under its host at its due time, or holds
    an active lease (in the deadline set, not past its deadline at ``now``, Unix s);
    every queued URL, every active lease and every ready host belong to a URL or
    host record; the shard's URL counter matches its records.

    Returns
    -------
    set of str
        Every URL the store holds.
    """
    urls: set[str] = set()
    for shard in range(SHARDS):
        keys = ShardKeys(shard)
        meta = _hash(client, f"{keys.tag}meta")
        hosts = _hash(client, keys.hosts)
        ready = _zset(client, f"{keys.tag}ready")
        leases = {int(k): _lease(v) for k, v in _hash(client, f"{keys.tag}leases").items()}
        deadlines = _deadlines(_zset(client, f"{keys.tag}deadlines"))
        active = {seq for seq, lease in leases.items() if lease.status == _ACTIVE}
        assert active <= set(deadlines), f"shard {shard}: active leases without a deadline"
        leased_urls: set[int] = set()
        records = 0
        for host, host_blob in hosts.items():
            records_h = _hash(client, keys.urls(host))
            queue = _zset(client, keys.queue(host))
            records += len(records_h)
            for ukey, blob in records_h.items():
                fields = URL.unpack_from(unpack_entry(blob)[0])
                due, seq = fields[11], fields[-1]
                url = expand_url(ukey, host)
                urls.add(url)
                if seq == 0:
                    assert queue.get(ukey) == ready_score(due), f"{url}: not queued at its due"
                    continue
                assert ukey not in queue, f"{url}: leased and queued at once"
                lease = leases.get(seq)
                assert lease is not None and lease.status == _ACTIVE, f"{url}: lease {seq} lost"
                assert (lease.host, lease.ukey) == (host, ukey), f"{url}: lease {seq} elsewhere"
                assert deadlines[seq] == ready_score(lease.deadline), f"{url}: lease {seq}"
                assert lease.deadline > now, f"{url}: lease {seq} overdue"
                leased_urls.add(seq)
            assert set(queue) <= set(records_h), f"{host}: queued URLs without a record"
            # readiness (lib.lua host_ready): the latest of the earliest due, the gate and
            # any block; out while empty, paused or with its cap of leases out
            gate = struct.unpack_from("<5d", host_blob)[1]
            blocked, _, cap, flight, paused, _, _ = HOST_CTL.unpack_from(host_blob, HOST.size)
            cap = cap or int(meta.get("max_in_flight", b"1000000"))  # lib.lua ctl: none written
            if queue and not paused and flight < cap:
                readiness = max(min(queue.values()), ready_score(gate))
                if not math.isnan(blocked):
                    readiness = max(readiness, ready_score(blocked))
                assert ready.get(host) == readiness, f"{host}: readiness"
            else:
                assert host not in ready, f"{host}: ready while empty, paused or full"
            in_flight = sum(1 for lease in leases.values()
                            if lease.status == _ACTIVE and lease.host == host)  # fmt: skip
            assert flight == in_flight, f"{host}: leases out"
        assert leased_urls == active, f"shard {shard}: active leases no URL holds"
        assert set(ready) <= set(hosts), f"shard {shard}: ready hosts without a record"
        assert int(meta.get("urls", b"0")) == records, f"shard {shard}: URL counter"
    return urls


def check_counts(states: dict[str, UrlState], ledger: EventLedger) -> dict[str, int]:
    """Per URL: stored == acknowledged (exactly once: none lost, none counted twice).

    Returns
    -------
    dict
        Totals of each kind over all URLs (acknowledged and stored).
    """
    # kind, the answers the store counts, the store's counter
    kinds: list[tuple[EventKind, tuple[str, ...], Callable[[UrlState], int]]] = [
        ("click", ("accepted",), lambda s: s.clicks),
        ("signal", ("accepted", "stale"), lambda s: s.signals),
        ("crawl_result", ("accepted",), lambda s: s.crawls + s.fetch_errors),
    ]
    totals: dict[str, int] = {}
    for kind, statuses, stored_of in kinds:
        acked = Counter(
            {canonical_url(u): k for u, k in ledger.acknowledged(kind, *statuses).items()}
        )
        assert set(acked) <= set(states), f"{kind}: acknowledged for URLs the store lacks"
        for url, state in states.items():
            stored = stored_of(state)
            assert stored == acked[url], f"{url}: {kind} acknowledged {acked[url]}, stored {stored}"
        totals[f"{kind}_acknowledged"] = sum(acked.values())
        totals[f"{kind}_stored"] = sum(stored_of(s) for s in states.values())
    return totals


async def _wait_for(
    http: httpx.AsyncClient, path: str, status: int, timeout_s: float
) -> httpx.Response:
    deadline = time.monotonic() + timeout_s
    while True:
        response = await http.get(path)
        if response.status_code == status or time.monotonic() > deadline:
            return response
        await asyncio.sleep(0.05)


@pytest.mark.slow
async def test_kill_9_mid_run_loses_no_acknowledged_event_url_or_lease(
    capfd: pytest.CaptureFixture[str],
) -> None:
    world = World.generate(
        WorldSpec(urls=200, hosts=10, duration_days=60, budget_per_day=20, seed=23)
    )
    speed = world.duration_s / WALL_S
    server = LocalRedis(aof=True).start()
    env = {
        "CRAWLSCHED_STORE": server.url,
        "CRAWLSCHED_SHARDS": str(SHARDS),
        "CRAWLSCHED_CLOCK": "accelerated",
        "CRAWLSCHED_CLOCK_SPEED": repr(speed),
        "CRAWLSCHED_LEASE_TTL_S": repr(LEASE_TTL_WALL_S * speed),
        "CRAWLSCHED_MAX_REVISIT_S": repr(world.duration_s),
    }
    try:
        with served_app(env) as base_url:
            async with (
                CrawlschedClient(base_url, retry_for_s=30.0) as client,
                httpx.AsyncClient(base_url=base_url, timeout=10.0) as http,
            ):
                ledger = EventLedger()
                options = LoadgenOptions(workers=4, progress=False, signal_optimum=False)
                run = asyncio.create_task(run_loadgen(world, client, options, ledger=ledger))
                await asyncio.sleep(KILL_AFTER_S)
                assert not run.done(), "the run ended (or failed) before the kill"
                assert ledger.total("crawl_result") > 0 and ledger.total("click") > 0
                acked_before_kill = ledger.total("click")

                server.kill()  # kill -9: no shutdown, no final save
                down_until = time.monotonic() + DOWN_S
                answers: list[tuple[str, int, str | None]] = []
                while time.monotonic() < down_until:
                    for path in ("/next?n=1", "/healthz"):
                        r = await http.get(path)
                        answers.append((path, r.status_code, r.headers.get("retry-after")))
                    await asyncio.sleep(0.25)
                assert not run.done(), "the load generator gave up during the outage"
                assert answers and all(a[1:] == (503, "1") for a in answers), answers

                await asyncio.to_thread(server.start)  # same port, same data directory
                health = await _wait_for(http, "/healthz", 200, timeout_s=10.0)
                assert health.status_code == 200, health.text  # recovered by itself
                report: LoadgenReport = await asyncio.wait_for(run, timeout=WALL_S + 30.0)
                # expired leases are reclaimed lazily, by the next lease call: make one
                after = (await http.get("/next", params={"n": 1})).json()
                assert (await http.get("/healthz")).status_code == 200

        # the service and its worker have stopped: fold what the worker left (taking
        # over the batches it held), then the store holds still for the raw reads
        store = await RedisStore.connect(server.url, shards=SHARDS)
        try:
            defaults = Settings()
            while (
                await store.fold_events(
                    "test", 1000, defaults.signal_discard_s, defaults.estimate_decay_s, 0.0
                )
            ).parts:
                pass
            assert await store.fold_lag() == 0.0
            urls = [canonical_url(u) for u in world.urls]
            states = dict(zip(urls, await store.get_urls(urls), strict=True))
        finally:
            await store.close()
        raw = redis.Redis(port=server.port)
        try:
            stored_urls = check_integrity(raw, float(after["now"]))
        finally:
            raw.close()
    finally:
        server.stop()
    service_log = capfd.readouterr().err

    # the outage was seen, and ridden out, by the load generator
    assert report.client_unavailable > 0 and report.client_retries > 0
    assert ledger.total("click") > acked_before_kill
    # no URL lost, none invented
    missing = [u for u, s in states.items() if s is None]
    assert not missing, f"{len(missing)} URLs lost, e.g. {missing[:3]}"
    assert stored_urls == set(urls)
    # every acknowledged event stored exactly once, and nothing else: some batches were
    # sent without getting an answer and retried, and none of them counted twice
    assert client.stats.unanswered, "no batch was caught by the outage"
    present = {u: s for u, s in states.items() if s is not None}
    totals = check_counts(present, ledger)
    assert ledger.total("crawl_result", "duplicate") == 0  # a retried result is no duplicate
    assert totals["crawl_result_acknowledged"] > 0.5 * world.budget_per_s * world.duration_s
    # the run is still a crawl schedule worth the name
    assert report.freshness > 0 and math.isfinite(report.freshness)
    assert report.crawls > 0.5 * world.budget_per_s * world.duration_s
    # the service answered 503 (StoreUnavailable), never a server error
    assert "Traceback" not in service_log, service_log[-4000:]
