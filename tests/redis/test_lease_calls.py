"""Dispatch costs one script call per Redis node, not per shard: a single Redis decides a
whole batch over all its shards in one ``lease.lua`` call, which also folds in the
buffered dispatch observations; a 3-master cluster sends one call per node to plan and
one per node to lease.  Counted with ``INFO commandstats`` on real servers."""

from __future__ import annotations

import asyncio
import dataclasses
import math
from collections.abc import AsyncIterator, Iterator

import pytest
import redis

from scheduler_core.multipliers import TrackerConfig
from service.store.base import DispatchObservation, UrlRecord, shard_of
from service.store.memory import MemoryStore
from service.store.redis import RedisStore
from service.store.redis.local import LocalCluster, LocalRedis

pytestmark = pytest.mark.anyio
T0 = 1_000_000.0
SHARDS = 16


def _records(hosts: int, per_host: int) -> list[UrlRecord]:
    return [
        UrlRecord(
            url=f"https://h{h}.example/{j}",
            host=f"h{h}.example",
            weight=1.0,
            change_rate=0.01,
            recall=0.5,
            false_signal_rate=0.01,
            signal_time_equivalent_s=20.0,
            threshold_s=100.0 + h,
            scored_lambda=1.0,
            last_crawled_at=T0,
            crawl_delay_s=5.0,
        )  # fmt: skip
        for h in range(hosts)
        for j in range(per_host)
    ]


def _evalsha_calls(ports: list[int]) -> int:
    total = 0
    for port in ports:
        with redis.Redis(port=port) as raw:
            stats = raw.info("commandstats").get("cmdstat_evalsha")
            total += int(stats["calls"]) if stats else 0
    return total


def _reset(ports: list[int]) -> None:
    for port in ports:
        with redis.Redis(port=port) as raw:
            raw.config_resetstat()


@pytest.fixture(scope="module")
def server() -> Iterator[LocalRedis]:
    with LocalRedis() as s:
        yield s


@pytest.fixture
async def store(server: LocalRedis) -> AsyncIterator[RedisStore]:
    with redis.Redis(port=server.port) as raw:
        raw.flushall()
    s = await RedisStore.connect(server.url, shards=SHARDS)
    yield s
    await s.close()


async def test_one_call_per_batch_on_a_single_redis(server: LocalRedis, store: RedisStore) -> None:
    await store.upsert_urls(_records(60, 2), T0)
    _reset([server.port])
    cols = await store.lease_columns(T0 + 1_000.0, 50, 60.0, True)
    assert len(cols) == 50 and len(set(cols.hosts)) == 50
    assert _evalsha_calls([server.port]) == 1
    # the earliest due first: host h0 (threshold 100 s) ... h49
    assert cols.hosts == [f"h{h}.example" for h in range(50)]


async def test_observations_ride_on_the_next_lease_call(
    server: LocalRedis, store: RedisStore
) -> None:
    await store.upsert_urls(_records(20, 3), T0)
    config = TrackerConfig()
    cols = await store.lease_columns(T0 + 1_000.0, 10, 60.0, False)
    observed = [DispatchObservation(h, math.log(2.0), False) for h in cols.hosts]
    observed.append(DispatchObservation(cols.hosts[0], math.log(8.0), True))
    _reset([server.port])
    await store.observe_dispatch(observed, config)
    assert _evalsha_calls([server.port]) == 0  # buffered: no round trip of its own
    await store.lease_columns(T0 + 1_001.0, 5, 60.0, False)
    assert _evalsha_calls([server.port]) == 1
    with redis.Redis(port=server.port) as raw:
        mean, count = raw.hmget(store._global.multiplier, ["mean", "count"])
    assert float(count or 0) == 10 and float(mean or 0) == pytest.approx(math.log(2.0))
    # λ_h: the gated observation lifted its host above λ₀; the others sit at λ₀
    thresholds = await store.host_thresholds(cols.hosts[:2])
    assert thresholds[cols.hosts[1]] == pytest.approx(2.0)
    assert thresholds[cols.hosts[0]] > 2.5


async def test_observations_pending_without_lease_calls_are_folded_by_the_timer(
    server: LocalRedis, store: RedisStore
) -> None:
    await store.upsert_urls(_records(3, 1), T0)
    await store.observe_dispatch([DispatchObservation("h0.example", 0.5, False)], TrackerConfig())
    timer = store._flush_timer
    assert timer is not None
    await timer
    assert store._pending == []
    with redis.Redis(port=server.port) as raw:
        assert float(raw.hget(store._global.multiplier, "count") or 0) == 1


@pytest.fixture(scope="module")
def cluster() -> Iterator[LocalCluster]:
    with LocalCluster(3) as c:
        yield c


async def test_one_plan_and_one_lease_call_per_node_on_a_cluster(cluster: LocalCluster) -> None:
    ports = [n.port for n in cluster.nodes]
    for port in ports:
        with redis.Redis(port=port) as raw:
            raw.flushall()
    store = await RedisStore.connect(cluster.url, shards=SHARDS)
    try:
        await store.upsert_urls(_records(60, 2), T0)
        _reset(ports)
        cols = await store.lease_columns(T0 + 1_000.0, 50, 60.0, True)
        assert cols.hosts == [f"h{h}.example" for h in range(50)]
        assert _evalsha_calls(ports) == 2 * len(ports)
    finally:
        await store.close()


async def test_concurrent_calls_are_coalesced_in_arrival_order(
    server: LocalRedis, store: RedisStore
) -> None:
    """Six callers at once: the first goes alone, the five that arrive while it is in
    flight go out as one call, and each gets its share in arrival order; the URLs are
    those six calls one after the other would get."""
    await store.upsert_urls(_records(40, 2), T0)
    _reset([server.port])
    answers = await asyncio.gather(
        *(store.lease_columns(T0 + 1_000.0, 5, 60.0, False) for _ in range(6))
    )
    assert _evalsha_calls([server.port]) == 2
    for k, cols in enumerate(answers):
        assert cols.hosts == [f"h{h}.example" for h in range(5 * k, 5 * k + 5)]
    assert len({u for cols in answers for u in cols.urls}) == 30


async def test_a_joint_call_that_comes_back_short_is_followed_up(
    server: LocalRedis, store: RedisStore
) -> None:
    """Three hosts without crawl delay, four callers of two URLs at once: a host gives
    one URL per call, so the joint call of six gets three; the callers not served in
    full go out again, and each ends with two, as four calls one after the other would."""
    records = [
        dataclasses.replace(r, crawl_delay_s=0.0, threshold_s=100.0 + j)
        for j, r in enumerate(_records(3, 4))
    ]
    await store.upsert_urls(records, T0)
    answers = await asyncio.gather(
        *(store.lease_columns(T0 + 1_000.0, 2, 60.0, False) for _ in range(4))
    )
    assert [len(cols) for cols in answers] == [2, 2, 2, 2]
    assert len({u for cols in answers for u in cols.urls}) == 8


async def test_ties_across_shards_break_by_host_name_bytewise(store: RedisStore) -> None:
    """Hosts due at the same instant in different shards go out in the byte order of
    their names (as one sorted set of all hosts, and the memory store, order them),
    punctuation and digits included."""
    names = ["a-b.example", "a.example", "a0.example", "a_.example", "ab.example", "a9-.example"]
    records = [
        UrlRecord(
            url=f"https://{name}/",
            host=name,
            weight=1.0,
            change_rate=0.01,
            recall=0.0,
            false_signal_rate=0.0,
            signal_time_equivalent_s=0.0,
            threshold_s=100.0,
            scored_lambda=1.0,
            last_crawled_at=T0,
        )  # fmt: skip
        for name in names
    ]
    assert len({shard_of(n, SHARDS) for n in names}) > 1
    memory = MemoryStore(shards=SHARDS)
    for s in (store, memory):
        await s.upsert_urls(records, T0)
    leased = [(await s.lease_columns(T0 + 500.0, 6, 60.0, False)).hosts for s in (store, memory)]
    assert leased[0] == leased[1] == sorted(names, key=str.encode)
