"""The scripts called directly, against a private ``redis-server``: the time they decide
at comes from the server's ``TIME`` through the caller's clock (``lib.lua``
clock_now), and an event batch under an idempotency key is applied once per shard,
its answer kept (``KEYS[10]``) with its effects.  Each checks the state after and that
a repeat is safe."""

from __future__ import annotations

import struct
from collections.abc import AsyncIterator, Iterator

import numpy as np
import pytest
import redis

from service.store.base import (
    ClickEvent,
    CrawlOutcome,
    EventStatus,
    IdempotencyKey,
    UrlRecord,
    ready_score,
    shard_of,
)
from service.store.redis import RedisStore
from service.store.redis.keys import ShardKeys, url_key
from service.store.redis.local import LocalRedis
from service.store.redis.records import GRANT, HOST, URL, parse_lease_id, unpack_entry
from service.store.redis.scripts import Call

pytestmark = [pytest.mark.anyio, pytest.mark.redis]
#: settle.lua's back-off base s, longest block s, jitter, gone count (ARGV[8:11]).
_CONTROLS = (repr(60.0), repr(86_400.0), repr(0.1), 3)
T0 = 1_000_000.0
DECAY_S = 86_400.0
SHARDS = 4
DELAY_S = 7.0
TTL_S = 60.0
#: Lease record (lua/lib.lua): status, deadline, issue time, then "nonce host url-key".
LEASE = struct.Struct("<Bdd")


def rec(url: str, last: float = T0) -> UrlRecord:
    return UrlRecord(
        url=url, host=url.split("/")[2], weight=1.0, change_rate=0.01, recall=0.5,
        false_signal_rate=0.01, signal_time_equivalent_s=0.0, threshold_s=100.0,
        scored_lambda=1.0, last_crawled_at=last, crawl_delay_s=DELAY_S,
    )  # fmt: skip


@pytest.fixture(scope="module")
def server() -> Iterator[LocalRedis]:
    with LocalRedis() as s:
        yield s


@pytest.fixture
def raw(server: LocalRedis) -> Iterator[redis.Redis]:
    with redis.Redis(port=server.port) as client:
        client.flushall()
        yield client


@pytest.fixture
async def store(server: LocalRedis, raw: redis.Redis) -> AsyncIterator[RedisStore]:
    s = await RedisStore.connect(server.url, shards=SHARDS)
    yield s
    await s.close()


def _server_time(raw: redis.Redis) -> float:
    sec, usec = raw.time()
    return sec + usec / 1e6


async def _lease(store: RedisStore, shard: int, clock: str) -> tuple[str, str, np.ndarray]:
    """``lease.lua`` over one shard for one due host: now, deadline, the grant records."""
    call = store._lease_call(None, [shard], (clock, "lease", 1, 0, repr(TTL_S), "n0nce"), [])
    (answer,) = await store._scripts.run(store.client, [call])
    now_s, deadline_s, _, _, blob, _ = answer
    return now_s, deadline_s, np.frombuffer(blob, dtype=GRANT)


@pytest.mark.parametrize(
    ("start", "speed", "epoch_ago_s"),
    [(0.0, 1.0, 0.0), (T0, 1000.0, 3.0), (T0, 0.5, 10.0)],
)
async def test_lease_reads_the_server_time_through_the_clock(
    store: RedisStore, raw: redis.Redis, start: float, speed: float, epoch_ago_s: float
) -> None:
    """now = start + speed × (TIME − epoch); the deadline, the gate and the lease's issue
    time all follow it."""
    host = "a.example"
    shard = shard_of(host, SHARDS)
    await store.upsert_urls([rec(f"https://{host}/{i}", last=-1e12) for i in range(2)], T0)
    epoch = _server_time(raw) - epoch_ago_s if speed != 1.0 else 0.0
    before = _server_time(raw)
    now_s, deadline_s, flat = await _lease(store, shard, f"{start!r} {speed!r} {epoch!r}")
    after = _server_time(raw)
    now = float(now_s)
    assert start + speed * (before - epoch) <= now <= start + speed * (after - epoch)
    assert float(deadline_s) == now + TTL_S
    seq = int(flat["seq"][0])
    keys = ShardKeys(shard)
    status, deadline, issued = LEASE.unpack_from(raw.hget(keys.all[3], seq) or b"")
    assert (status, deadline, issued) == (1, now + TTL_S, now)
    # the call's deadline: one member for the shard's leases of the call, "<first>:<n>"
    deadlines = dict(raw.zrange(keys.all[4], 0, -1, withscores=True))
    assert deadlines == {f"{seq}:1".encode(): ready_score(now + TTL_S)}
    assert HOST.unpack_from(raw.hget(keys.hosts, host) or b"")[1] == now + DELAY_S  # the gate
    # a repeat within the crawl delay leases nothing: the gate is in the server's future
    again_now, _, again = await _lease(store, shard, f"{start!r} {speed!r} {epoch!r}")
    if speed * (_server_time(raw) - before) < DELAY_S:
        assert len(again) == 0 and float(again_now) >= now


async def test_a_fixed_reading_is_used_as_it_is(store: RedisStore, raw: redis.Redis) -> None:
    host = "a.example"
    await store.upsert_urls([rec(f"https://{host}/x")], T0)
    now_s, deadline_s, flat = await _lease(store, shard_of(host, SHARDS), f"{T0 + 500!r} 0.0 0.0")
    assert (float(now_s), float(deadline_s), len(flat)) == (T0 + 500, T0 + 500 + TTL_S, 1)


async def test_reclaiming_follows_the_server_time(store: RedisStore, raw: redis.Redis) -> None:
    """A lease is reclaimed once the server's time, through the caller's clock, passes
    its deadline, not before; reclaiming again changes nothing."""
    host = "a.example"
    shard = shard_of(host, SHARDS)
    wall = _server_time(raw)
    await store.upsert_urls([rec(f"https://{host}/x", last=wall - 1e4)], wall)
    await _lease(store, shard, "0.0 1.0 0.0")  # the system clock: the server's TIME
    keys = ShardKeys(shard)

    async def stats(clock: str) -> tuple[int, int]:
        (answer,) = await store._scripts.run(
            store.client, [Call("stats", keys.all, (clock, 1000, 0))]
        )
        return int(answer[3]), int(answer[4])  # active, expired

    for _ in range(2):
        assert await stats("0.0 1.0 0.0") == (1, 0)
    # a clock one TTL and a second ahead of the server's: its deadline has passed
    for _ in range(2):
        assert await stats(f"{TTL_S + 1!r} 1.0 0.0") == (0, 1)
    assert raw.zcard(keys.all[4]) == 0 and raw.zcard(keys.queue(host)) == 1


def _once(digest: str, ttl_s: float = 3600.0) -> IdempotencyKey:
    return IdempotencyKey(digest, ttl_s)


async def test_a_batch_half_applied_is_completed_once(store: RedisStore, raw: redis.Redis) -> None:
    """Redis died after one shard's script of a batch ran: the batch sent again under its
    key applies the other shards and answers the one that ran as it did."""
    urls = [f"https://h{i}.example/p" for i in range(12)]
    await store.upsert_urls([rec(u) for u in urls], T0)
    clicks = [ClickEvent(u, T0 + 1.0) for u in [*urls, "https://nope.example/"]]
    once = _once("ab" * 16)
    groups = store._by_shard([c.url for c in clicks])
    assert len(groups) >= 3
    shard, items = next(iter(groups.items()))
    head = " ".join(f"{h} {k} {T0 + 1.0!r}" for _, h, k in items)
    part = store._call("clicks", shard, (repr(DECAY_S), head, 3_600_000), once)
    (answer,) = await store._scripts.run(store.client, [part])  # the part that ran
    record = raw.get(ShardKeys(shard).once(once.digest))
    assert record == "".join(map(str, answer)).encode()
    assert 0 < raw.pttl(ShardKeys(shard).once(once.digest)) <= 3_600_000
    for _ in range(2):
        statuses = await store.record_clicks(clicks, DECAY_S, once)
        assert statuses == [EventStatus.ACCEPTED] * len(urls) + [EventStatus.UNKNOWN_URL]
        assert all(s is not None and s.clicks == 1 for s in await store.get_urls(urls))
    for s in groups:
        assert raw.exists(ShardKeys(s).once(once.digest))


def _settle_line(o: CrawlOutcome) -> str:
    """One result as ``settle.lua`` takes it (a refreshed, changed copy)."""
    host = o.url.split("/")[2]
    parsed = parse_lease_id(o.lease_id, SHARDS)
    assert parsed is not None
    _, seq, nonce = parsed
    return f"{host} {url_key(o.url, host)} {seq} {nonce} {o.fetched_at!r} 1 1 200 - - 0"


async def test_results_half_applied_are_completed_once(store: RedisStore, raw: redis.Redis) -> None:
    urls = [f"https://h{i}.example/p" for i in range(12)]
    await store.upsert_urls([rec(u) for u in urls], T0)
    _, grants = await store.lease_next(T0 + 500, len(urls), TTL_S, dispatch_ahead=False)
    outcomes = [CrawlOutcome(g.state.url, g.lease_id, T0 + 501, True, True) for g in grants]
    once = _once("cd" * 16)
    # the results of one shard settle (the answer lost with Redis), the rest do not
    shard = int(grants[0].lease_id.split(".")[0])
    mine = [o for o in outcomes if o.lease_id.startswith(f"{shard}.")]
    line = " ".join(_settle_line(o) for o in mine)
    head = (repr(60.0), repr(0.0), repr(1e6), 1000, 8, line, 3_600_000, *_CONTROLS)
    part = Call("settle", store.settle_keys(shard, once), head)
    assert await store._scripts.run(store.client, [part]) == [[0] * len(mine)]
    assert len(mine) < len(outcomes)
    for _ in range(2):
        statuses = await store.settle(outcomes, 60.0, 0.0, 8, once)
        assert statuses == [EventStatus.ACCEPTED] * len(urls)
        states = await store.get_urls(urls)
        assert all(s is not None and (s.crawls, s.lease_id) == (1, None) for s in states)
    # a new batch of the same results: duplicates
    again = await store.settle(outcomes, 60.0, 0.0, 8, _once("ef" * 16))
    assert again == [EventStatus.DUPLICATE] * len(urls)
    # each shard appended its results for the fold once
    shards = {int(o.lease_id.split(".")[0]) for o in outcomes}
    assert [raw.xlen(ShardKeys(n).events) for n in sorted(shards)] == [1] * len(shards)


async def test_unknown_leases_get_code_4(store: RedisStore, raw: redis.Redis) -> None:
    await store.upsert_urls([rec("https://a.example/x")], T0)
    _, (g,) = await store.lease_next(T0 + 500, 1, TTL_S, dispatch_ahead=False)
    parsed = parse_lease_id(g.lease_id, SHARDS)
    assert parsed is not None
    shard, seq, nonce = parsed
    ukey = url_key(g.state.url, "a.example")
    lines = [
        f"a.example {ukey} {seq} wrongnonce {T0!r} 1 1 200 - - 0",  # a nonce never issued
        f"a.example {ukey} {seq + 1} {nonce} {T0!r} 1 1 200 - - 0",  # a seq never issued
        f"b.example /y {seq} {nonce} {T0!r} 1 1 200 - - 0",  # the lease of another URL
    ]
    head = (repr(60.0), repr(0.0), repr(1e6), 1000, 8, " ".join(lines), 0, *_CONTROLS)
    keys = ShardKeys(shard)
    call = Call("settle", store.settle_keys(shard, None), head)
    for _ in range(2):
        (answer,) = await store._scripts.run(store.client, [call])
        assert answer == [4, 4, 2]
        entry = raw.hget(keys.urls("a.example"), ukey) or b""
        assert URL.unpack_from(unpack_entry(entry)[0])[-1] == seq  # leased


async def test_lease_status_reads_leases_and_changes_nothing(
    store: RedisStore, raw: redis.Redis
) -> None:
    """lease_status.lua answers status, host, URL key and issue time per "seq nonce"
    (0 and blanks for a lease it does not know, a wrong nonce included); it only reads:
    a repeat answers the same and the shard's keys stay as they were."""
    await store.upsert_urls([rec("https://a.example/x")], T0)
    _, (g,) = await store.lease_next(T0 + 500, 1, TTL_S, dispatch_ahead=False)
    parsed = parse_lease_id(g.lease_id, SHARDS)
    assert parsed is not None
    shard, seq, nonce = parsed
    arg = f"{seq} {nonce} {seq} wrongnonce {seq + 1} {nonce}"
    call = Call("lease_status", ShardKeys(shard).all, (arg,))
    before = {k: raw.dump(k) for k in raw.keys("*")}
    for _ in range(2):
        (answer,) = await store._scripts.run(store.client, [call])
        status, host, ukey, issued = answer[:4]
        assert (status, host, ukey) == (1, b"a.example", b"/x")
        assert float(issued) == pytest.approx(T0 + 500)
        assert answer[4:] == [0, b"", b"", b"", 0, b"", b"", b""]
    assert {k: raw.dump(k) for k in raw.keys("*")} == before
    done = CrawlOutcome(g.state.url, g.lease_id, T0 + 501, True, True)
    await store.settle([done], 60.0, 0.0, 8)
    (answer,) = await store._scripts.run(store.client, [call])
    assert answer[0] == 3  # settled


async def test_leases_of_the_earlier_layout_are_still_read(
    store: RedisStore, raw: redis.Redis
) -> None:
    """Lease records written before the issue time was kept ("<Bd" + text) are read
    with an unknown issue time: they settle, expire and report as before."""
    urls = ["https://a.example/x", "https://b.example/y"]
    await store.upsert_urls([rec(u) for u in urls], T0)
    _, grants = await store.lease_next(T0 + 500, 2, TTL_S, dispatch_ahead=False)
    for g in grants:
        parsed = parse_lease_id(g.lease_id, SHARDS)
        assert parsed is not None
        shard, seq, nonce = parsed
        host = g.state.host
        old = (
            struct.pack("<Bd", 1, g.deadline)
            + f"{nonce} {host} {url_key(g.state.url, host)}".encode()
        )
        raw.hset(ShardKeys(shard).all[3], str(seq), old)
    infos = await store.lease_status([g.lease_id for g in grants])
    assert [(i.status, i.url, i.issued_at) for i in infos] == [
        ("active", g.state.url, None) for g in grants
    ]
    first, second = grants
    done = CrawlOutcome(first.state.url, first.lease_id, T0 + 501, True, True)
    assert await store.settle([done], 60.0, 0.0, 8) == [EventStatus.ACCEPTED]
    stats = await store.stats(T0 + 500 + TTL_S, 0)  # the other one expires
    assert (stats.leases_active, stats.leases_expired_total) == (0, 1)
    (late,) = await store.lease_status([second.lease_id])
    assert (late.status, late.issued_at) == ("expired", None)


def _hosts_of_shard(shard: int, k: int) -> list[str]:
    """``k`` host names whose URLs live in ``shard``."""
    names = (f"h{i}.example" for i in range(10_000))
    return [h for h in names if shard_of(h, SHARDS) == shard][:k]


async def test_a_lease_call_has_one_deadline_per_shard_and_expires_only_active_leases(
    store: RedisStore, raw: redis.Redis
) -> None:
    """lease.lua writes one deadline member for a shard's leases of one call, "<first
    seq>:<n>"; a lease settled before the deadline is skipped at expiry, the others
    expire and go back to their queues, and expiring again changes nothing."""
    hosts = _hosts_of_shard(0, 3)
    urls = [f"https://{h}/x" for h in hosts]
    await store.upsert_urls([rec(u) for u in urls], T0)
    _, grants = await store.lease_next(T0 + 500, 3, TTL_S, dispatch_ahead=False)
    assert sorted(g.state.url for g in grants) == sorted(urls)
    keys = ShardKeys(0)
    seqs = sorted(parse_lease_id(g.lease_id, SHARDS)[1] for g in grants)  # type: ignore[index]
    members = dict(raw.zrange(keys.all[4], 0, -1, withscores=True))
    assert members == {f"{seqs[0]}:3".encode(): ready_score(T0 + 500 + TTL_S)}
    assert seqs == list(range(seqs[0], seqs[0] + 3))
    settled = grants[0]
    done = CrawlOutcome(settled.state.url, settled.lease_id, T0 + 501, True, True)
    assert await store.settle([done], 60.0, 0.0, 8) == [EventStatus.ACCEPTED]
    assert raw.zcard(keys.all[4]) == 1  # the member outlives the settled lease
    for _ in range(2):  # past the deadline: the two leases still out expire, once
        stats = await store.stats(T0 + 500 + TTL_S, 0)
        assert (stats.leases_active, stats.leases_expired_total) == (0, 2)
        assert raw.zcard(keys.all[4]) == 0
    statuses = {i.url: i.status for i in await store.lease_status([g.lease_id for g in grants])}
    assert statuses == {g.state.url: "expired" for g in grants[1:]} | {settled.state.url: "settled"}
    for g in grants[1:]:  # back in their queues
        assert raw.zscore(keys.queue(g.state.host), url_key(g.state.url, g.state.host))


async def test_a_deadline_of_the_earlier_layout_is_reclaimed(
    store: RedisStore, raw: redis.Redis
) -> None:
    """A deadline member written by layout 4, the lease's bare seq, expires its lease as
    a range of one does."""
    (host,) = _hosts_of_shard(1, 1)
    await store.upsert_urls([rec(f"https://{host}/x")], T0)
    _, (g,) = await store.lease_next(T0 + 500, 1, TTL_S, dispatch_ahead=False)
    keys = ShardKeys(1)
    seq = parse_lease_id(g.lease_id, SHARDS)[1]  # type: ignore[index]
    raw.delete(keys.all[4])
    raw.zadd(keys.all[4], {str(seq): ready_score(T0 + 500 + TTL_S)})
    stats = await store.stats(T0 + 500 + TTL_S - 1, 0)
    assert (stats.leases_active, stats.leases_expired_total) == (1, 0)
    stats = await store.stats(T0 + 500 + TTL_S, 0)
    assert (stats.leases_active, stats.leases_expired_total) == (0, 1)
    assert raw.zcard(keys.all[4]) == 0
    (info,) = await store.lease_status([g.lease_id])
    assert info.status == "expired"
