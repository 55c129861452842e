"""The Store contract: every implementation must pass this suite unchanged."""

from __future__ import annotations

import math

import numpy as np
import pytest

from scheduler_core.multipliers import LogMean, TrackerConfig, update_log_mean
from service.store.base import (
    ClickEvent,
    CrawlOutcome,
    DispatchObservation,
    EventStatus,
    LeaseStatus,
    SignalEvent,
    Store,
    UrlRecord,
)

pytestmark = pytest.mark.anyio
T0 = 1_000_000.0
DECAY_S = 86_400.0 * 30  # time constant of the decayed click and signal counts
WINDOW = 64  # crawl outcomes kept per URL


def rec(
    url: str,
    *,
    threshold_s: float = 100.0,
    beta_s: float = 0.0,
    last: float | None = T0,
    delay: float | None = None,
) -> UrlRecord:
    host = url.split("/")[2]
    return UrlRecord(
        url=url, host=host, weight=1.0, change_rate=0.01, recall=0.5, false_signal_rate=0.01,
        signal_time_equivalent_s=beta_s, threshold_s=threshold_s, scored_lambda=1.0,
        last_crawled_at=last, crawl_delay_s=delay,
    )  # fmt: skip


def ok(url: str, lease_id: str, at: float, changed: bool = True) -> CrawlOutcome:
    return CrawlOutcome(url, lease_id, at, ok=True, changed=changed)


async def test_upsert_reports_new_and_updates_params(store: Store) -> None:
    assert await store.upsert_urls([rec("https://a.example/1")], T0) == [True]
    assert await store.upsert_urls([rec("https://a.example/1", threshold_s=50.0)], T0) == [False]
    (state,) = await store.get_urls(["https://a.example/1"])
    assert state is not None
    assert state.threshold_s == 50.0
    assert state.due_at == T0 + 50.0
    assert await store.get_urls(["https://nope.example/"]) == [None]


async def test_upsert_keeping_known_urls_leaves_them_and_sets_the_host_delay(store: Store) -> None:
    await store.upsert_urls([rec("https://a.example/1", threshold_s=50.0)], T0)
    batch = [
        rec("https://a.example/1", threshold_s=999.0, last=T0 + 5, delay=30.0),
        rec("https://a.example/2", threshold_s=70.0),
    ]
    assert await store.upsert_urls(batch, T0 + 5, keep_known=True) == [False, True]
    known, new = await store.get_urls(["https://a.example/1", "https://a.example/2"])
    assert known is not None and new is not None
    assert (known.threshold_s, known.due_at, known.last_crawl_at) == (50.0, T0 + 50.0, T0)
    assert new.threshold_s == 70.0
    host = await store.get_host("a.example", T0 + 5)
    assert host is not None and host.crawl_delay_s == 30.0 and host.urls == 2
    # repeating the call changes nothing
    assert await store.upsert_urls(batch, T0 + 6, keep_known=True) == [False, False]
    (again,) = await store.get_urls(["https://a.example/1"])
    assert again == known


async def test_never_crawled_url_is_due_at_registration(store: Store) -> None:
    await store.upsert_urls([rec("https://a.example/new", last=None)], T0)
    (grant,) = (await store.lease_next(T0, 5, 60.0, dispatch_ahead=False)).grants
    assert grant.state.url == "https://a.example/new"


async def test_due_urls_go_first_in_due_order(store: Store) -> None:
    await store.upsert_urls(
        [
            rec("https://a.example/late", threshold_s=300.0),
            rec("https://b.example/early", threshold_s=100.0),
            rec("https://c.example/mid", threshold_s=200.0),
        ],
        T0,
    )
    assert (await store.lease_next(T0 + 50, 3, 60.0, dispatch_ahead=False)).grants == []
    grants = (await store.lease_next(T0 + 250, 3, 60.0, dispatch_ahead=False)).grants
    assert [g.state.url for g in grants] == ["https://b.example/early", "https://c.example/mid"]
    ahead = (await store.lease_next(T0 + 250, 3, 60.0, dispatch_ahead=True)).grants
    assert [g.state.url for g in ahead] == ["https://a.example/late"]


async def test_leased_url_is_not_handed_out_twice(store: Store) -> None:
    await store.upsert_urls([rec(f"https://h{i}.example/") for i in range(5)], T0)
    first = (await store.lease_next(T0 + 500, 3, 60.0, dispatch_ahead=True)).grants
    second = (await store.lease_next(T0 + 500, 10, 60.0, dispatch_ahead=True)).grants
    urls = [g.state.url for g in first + second]
    assert len(urls) == len(set(urls)) == 5


async def test_host_gate_spaces_dispatches_by_crawl_delay(store: Store) -> None:
    await store.upsert_urls([rec(f"https://one.example/{i}", delay=10.0) for i in range(4)], T0)
    now = T0 + 1000.0
    assert len((await store.lease_next(now, 4, 60.0, dispatch_ahead=True)).grants) == 1
    assert (await store.lease_next(now + 9.9, 4, 60.0, dispatch_ahead=True)).grants == []
    (grant,) = (await store.lease_next(now + 10.0, 4, 60.0, dispatch_ahead=True)).grants
    assert grant.gated  # it was due long before the gate opened
    host = await store.get_host("one.example", now + 10.0)
    assert host is not None and host.gate_at == now + 20.0


async def test_a_lease_is_gated_only_when_politeness_held_it_back(store: Store) -> None:
    """Gated: due before the host's gate opened and leased within BOUND_SLACK = 0.5 crawl
    delays of the opening; leased later it waited for the budget, not for the host."""
    await store.upsert_urls([rec(f"https://one.example/{i}", delay=10.0) for i in range(3)], T0)
    now = T0 + 1000.0  # every URL due since T0 + 100
    (first,) = (await store.lease_next(now, 1, 60.0, dispatch_ahead=False)).grants
    assert not first.gated  # the gate had never closed
    (held,) = (await store.lease_next(now + 14.0, 1, 60.0, dispatch_ahead=False)).grants
    assert held.gated  # the gate opened at now + 10: 0.4 crawl delays ago
    (late,) = (await store.lease_next(now + 30.0, 1, 60.0, dispatch_ahead=False)).grants
    assert not late.gated  # the gate opened at now + 24: 0.6 crawl delays ago
    await store.upsert_urls(
        [rec("https://two.example/a", delay=10.0), rec("https://two.example/b", delay=10.0,
         threshold_s=1015.0)], T0,
    )  # fmt: skip
    (a,) = (await store.lease_next(now, 1, 60.0, dispatch_ahead=False)).grants
    (b,) = (await store.lease_next(now + 15.0, 1, 60.0, dispatch_ahead=False)).grants
    assert b.state.url == "https://two.example/b"
    assert not b.gated  # due at now + 15, after the gate opened at now + 10


async def test_a_hosts_threshold_moves_with_lambda0(store: Store) -> None:
    """A host's estimate is ln(Λ_h / λ₀): when λ₀ moves, Λ_h keeps its ratio to it."""
    await store.upsert_urls([rec("https://a.example/x"), rec("https://b.example/y")], T0)
    cfg = TrackerConfig(window=4, clip=10)
    free = [DispatchObservation("a.example", math.log(2.0), gated=False)] * 4
    gated = [DispatchObservation("b.example", math.log(8.0), gated=True)] * 4
    await store.observe_dispatch(free + gated, cfg)
    before = await store.host_thresholds(["a.example", "b.example"])
    assert (before["a.example"], before["b.example"]) == (pytest.approx(2.0), pytest.approx(8.0))
    await store.observe_dispatch([DispatchObservation("c.example", math.log(5.0), False)] * 6, cfg)
    lam0 = (await store.stats(T0, 0)).lambda0
    assert lam0 is not None and lam0 > 4.0
    after = await store.host_thresholds(["a.example", "b.example"])
    assert after["a.example"] == pytest.approx(lam0)
    assert after["b.example"] == pytest.approx(4.0 * lam0)  # λ_b = 3 λ₀, unobserved since


async def test_expired_lease_makes_url_due_again(store: Store) -> None:
    await store.upsert_urls([rec("https://a.example/x")], T0)
    (g1,) = (await store.lease_next(T0 + 200, 1, 60.0, dispatch_ahead=False)).grants
    assert (await store.lease_next(T0 + 259, 1, 60.0, dispatch_ahead=False)).grants == []
    (g2,) = (await store.lease_next(T0 + 260, 1, 60.0, dispatch_ahead=False)).grants
    assert g2.state.url == g1.state.url and g2.lease_id != g1.lease_id
    assert await store.lease_status([g1.lease_id, g2.lease_id, "zz"]) == [
        (LeaseStatus.EXPIRED, "https://a.example/x", T0 + 200),
        (LeaseStatus.ACTIVE, "https://a.example/x", T0 + 260),
        (LeaseStatus.UNKNOWN, None, None),
    ]
    # the superseded lease's result is ignored; the current one settles
    assert await store.settle([ok(g1.state.url, g1.lease_id, T0 + 261)], 60.0, 0.0, WINDOW) == [
        EventStatus.STALE
    ]
    assert await store.settle([ok(g2.state.url, g2.lease_id, T0 + 262)], 60.0, 0.0, WINDOW) == [
        EventStatus.ACCEPTED
    ]
    stats = await store.stats(T0 + 262, 5)
    assert stats.leases_expired_total == 1 and stats.leases_active == 0


async def test_late_result_of_expired_lease_is_accepted_if_not_leased_again(store: Store) -> None:
    await store.upsert_urls([rec("https://a.example/x")], T0)
    (g,) = (await store.lease_next(T0 + 200, 1, 60.0, dispatch_ahead=False)).grants
    await store.lease_next(T0 + 300, 1, 60.0, dispatch_ahead=False)  # reclaims, leases again
    await store.upsert_urls([rec("https://b.example/y")], T0)
    (state,) = await store.get_urls(["https://a.example/x"])
    assert state is not None and state.lease_id is not None  # leased again: g is superseded
    assert await store.settle([ok(g.state.url, g.lease_id, T0 + 301)], 60.0, 0.0, WINDOW) == [
        EventStatus.STALE
    ]


async def test_a_result_twice_in_one_batch_settles_once(store: Store) -> None:
    await store.upsert_urls([rec("https://a.example/x", threshold_s=100.0)], T0)
    (g,) = (await store.lease_next(T0 + 150, 1, 60.0, dispatch_ahead=False)).grants
    out = ok(g.state.url, g.lease_id, T0 + 151)
    assert await store.settle([out, out], 60.0, 0.0, WINDOW) == [
        EventStatus.ACCEPTED,
        EventStatus.DUPLICATE,
    ]
    (s,) = await store.get_urls([g.state.url])
    assert s is not None and (s.crawls, s.lease_id) == (1, None)
    stats = await store.stats(T0 + 151, 5)
    assert stats.leases_active == 0


async def test_result_settles_once_and_resets_elapsed_time(store: Store) -> None:
    await store.upsert_urls([rec("https://a.example/x", threshold_s=100.0)], T0)
    (g,) = (await store.lease_next(T0 + 150, 1, 60.0, dispatch_ahead=False)).grants
    out = ok(g.state.url, g.lease_id, T0 + 151)
    assert await store.settle([out], 60.0, 0.0, WINDOW) == [EventStatus.ACCEPTED]
    assert await store.settle([out], 60.0, 0.0, WINDOW) == [EventStatus.DUPLICATE]
    (s,) = await store.get_urls([g.state.url])
    assert s is not None
    assert (s.crawls, s.changes, s.last_crawl_at, s.due_at) == (1, 1, T0 + 151, T0 + 251)
    assert s.lease_id is None


async def test_failed_fetch_retries_later_and_keeps_the_copy(store: Store) -> None:
    await store.upsert_urls([rec("https://a.example/x", threshold_s=100.0)], T0)
    (g,) = (await store.lease_next(T0 + 150, 1, 60.0, dispatch_ahead=False)).grants
    failed = CrawlOutcome(g.state.url, g.lease_id, T0 + 151, ok=False, changed=None)
    assert await store.settle([failed], 500.0, 0.0, WINDOW) == [EventStatus.ACCEPTED]
    (s,) = await store.get_urls([g.state.url])
    assert s is not None
    assert (s.last_crawl_at, s.fetch_errors, s.due_at) == (T0, 1, T0 + 651)


async def test_signal_moves_due_time_earlier_by_beta(store: Store) -> None:
    await store.upsert_urls([rec("https://a.example/x", threshold_s=100.0, beta_s=30.0)], T0)
    events = [SignalEvent("https://a.example/x", T0 + 10), SignalEvent("https://a.example/x", T0)]
    statuses = await store.record_signals(events, 0.0, DECAY_S)
    assert statuses == [EventStatus.ACCEPTED, EventStatus.STALE]
    (s,) = await store.get_urls(["https://a.example/x"])
    assert s is not None
    assert (s.signals_since_crawl, s.signals, s.due_at) == (1, 2, T0 + 70)
    assert await store.record_signals([SignalEvent("https://x.example/", T0)], 0.0, DECAY_S) == [
        EventStatus.UNKNOWN_URL
    ]


async def test_signal_within_t_delay_after_crawl_is_discarded(store: Store) -> None:
    await store.upsert_urls([rec("https://a.example/x", beta_s=30.0)], T0)
    statuses = await store.record_signals(
        [SignalEvent("https://a.example/x", T0 + 5)], 10.0, DECAY_S
    )
    assert statuses == [EventStatus.STALE]


async def test_certain_signal_makes_url_due_at_once(store: Store) -> None:
    await store.upsert_urls([rec("https://a.example/x", threshold_s=1e5, beta_s=math.inf)], T0)
    await store.record_signals([SignalEvent("https://a.example/x", T0 + 42)], 0.0, DECAY_S)
    (s,) = await store.get_urls(["https://a.example/x"])
    assert s is not None and s.due_at == T0 + 42


async def test_abandoned_url_is_revisited_at_the_cap(store: Store) -> None:
    await store.upsert_urls([rec("https://a.example/x", threshold_s=math.inf)], T0)
    (s,) = await store.get_urls(["https://a.example/x"])
    assert s is not None and s.due_at == T0 + 1e6


async def test_clicks_are_counted(store: Store) -> None:
    await store.upsert_urls([rec("https://a.example/x")], T0)
    statuses = await store.record_clicks(
        [ClickEvent("https://a.example/x", T0 + 1), ClickEvent("https://q.example/", T0)], DECAY_S
    )
    assert statuses == [EventStatus.ACCEPTED, EventStatus.UNKNOWN_URL]
    (s,) = await store.get_urls(["https://a.example/x"])
    assert s is not None and (s.clicks, s.last_click_at) == (1, T0 + 1)


async def test_remove_drops_url_and_its_lease(store: Store) -> None:
    await store.upsert_urls([rec("https://a.example/x"), rec("https://a.example/y")], T0)
    (g,) = (await store.lease_next(T0 + 500, 1, 60.0, dispatch_ahead=False)).grants
    assert await store.remove_urls([g.state.url, "https://none.example/"]) == 1
    assert await store.get_urls([g.state.url]) == [None]
    assert await store.settle([ok(g.state.url, g.lease_id, T0 + 501)], 60.0, 0.0, WINDOW) == [
        EventStatus.STALE
    ]
    assert (await store.stats(T0 + 501, 1)).urls == 1


async def test_set_thresholds_rederives_due_times(store: Store) -> None:
    await store.upsert_urls([rec("https://a.example/x", threshold_s=100.0)], T0)
    await store.set_thresholds("a.example", {"https://a.example/x": 400.0}, 2.0)
    (s,) = await store.get_urls(["https://a.example/x"])
    assert s is not None and (s.due_at, s.scored_lambda) == (T0 + 400.0, 2.0)


async def test_rescore_columns_read_and_set_hosts_as_columns(store: Store) -> None:
    await store.upsert_urls(
        [
            rec("https://a.example/2", threshold_s=100.0),
            rec("https://a.example/1", threshold_s=200.0),
            rec("https://b.example/3", threshold_s=300.0),
        ],
        T0,
    )
    stale = [("b.example", 3.0), ("a.example", 2.0), ("none.example", 4.0)]
    cols = await store.rescore_columns(stale)
    assert cols.hosts == ["b.example", "a.example", "none.example"]
    assert cols.counts.tolist() == [1, 2, 0]
    assert cols.urls == ["https://b.example/3", "https://a.example/1", "https://a.example/2"]
    assert cols.row_lambdas().tolist() == [3.0, 2.0, 2.0]
    assert cols.params.tolist() == [
        [1.0, 0.01, 0.5, 0.01, 300.0],
        [1.0, 0.01, 0.5, 0.01, 200.0],
        [1.0, 0.01, 0.5, 0.01, 100.0],
    ]
    await store.remove_urls(["https://a.example/1"])  # gone since the read: skipped
    await store.set_rescored(cols, np.array([30.0, 20.0, 10.0]))
    states = await store.get_urls([*cols.urls, "https://a.example/9"])
    assert [None if s is None else (s.threshold_s, s.scored_lambda, s.due_at) for s in states] == [
        (30.0, 3.0, T0 + 30.0),
        None,
        (10.0, 2.0, T0 + 10.0),
        None,
    ]
    grants = await store.lease_next(T0 + 15.0, 5, 60.0, False)
    assert [g.state.url for g in grants.grants] == ["https://a.example/2"]


async def test_rescore_columns_leave_out_urls_never_crawled(store: Store) -> None:
    """A URL never crawled is due at its registration whatever its threshold: a
    rescoring pass reads only the others, counts it, and leaves its ι and Λ scored."""
    await store.upsert_urls(
        [
            rec("https://a.example/1", threshold_s=200.0),
            rec("https://a.example/2", threshold_s=100.0, last=None),
            rec("https://b.example/3", last=None),
        ],
        T0,
    )
    lam = await store.host_thresholds(["a.example", "b.example"])
    cols = await store.rescore_columns([(h, lam[h]) for h in ("a.example", "b.example")])
    assert cols.urls == ["https://a.example/1"] and cols.counts.tolist() == [1, 0]
    assert cols.never_crawled == 2
    await store.set_rescored(cols, np.array([20.0]))
    one, two, three = await store.get_urls(
        ["https://a.example/1", "https://a.example/2", "https://b.example/3"]
    )
    assert one is not None and (one.threshold_s, one.scored_lambda) == (20.0, lam["a.example"])
    assert two is not None and (two.threshold_s, two.scored_lambda, two.due_at) == (
        100.0, 1.0, T0,
    )  # fmt: skip
    assert three is not None and three.due_at == T0
    # both hosts are scored at their Λ_h now, the one without a URL crawled too
    assert (await store.hosts_needing_rescore(0.05, 10_000)).hosts == []


async def test_multipliers_follow_dispatch_values(store: Store) -> None:
    await store.upsert_urls([rec("https://a.example/x"), rec("https://b.example/y")], T0)
    cfg = TrackerConfig(window=4, clip=10)
    free = [DispatchObservation("a.example", math.log(2.0), gated=False)] * 4
    gated = [DispatchObservation("b.example", math.log(8.0), gated=True)] * 4
    await store.observe_dispatch(free + gated, cfg)
    stats = await store.stats(T0, 5)
    assert stats.lambda0 == pytest.approx(2.0)
    lam = await store.host_thresholds(["a.example", "b.example", "new.example"])
    assert lam["a.example"] == pytest.approx(2.0)
    assert lam["b.example"] == pytest.approx(8.0)  # λ₀ + λ_b, λ_b = 6
    assert lam["new.example"] == pytest.approx(2.0)
    stale = dict((await store.hosts_needing_rescore(0.05, 10_000)).hosts)
    assert stale["b.example"] == pytest.approx(8.0)
    await store.set_thresholds("b.example", {}, stale["b.example"])
    assert "b.example" not in dict((await store.hosts_needing_rescore(0.05, 10_000)).hosts)


async def test_lambda0_tracker_folds_as_the_core_does(store: Store) -> None:
    """λ₀'s mean, count and spread are the core's update_log_mean of the ungated values,
    bit for bit, whether the observations are folded when read or by the next lease."""
    await store.upsert_urls([rec(f"https://a.example/{i}") for i in range(3)], T0)
    cfg = TrackerConfig(window=4, clip=1.5)
    rng = np.random.default_rng(8)
    first = [float(x) for x in rng.normal(0.0, 2.0, 6)]
    second = [float(x) for x in rng.normal(1.0, 2.0, 5)]
    obs = [DispatchObservation("a.example", x, gated=False) for x in first]
    await store.observe_dispatch([*obs, DispatchObservation("a.example", 9.0, gated=True)], cfg)
    expected = update_log_mean(LogMean(), first, cfg)
    assert await store.lambda0_tracker() == expected
    await store.observe_dispatch([DispatchObservation("a.example", x, False) for x in second], cfg)
    await store.lease_next(T0 + 1e6, 1, 60.0, False)  # folds what was observed before it
    expected = update_log_mean(expected, second, cfg)
    assert await store.lambda0_tracker() == expected
    assert expected.var > 0 and expected.count == 11


async def test_stats_count_due_backlog(store: Store) -> None:
    await store.upsert_urls(
        [rec("https://a.example/1", threshold_s=10.0), rec("https://b.example/2", threshold_s=1e4)],
        T0,
    )
    stats = await store.stats(T0 + 100, 10)
    assert (stats.urls, stats.hosts, stats.due_backlog) == (2, 2, 1)


async def test_lease_columns_carry_the_leased_state(store: Store) -> None:
    """The columnar answer holds, per lease, what the store keeps of the URL, its lease,
    its host's Λ_h, in dispatch order (due first, earliest first; then open hosts)."""
    records = [
        rec(f"https://c{h}.example/{j}", threshold_s=100.0 + 10 * h + j, beta_s=30.0 * (h % 2),
            last=None if h == 4 else T0)
        for h in range(6)
        for j in range(2)
    ]  # fmt: skip
    await store.upsert_urls(records, T0)
    await store.record_signals([SignalEvent("https://c1.example/0", T0 + 5.0)], 1.0, DECAY_S)
    cols = await store.lease_columns(T0 + 135.0, 5, 60.0, dispatch_ahead=True)
    # c4 never crawled (due at registration), c1 moved earlier by its signal (β = 30 s)
    assert cols.urls == [
        "https://c4.example/0", "https://c1.example/0", "https://c0.example/0",
        "https://c2.example/0", "https://c3.example/0",
    ]  # fmt: skip
    assert cols.gated.tolist() == [False] * 5
    states = await store.get_urls(cols.urls)
    thresholds = await store.host_thresholds(cols.hosts)
    for i, s in enumerate(states):
        assert s is not None
        assert (cols.lease_ids[i], float(cols.deadline[i])) == (s.lease_id, s.lease_deadline)
        assert cols.hosts[i] == s.host and cols.threshold[i] == thresholds[s.host]
        row = cols.state[i]
        for name in ("weight", "threshold_s", "signal_time_equivalent_s", "due_at"):
            assert row[name] == getattr(s, name)
        assert int(row["signals_since_crawl"]) == s.signals_since_crawl
        last = float(row["last_crawl_at"])
        assert (None if math.isnan(last) else last) == s.last_crawl_at
