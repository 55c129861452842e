"""The Store contract for the estimators' state (MATH.md, "Estimating parameters"):
priors, decayed click and signal counts, the crawl-outcome window, ``set_params`` and
the group statistics.  Every store passes it unchanged.

Decayed masses are compared with a relative tolerance of 1e-12 (Lua's ``exp`` and
Python's may differ in the last bit); everything else exactly.
"""

from __future__ import annotations

import math
import struct

import pytest

from scheduler_core.due import due_time
from scheduler_core.estimate.rates import add_event
from service.store.base import (
    ClickEvent,
    CrawlOutcome,
    EventStatus,
    Observations,
    Outcome,
    ScoredParams,
    SignalEvent,
    Store,
    UrlPrior,
    UrlRecord,
    shard_of,
)
from service.store.redis import RedisStore
from service.store.redis.keys import ShardKeys, url_key
from service.store.redis.records import est_bytes, est_size, unpack_entry

pytestmark = pytest.mark.anyio
T0 = 1_000_000.0
DECAY_S = 86_400.0 * 30
WINDOW = 64
MAX_REVISIT_S = 1e6  # the contract fixture's (conftest.OPTIONS)
URL = "https://a.example/x"
PRIOR = UrlPrior(label="shoes", weight=2e-5, change_rate=1e-6, recall=0.4, fixed=False)
NO_PRIOR = UrlPrior()


def rec(
    url: str = URL,
    *,
    prior: UrlPrior = NO_PRIOR,
    last: float | None = T0,
    threshold_s: float = 100.0,
) -> UrlRecord:
    return UrlRecord(
        url=url, host=url.split("/")[2], weight=1.0, change_rate=0.01, recall=0.5,
        false_signal_rate=0.01, signal_time_equivalent_s=0.0, threshold_s=threshold_s,
        scored_lambda=1.0, last_crawled_at=last, prior=prior,
    )  # fmt: skip


async def observations(store: Store, url: str = URL) -> Observations:
    (s,) = await store.get_urls([url])
    assert s is not None
    return s.observations


Count = tuple[float, float | None]  # decayed mass, reference time


def assert_masses(got: Observations, click: Count, signal: Count) -> None:
    """Decayed counts equal (mass to 1e-12 relative, reference time exactly)."""
    assert (got.click_mass, got.click_ref) == (pytest.approx(click[0], rel=1e-12, abs=0), click[1])
    assert (got.signal_mass, got.signal_ref) == (
        pytest.approx(signal[0], rel=1e-12, abs=0), signal[1],
    )  # fmt: skip


async def crawl(
    store: Store,
    at: float,
    *,
    ok: bool = True,
    changed: bool | None = True,
    window: int = WINDOW,
    url: str = URL,
) -> None:
    """Lease ``url`` (the only one due) at ``at`` and settle it as fetched then."""
    (grant,) = (await store.lease_next(at, 1, 60.0, dispatch_ahead=True)).grants
    assert grant.state.url == url
    result = CrawlOutcome(url, grant.lease_id, at, ok=ok, changed=changed)
    assert await store.settle([result], 60.0, 0.0, window) == [EventStatus.ACCEPTED]


def outcome(tau_s: float, n: int, changed: bool) -> Outcome:
    """What a store keeps of an outcome: τ rounded to a 32-bit float."""
    return struct.unpack("<f", struct.pack("<f", tau_s))[0], n, changed


# -- decayed counts --------------------------------------------------------------------------
async def test_clicks_fold_into_the_decayed_count_as_add_event(store: Store) -> None:
    await store.upsert_urls([rec()], T0)
    times = [T0 + 10.0, T0 + 86_400.0, T0 + 3_600.5, T0 + 2 * 86_400.0]  # one out of order
    events = [ClickEvent(URL, t) for t in times] + [ClickEvent("https://q.example/", T0)]
    statuses = await store.record_clicks(events, DECAY_S)
    assert statuses == [EventStatus.ACCEPTED] * 4 + [EventStatus.UNKNOWN_URL]
    mass, ref = 0.0, None
    for t in times:
        mass, ref = add_event(mass, ref, t, DECAY_S)
    assert_masses(await observations(store), (mass, ref), (0.0, None))
    # a second batch continues from the stored count
    await store.record_clicks([ClickEvent(URL, T0 + 5.0)], DECAY_S)
    mass, ref = add_event(mass, ref, T0 + 5.0, DECAY_S)
    assert_masses(await observations(store), (mass, ref), (0.0, None))


async def test_every_signal_counts_in_the_decayed_signal_count(store: Store) -> None:
    await store.upsert_urls([rec()], T0)
    times = [T0 + 5.0, T0 + 500.0, T0 + 100.0, T0 - 50.0]  # stale, new, older, stale
    statuses = await store.record_signals([SignalEvent(URL, t) for t in times], 10.0, DECAY_S)
    accepted, stale = EventStatus.ACCEPTED, EventStatus.STALE
    assert statuses == [stale, accepted, accepted, stale]
    mass, ref = 0.0, None
    for t in times:
        mass, ref = add_event(mass, ref, t, DECAY_S)
    assert_masses(await observations(store), (0.0, None), (mass, ref))
    assert await store.record_signals([SignalEvent("https://q.example/", T0)], 0.0, DECAY_S) == [
        EventStatus.UNKNOWN_URL
    ]


async def test_events_of_unknown_urls_leave_no_state(store: Store) -> None:
    other = "https://a.example/later"
    await store.upsert_urls([rec()], T0)
    await store.record_clicks([ClickEvent(other, T0 + 1)], DECAY_S)
    await store.record_signals([SignalEvent(other, T0 + 1)], 0.0, DECAY_S)
    await store.upsert_urls([rec(other)], T0 + 2)
    assert await observations(store, other) == Observations()


# -- crawl outcomes --------------------------------------------------------------------------
async def test_settle_appends_tau_n_and_changed(store: Store) -> None:
    await store.upsert_urls([rec()], T0)
    signals = [SignalEvent(URL, T0 + 20.0), SignalEvent(URL, T0 + 30.0)]
    await store.record_signals(signals, 0.0, DECAY_S)
    await crawl(store, T0 + 151.3, changed=True)
    await crawl(store, T0 + 400.0, changed=False)
    (s,) = await store.get_urls([URL])
    assert s is not None
    expected = (outcome((T0 + 151.3) - T0, 2, True), outcome(400.0 - 151.3, 0, False))
    assert s.observations.outcomes == expected
    assert expected[0][0] != (T0 + 151.3) - T0  # τ was rounded to 32 bits
    assert (s.crawls, s.changes, s.signals_since_crawl) == (2, 1, 0)


async def test_only_known_changes_after_a_known_crawl_are_outcomes(store: Store) -> None:
    await store.upsert_urls([rec(last=None)], T0)
    await crawl(store, T0 + 10.0, changed=True)  # first crawl: no previous fetch
    assert (await observations(store)).outcomes == ()
    await crawl(store, T0 + 100.0, ok=False, changed=None)  # failed fetch
    await crawl(store, T0 + 200.0, ok=True, changed=None)  # refreshed, change unknown
    assert (await observations(store)).outcomes == ()
    (s,) = await store.get_urls([URL])
    assert s is not None and s.last_crawl_at == T0 + 200.0
    await crawl(store, T0 + 300.0, changed=False)
    assert (await observations(store)).outcomes == (outcome(100.0, 0, False),)


async def test_signal_count_of_an_outcome_is_capped(store: Store) -> None:
    await store.upsert_urls([rec()], T0)
    signals = [SignalEvent(URL, T0 + 1.0 + i * 1e-3) for i in range(65_540)]
    await store.record_signals(signals, 0.0, DECAY_S)
    await crawl(store, T0 + 100.0)
    assert (await observations(store)).outcomes == (outcome(100.0, 65_535, True),)


async def test_outcome_window_keeps_the_last_k(store: Store) -> None:
    await store.upsert_urls([rec()], T0)
    last, kept = T0, []
    for k in range(5):
        at = last + 20.0 + k
        await store.record_signals([SignalEvent(URL, at - 1.0)] * k, 0.0, DECAY_S)
        await crawl(store, at, changed=k % 2 == 0, window=3)
        kept.append(outcome(at - last, k, k % 2 == 0))
        last = at
    assert (await observations(store)).outcomes == tuple(kept[-3:])


async def test_memory_per_url_is_bounded(store: Store) -> None:
    prior = UrlPrior(label="chaussures-été")  # a multi-byte label
    await store.upsert_urls([rec(prior=prior)], T0)
    at = T0
    for k in range(200):
        at += 20.0 + k % 7
        await crawl(store, at, changed=k % 3 == 0)
    outcomes = (await observations(store)).outcomes
    assert len(outcomes) == WINDOW
    assert outcomes[-1] == outcome(20.0 + 199 % 7, 0, 199 % 3 == 0)
    if isinstance(store, RedisStore):
        host = "a.example"
        key = ShardKeys(shard_of(host, store.shards)).urls(host)
        entry = await store.client.hget(key, url_key(URL, host))
        assert entry is not None
        blob = unpack_entry(entry)[1]
        label_bytes = len("chaussures-été".encode())
        assert len(blob or b"") == est_bytes(prior, clicks=False, signals=False, outcomes=WINDOW)
        assert len(blob or b"") == 1 + 2 + label_bytes + 6 * WINDOW
        assert len(blob or b"") < est_size(label_bytes, WINDOW) == 67 + label_bytes + 6 * WINDOW


# -- priors ----------------------------------------------------------------------------------
async def test_registration_writes_the_prior(store: Store) -> None:
    full = UrlPrior("ßhoes ✓", 1e-4, 2e-6, 0.25, 3e-7, fixed=True)
    urls = [URL, "https://b.example/1", "https://b.example/2"]
    priors = [full, UrlPrior(), UrlPrior(label="")]
    await store.upsert_urls([rec(u, prior=p) for u, p in zip(urls, priors, strict=True)], T0)
    states = await store.get_urls(urls)
    assert [s.prior if s else None for s in states] == priors
    assert [s.observations if s else None for s in states] == [Observations()] * 3
    listed = await store.host_urls("b.example")
    assert [(s.url, s.prior) for s in listed] == list(zip(urls[1:], priors[1:], strict=True))


async def test_reregistration_replaces_the_prior_and_keeps_observations(store: Store) -> None:
    await store.upsert_urls([rec(prior=PRIOR)], T0)
    await store.record_clicks([ClickEvent(URL, T0 + 3.0)], DECAY_S)
    await store.record_signals([SignalEvent(URL, T0 + 4.0)], 0.0, DECAY_S)
    await crawl(store, T0 + 50.0)
    before = await observations(store)
    assert before.outcomes == (outcome(50.0, 1, True),)
    for prior in (UrlPrior(label="a much longer label than before", fixed=True), UrlPrior()):
        assert await store.upsert_urls([rec(prior=prior)], T0 + 60.0) == [False]
        (s,) = await store.get_urls([URL])
        assert s is not None and (s.prior, s.observations) == (prior, before)
    (listed,) = await store.host_urls("a.example")
    assert (listed.prior, listed.observations) == (UrlPrior(), before)


async def test_removal_deletes_the_state(store: Store) -> None:
    await store.upsert_urls([rec(prior=PRIOR)], T0)
    await store.record_clicks([ClickEvent(URL, T0 + 3.0)], DECAY_S)
    await store.record_signals([SignalEvent(URL, T0 + 4.0)], 0.0, DECAY_S)
    await crawl(store, T0 + 50.0)
    assert await store.remove_urls([URL]) == 1
    await store.upsert_urls([rec(prior=UrlPrior(label="new"))], T0 + 100.0)
    (s,) = await store.get_urls([URL])
    assert s is not None and (s.prior, s.observations) == (UrlPrior(label="new"), Observations())


# -- set_params ------------------------------------------------------------------------------
async def test_set_params_writes_parameters_and_rederives_due_times(store: Store) -> None:
    b1, b2, other = "https://a.example/b1", "https://a.example/b2", "https://o.example/z"
    late = 1_000.0  # due after the leases below
    await store.upsert_urls(
        [rec(), rec(b1), rec(b2, threshold_s=late), rec(other, threshold_s=late)], T0
    )
    await store.record_signals([SignalEvent(URL, T0 + 20.0)] * 2, 0.0, DECAY_S)
    new = ScoredParams(3e-5, 4e-6, 0.75, 1e-7, signal_time_equivalent_s=30.0, threshold_s=400.0)
    abandon = ScoredParams(1e-9, 1e-3, 0.0, 0.0, signal_time_equivalent_s=0.0, threshold_s=math.inf)
    before = await store.get_urls([other])
    await store.set_params(
        "a.example",
        {URL: new, b1: abandon, "https://a.example/unknown": new, other: new},
        2.5,
    )
    s, s1, s2 = await store.get_urls([URL, b1, b2])
    assert s is not None and s1 is not None and s2 is not None
    got = (s.weight, s.change_rate, s.recall, s.false_signal_rate,
           s.signal_time_equivalent_s, s.threshold_s)  # fmt: skip
    assert got == (3e-5, 4e-6, 0.75, 1e-7, 30.0, 400.0)
    assert s.scored_lambda == 2.5 and s.signals_since_crawl == 2
    assert s.due_at == due_time(
        last_crawl_at=T0, registered_at=T0, threshold_s=400.0, signal_time_equivalent_s=30.0,
        signals_since_crawl=2, last_signal_at=T0 + 20.0, max_revisit_s=MAX_REVISIT_S,
    ) == T0 + 340.0  # fmt: skip
    assert (s1.threshold_s, s1.due_at) == (math.inf, T0 + MAX_REVISIT_S)  # the revisit cap
    assert (s2.threshold_s, s2.scored_lambda) == (1_000.0, 1.0)  # not named: unchanged
    assert await store.get_urls([other]) == before  # another host's URL: skipped
    host = await store.get_host("a.example", T0)
    assert host is not None and host.scored_lambda is None  # the host's scored Λ stays
    # the host queue follows the new due times
    assert (await store.lease_next(T0 + 339.0, 5, 60.0, dispatch_ahead=False)).grants == []
    (grant,) = (await store.lease_next(T0 + 340.0, 5, 60.0, dispatch_ahead=False)).grants
    assert grant.state.url == URL


async def test_set_params_moves_due_time_as_set_thresholds_does(store: Store) -> None:
    a, b = "https://a.example/p", "https://a.example/q"
    await store.upsert_urls([rec(a), rec(b)], T0)
    for url in (a, b):
        await store.record_signals([SignalEvent(url, T0 + 7.0)], 0.0, DECAY_S)
    same = ScoredParams(1.0, 0.01, 0.5, 0.01, signal_time_equivalent_s=0.0, threshold_s=250.0)
    await store.set_params("a.example", {a: same}, 3.0)
    await store.set_thresholds("a.example", {b: 250.0}, 3.0)
    sa, sb = await store.get_urls([a, b])
    assert sa is not None and sb is not None
    assert (sa.due_at, sa.threshold_s, sa.scored_lambda) == (sb.due_at, 250.0, 3.0)
    assert sa.due_at == T0 + 250.0


async def test_set_params_many_is_set_params_for_each_host(store: Store) -> None:
    """One call for URLs of several hosts (several shards) does what one call per host does."""
    urls = [f"https://h{k}.example/p" for k in range(12)]
    await store.upsert_urls([rec(u) for u in urls], T0)
    p = ScoredParams(2e-5, 3e-6, 0.25, 1e-7, signal_time_equivalent_s=10.0, threshold_s=123.0)
    q = ScoredParams(1e-5, 5e-6, 0.0, 0.0, signal_time_equivalent_s=0.0, threshold_s=321.0)
    await store.set_params_many(
        [(f"h{k}.example", {u: p if k % 2 else q}, 1.5 + k) for k, u in enumerate(urls)]
    )
    states = await store.get_urls(urls)
    for k, s in enumerate(states):
        assert s is not None
        want = p if k % 2 else q
        assert (s.weight, s.threshold_s, s.scored_lambda) == (
            want.weight,
            want.threshold_s,
            1.5 + k,
        )
        assert s.due_at == T0 + want.threshold_s


# -- groups ----------------------------------------------------------------------------------
async def test_groups_round_trip_and_put_replaces(store: Store) -> None:
    assert await store.get_groups(["global"]) == [None]
    groups = {
        "host:a.example": (1.5, 2e-6, -0.0),
        "label:shoes": (0.1,),
        "global": (1.0, 2.0, 3.0, 1e-300, math.inf),
        "label:empty": (),
    }
    await store.put_groups(groups)
    keys = [*groups, "label:none"]
    assert await store.get_groups(keys) == [*groups.values(), None]
    await store.put_groups({"global": [7.0], "host:b.example": [4.0, 5.0]})
    assert await store.get_groups(["global", "label:shoes", "host:b.example"]) == [
        (7.0,), (0.1,), (4.0, 5.0),
    ]  # fmt: skip
    assert await store.get_groups([]) == []
