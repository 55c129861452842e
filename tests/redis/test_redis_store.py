"""The Redis store beyond the contract: script cache loss, repeated calls, shared λ₀,
shard-count guard, outages, the estimator state's layout.  Against a private
``redis-server`` (never a mock)."""

from __future__ import annotations

import asyncio
import dataclasses
import math
import struct
from collections.abc import AsyncIterator, Iterator

import numpy as np
import pytest
import redis

from scheduler_core.errors import ParameterError
from scheduler_core.multipliers import TrackerConfig
from service.errors import StoreUnavailable
from service.store.base import (
    ClickEvent,
    CrawlOutcome,
    DispatchObservation,
    EventStatus,
    Observations,
    ScoredParams,
    SignalEvent,
    UrlPrior,
    UrlRecord,
    ready_score,
    shard_of,
)
from service.store.redis import RedisStore
from service.store.redis.keys import ShardKeys
from service.store.redis.local import LocalRedis
from service.store.redis.records import (
    LAYOUT,
    SCORED,
    URL,
    URL_CTL,
    URL_FULL,
    est_bytes,
    est_size,
    unpack_entry,
)
from service.store.redis.scripts import Call

pytestmark = pytest.mark.anyio
T0 = 1_000_000.0
DECAY_S = 86_400.0 * 30
WINDOW = 64


def rec(url: str, threshold_s: float = 100.0, prior: UrlPrior | None = None) -> UrlRecord:
    return UrlRecord(
        url=url, host=url.split("/")[2], weight=1.0, change_rate=0.01, recall=0.5,
        false_signal_rate=0.01, signal_time_equivalent_s=20.0, threshold_s=threshold_s,
        scored_lambda=1.0, last_crawled_at=T0, prior=prior or UrlPrior(),
    )  # fmt: skip


@pytest.fixture
def server() -> Iterator[LocalRedis]:
    with LocalRedis() as s:
        yield s


@pytest.fixture
async def store(server: LocalRedis) -> AsyncIterator[RedisStore]:
    s = await RedisStore.connect(server.url, shards=4)
    yield s
    await s.close()


async def test_lost_script_cache_is_reloaded(server: LocalRedis, store: RedisStore) -> None:
    with redis.Redis(port=server.port) as raw:
        raw.script_flush()
    assert await store.upsert_urls([rec("https://a.example/1")], T0) == [True]
    with redis.Redis(port=server.port) as raw:
        raw.script_flush()
    assert await store.ping()  # the readiness check puts them back
    with redis.Redis(port=server.port) as raw:
        assert all(raw.script_exists(*store._scripts.sha.values()))


async def test_repeated_calls_are_safe(store: RedisStore) -> None:
    batch = [rec("https://a.example/1"), rec("https://b.example/2")]
    assert await store.upsert_urls(batch, T0) == [True, True]
    first = await store.get_urls([r.url for r in batch])
    assert await store.upsert_urls(batch, T0 + 5) == [False, False]
    assert await store.get_urls([r.url for r in batch]) == first
    await store.set_thresholds("a.example", {"https://a.example/1": 300.0}, 2.0)
    once = await store.get_urls(["https://a.example/1"])
    await store.set_thresholds("a.example", {"https://a.example/1": 300.0}, 2.0)
    assert await store.get_urls(["https://a.example/1"]) == once
    grants = (await store.lease_next(T0 + 400, 10, 60.0, dispatch_ahead=False)).grants
    results = [
        CrawlOutcome(g.state.url, g.lease_id, T0 + 401, ok=True, changed=True) for g in grants
    ]
    assert await store.settle(results, 60.0, 0.0, WINDOW) == [EventStatus.ACCEPTED] * 2
    settled = await store.get_urls([r.url for r in batch])
    assert await store.settle(results, 60.0, 0.0, WINDOW) == [EventStatus.DUPLICATE] * 2
    assert await store.get_urls([r.url for r in batch]) == settled  # no second outcome
    params = {"https://a.example/1": ScoredParams(2.0, 0.02, 0.5, 0.0, 10.0, 250.0)}
    await store.set_params("a.example", params, 3.0)
    once = await store.get_urls(["https://a.example/1"])
    await store.set_params("a.example", params, 3.0)
    assert await store.get_urls(["https://a.example/1"]) == once
    await store.put_groups({"global": (1.0, 2.0)})
    await store.put_groups({"global": (1.0, 2.0)})
    assert await store.get_groups(["global"]) == [(1.0, 2.0)]
    assert await store.remove_urls(["https://a.example/1"]) == 1
    assert await store.remove_urls(["https://a.example/1"]) == 0
    stats = await store.stats(T0 + 401, 5)
    assert (stats.urls, stats.leases_active) == (1, 0)


async def test_rescoring_writes_back_in_slices_of_a_host(
    server: LocalRedis, store: RedisStore
) -> None:
    # 150 URLs of one host go back in three calls of set_rescored.lua (64 a call), each
    # URL with its own threshold, scored Λ and due time
    urls = [f"https://a.example/{i:03d}" for i in range(150)]
    await store.upsert_urls([rec(u) for u in urls], T0)
    cols = await store.rescore_columns([("a.example", 2.0)])
    assert cols.urls == urls
    thresholds = 10.0 + np.arange(len(cols), dtype=np.float64)
    with redis.Redis(port=server.port) as raw:
        raw.config_resetstat()
        await store.set_rescored(cols, thresholds)
        assert raw.info("commandstats")["cmdstat_evalsha"]["calls"] == 3
    states = await store.get_urls(urls)
    assert [(s.threshold_s, s.scored_lambda, s.due_at) for s in states if s] == [
        (t, 2.0, T0 + t) for t in thresholds.tolist()
    ]


async def test_url_entry_is_compact(server: LocalRedis, store: RedisStore) -> None:
    """One hash entry per URL: a form byte, the record without its parts that hold only
    defaults, then the estimator state (lib.lua); the scripts answer the full record."""
    url, ukey = "https://a.example/some/page", b"/some/page"
    given = UrlPrior(weight=1e-5, change_rate=2e-6)
    never = dataclasses.replace(rec(url, prior=given), last_crawled_at=None)
    await store.upsert_urls([never], T0)
    with redis.Redis(port=server.port) as raw:
        (key,) = raw.keys("cs:*:urls:a.example")
        blob = raw.hget(key, ukey) or b""
        assert raw.hgetall(key) == {ukey: blob}
        assert raw.object("encoding", key) == b"listpack"  # LocalRedis's settings
        # never crawled, not leased, no controls: W .. registered and the due time
        assert len(blob) == 1 + 64 + 8 + 17 == 90 and blob[0] == 0
        full, est = unpack_entry(blob)
        assert len(full) == URL_FULL == URL.size + URL_CTL.size == 145
        assert est == struct.pack("<B2d", 16 | 32, 1e-5, 2e-6)
        fields = URL.unpack_from(full)
        assert fields[:8] == (1.0, 0.01, 0.5, 0.01, 20.0, 100.0, 1.0, T0)
        assert all(math.isnan(x) for x in fields[8:11]) and fields[11] == T0
        assert fields[12:] == (0,) * 7
        tail = URL_CTL.unpack_from(full, URL.size)
        assert math.isnan(tail[0]) and math.isnan(tail[1]) and tail[2:] == (0, 0)
        (g,) = (await store.lease_next(T0 + 1, 1, 60.0, dispatch_ahead=False)).grants
        blob = raw.hget(key, ukey) or b""
        assert blob[0] == 2 and len(blob) == 1 + 64 + 8 + 28 + 17  # the counts: leased
        assert URL.unpack_from(unpack_entry(blob)[0])[-1] == int(g.lease_id.split(".")[1])
        assert unpack_entry(blob)[1] == est
        assert await store.remove_urls([url]) == 1
        await store.upsert_urls([rec(url)], T0)  # crawled before: the times, no state
        blob = raw.hget(key, ukey) or b""
        assert blob[0] == 1 and len(blob) == 1 + 64 + 24 + 8
    (state,) = await store.get_urls([url])
    assert state is not None and state.last_crawl_at == T0 and state.prior == UrlPrior()


async def test_data_of_another_layout_is_refused(server: LocalRedis) -> None:
    """The global meta hash records the layout the data was written in; data written
    before it was recorded (layout 1: no field) is refused at start, naming it."""
    store = await RedisStore.connect(server.url, shards=4)
    await store.close()
    with redis.Redis(port=server.port) as raw:
        assert raw.hget("cs:{g}:meta", "layout") == str(LAYOUT).encode()
        raw.hdel("cs:{g}:meta", "layout")
    with pytest.raises(ValueError, match="record layout 1"):
        await RedisStore.connect(server.url, shards=4)


async def test_data_of_layout_4_is_read_and_recorded_as_the_current_layout(
    server: LocalRedis,
) -> None:
    """Layout 4 differs only in its deadline members (one lease seq each, which the
    scripts read as ranges of one): a store starting on it records the current layout;
    an older one is still refused."""
    store = await RedisStore.connect(server.url, shards=4)
    await store.close()
    with redis.Redis(port=server.port) as raw:
        raw.hset("cs:{g}:meta", "layout", "4")
        store = await RedisStore.connect(server.url, shards=4)
        await store.close()
        assert raw.hget("cs:{g}:meta", "layout") == str(LAYOUT).encode()
        raw.hset("cs:{g}:meta", "layout", "3")
    with pytest.raises(ValueError, match="record layout 3"):
        await RedisStore.connect(server.url, shards=4)


async def test_lambda0_updates_from_many_clients_are_not_lost(server: LocalRedis) -> None:
    stores = [await RedisStore.connect(server.url, shards=4) for _ in range(4)]
    obs = [DispatchObservation("a.example", math.log(3.0), gated=False)] * 5
    cfg = TrackerConfig(window=64, clip=2)
    await asyncio.gather(*(s.observe_dispatch(obs, cfg) for s in stores for _ in range(25)))
    for s in stores[1:]:
        await s.close()  # a closing store folds in what it buffered
    stats = await stores[0].stats(T0, 0)
    await stores[0].close()
    assert stats.lambda0_observations == 4 * 25 * 5
    assert stats.lambda0 == pytest.approx(3.0)


async def test_other_shard_count_is_refused(server: LocalRedis, store: RedisStore) -> None:
    with pytest.raises(ValueError, match="4 shards"):
        await RedisStore.connect(server.url, shards=8)


async def test_outage_raises_store_unavailable_and_recovers() -> None:
    server = LocalRedis(aof=True).start()
    try:
        store = await RedisStore.connect(server.url, shards=2)
        await store.upsert_urls([rec("https://a.example/1")], T0)
        server.kill()
        with pytest.raises(StoreUnavailable):
            await store.get_urls(["https://a.example/1"])
        assert not await store.ping()
        server.start()
        (state,) = await store.get_urls(["https://a.example/1"])  # AOF kept it
        assert state is not None and state.due_at == T0 + 100.0
        assert await store.ping()
        await store.close()
    finally:
        server.stop()


async def test_one_leader_at_a_time(server: LocalRedis) -> None:
    a, b = [await RedisStore.connect(server.url, shards=4) for _ in range(2)]
    try:
        assert await a.try_lead("rescorer", "a", 0.2)
        assert not await b.try_lead("rescorer", "b", 0.2)
        assert await a.try_lead("rescorer", "a", 0.2)  # renewal
        with redis.Redis(port=server.port) as raw:
            raw.delete("cs:{g}:lead:rescorer")  # the holder died and its claim lapsed
        assert await b.try_lead("rescorer", "b", 0.2)
        assert not await a.try_lead("rescorer", "a", 0.2)
    finally:
        await a.close()
        await b.close()


async def test_first_clock_epoch_wins(store: RedisStore) -> None:
    assert await store.clock_epoch(1234.5) == 1234.5
    assert await store.clock_epoch(9999.0) == 1234.5


async def test_batches_larger_than_lua_unpack_limits(server: LocalRedis) -> None:
    store = await RedisStore.connect(server.url, shards=1)
    try:
        batch = [rec(f"https://h{i}.example/") for i in range(9_000)]  # 9,000 hosts, 1 shard
        assert sum(await store.upsert_urls(batch, T0)) == 9_000
        grants = (await store.lease_next(T0 + 500, 1_000, 60.0, dispatch_ahead=False)).grants
        assert len(grants) == 1_000
        done = [CrawlOutcome(g.state.url, g.lease_id, T0 + 501, True, True) for g in grants]
        assert await store.settle(done, 60.0, 0.0, WINDOW) == [EventStatus.ACCEPTED] * 1_000
        assert (await store.stats(T0 + 501, 0)).urls == 9_000
    finally:
        await store.close()


def _urls_key(store: RedisStore, host: str) -> str:
    return ShardKeys(shard_of(host, store.shards)).urls(host)


def _est(raw: redis.Redis, store: RedisStore, host: str, ukey: str) -> bytes | None:
    """The estimator state in the URL's entry (b"": none), or None (no entry)."""
    blob = raw.hget(_urls_key(store, host), ukey)
    return None if blob is None else unpack_entry(blob)[1]


def _cut_state(raw: redis.Redis, store: RedisStore, host: str, ukey: str) -> None:
    """Drop the estimator state from the end of the URL's entry."""
    blob = raw.hget(_urls_key(store, host), ukey) or b""
    state = unpack_entry(blob)[1]
    raw.hset(_urls_key(store, host), ukey, blob[: len(blob) - len(state)])


def _record(raw: redis.Redis, key: str, ukey: str) -> bytes:
    """The full record of the URL's entry (b"": no entry)."""
    blob = raw.hget(key, ukey)
    return b"" if blob is None else unpack_entry(blob)[0]


async def test_set_params_script(server: LocalRedis, store: RedisStore) -> None:
    """``set_params.lua`` called directly: the record's parameters, Λ and due time, the
    host queue; the host's scored Λ untouched; a second call changes nothing.  One call
    carries the URLs of several hosts of its shard, each host with its own Λ."""
    shard = shard_of("a.example", store.shards)
    other = next(
        h for h in (f"b{k}.example" for k in range(100)) if shard_of(h, store.shards) == shard
    )
    await store.upsert_urls(
        [rec("https://a.example/p"), rec("https://a.example/q"), rec(f"https://{other}/r")], T0
    )
    keys = ShardKeys(shard)
    call = Call(
        "set_params",
        keys.all,
        (repr(1e6), f"a.example {2.5!r} 2 /p /gone {other} 4.5 1 /r",
         SCORED.pack(3.0, 0.5, 0.25, 0.125, 0.0, 40.0) + SCORED.pack(1.0, 1.0, 1.0, 1.0, 1.0, 1.0)
         + SCORED.pack(1.0, 2.0, 0.0, 0.0, 0.0, 60.0)),
    )  # fmt: skip
    with redis.Redis(port=server.port) as raw:
        host_before = raw.hget(keys.hosts, "a.example")
        for _ in range(2):
            assert await store._scripts.run(store.client, [call]) == [2]  # two known URLs
            record = _record(raw, keys.urls(other), "/r")
            assert URL.unpack_from(record)[:7] == (1.0, 2.0, 0.0, 0.0, 0.0, 60.0, 4.5)
            assert raw.zscore(keys.queue(other), "/r") == ready_score(T0 + 60.0)
            record = _record(raw, keys.urls("a.example"), "/p")
            w, delta, recall, nu, beta, thr, slam, *_, due = URL.unpack_from(record)[:12]
            assert (w, delta, recall, nu, beta, thr, slam, due) == (
                3.0, 0.5, 0.25, 0.125, 0.0, 40.0, 2.5, T0 + 40.0,
            )  # fmt: skip
            assert raw.zscore(keys.queue("a.example"), "/p") == ready_score(T0 + 40.0)
            assert raw.zscore(keys.all[2], "a.example") == ready_score(T0 + 40.0)  # the new head
            assert raw.hget(keys.hosts, "a.example") == host_before
            assert not raw.hexists(keys.urls("a.example"), "/gone")


async def test_estimator_state_layout(server: LocalRedis, store: RedisStore) -> None:
    """The estimator state at the end of a URL's entry is laid out as ``lua/lib.lua``
    documents it."""
    prior = UrlPrior("été", 1e-4, None, 0.5, None, fixed=True)
    await store.upsert_urls([rec("https://a.example/p", prior=prior)], T0)
    await store.record_clicks([ClickEvent("https://a.example/p", T0 + 1.0)], DECAY_S)
    await store.record_signals([SignalEvent("https://a.example/p", T0 + 2.0)], 0.0, DECAY_S)
    (grant,) = (await store.lease_next(T0 + 500.0, 1, 60.0, dispatch_ahead=False)).grants
    done = CrawlOutcome(grant.state.url, grant.lease_id, T0 + 500.25, ok=True, changed=True)
    await store.settle([done], 60.0, 0.0, WINDOW)
    with redis.Redis(port=server.port) as raw:
        blob = _est(raw, store, "a.example", "/p") or b""
    label = "été".encode()
    assert len(blob) == est_bytes(prior, clicks=True, signals=True, outcomes=1)
    assert len(blob) == 1 + 4 * 8 + 2 * 8 + 2 + len(label) + 6 < est_size(len(label), 1)
    # flags: clicks 1, signals 2, fixed 4, labelled 8, W 16, recall 64 (Δ and ν not given)
    head = struct.unpack_from("<B4d2dH", blob)
    assert head[0] == 1 | 2 | 4 | 8 | 16 | 64
    assert head[1:5] == (1.0, T0 + 1.0, 1.0, T0 + 2.0)
    assert head[5:] == (1e-4, 0.5, len(label))
    at = struct.calcsize("<B4d2dH")
    assert blob[at : at + len(label)] == label
    assert struct.unpack_from("<fH", blob, at + len(label)) == (-500.25, 1)  # changed: < 0
    assert len(blob) == at + len(label) + 6


async def test_estimator_state_is_written_only_when_it_holds_something(
    server: LocalRedis, store: RedisStore
) -> None:
    """A bare registration writes no estimator state; the first event, outcome or given
    value does, with just what it needs; a bare re-registration of a URL without history
    deletes it."""
    url, key = "https://a.example/p", "/p"
    with redis.Redis(port=server.port) as raw:
        await store.upsert_urls([rec(url)], T0)
        assert _est(raw, store, "a.example", key) == b""
        given = UrlPrior(weight=1e-5, change_rate=2e-6)
        await store.upsert_urls([rec(url, prior=given)], T0)
        blob = _est(raw, store, "a.example", key)
        assert blob == struct.pack("<B2d", 16 | 32, 1e-5, 2e-6)  # 17 bytes
        await store.upsert_urls([rec(url)], T0)
        assert _est(raw, store, "a.example", key) == b""
        await store.record_signals([SignalEvent(url, T0 + 2.0)], 0.0, DECAY_S)
        blob = _est(raw, store, "a.example", key)
        assert blob == struct.pack("<B2d", 2, 1.0, T0 + 2.0)
        await store.upsert_urls([rec(url, prior=UrlPrior(label=""))], T0)
        blob = _est(raw, store, "a.example", key)
        assert blob == struct.pack("<B2dH", 2 | 8, 1.0, T0 + 2.0, 0)  # an empty label
    (s,) = await store.get_urls([url])
    assert s is not None and s.prior == UrlPrior(label="")
    assert s.observations == Observations(signal_mass=1.0, signal_ref=T0 + 2.0)


async def test_urls_without_estimator_state_read_as_empty(
    server: LocalRedis, store: RedisStore
) -> None:
    """A URL whose entry holds no state (cut off here) reads as no prior and no
    observations; events and re-registration start it afresh."""
    url = "https://a.example/p"
    await store.upsert_urls([rec(url, prior=UrlPrior(label="x"))], T0)
    with redis.Redis(port=server.port) as raw:
        _cut_state(raw, store, "a.example", "/p")
    (s,) = await store.get_urls([url])
    assert s is not None and (s.prior, s.observations) == (UrlPrior(), Observations())
    await store.record_clicks([ClickEvent(url, T0 + 1.0)], DECAY_S)
    (s,) = await store.get_urls([url])
    assert s is not None and s.observations == Observations(click_mass=1.0, click_ref=T0 + 1.0)
    with redis.Redis(port=server.port) as raw:
        _cut_state(raw, store, "a.example", "/p")
    await store.upsert_urls([rec(url, prior=UrlPrior(label="y"))], T0)
    (listed,) = await store.host_urls("a.example")
    assert (listed.prior, listed.observations) == (UrlPrior(label="y"), Observations())


async def test_removal_deletes_the_estimator_state(server: LocalRedis, store: RedisStore) -> None:
    labelled = UrlPrior(label="x")
    await store.upsert_urls(
        [rec("https://a.example/p", prior=labelled), rec("https://a.example/q", prior=labelled)],
        T0,
    )
    assert await store.remove_urls(["https://a.example/p"]) == 1
    with redis.Redis(port=server.port) as raw:
        assert raw.hkeys(_urls_key(store, "a.example")) == [b"/q"]  # the state went with it
        assert _est(raw, store, "a.example", "/q") == struct.pack("<BH", 8, 1) + b"x"


async def test_bad_decay_time_is_refused(store: RedisStore) -> None:
    with pytest.raises(ParameterError, match="decay_s"):
        await store.record_clicks([ClickEvent("https://a.example/p", T0)], 0.0)


# a script that holds the server for about a second (nothing else is served meanwhile)
_BUSY_LUA = "local i = 0 while i < 40000000 do i = i + 1 end return i"


@pytest.mark.parametrize(("timeout_s", "unavailable"), [(0.1, True), (30.0, False)])
async def test_a_call_answers_within_the_redis_timeout(
    server: LocalRedis, timeout_s: float, unavailable: bool
) -> None:
    store = await RedisStore.connect(server.url, shards=4, timeout_s=timeout_s)
    try:
        with redis.Redis(port=server.port) as other:
            busy = asyncio.get_running_loop().run_in_executor(None, other.eval, _BUSY_LUA, 0)
            await asyncio.sleep(0.05)  # the busy script has started
            if unavailable:  # (the answer comes once the script is done: after the timeout)
                with pytest.raises(StoreUnavailable):
                    await store.upsert_urls([rec("https://a.example/1")], T0)
            else:
                assert await store.upsert_urls([rec("https://a.example/1")], T0) == [True]
            await busy
    finally:
        await store.close()
