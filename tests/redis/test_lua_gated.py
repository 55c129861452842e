"""``lease.lua`` called directly, against a private ``redis-server``: which leases it
marks as held back by politeness (gated), and what the observations it folds do to λ₀
and to the hosts' means of ln(Λ_h / λ₀).  The rule is
``scheduler_core.multipliers.dispatch_gated``; the script holds its own copy."""

from __future__ import annotations

import dataclasses
import math
from collections.abc import AsyncIterator, Iterator, Sequence
from importlib.resources import files

import numpy as np
import pytest
import redis

from scheduler_core.multipliers import (
    BOUND_SLACK,
    LogMean,
    TrackerConfig,
    dispatch_gated,
    update_log_mean,
)
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
    assert len(await _lease(store, free, T0 + 50.0, observed)) == 0  # none due yet: a fold
    mean, count = raw.hmget(store._global.multiplier, ["mean", "count"])
    assert (float(mean or "nan"), float(count or 0)) == (pytest.approx(math.log(2.0)), 4.0)
    assert _host(raw, free)[2:4] == (0.0, 4.0)  # Λ = λ₀: excess ln 1
    assert _host(raw, bound)[2] == pytest.approx(math.log(4.0))  # Λ_h = 8 = 4 λ₀
    thresholds = await store.host_thresholds([free, bound])
    assert thresholds == {free: pytest.approx(2.0), bound: pytest.approx(8.0)}


async def test_an_ungated_lease_is_folded_into_its_host_as_it_is_leased(
    store: RedisStore, raw: redis.Redis
) -> None:
    """Once λ₀ is known, an ungated lease adds its observation (0: Λ_h = λ₀) to its host
    as the core's fold would, after the host's earlier ones, and its grant says so
    (``host_observed``); a URL due by the revisit cap alone adds none, and before λ₀ is
    known none is folded as leased."""
    config = TrackerConfig(window=4, clip=10)
    early, host, capped = "early.example", "late.example", "capped.example"
    await store.upsert_urls(
        [rec(f"https://{early}/a"), rec(f"https://{host}/a"), rec(f"https://{host}/b")], T0
    )
    cols = await store.lease_columns(T0 + 500.0, 10, 3_600.0, False)  # λ₀ unknown
    assert sorted(cols.hosts) == [early, host] and not cols.host_observed.any()
    assert _host(raw, early)[3] == _host(raw, host)[3] == 0.0
    await store.observe_dispatch([DispatchObservation(early, math.log(3.0), False)], config)
    cap = 30 * 86_400.0  # the store's revisit cap (RedisStore.connect's default)
    by_cap = dataclasses.replace(
        rec(f"https://{capped}/a", threshold_s=2 * cap), last_crawled_at=T0 - cap
    )
    await store.upsert_urls([by_cap], T0)
    # an earlier observation of the host (a record of the layout before the controls' tail)
    raw.hset(ShardKeys(shard_of(host, SHARDS)).hosts, host, HOST.pack(DELAY_S, 0.0, 1.5, 1.0, 1.0))
    cols = await store.lease_columns(T0 + 1_000.0, 10, 60.0, False)
    got = dict(zip(cols.hosts, cols.host_observed.tolist(), strict=True))
    assert got == {host: True, capped: False}
    assert cols.state["signals_since_crawl"].tolist() == [0, 0]
    expected = update_log_mean(LogMean(1.5, 1.0), (0.0,), config)
    assert _host(raw, host)[2:4] == (expected.log_mean, expected.count)
    assert _host(raw, early)[2:4] == (0.0, 1.0)  # the pending one, folded first
    assert _host(raw, capped)[3] == 0.0
