"""``append.lua``, ``fold.lua`` and the append of ``settle.lua`` called directly against a
private ``redis-server``: the state after each, that a repeat is safe, and that the fold
applies an entry exactly once when its folder dies between the script and its ``XACK``
(the entry stays pending in the dead consumer's hands and another folder takes it over).
"""

from __future__ import annotations

import dataclasses
import math
import struct
from collections.abc import AsyncIterator, Iterator

import numpy as np
import pytest
import redis

from service.store.base import (
    CrawlOutcome,
    EventBatch,
    EventKind,
    EventStatus,
    IdempotencyKey,
    RetireReason,
    SignalEvent,
    UrlRecord,
    ready_score,
)
from service.store.redis import RedisStore
from service.store.redis import events as events_module
from service.store.redis.keys import FOLD_GROUP, ShardKeys, url_key
from service.store.redis.local import LocalRedis
from service.store.redis.records import HOST, HOST_CTL
from service.store.redis.scripts import Call

pytestmark = [pytest.mark.anyio, pytest.mark.redis]
T0 = 1_000_000.0
DECAY_S = 86_400.0
SHARDS = 4
URLS = [f"https://h{i}.example/p" for i in range(12)]


def rec(url: str) -> UrlRecord:
    return UrlRecord(
        url=url, host=url.split("/")[2], weight=1.0, change_rate=0.01, recall=0.5,
        false_signal_rate=0.01, signal_time_equivalent_s=30.0, threshold_s=100.0,
        scored_lambda=1.0, last_crawled_at=T0,
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
    await s.upsert_urls([rec(u) for u in URLS], T0)
    yield s
    await s.close()


def _streams(raw: redis.Redis) -> dict[int, list[tuple[bytes, dict[bytes, bytes]]]]:
    return {n: raw.xrange(ShardKeys(n).events) for n in range(SHARDS)}


async def test_append_writes_one_entry_of_columns_per_shard_once(
    store: RedisStore, raw: redis.Redis
) -> None:
    times = T0 + np.arange(len(URLS) + 1, dtype=np.float64)
    urls = [*URLS, "https://nope.example/"]
    once = IdempotencyKey("ab" * 16, 3600.0)
    for _ in range(2):  # a repeat under the key appends nothing
        await store.append_events(EventBatch(EventKind.SIGNAL, urls, times), once)
    groups = store._by_shard(urls)
    entries = _streams(raw)
    for shard, items in groups.items():
        ((_, fields),) = entries[shard]
        assert fields[b"k"] == b"s"
        got = struct.unpack(f"<{len(items)}d", fields[b"t"])
        assert list(got) == [times[i] for i, _, _ in items]
        assert fields[b"h"].decode().split(" ") == [h for _, h, _ in items]
        assert fields[b"u"].decode().split(" ") == [k for _, _, k in items]
        assert 0 < raw.pttl(ShardKeys(shard).once(once.digest)) <= 3_600_000
    assert all(not entries[n] for n in range(SHARDS) if n not in groups)
    assert all(s is not None and s.signals == 0 for s in await store.get_urls(URLS))


async def _fold_call(store: RedisStore, shard: int, ids: list[bytes]) -> list[object]:
    call = Call("fold", store.fold_keys(shard), (repr(10.0), store._cap, repr(DECAY_S), *ids))
    (answer,) = await store._scripts.run(store.client, [call])
    return list(answer)


async def test_fold_applies_an_entry_and_deletes_it_a_repeat_changes_nothing(
    store: RedisStore, raw: redis.Redis
) -> None:
    urls = [URLS[0], URLS[0], "https://nope.example/"]  # one host: one shard
    await store.append_events(EventBatch(EventKind.CLICK, urls, np.array([T0 + 1, T0 + 2, T0])))
    shard = store._shard("h0.example")
    ids = [entry_id for entry_id, _ in _streams(raw)[shard]]
    parts, *counts, touched, settled = await _fold_call(store, shard, ids)
    assert (parts, counts) == (1, [0, 0, 0, 2, 1])  # two clicks accepted, one unknown URL
    assert touched == [b"h0.example", url_key(URLS[0], "h0.example").encode()]
    assert settled == []
    assert raw.xlen(ShardKeys(shard).events) == 0
    (state,) = await store.get_urls(URLS[:1])
    assert state is not None and (state.clicks, state.last_click_at) == (2, T0 + 2)
    assert await _fold_call(store, shard, ids) == [0, 0, 0, 0, 0, 0, [], []]  # gone: skipped
    assert await store.get_urls(URLS[:1]) == [state]


async def test_fold_counts_stale_signals_per_url_once(store: RedisStore, raw: redis.Redis) -> None:
    """A signal within the discard time of the last crawl is stale: fold.lua counts it
    in the URL's stale count (``ShardKeys.stale``); a repeat of the call changes
    nothing; removing the URL drops the count."""
    url, host = URLS[0], "h0.example"
    times = np.array([T0 + 5.0, T0 + 6.0, T0 + 50.0])  # two stale (discard 10 s), one not
    await store.append_events(EventBatch(EventKind.SIGNAL, [url] * 3, times))
    shard = store._shard(host)
    ids = [entry_id for entry_id, _ in _streams(raw)[shard]]
    parts, *counts, _, _ = await _fold_call(store, shard, ids)
    assert (parts, counts) == (1, [1, 0, 2, 0, 0])
    stale_key = ShardKeys(shard).stale(host)
    assert raw.hgetall(stale_key) == {url_key(url, host).encode(): b"2"}
    assert (await _fold_call(store, shard, ids))[0] == 0  # folded before: skipped
    assert await store.stale_signals([url, URLS[1]]) == [2, 0]
    await store.remove_urls([url])
    assert not raw.exists(stale_key)


async def test_settle_appends_its_accepted_results_once_and_the_fold_names_them(
    store: RedisStore, raw: redis.Redis
) -> None:
    """settle.lua appends one entry (kind ``r``) per shard with the URLs of the results
    it accepted, atomically with the settlement: a repeat under the batch's key and a
    duplicate append nothing.  fold.lua answers those URLs (each once), applies nothing
    else and deletes the entry."""
    _, grants = await store.lease_next(T0 + 500, len(URLS), 60.0, dispatch_ahead=False)
    assert len(grants) == len(URLS)
    fetched = T0 + 501
    results = [CrawlOutcome(g.state.url, g.lease_id, fetched, True, True) for g in grants]
    unknown = CrawlOutcome(URLS[0], "0.999.abcdef", fetched, True, True)
    once = IdempotencyKey("cd" * 16, 3600.0)
    for _ in range(2):
        assert await store.settle([*results, unknown], 60.0, 0.0, 8, once) == [
            *[EventStatus.ACCEPTED] * len(URLS), EventStatus.UNKNOWN_LEASE,
        ]  # fmt: skip
    assert await store.settle(results, 60.0, 0.0, 8) == [EventStatus.DUPLICATE] * len(URLS)
    groups = store._by_shard(URLS)
    entries = _streams(raw)
    for shard, items in groups.items():
        ((_, fields),) = entries[shard]
        assert fields[b"k"] == b"r"
        assert struct.unpack(f"<{len(items)}d", fields[b"t"]) == (fetched,) * len(items)
        assert sorted(zip(fields[b"h"].decode().split(" "), fields[b"u"].decode().split(" "),
                          strict=True)) == sorted((h, k) for _, h, k in items)  # fmt: skip
    before = await store.get_urls(URLS)
    shard, items = next(iter(groups.items()))
    ids = [entry_id for entry_id, _ in entries[shard]]
    parts, *counts, touched, settled = await _fold_call(store, shard, ids)
    assert (parts, counts, touched) == (1, [0] * 5, [])
    pairs = sorted(zip(settled[::2], settled[1::2], strict=True))
    assert pairs == sorted((h.encode(), k.encode()) for _, h, k in items)
    assert raw.xlen(ShardKeys(shard).events) == 0
    assert await _fold_call(store, shard, ids) == [0, 0, 0, 0, 0, 0, [], []]  # a repeat
    folded = await store.fold_events("f", 100, 10.0, DECAY_S, 60.0)  # the other shards
    assert (folded.counts, folded.touched) == ({}, [])
    others = [URLS[i] for n, its in groups.items() if n != shard for i, _, _ in its]
    assert sorted(folded.outcomes) == sorted(others)
    assert await store.get_urls(URLS) == before  # the fold changed no record


async def test_a_folder_killed_between_apply_and_ack_applies_once(
    store: RedisStore, raw: redis.Redis
) -> None:
    """The dead folder read every entry and applied half the shards' before dying (no
    XACK); the next folder takes the pending entries over: the applied ones are not
    applied again, the others are, once."""
    await store.append_events(EventBatch(EventKind.CLICK, URLS, np.full(len(URLS), T0 + 1)))
    taken = await store._take("dead", 100, 60.0)
    shards = [n for n, ids in enumerate(taken) if ids]
    assert len(shards) >= 2
    for n in shards[: len(shards) // 2]:
        ids = [entry_id for entry_id, _ in taken[n]]
        await _fold_call(store, n, ids)  # applied; the folder dies before its XACK
    pending = sum(raw.xpending(ShardKeys(n).events, FOLD_GROUP)["pending"] for n in shards)
    assert pending == len(shards)
    # a live folder that waits for the claim time leaves the dead one's entries alone
    assert (await store.fold_events("live", 100, 10.0, DECAY_S, 3600.0)).parts == 0
    folded = await store.fold_events("live", 100, 10.0, DECAY_S, 0.0)  # takes them over
    applied_before = sum(len(store._by_shard(URLS)[n]) for n in shards[: len(shards) // 2])
    assert folded.counts == {(EventKind.CLICK, EventStatus.ACCEPTED): len(URLS) - applied_before}
    assert all(s is not None and s.clicks == 1 for s in await store.get_urls(URLS))
    assert sum(raw.xpending(ShardKeys(n).events, FOLD_GROUP)["pending"] for n in shards) == 0
    assert await store.fold_lag() == 0.0
    assert (await store.fold_events("live", 100, 10.0, DECAY_S, 0.0)).parts == 0


async def test_a_fold_call_applies_a_bounded_number_of_events(
    store: RedisStore, raw: redis.Redis, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Entries are folded in script calls of about ``_EVENTS_PER_CALL`` events (Redis
    serves other clients between them), each once, none split."""
    monkeypatch.setattr(events_module, "_EVENTS_PER_CALL", 5)
    url = URLS[0]
    for k in range(4):  # entries of 3 events: one call each, 12 clicks in all
        await store.append_events(EventBatch(EventKind.CLICK, [url] * 3, np.full(3, T0 + k)))
    shard = store._shard("h0.example")
    taken = await store._take("f", 100, 60.0)
    assert [events for _, events in taken[shard]] == [3, 3, 3, 3]
    assert [len(c) for c in events_module._chunks(taken[shard])] == [1, 1, 1, 1]
    assert events_module._chunks([(b"1-0", 0), (b"2-0", 2), (b"3-0", 2)]) == [
        [b"1-0"], [b"2-0", b"3-0"],
    ]  # fmt: skip
    await store.fold_events("f", 100, 10.0, DECAY_S, 0.0)  # takes them over from "f"
    (state,) = await store.get_urls([url])
    assert state is not None and state.clicks == 12
    assert raw.xlen(ShardKeys(shard).events) == 0


async def test_the_fold_recreates_its_group_after_a_flush(
    store: RedisStore, raw: redis.Redis
) -> None:
    """Data flushed (or restored from before the group existed): the next fold makes
    the consumer group again instead of failing."""
    raw.flushall()
    await store.upsert_urls([rec(URLS[0])], T0)
    assert (await store.fold_events("f", 100, 10.0, DECAY_S, 60.0)).parts == 0
    await store.append_events(EventBatch(EventKind.CLICK, URLS[:1], np.array([T0 + 1])))
    assert (await store.fold_events("f", 100, 10.0, DECAY_S, 60.0)).parts == 1


def _readiness(raw: redis.Redis) -> tuple[dict[str, float], dict[str, float]]:
    """Every shard's ready set as stored, and as it follows from its hosts' queues and
    records (lib.lua host_ready: the latest of the queue's head, the gate and any
    block, as scores: ready_score; no entry while the queue is empty, the host paused
    or full)."""
    stored: dict[str, float] = {}
    expected: dict[str, float] = {}
    for shard in range(SHARDS):
        keys = ShardKeys(shard)
        stored |= {k.decode(): v for k, v in raw.zrange(keys.all[2], 0, -1, withscores=True)}
        for host_b, blob in raw.hgetall(keys.hosts).items():
            host = host_b.decode()
            head = raw.zrange(keys.queue(host), 0, 0, withscores=True)
            gate = HOST.unpack_from(blob)[1]
            blocked, _, cap, flight, paused, _, _ = HOST_CTL.unpack_from(blob, HOST.size)
            if head and not paused and flight < (cap or 1_000_000):
                block = -math.inf if math.isnan(blocked) else ready_score(blocked)
                expected[host] = max(head[0][1], ready_score(gate), block)
    return stored, expected


async def test_signals_keep_each_hosts_readiness(raw: redis.Redis, server: LocalRedis) -> None:
    """A signal moves its URL's due time earlier (the host's readiness falls to it when
    it is the new head, and never below the gate or a block), later (β = ∞ on an overdue
    URL: the head moves back), or brings a retired URL back; after each batch every
    host's ready-set score is what its queue and record give."""
    store = await RedisStore.connect(server.url, shards=SHARDS)
    try:
        hosts = [f"r{i}.example" for i in range(8)]
        beta = {"a": 30.0, "b": 250.0, "c": 30.0}
        records = [
            dataclasses.replace(
                rec(f"https://{h}/{p}"), threshold_s=thr,
                signal_time_equivalent_s=math.inf if (h, p) == (hosts[1], "a") else beta[p],
            )
            for h in hosts for p, thr in (("a", 100.0), ("b", 300.0), ("c", 500.0))
        ]  # fmt: skip
        await store.upsert_urls(records, T0)
        grants = (await store.lease_next(T0 + 100, len(hosts), 60.0, False)).grants
        assert sorted(g.state.url for g in grants) == [f"https://{h}/a" for h in hosts]

        def result(url: str, lease_id: str) -> CrawlOutcome:
            host = url.split("/")[2]
            if host == hosts[3]:  # blocked: back-off
                return CrawlOutcome(url, lease_id, T0 + 101, False, None, status=503)
            retire = RetireReason.DONE if host == hosts[4] else None
            return CrawlOutcome(url, lease_id, T0 + 101, True, True, retire=retire)

        await store.settle([result(g.state.url, g.lease_id) for g in grants], 60.0, 0.0, 8)
        stored, expected = _readiness(raw)
        assert stored == expected and hosts[3] in stored
        signals = [
            SignalEvent(f"https://{hosts[0]}/c", T0 + 150),  # earlier, not the head
            SignalEvent(f"https://{hosts[1]}/a", T0 + 250),  # β = ∞, overdue: later
            SignalEvent(f"https://{hosts[2]}/b", T0 + 150),  # earlier than the head
            SignalEvent(f"https://{hosts[3]}/b", T0 + 150),  # earlier, held by the block
            SignalEvent(f"https://{hosts[4]}/a", T0 + 150),  # retired: back, the new head
            SignalEvent(f"https://{hosts[5]}/b", T0 + 150),  # twice in one batch
            SignalEvent(f"https://{hosts[5]}/b", T0 + 160),
        ]
        before = stored
        assert await store.record_signals(signals, 0.0, DECAY_S) == [EventStatus.ACCEPTED] * 7
        stored, expected = _readiness(raw)
        assert stored == expected
        assert stored[hosts[1]] > before[hosts[1]]  # the later head
        assert stored[hosts[2]] < before[hosts[2]]  # the earlier head
        assert stored[hosts[4]] < before[hosts[4]]  # back from retirement, the new head
        assert stored[hosts[0]] == before[hosts[0]]
    finally:
        await store.close()
