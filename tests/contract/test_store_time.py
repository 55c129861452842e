"""Stores read time when they decide: a lease's deadline, the reclaiming of expired
leases and a host's politeness gate follow the clock the store is given (read by the
memory store, mapped onto its own ``TIME`` by the Redis store), and the store says
what it read."""

from __future__ import annotations

import asyncio
import time

import pytest

from service.clock import AcceleratedClock, ManualClock, SystemClock
from service.store.base import LeaseStatus, Store, UrlRecord

pytestmark = pytest.mark.anyio
T0 = 1_000_000.0
#: How far Redis's TIME and this process's time.time() may differ (one machine), s.
SAME_MACHINE_S = 0.05


def rec(url: str, *, last: float, delay: float = 10.0) -> UrlRecord:
    return UrlRecord(
        url=url, host=url.split("/")[2], weight=1.0, change_rate=0.01, recall=0.5,
        false_signal_rate=0.01, signal_time_equivalent_s=0.0, threshold_s=100.0,
        scored_lambda=1.0, last_crawled_at=last, crawl_delay_s=delay,
    )  # fmt: skip


async def test_a_manual_clock_is_a_fixed_reading(store: Store) -> None:
    await store.upsert_urls([rec("https://a.example/x", last=T0)], T0)
    clock = ManualClock(T0 + 500.0)
    now, (grant,) = await store.lease_next(clock, 1, 60.0, dispatch_ahead=False)
    assert now == T0 + 500.0 and grant.deadline == T0 + 560.0
    ((status, url, issued),) = await store.lease_status([grant.lease_id])
    assert (status, url, issued) == (LeaseStatus.ACTIVE, "https://a.example/x", T0 + 500.0)
    clock.advance(60.0)
    stats = await store.stats(clock, 0)  # reclaims at the clock's reading
    assert (stats.leases_active, stats.leases_expired_total) == (0, 1)


async def test_the_system_clock_is_read_when_the_store_decides(store: Store) -> None:
    wall = time.time()
    await store.upsert_urls(
        [rec(f"https://a.example/{i}", last=wall - 1e3) for i in range(2)], wall
    )
    before = time.time()
    now, (grant,) = await store.lease_next(SystemClock(), 5, 0.3, dispatch_ahead=True)
    after = time.time()
    assert before - SAME_MACHINE_S <= now <= after + SAME_MACHINE_S
    (info,) = await store.lease_status([grant.lease_id])
    assert info.issued_at is not None and before - SAME_MACHINE_S <= info.issued_at <= now
    assert grant.deadline == info.issued_at + 0.3
    host = await store.get_host("a.example", now)
    assert host is not None and host.gate_at == info.issued_at + 10.0  # now + crawl delay
    await asyncio.sleep(0.3 + SAME_MACHINE_S)
    stats = await store.stats(SystemClock(), 0)  # the deadline passed: reclaimed
    assert (stats.leases_active, stats.leases_expired_total) == (0, 1)


async def test_an_accelerated_clock_maps_the_store_s_wall_time(store: Store) -> None:
    speed = 1000.0
    epoch = time.time() - 2.0  # the clock started two wall seconds ago, at T0
    clock = AcceleratedClock(speed, start=T0, epoch=epoch)
    await store.upsert_urls([rec("https://a.example/x", last=T0 - 1e3)], T0)
    before = time.time()
    now, (grant,) = await store.lease_next(clock, 1, 60.0, dispatch_ahead=False)
    after = time.time()
    slack = speed * SAME_MACHINE_S
    assert T0 + speed * (before - epoch) - slack <= now <= T0 + speed * (after - epoch) + slack
    assert grant.deadline == now + 60.0


async def test_no_lease_leaves_the_time_read(store: Store) -> None:
    now, grants = await store.lease_next(ManualClock(T0), 3, 60.0, dispatch_ahead=True)
    assert (now, grants) == (T0, [])
