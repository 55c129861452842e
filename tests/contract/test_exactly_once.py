"""Idempotency keys at the store: a call repeated with the same key within its TTL
answers as the first call did and changes nothing; another key, or the same key after
its TTL, is a new call.  Crawl results for leases the store has no record of are
``unknown_lease``."""

from __future__ import annotations

import asyncio
import dataclasses

import pytest

from service.store.base import (
    ClickEvent,
    CrawlOutcome,
    EventStatus,
    IdempotencyKey,
    SignalEvent,
    Store,
    UrlRecord,
)

pytestmark = pytest.mark.anyio
T0 = 1_000_000.0
DECAY_S = 86_400.0
WINDOW = 8
DAY = 86_400.0
#: Hosts on several shards (4 in the contract stores), so that calls span shards.
URLS = [f"https://h{i}.example/p" for i in range(8)]


def rec(url: str, threshold_s: float = 100.0) -> UrlRecord:
    return UrlRecord(
        url=url, host=url.split("/")[2], weight=1.0, change_rate=0.01, recall=0.5,
        false_signal_rate=0.01, signal_time_equivalent_s=30.0, threshold_s=threshold_s,
        scored_lambda=1.0, last_crawled_at=T0,
    )  # fmt: skip


def key(name: str, ttl_s: float = DAY) -> IdempotencyKey:
    return IdempotencyKey(name.encode().hex(), ttl_s)


async def test_repeated_clicks_and_signals_count_once(store: Store) -> None:
    await store.upsert_urls([rec(u) for u in URLS], T0)
    clicks = [ClickEvent(u, T0 + 1) for u in [*URLS, "https://nope.example/"]]
    signals = [SignalEvent(u, T0 + 5) for u in URLS]
    first = await store.record_clicks(clicks, DECAY_S, key("c"))
    assert first == [EventStatus.ACCEPTED] * len(URLS) + [EventStatus.UNKNOWN_URL]
    s_first = await store.record_signals(signals, 0.0, DECAY_S, key("s"))
    states = await store.get_urls(URLS)
    assert await store.record_clicks(clicks, DECAY_S, key("c")) == first
    assert await store.record_signals(signals, 0.0, DECAY_S, key("s")) == s_first
    assert await store.get_urls(URLS) == states
    assert all(s is not None and (s.clicks, s.signals) == (1, 1) for s in states)
    # another key: new events
    await store.record_clicks(clicks, DECAY_S, key("c2"))
    await store.record_clicks(clicks, DECAY_S)
    assert all(s is not None and s.clicks == 3 for s in await store.get_urls(URLS))


async def test_a_repeat_changes_nothing_even_with_other_contents(store: Store) -> None:
    """The key names the call: what the first call did is all that is ever done."""
    await store.upsert_urls([rec(URLS[0])], T0)
    assert await store.record_clicks([ClickEvent(URLS[0], T0)], DECAY_S, key("k")) == [
        EventStatus.ACCEPTED
    ]
    assert await store.record_clicks([ClickEvent(URLS[0], T0 + 9)], DECAY_S, key("k")) == [
        EventStatus.ACCEPTED
    ]
    (s,) = await store.get_urls([URLS[0]])
    assert s is not None and (s.clicks, s.last_click_at) == (1, T0)


async def test_repeated_results_settle_once(store: Store) -> None:
    await store.upsert_urls([rec(u) for u in URLS], T0)
    _, grants = await store.lease_next(T0 + 200, len(URLS), 60.0, dispatch_ahead=False)
    assert len(grants) == len(URLS)
    outcomes = [
        CrawlOutcome(g.state.url, g.lease_id, T0 + 201, ok=k % 2 == 0, changed=True)
        for k, g in enumerate(grants)
    ]
    first = await store.settle(outcomes, 60.0, 0.0, WINDOW, key("r"))
    assert first == [EventStatus.ACCEPTED] * len(URLS)
    states = await store.get_urls(URLS)
    assert await store.settle(outcomes, 60.0, 0.0, WINDOW, key("r")) == first
    assert await store.get_urls(URLS) == states
    assert sum(s.crawls + s.fetch_errors for s in states if s is not None) == len(URLS)
    assert await store.settle(outcomes, 60.0, 0.0, WINDOW, key("r2")) == [
        EventStatus.DUPLICATE
    ] * len(URLS)


async def test_repeated_registration_answers_as_the_first_time(store: Store) -> None:
    records = [rec(u) for u in URLS[:3]]
    assert await store.upsert_urls(records, T0, key("u")) == [True] * 3
    changed = [dataclasses.replace(r, threshold_s=5.0) for r in records]
    assert await store.upsert_urls(changed, T0, key("u")) == [True] * 3
    assert all(s is not None and s.threshold_s == 100.0 for s in await store.get_urls(URLS[:3]))
    assert await store.upsert_urls(changed, T0, key("u2")) == [False] * 3


async def test_a_key_is_forgotten_after_its_ttl(store: Store) -> None:
    await store.upsert_urls([rec(URLS[0])], T0)
    click = [ClickEvent(URLS[0], T0)]
    for _ in range(2):
        await store.record_clicks(click, DECAY_S, key("brief", ttl_s=0.1))
    await asyncio.sleep(0.2)  # wall seconds
    await store.record_clicks(click, DECAY_S, key("brief", ttl_s=0.1))
    (s,) = await store.get_urls([URLS[0]])
    assert s is not None and s.clicks == 2


async def test_results_for_unknown_leases_and_leases_of_other_urls(store: Store) -> None:
    await store.upsert_urls([rec(u) for u in URLS], T0)
    _, grants = await store.lease_next(T0 + 200, 2, 60.0, dispatch_ahead=False)
    a, b = grants
    outcomes = [
        CrawlOutcome(a.state.url, "never-issued", T0 + 201, ok=True, changed=True),
        CrawlOutcome(a.state.url, b.lease_id, T0 + 201, ok=True, changed=True),  # b's lease
        CrawlOutcome(a.state.url, a.lease_id, T0 + 201, ok=True, changed=True),
    ]
    assert await store.settle(outcomes, 60.0, 0.0, WINDOW) == [
        EventStatus.UNKNOWN_LEASE, EventStatus.STALE, EventStatus.ACCEPTED,
    ]  # fmt: skip
    (sb,) = await store.get_urls([b.state.url])
    assert sb is not None and sb.lease_id == b.lease_id and sb.crawls == 0
