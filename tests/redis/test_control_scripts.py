"""Direct tests of the frontier controls' scripts against a real Redis: the state each
leaves (host and URL record tails, ready set, counters) and that repeating a call is
safe: host_ctl.lua, hosts.lua, delete_host.lua, purge.lua, and the tails settle.lua and
lease.lua keep."""

from __future__ import annotations

import math
from collections.abc import AsyncIterator, Iterator

import pytest
import redis

from service.store.base import (
    ControlRules,
    CrawlOutcome,
    RetireReason,
    UrlRecord,
    ready_score,
    shard_of,
)
from service.store.redis import RedisStore
from service.store.redis.keys import ShardKeys, url_key
from service.store.redis.local import LocalRedis
from service.store.redis.records import HOST, HOST_CTL, URL, URL_CTL, unpack_entry
from service.store.redis.scripts import Call

pytestmark = [pytest.mark.anyio, pytest.mark.redis]
T0 = 1_000_000.0
SHARDS = 4
HOST_NAME = "a.example"
SHARD = shard_of(HOST_NAME, SHARDS)
KEYS = ShardKeys(SHARD)


def rec(url: str) -> UrlRecord:
    return UrlRecord(
        url=url, host=url.split("/")[2], weight=1.0, change_rate=0.01, recall=0.0,
        false_signal_rate=0.0, signal_time_equivalent_s=0.0, threshold_s=100.0,
        scored_lambda=1.0, last_crawled_at=T0, crawl_delay_s=5.0,
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
    s = await RedisStore.connect(server.url, shards=SHARDS, controls=ControlRules())
    yield s
    await s.close()


def _host_ctl(raw: redis.Redis) -> tuple[float, ...]:
    blob = raw.hget(KEYS.hosts, HOST_NAME) or b""
    assert len(blob) == HOST.size + HOST_CTL.size
    return HOST_CTL.unpack_from(blob, HOST.size)


async def _run(store: RedisStore, script: str, *args: object) -> object:
    (answer,) = await store._scripts.run(store.client, [Call(script, KEYS.all, args)])
    return answer


async def test_prepare_writes_the_controls_every_script_reads(
    server: LocalRedis, store: RedisStore, raw: redis.Redis
) -> None:
    for n in range(SHARDS):
        assert raw.hmget(ShardKeys(n).meta, "min_revisit", "max_in_flight") == [b"60.0", b"1"]
    bare = await RedisStore.connect(server.url, shards=SHARDS)
    await bare.close()  # a tool connecting without rules changes none of the service's
    assert raw.hmget(ShardKeys(0).meta, "min_revisit", "max_in_flight") == [b"60.0", b"1"]


async def test_host_ctl_sets_and_repeats_safely(store: RedisStore, raw: redis.Redis) -> None:
    await store.upsert_urls([rec(f"https://{HOST_NAME}/{i}") for i in range(2)], T0)
    assert raw.zscore(KEYS.ready, HOST_NAME) == ready_score(T0 + 100)
    for _ in range(2):
        answer = await _run(store, "host_ctl", HOST_NAME, "2.5", "3", repr(T0 + 900), "", "0")
        assert isinstance(answer, list) and answer[1:4] == [2, 2, 0]
        blocked, failures, cap, flight, paused, reason, retired = _host_ctl(raw)
        assert (blocked, cap, paused, reason) == (T0 + 900, 3, 0, 2)
        assert HOST.unpack_from(raw.hget(KEYS.hosts, HOST_NAME) or b"")[0] == 2.5
        assert raw.zscore(KEYS.ready, HOST_NAME) == ready_score(T0 + 900)  # the block
    for _ in range(2):
        await _run(store, "host_ctl", HOST_NAME, "", "", "", "1", "0")
        assert _host_ctl(raw)[4] == 1
        assert raw.zscore(KEYS.ready, HOST_NAME) is None  # paused: in no ready set
    for _ in range(2):
        await _run(store, "host_ctl", HOST_NAME, "", "", "0", "0", "0")
        blocked, failures, *_ = _host_ctl(raw)
        assert math.isnan(blocked) and failures == 0
        assert raw.zscore(KEYS.ready, HOST_NAME) == ready_score(T0 + 100)
    assert await _run(store, "host_ctl", "nope.example", "", "", "", "1", "0") is None


async def test_settle_and_lease_keep_the_tails(store: RedisStore, raw: redis.Redis) -> None:
    url = f"https://{HOST_NAME}/x"
    ukey = url_key(url, HOST_NAME)
    await store.upsert_urls([rec(url)], T0)
    (g,) = (await store.lease_next(T0 + 500, 5, 60.0, dispatch_ahead=False)).grants
    entry = raw.hget(KEYS.urls(HOST_NAME), ukey) or b""
    assert entry[0] & 4 == 0  # the controls' tail holds its defaults: left out
    blob = unpack_entry(entry)[0]
    assert URL.unpack_from(blob)[-1] != 0  # leased
    assert _host_ctl(raw)[3] == 1  # one lease out
    outcome = CrawlOutcome(url, g.lease_id, T0 + 501, ok=False, changed=None, status=410,
                           refetch_after=T0 + 9000)  # fmt: skip
    for _ in range(2):  # the repeat is a duplicate: nothing changes
        await store.settle([outcome], 60.0, 0.0, 8)
        entry = raw.hget(KEYS.urls(HOST_NAME), ukey) or b""
        assert entry[0] & 4 == 4  # the tail is kept now
        blob = unpack_entry(entry)[0]
        retired_at, refetch, gone, reason = URL_CTL.unpack_from(blob, URL.size)
        assert (math.isnan(retired_at), refetch, gone, reason) == (True, T0 + 9000, 2, 0)
        assert _host_ctl(raw)[3] == 0  # the lease ended
        assert raw.zscore(KEYS.queue(HOST_NAME), ukey) == ready_score(T0 + 9000)


async def test_hosts_delete_host_and_purge(store: RedisStore, raw: redis.Redis) -> None:
    urls = [f"https://{HOST_NAME}/{i}" for i in range(3)]
    await store.upsert_urls([rec(u) for u in urls], T0)
    flat = await _run(store, "hosts", repr(T0 + 200))
    assert isinstance(flat, list) and flat[0] == HOST_NAME.encode() and flat[2:5] == [3, 3, 3]
    (g,) = (await store.lease_next(T0 + 500, 5, 60.0, dispatch_ahead=False)).grants
    done = CrawlOutcome(g.state.url, g.lease_id, T0 + 501, ok=True, changed=True,
                        retire=RetireReason.DONE)  # fmt: skip
    await store.settle([done], 60.0, 0.0, 8)
    assert _host_ctl(raw)[6] == 1 and raw.hget(KEYS.meta, "retired") == b"1"
    gone = [HOST_NAME.encode(), url_key(g.state.url, HOST_NAME).encode()]
    for dropped in ([], []):
        assert await _run(store, "purge", repr(T0 + 501)) == dropped
    for dropped in (gone, []):  # the dropped URLs, host and key, for their signatures
        assert await _run(store, "purge", repr(T0 + 502)) == dropped
        assert _host_ctl(raw)[6] == 0 and raw.hget(KEYS.meta, "retired") == b"0"
        assert raw.hlen(KEYS.urls(HOST_NAME)) == 2
    (g,) = (await store.lease_next(T0 + 600, 5, 60.0, dispatch_ahead=False)).grants
    for expect in (2, 0):
        assert await _run(store, "delete_host", HOST_NAME, "1000") == expect
        assert raw.hget(KEYS.hosts, HOST_NAME) is None
        assert not raw.exists(KEYS.urls(HOST_NAME), KEYS.queue(HOST_NAME))
        assert raw.zscore(KEYS.ready, HOST_NAME) is None
        leases = raw.hgetall(f"{KEYS.tag}leases")
        assert leases and all(rec[0] != 1 for rec in leases.values())  # its lease ended
        assert raw.hget(KEYS.meta, "urls") == b"0"


async def test_old_host_records_without_tails_are_read_with_the_defaults(
    store: RedisStore, raw: redis.Redis
) -> None:
    url = f"https://{HOST_NAME}/old"
    await store.upsert_urls([rec(url)], T0)
    # cut the host record back to the layout written before the controls existed
    raw.hset(KEYS.hosts, HOST_NAME, (raw.hget(KEYS.hosts, HOST_NAME) or b"")[:40])
    (state,) = await store.get_urls([url])
    assert state is not None and (state.retired_at, state.gone_count) == (None, 0)
    h = await store.get_host(HOST_NAME, T0)
    assert h is not None and (h.max_in_flight, h.in_flight, h.paused) == (1, 0, False)
    (g,) = (await store.lease_next(T0 + 500, 5, 60.0, dispatch_ahead=False)).grants
    assert g.state.url == url
    assert _host_ctl(raw)[3] == 1
