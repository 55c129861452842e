"""``lease.lua`` called directly, against a private ``redis-server``: which leases it
marks as held back by politeness (gated), and what the observations it folds do to λ₀
and to the hosts' means of ln(Λ_h / λ₀).  The rule is
``scheduler_core.multipliers.dispatch_gated``; the script holds its own copy."""

from __future__ import annotations

import math
from collections.abc import AsyncIterator, Iterator, Sequence
from importlib.resources import files

import numpy as np
import pytest
import redis

from scheduler_core.multipliers import BOUND_SLACK, TrackerConfig, dispatch_gated
from service.store.base import DispatchObservation, UrlRecord, shard_of
from service.store.redis import RedisStore
from service.store.redis.keys import ShardKeys
from service.store.redis.local import LocalRedis
from service.store.redis.records import GRANT, HOST

pytestmark = [pytest.mark.anyio, pytest.mark.redis]
T0 = 1_000_000.0
SHARDS = 2
DELAY_S = 7.0


def rec(url: str, threshold_s: float = 100.0) -> UrlRecord:
    return UrlRecord(
        url=url, host=url.split("/")[2], weight=1.0, change_rate=0.01, recall=0.5,
        false_signal_rate=0.01, signal_time_equivalent_s=0.0, threshold_s=threshold_s,
        scored_lambda=1.0, last_crawled_at=T0, crawl_delay_s=DELAY_S,
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
    s._pending_config = TrackerConfig(window=4, clip=10)
    yield s
    await s.close()


async def _lease(
    store: RedisStore, host: str, now: float, observed: Sequence[DispatchObservation] = ()
) -> np.ndarray:
    """``lease.lua`` over ``host``'s shard at the fixed time ``now``, folding ``observed``:
    the grant records."""
    head = (f"{now!r} 0.0 0.0", "lease", 1, 0, "60.0", "n0nce")
    call = store._lease_call(None, [shard_of(host, SHARDS)], head, list(observed))
    (answer,) = await store._scripts.run(store.client, [call])
    return np.frombuffer(answer[4], dtype=GRANT)


def _host(raw: redis.Redis, host: str) -> tuple[float, ...]:
    """delay, gate, mean, count, scored Λ of the host record (its head; the frontier
    controls' tail follows)."""
    return HOST.unpack_from(raw.hget(ShardKeys(shard_of(host, SHARDS)).hosts, host) or b"")


def test_the_script_holds_the_cores_slack() -> None:
    lua = (files("service.store.redis") / "lua" / "lease.lua").read_text()
    assert f"local BOUND_SLACK = {BOUND_SLACK!r}" in lua


async def test_gated_within_half_a_crawl_delay_of_the_gate_opening(
    store: RedisStore, raw: redis.Redis
) -> None:
    host = "one.example"
    await store.upsert_urls([rec(f"https://{host}/{i}") for i in range(4)], T0)  # due T0 + 100
    now = T0 + 500.0
    leases = [(now, False)]  # the gate had never closed
    for after_s in (0.0, 0.49 * DELAY_S, 0.51 * DELAY_S):
        gate = leases[-1][0] + DELAY_S
        leases.append((gate + after_s, dispatch_gated(T0 + 100.0, gate, gate + after_s, DELAY_S)))
    assert [g for _, g in leases] == [False, True, True, False]
    for at, held in leases:
        (grant,) = await _lease(store, host, at)
        assert bool(grant["gated"]) is held, at
        assert _host(raw, host)[1] == at + DELAY_S  # the gate moved
        assert len(await _lease(store, host, at)) == 0  # a repeat: the gate is closed


async def test_a_url_due_after_the_gate_opened_is_not_gated(
    store: RedisStore, raw: redis.Redis
) -> None:
    host = "two.example"
    await store.upsert_urls([rec(f"https://{host}/a"), rec(f"https://{host}/b", 510.0)], T0)
    (a,) = await _lease(store, host, T0 + 500.0)  # gate → T0 + 507
    (b,) = await _lease(store, host, T0 + 510.0)  # /b due at T0 + 510, after the opening
    assert (bool(a["gated"]), bool(b["gated"])) == (False, False)


async def test_the_fold_keeps_host_means_as_excess_over_lambda0(
    store: RedisStore, raw: redis.Redis
) -> None:
    free, bound = "free.example", "bound.example"
    await store.upsert_urls([rec(f"https://{free}/x"), rec(f"https://{bound}/y")], T0)
    observed = [DispatchObservation(free, math.log(2.0), False)] * 4
    observed += [DispatchObservation(bound, math.log(8.0), True)] * 4
    await _lease(store, free, T0 + 500.0, observed)
    mean, count = raw.hmget(store._global.multiplier, ["mean", "count"])
    assert (float(mean or "nan"), float(count or 0)) == (pytest.approx(math.log(2.0)), 4.0)
    assert _host(raw, free)[2:4] == (0.0, 4.0)  # Λ = λ₀: excess ln 1
    assert _host(raw, bound)[2] == pytest.approx(math.log(4.0))  # Λ_h = 8 = 4 λ₀
    thresholds = await store.host_thresholds([free, bound])
    assert thresholds == {free: pytest.approx(2.0), bound: pytest.approx(8.0)}
