"""The frontier controls, the same on every store: back-off from what hosts answer,
retirement, redirects, refetch_after, host control (pause, block, crawl delay, in-flight
cap), the minimum revisit interval, paging over hosts (docs/operations.md, "Frontier
controls")."""

from __future__ import annotations

import pytest

from service.store.base import (
    BlockReason,
    ControlRules,
    CrawlOutcome,
    HostChange,
    HostOrder,
    RetireReason,
    SignalEvent,
    Store,
    UrlRecord,
    back_off_s,
)

pytestmark = pytest.mark.anyio
CONTROLS = ControlRules()  # as tests/contract/conftest.py gives the `controlled` stores
T0 = 1_000_000.0
DECAY_S = 86_400.0 * 30
WINDOW = 64
TTL_S = 60.0
RETRY_S = 1.0  # failed fetch: due again this soon (the back-off is what holds the host)


def rec(url: str, *, threshold_s: float = 100.0) -> UrlRecord:
    """A URL crawled at T0, due ``threshold_s`` later (its host's crawl delay: 10 s)."""
    host = url.split("/")[2]
    return UrlRecord(
        url=url, host=host, weight=1.0, change_rate=0.01, recall=0.0, false_signal_rate=0.0,
        signal_time_equivalent_s=0.0, threshold_s=threshold_s, scored_lambda=1.0,
        last_crawled_at=T0,
    )  # fmt: skip


def result(url: str, lease_id: str, at: float, status: int = 200, **kw: object) -> CrawlOutcome:
    ok = 200 <= status < 400
    return CrawlOutcome(url, lease_id, at, ok=ok, changed=True if ok else None, status=status, **kw)  # type: ignore[arg-type]


async def settle(store: Store, *outcomes: CrawlOutcome) -> None:
    await store.settle(list(outcomes), RETRY_S, 0.0, WINDOW)


async def lease(store: Store, at: float, n: int = 10, ahead: bool = True) -> dict[str, str]:
    """URL -> lease id of what a lease call at ``at`` gives."""
    got = await store.lease_next(at, n, TTL_S, dispatch_ahead=ahead)
    return {g.state.url: g.lease_id for g in got.grants}


A, B = "https://a.example/x", "https://b.example/y"


async def test_retry_after_blocks_the_host_until_then(controlled: Store) -> None:
    await controlled.upsert_urls([rec(A), rec("https://a.example/z"), rec(B)], T0)
    leased = await lease(controlled, T0 + 500)
    assert set(leased) >= {A, B}
    await settle(controlled, result(A, leased[A], T0 + 501, 429, retry_after_s=3600.0))
    h = await controlled.get_host("a.example", T0 + 502)
    assert h is not None
    assert (h.blocked_until, h.block_reason, h.consecutive_failures) == (
        T0 + 4101, BlockReason.BACK_OFF, 1,
    )  # fmt: skip
    assert not any(u.startswith("https://a.") for u in await lease(controlled, T0 + 4100.5))
    assert set(await lease(controlled, T0 + 4101)) & {A, "https://a.example/z"}
    stats = await controlled.stats(T0 + 4000, 0)
    assert stats.blocked_hosts == 1


async def test_retry_after_is_capped(controlled: Store) -> None:
    await controlled.upsert_urls([rec(A)], T0)
    leased = await lease(controlled, T0 + 500)
    await settle(controlled, result(A, leased[A], T0 + 501, 503, retry_after_s=1e9))
    h = await controlled.get_host("a.example", T0 + 502)
    assert h is not None and h.blocked_until == T0 + 501 + CONTROLS.max_block_s


@pytest.mark.parametrize("status", [429, 500, 503, 599, 0])
async def test_back_off_doubles_per_failure_and_a_success_resets_it(
    controlled: Store, status: int
) -> None:
    await controlled.upsert_urls([rec(A)], T0)
    at = T0 + 500
    blocks = []
    for k in (1, 2, 3):
        leased = await lease(controlled, at)
        assert list(leased) == [A], k
        await settle(controlled, result(A, leased[A], at + 1, status))
        h = await controlled.get_host("a.example", at + 1)
        assert h is not None and h.blocked_until is not None
        assert h.consecutive_failures == k
        block = h.blocked_until - (at + 1)
        assert block == pytest.approx(back_off_s("a.example", k, None, CONTROLS), rel=1e-12)
        assert await lease(controlled, h.blocked_until - 0.01) == {}
        blocks.append(block)
        at = max(h.blocked_until, at + 61)  # the minimum revisit holds it after the lease
    # doubling within the ±10% jitter
    assert 2 * 0.9 / 1.1 <= blocks[1] / blocks[0] <= 2 * 1.1 / 0.9
    assert 2 * 0.9 / 1.1 <= blocks[2] / blocks[1] <= 2 * 1.1 / 0.9
    leased = await lease(controlled, at)
    await settle(controlled, result(A, leased[A], at + 1, 200))
    h = await controlled.get_host("a.example", at + 1)
    assert h is not None and h.consecutive_failures == 0


async def test_not_found_does_not_back_off_and_three_retire(controlled: Store) -> None:
    await controlled.upsert_urls([rec(A), rec("https://a.example/other", threshold_s=1e5)], T0)
    at = T0 + 500
    for k in (1, 2, 3):
        leased = await lease(controlled, at, n=1, ahead=False)
        assert A in leased, k
        await settle(controlled, result(A, leased[A], at + 1, 404))
        h = await controlled.get_host("a.example", at + 1)
        assert h is not None and (h.blocked_until, h.consecutive_failures) == (None, 0)
        (s,) = await controlled.get_urls([A])
        assert s is not None and s.gone_count == k
        at += 100
    (s,) = await controlled.get_urls([A])
    assert s is not None and (s.retired_at, s.retire_reason) == (T0 + 701, RetireReason.GONE)
    for t in (at, at + 86_400.0 * 40):  # never again, not even at the revisit cap
        assert A not in await lease(controlled, t, n=10)
    h = await controlled.get_host("a.example", at)
    assert h is not None and (h.urls, h.retired) == (1, 1)
    stats = await controlled.stats(at, 0)
    assert (stats.urls, stats.retired) == (1, 1)


async def test_gone_410_counts_double_and_success_resets(controlled: Store) -> None:
    await controlled.upsert_urls([rec(A)], T0)
    leased = await lease(controlled, T0 + 500)
    await settle(controlled, result(A, leased[A], T0 + 501, 404))
    leased = await lease(controlled, T0 + 600)
    await settle(controlled, result(A, leased[A], T0 + 601, 200))
    (s,) = await controlled.get_urls([A])
    assert s is not None and s.gone_count == 0
    leased = await lease(controlled, T0 + 800)
    await settle(controlled, result(A, leased[A], T0 + 801, 410))
    leased = await lease(controlled, T0 + 900)
    await settle(controlled, result(A, leased[A], T0 + 901, 404))
    (s,) = await controlled.get_urls([A])
    assert s is not None and s.retire_reason is RetireReason.GONE and s.gone_count == 3


async def test_registering_again_or_a_signal_brings_a_retired_url_back(controlled: Store) -> None:
    await controlled.upsert_urls([rec(A), rec(B)], T0)
    leased = await lease(controlled, T0 + 500)
    await settle(
        controlled,
        result(A, leased[A], T0 + 501, 200, retire=RetireReason.DONE),
        result(B, leased[B], T0 + 501, 301, retire=RetireReason.REDIRECT),
    )
    a, b = await controlled.get_urls([A, B])
    assert a is not None and a.retire_reason is RetireReason.DONE and a.crawls == 1
    assert b is not None and b.retire_reason is RetireReason.REDIRECT
    assert await lease(controlled, T0 + 86_400.0) == {}
    await controlled.upsert_urls([rec(A)], T0 + 600)
    await controlled.record_signals([SignalEvent(B, T0 + 700)], 0.0, DECAY_S)
    a, b = await controlled.get_urls([A, B])
    assert a is not None and (a.retired_at, a.crawls) == (None, 1)  # with its history
    assert b is not None and b.retired_at is None
    assert set(await lease(controlled, T0 + 86_400.0)) == {A, B}
    assert (await controlled.stats(T0 + 86_400.0, 0)).retired == 0


async def test_purge_deletes_urls_retired_before_a_time(controlled: Store) -> None:
    await controlled.upsert_urls([rec(A), rec(B), rec("https://c.example/z")], T0)
    await controlled.swap_signatures([(A, "sig-a"), (B, "sig-b")])
    leased = await lease(controlled, T0 + 500)
    await settle(controlled, result(A, leased[A], T0 + 501, 200, retire=RetireReason.DONE))
    await settle(controlled, result(B, leased[B], T0 + 601, 200, retire=RetireReason.DONE))
    assert await controlled.purge_retired(T0 + 600) == 1
    assert await controlled.get_urls([A]) == [None]
    # a purged URL's content signature goes with it; a kept one's stays
    assert await controlled.swap_signatures([(A, "x"), (B, "sig-b")]) == [None, "sig-b"]
    assert await controlled.purge_retired(T0 + 600) == 0
    assert await controlled.purge_retired(T0 + 700) == 1
    stats = await controlled.stats(T0 + 700, 0)
    assert (stats.urls, stats.retired) == (1, 0)


async def test_refetch_after_is_a_lower_bound_on_the_next_lease(controlled: Store) -> None:
    await controlled.upsert_urls([rec(A, threshold_s=1.0)], T0)
    leased = await lease(controlled, T0 + 500)
    await settle(controlled, result(A, leased[A], T0 + 501, 200, refetch_after=T0 + 5000))
    (s,) = await controlled.get_urls([A])
    assert s is not None and s.refetch_after == T0 + 5000 and s.due_at == T0 + 5000
    assert await lease(controlled, T0 + 4999) == {}
    assert set(await lease(controlled, T0 + 5000)) == {A}


async def test_no_url_is_leased_again_within_the_minimum_revisit(controlled: Store) -> None:
    # one URL due at once after a fetch, one never due (dispatch-ahead would give it)
    await controlled.upsert_urls([rec(A, threshold_s=1.0), rec(B, threshold_s=1e9)], T0)
    leased = await lease(controlled, T0 + 500)
    assert set(leased) == {A, B}
    await settle(
        controlled, result(A, leased[A], T0 + 500, 200), result(B, leased[B], T0 + 500, 200)
    )
    for t in (T0 + 501, T0 + 530, T0 + 559.9):
        assert await lease(controlled, t, n=50, ahead=True) == {}, t
    assert set(await lease(controlled, T0 + 560, n=50, ahead=True)) == {A, B}


async def test_pause_and_operator_block_hold_the_host(controlled: Store) -> None:
    await controlled.upsert_urls([rec(A), rec(B)], T0)
    assert await controlled.change_host("nope.example", HostChange(paused=True), T0) is None
    h = await controlled.change_host("a.example", HostChange(paused=True), T0)
    assert h is not None and h.paused
    assert set(await lease(controlled, T0 + 500)) == {B}
    await controlled.change_host("a.example", HostChange(paused=False), T0 + 501)
    h = await controlled.change_host("a.example", HostChange(blocked_until=T0 + 900), T0 + 501)
    assert h is not None and (h.blocked_until, h.block_reason) == (T0 + 900, BlockReason.OPERATOR)
    assert A not in await lease(controlled, T0 + 899)
    got = await controlled.lease_next(T0 + 900, 10, TTL_S, dispatch_ahead=False)
    (grant,) = got.grants
    assert grant.state.url == A
    assert grant.gated  # due before the block ended: its value is not the budget's (λ₀)
    await controlled.change_host("b.example", HostChange(blocked_until=T0 + 1e6), T0 + 901)
    await controlled.change_host("b.example", HostChange(blocked_until=0.0), T0 + 902)
    h = await controlled.get_host("b.example", T0 + 902)
    assert h is not None and h.blocked_until is None and h.consecutive_failures == 0
    assert B in await lease(controlled, T0 + 1000)  # its lease of T0 + 899 expired


async def test_in_flight_cap_and_crawl_delay(controlled: Store) -> None:
    urls = [f"https://a.example/{i}" for i in range(4)]
    await controlled.upsert_urls([rec(u) for u in urls], T0)
    h = await controlled.get_host("a.example", T0)
    assert h is not None and (h.max_in_flight, h.in_flight) == (1, 0)
    first = await lease(controlled, T0 + 500)
    assert len(first) == 1
    assert await lease(controlled, T0 + 520) == {}  # the gate passed, the cap holds
    await controlled.change_host("a.example", HostChange(max_in_flight=2, crawl_delay_s=30.0), T0)
    second = await lease(controlled, T0 + 520)
    assert len(second) == 1
    h = await controlled.get_host("a.example", T0 + 520)
    assert h is not None and (h.in_flight, h.crawl_delay_s, h.gate_at) == (2, 30.0, T0 + 550)
    assert await lease(controlled, T0 + 555) == {}  # two out (the gate has passed): the cap
    ((url, lid),) = first.items()
    await settle(controlled, result(url, lid, T0 + 555))
    assert len(await lease(controlled, T0 + 555)) == 1
    await controlled.stats(T0 + 700, 0)  # reclaims the two leases, expired by then
    h = await controlled.get_host("a.example", T0 + 700)
    assert h is not None and h.in_flight == 0


async def test_delete_host_and_list_hosts(controlled: Store) -> None:
    await controlled.upsert_urls(
        [rec(A), rec("https://a.example/2"), rec(B), rec("https://c.example/3", threshold_s=9.0)],
        T0,
    )
    await controlled.change_host("b.example", HostChange(paused=True), T0)
    page = await controlled.list_hosts(T0, HostOrder.DUE, 2, None)
    assert [h.host for h in page.hosts] == ["c.example", "a.example"] and page.cursor
    rest = await controlled.list_hosts(T0, HostOrder.DUE, 2, page.cursor)
    assert [h.host for h in rest.hosts] == ["b.example"] and rest.cursor is None
    blocked = await controlled.list_hosts(T0, HostOrder.BLOCKED, 10, None)
    assert [h.host for h in blocked.hosts] == ["b.example"]
    by_lambda = await controlled.list_hosts(T0, HostOrder.LAMBDA, 10, None)
    assert len(by_lambda.hosts) == 3
    with pytest.raises(ValueError, match="cursor"):
        await controlled.list_hosts(T0, HostOrder.DUE, 2, "x")
    leased = await lease(controlled, T0 + 500)
    assert A in leased or "https://a.example/2" in leased
    assert await controlled.delete_host("a.example") == 2
    assert await controlled.get_host("a.example", T0 + 500) is None
    assert await controlled.get_urls([A]) == [None]
    assert await controlled.delete_host("a.example") == 0
    stats = await controlled.stats(T0 + 500, 0)
    assert (stats.urls, stats.hosts, stats.leases_active) == (2, 2, 1)
