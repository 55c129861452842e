"""Append, then fold, on every store: signals and clicks appended change nothing until
folded; settled crawl results are named by the fold for re-estimation; a fold applies
each appended batch once (a batch appended twice under its idempotency key counts once),
classifies the events (accepted, unknown URL, stale) and names the URLs whose history
grew; the fold lag is 0 once nothing waits; a worker's heartbeat holds for its TTL.
"""

from __future__ import annotations

import asyncio

import numpy as np
import pytest

from service.store.base import (
    CrawlOutcome,
    EventBatch,
    EventKind,
    EventStatus,
    Folded,
    IdempotencyKey,
    Store,
    UrlRecord,
)

pytestmark = pytest.mark.anyio
T0 = 1_000_000.0
DECAY_S = 86_400.0
DISCARD_S = 10.0
#: Hosts on several shards (4 in the contract stores), so that batches span shards.
URLS = [f"https://h{i}.example/p" for i in range(8)]
UNKNOWN = "https://nope.example/"


def rec(url: str) -> UrlRecord:
    return UrlRecord(
        url=url, host=url.split("/")[2], weight=1.0, change_rate=0.01, recall=0.5,
        false_signal_rate=0.01, signal_time_equivalent_s=30.0, threshold_s=100.0,
        scored_lambda=1.0, last_crawled_at=T0,
    )  # fmt: skip


def batch(kind: EventKind, urls: list[str], t: float) -> EventBatch:
    return EventBatch(kind, urls, np.full(len(urls), t))


async def fold_all(store: Store) -> Folded:
    """Fold until nothing waits; the counts and touched URLs of every step together."""
    counts: dict[tuple[EventKind, EventStatus], int] = {}
    touched: list[str] = []
    outcomes: list[str] = []
    parts = 0
    while True:
        f = await store.fold_events("contract", 100, DISCARD_S, DECAY_S, 60.0)
        if f.parts == 0:
            return Folded(parts, counts, touched, outcomes)
        parts += f.parts
        touched += f.touched
        outcomes += f.outcomes
        for k, n in f.counts.items():
            counts[k] = counts.get(k, 0) + n


async def test_appended_events_apply_once_when_folded(store: Store) -> None:
    await store.upsert_urls([rec(u) for u in URLS], T0)
    before = await store.get_urls(URLS)
    once = IdempotencyKey("ab" * 16, 3600.0)
    clicks = batch(EventKind.CLICK, [*URLS, UNKNOWN], T0 + 1)
    for _ in range(2):  # a retried batch
        await store.append_events(clicks, once)
    await store.append_events(batch(EventKind.SIGNAL, URLS, T0 + 50), None)
    assert await store.get_urls(URLS) == before  # appended, not yet applied
    assert await store.fold_lag() >= 0.0
    folded = await fold_all(store)
    assert folded.counts == {
        (EventKind.CLICK, EventStatus.ACCEPTED): len(URLS),
        (EventKind.CLICK, EventStatus.UNKNOWN_URL): 1,
        (EventKind.SIGNAL, EventStatus.ACCEPTED): len(URLS),
    }
    assert sorted(set(folded.touched)) == sorted(URLS)
    states = await store.get_urls(URLS)
    for s, b in zip(states, before, strict=True):
        assert s is not None and b is not None
        assert (s.clicks, s.signals, s.signals_since_crawl, s.last_click_at) == (1, 1, 1, T0 + 1)
        assert s.due_at == b.due_at - 30.0  # one signal moves the due time by β
    assert (await fold_all(store)).parts == 0  # a repeat folds nothing
    assert await store.get_urls(URLS) == states
    assert await store.fold_lag() == 0.0


async def test_the_fold_classifies_stale_signals(store: Store) -> None:
    await store.upsert_urls([rec(URLS[0])], T0)
    await store.append_events(batch(EventKind.SIGNAL, [URLS[0], UNKNOWN], T0 + DISCARD_S), None)
    folded = await fold_all(store)
    assert folded.counts == {
        (EventKind.SIGNAL, EventStatus.STALE): 1,
        (EventKind.SIGNAL, EventStatus.UNKNOWN_URL): 1,
    }
    assert folded.touched == [URLS[0]]  # a stale signal still adds to the history
    (state,) = await store.get_urls(URLS[:1])
    assert state is not None and (state.signals, state.signals_since_crawl) == (1, 0)
    assert await store.stale_signals([URLS[0], UNKNOWN]) == [1, 0]  # counted per URL
    await store.append_events(batch(EventKind.SIGNAL, [URLS[0]], T0 + DISCARD_S + 1), None)
    await fold_all(store)  # not stale: not counted
    assert await store.stale_signals(URLS[:1]) == [1]
    await store.remove_urls(URLS[:1])  # the count goes with the URL
    await store.upsert_urls([rec(URLS[0])], T0)
    assert await store.stale_signals(URLS[:1]) == [0]


async def test_settled_results_are_named_by_the_fold_once(store: Store) -> None:
    """A settlement takes effect at once (due time under the stored parameters) and
    appends its accepted results' URLs: the fold names them for re-estimation, applies
    nothing else; a duplicate result or a repeat under the key appends nothing."""
    await store.upsert_urls([rec(u) for u in URLS], T0)
    assert (await fold_all(store)).parts == 0
    grants = (await store.lease_next(T0 + 200, len(URLS), 60.0, False)).grants
    assert len(grants) == len(URLS)
    results = [CrawlOutcome(g.state.url, g.lease_id, T0 + 201, True, True) for g in grants]
    once = IdempotencyKey("cd" * 16, 3600.0)
    for _ in range(2):
        await store.settle(results, 60.0, DISCARD_S, 8, once)
    await store.settle(results[:2], 60.0, DISCARD_S, 8)  # duplicates
    states = await store.get_urls(URLS)
    assert all(s is not None and s.last_crawl_at == T0 + 201 for s in states)
    assert all(s is not None and s.due_at == T0 + 201 + 100.0 for s in states)
    folded = await fold_all(store)
    assert (folded.counts, folded.touched) == ({}, [])
    assert sorted(folded.outcomes) == sorted(URLS)
    assert await store.get_urls(URLS) == states
    assert (await fold_all(store)).parts == 0
    assert await store.fold_lag() == 0.0


async def test_a_heartbeat_holds_for_its_ttl(store: Store) -> None:
    assert not await store.worker_alive()
    await store.heartbeat("w1", 0.2)
    assert await store.worker_alive()
    await asyncio.sleep(0.35)  # wall time: the TTL is wall seconds
    assert not await store.worker_alive()


async def test_folders_report_what_waits_for_re_estimation(store: Store) -> None:
    """A fold names when its oldest part was appended; a folder's report of the events
    still waiting for re-estimation ages until it reports nothing, and lapses with its
    TTL; the lag is that of the oldest live report."""
    await store.upsert_urls([rec(u) for u in URLS], T0)
    assert (await store.fold_events("contract", 100, DISCARD_S, DECAY_S, 60.0)).oldest_at is None
    await store.append_events(batch(EventKind.CLICK, URLS, T0 + 1), None)
    folded = await store.fold_events("contract", 100, DISCARD_S, DECAY_S, 60.0)
    assert folded.parts > 0 and folded.oldest_at is not None
    assert await store.backlog_lag() == 0.0
    await store.report_backlog("a", folded.oldest_at, 60.0)
    await store.report_backlog("b", None, 60.0)  # another folder, nothing waiting
    first = await store.backlog_lag()
    assert 0.0 <= first < 30.0
    await asyncio.sleep(0.05)
    assert await store.backlog_lag() >= first + 0.04  # it ages
    await store.report_backlog("c", folded.oldest_at + 1000.0, 60.0)  # younger: the oldest counts
    assert await store.backlog_lag() >= first + 0.04
    await store.report_backlog("a", None, 60.0)
    await store.report_backlog("c", None, 60.0)
    assert await store.backlog_lag() == 0.0
    await store.report_backlog("d", folded.oldest_at, 0.05)  # a folder that stops reporting
    assert await store.backlog_lag() > 0.0
    await asyncio.sleep(0.1)
    assert await store.backlog_lag() == 0.0
