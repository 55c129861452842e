"""The Redis store decides exactly as the memory store: the same seeded stream of
registrations, signals and clicks (appended, then folded), leases, results (some for
leases never issued) and new parameters, some batches sent twice under an idempotency
key, gives the same fold counts, the same leases, in the same order, and the same URL
states, priors and observations (decayed masses to 1e-12 relative: Lua's exp and
Python's may differ in the last bit); each store's columns for re-estimation are its
snapshots' exactly."""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Callable, Iterator

import numpy as np
import pytest

from service.clock import ManualClock
from service.metrics import Metrics
from service.scheduler.context import Context
from service.scheduler.dispatch import dispatch
from service.settings import Settings
from service.store.base import (
    ControlRules,
    CrawlOutcome,
    EventBatch,
    EventKind,
    Folded,
    HostChange,
    IdempotencyKey,
    LeaseGrant,
    Observations,
    RetireReason,
    ScoredParams,
    SignalEvent,
    Store,
    UrlPrior,
    UrlRecord,
    UrlState,
    shard_of,
)
from service.store.estimate_columns import EstimateColumns, estimate_table
from service.store.memory import MemoryStore
from service.store.redis import RedisStore
from service.store.redis.local import LocalRedis

pytestmark = pytest.mark.anyio
T0 = 1_000_000.0
OPTIONS = {"shards": 4, "default_crawl_delay_s": 5.0, "max_revisit_s": 5_000.0}
DECAY_S = 3_600.0
WINDOW = 4  # small: the window is trimmed many times


def _prior(rng: np.random.Generator) -> UrlPrior:
    def maybe(x: float) -> float | None:
        return None if rng.random() < 0.5 else x

    label = [None, "shoes", "été", ""][int(rng.integers(4))]
    return UrlPrior(
        label=label, weight=maybe(float(rng.random())), change_rate=maybe(1e-4),
        recall=maybe(0.3), false_signal_rate=maybe(1e-6), fixed=bool(rng.random() < 0.3),
    )  # fmt: skip


@pytest.fixture(scope="module")
def server() -> Iterator[LocalRedis]:
    with LocalRedis() as s:
        yield s


def _records(rng: np.random.Generator) -> list[UrlRecord]:
    out = []
    for h in range(12):
        delay = float(rng.choice([1.0, 5.0, 20.0]))
        for j in range(int(rng.integers(1, 6))):
            beta = float(rng.choice([0.0, 30.0, math.inf]))
            out.append(
                UrlRecord(
                    url=f"https://h{h}.example/{j}",
                    host=f"h{h}.example",
                    weight=1.0,
                    change_rate=0.01,
                    recall=0.5,
                    false_signal_rate=0.01,
                    signal_time_equivalent_s=beta,
                    threshold_s=float(rng.choice([50.0, 200.0, 1_000.0, math.inf])),
                    scored_lambda=1.0,
                    last_crawled_at=None if rng.random() < 0.3 else T0 - float(rng.random() * 300),
                    crawl_delay_s=delay,
                    prior=_prior(rng),
                )  # fmt: skip
            )
    return out


def _view(state: UrlState | None) -> tuple[object, ...] | None:
    """A URL's state without its lease id (each store spells those its own way)."""
    if state is None:
        return None
    return (
        state.due_at, state.last_crawl_at, state.signals_since_crawl, state.last_signal_at,
        state.lease_id is not None, state.lease_deadline, state.clicks, state.signals,
        state.crawls, state.changes, state.fetch_errors, state.threshold_s, state.weight,
        state.signal_time_equivalent_s, state.scored_lambda, state.prior,
        state.observations.click_ref, state.observations.signal_ref,
        state.observations.outcomes,
    )  # fmt: skip


def _masses(obs: Observations | None) -> list[float]:
    return [] if obs is None else [obs.click_mass, obs.signal_mass]


def _folded(
    f: Folded,
) -> tuple[int, dict[tuple[EventKind, object], int], list[str], list[str]]:
    """A fold's counts, touched URLs and settled results' URLs (in URL order: the stores
    fold shards apart)."""
    return f.parts, dict(f.counts), sorted(f.touched), sorted(f.outcomes)


def _assert_same_columns(got: EstimateColumns, want: EstimateColumns) -> None:
    """Equal, bit for bit where stored (NaN equal to NaN)."""
    assert (got.urls, got.hosts, got.priors) == (want.urls, want.hosts, want.priors)
    for name in ("params", "clicks", "signals", "outcome_tau", "outcome_n"):
        a, b = getattr(got, name), getattr(want, name)
        assert a.shape == b.shape and np.array_equal(a, b, equal_nan=True), name
    assert np.array_equal(got.outcome_changed, want.outcome_changed)
    assert np.array_equal(got.outcome_counts, want.outcome_counts)


async def _dispatched(
    store: Store, records: list[UrlRecord], rounds: int, step_s: float, n: int
) -> ManualClock:
    """``records`` loaded into ``store`` at T0, then ``rounds`` dispatches of ``n`` URLs
    through the use case, the clock ``step_s`` s further before each; the clock."""
    await store.upsert_urls(records, T0)
    clock = ManualClock(T0)
    ctx = Context(store, clock, Settings(), Metrics())
    for _ in range(rounds):
        clock.advance(step_s)
        await dispatch(ctx, n)
    return clock


def _polite_records(
    rng: np.random.Generator,
    name: str,
    hosts: int,
    per_host: Callable[[], int],
    thr_lo: float,
    thr_hi: float,
    scored: Callable[[], float],
) -> list[UrlRecord]:
    """URLs without signals on hosts of crawl delay 0.5 s: per host ``per_host()`` URLs,
    random W and Δ (0.01–2 and 0.01–1 a day), ι uniform in [thr_lo, thr_hi] s, scored
    for ``scored()``, last crawled up to ``thr_hi`` s before T0."""
    return [
        UrlRecord(
            url=f"https://{name}{h}.example/{j}",
            host=f"{name}{h}.example",
            weight=float(rng.uniform(0.01, 2.0)) / 86_400,
            change_rate=float(rng.uniform(0.01, 1.0)) / 86_400,
            recall=0.0,
            false_signal_rate=0.0,
            signal_time_equivalent_s=0.0,
            threshold_s=float(rng.uniform(thr_lo, thr_hi)),
            scored_lambda=scored(),
            crawl_delay_s=0.5,
            last_crawled_at=T0 - float(rng.uniform(0, thr_hi)),
        )  # fmt: skip
        for h in range(hosts)
        for j in range(per_host())
    ]


def _leased(grants: list[LeaseGrant]) -> list[tuple[str, bool]]:
    return [(g.state.url, g.gated) for g in grants]


@pytest.mark.parametrize("seed", [1, 2, 3, 4, 5, 6])
async def test_same_stream_same_decisions(server: LocalRedis, seed: int) -> None:
    rng = np.random.default_rng(seed)
    records = _records(rng)
    urls = [r.url for r in records]
    memory = MemoryStore(**OPTIONS)  # type: ignore[arg-type]
    redis_store = await RedisStore.connect(server.url, prefix=f"diff{seed}", **OPTIONS)
    stores: list[Store] = [memory, redis_store]
    try:
        for s in stores:
            await s.upsert_urls(records, T0)
        now = T0
        open_leases: list[tuple[LeaseGrant, LeaseGrant]] = []
        settled_before = 0  # results' URLs the folds named for re-estimation
        for step in range(60):
            now += float(rng.exponential(40.0))
            picked = [urls[i] for i in rng.integers(len(urls), size=3)]
            signal_urls = [*picked, "https://unknown.example/"]
            signals = EventBatch(
                EventKind.SIGNAL, signal_urls, now - rng.random(len(signal_urls)) * 10
            )
            clicks = EventBatch(EventKind.CLICK, picked[:2], np.full(2, now))
            n, ahead = int(rng.integers(1, 8)), bool(rng.random() < 0.5)
            once = {k: IdempotencyKey(f"{k}{seed:02x}{step:04x}", 3600.0) for k in "abc"}
            sends = 2 if rng.random() < 0.3 else 1  # some batches are sent twice
            folds = []
            for s in stores:
                for _ in range(sends):
                    await s.append_events(signals, once["a"])
                    await s.append_events(clicks, once["b"])
                folds.append(_folded(await s.fold_events("diff", 100, 5.0, DECAY_S, 60.0)))
            assert folds[0][1:] == folds[1][1:]  # the same counts, the same URLs
            settled_before += len(folds[0][3])
            answers = []
            if rng.random() < 0.2:  # new parameters for some URLs of a host
                host = f"h{int(rng.integers(12))}.example"
                params = {
                    u: ScoredParams(
                        weight=float(rng.random()),
                        change_rate=0.01,
                        recall=0.5,
                        false_signal_rate=0.01,
                        signal_time_equivalent_s=float(rng.choice([0.0, 30.0, math.inf])),
                        threshold_s=float(rng.choice([50.0, 200.0, math.inf])),
                    )
                    for u in urls
                    if rng.random() < 0.3
                }
                scored = float(rng.random() + 1.0)
                for s in stores:
                    await s.set_params(host, params, scored)
            if rng.random() < 0.1:  # re-registration: new priors, observations kept
                again = [r for r in records if rng.random() < 0.2]
                again = [dataclasses.replace(r, prior=_prior(rng)) for r in again]
                for s in stores:
                    await s.upsert_urls(again, now)
            grants = [(await s.lease_next(now, n, 120.0, ahead)).grants for s in stores]
            assert _leased(grants[0]) == _leased(grants[1])
            open_leases += list(zip(grants[0], grants[1], strict=True))
            rng.shuffle(open_leases)  # type: ignore[arg-type]
            settle, open_leases = open_leases[:3], open_leases[3:]
            ok = [bool(rng.random() < 0.8) for _ in settle]
            changed = [[True, False, None][int(rng.integers(3))] for _ in settle]
            forged = [CrawlOutcome(picked[0], "f" * 32, now, True, True)] * (sends - 1)
            for k, s in enumerate(stores):
                outcomes = [
                    CrawlOutcome(
                        pair[k].state.url, pair[k].lease_id, now, good, c if good else None
                    )
                    for pair, good, c in zip(settle, ok, changed, strict=True)
                ]
                for _ in range(sends):
                    batch = [*outcomes, *forged]
                    answers.append(await s.settle(batch, 300.0, 5.0, WINDOW, once["c"]))
            assert answers[-2 * sends : -sends] == answers[-sends:]
            states = [await s.get_urls(urls) for s in stores]
            assert [_view(x) for x in states[0]] == [_view(x) for x in states[1]]
            assert await memory.stale_signals(urls) == await redis_store.stale_signals(urls)
            asked = [urls[-1], "https://unknown.example/", *urls[:-1]]
            for s, known in zip(stores, states, strict=True):  # columns = their snapshots
                snapshots = [x for x in [known[-1], *known[:-1]] if x is not None]
                _assert_same_columns(await s.estimate_columns(asked), estimate_table(snapshots))
            for a, b in zip(states[0], states[1], strict=True):
                assert _masses(a and a.observations) == pytest.approx(
                    _masses(b and b.observations), rel=1e-12, abs=0
                )
        windows = []
        for host in sorted({r.host for r in records}):
            listed = [await s.host_urls(host) for s in stores]
            assert [_view(x) for x in listed[0]] == [_view(x) for x in listed[1]]
            windows += [len(x.observations.outcomes) for x in listed[1]]
        assert max(windows) == WINDOW  # the stream filled (and trimmed) some windows
        assert settled_before > 0  # and the folds named settled results
        stats = [await s.stats(now, 3) for s in stores]
        assert (stats[0].urls, stats[0].due_backlog, stats[0].leases_active) == (
            stats[1].urls, stats[1].due_backlog, stats[1].leases_active,
        )  # fmt: skip
    finally:
        await redis_store.close()


async def test_big_batches_over_many_shards_match(server: LocalRedis) -> None:
    """The lease script reads each shard's ready set about twice its share at a time and
    reads on when a shard gives more than that (here shard 0, the most overdue)."""
    rng = np.random.default_rng(11)
    options = {**OPTIONS, "shards": 16}
    records = [
        UrlRecord(
            url=f"https://m{h}.example/",
            host=f"m{h}.example",
            weight=1.0,
            change_rate=0.01,
            recall=0.0,
            false_signal_rate=0.0,
            signal_time_equivalent_s=0.0,
            # shard 0's hosts are the most overdue: more than its share comes from it
            threshold_s=10.0 if shard_of(f"m{h}.example", 16) == 0 else rng.uniform(50, 500),
            scored_lambda=1.0,
            last_crawled_at=T0,
        )
        for h in range(400)
    ]
    memory = MemoryStore(**options)  # type: ignore[arg-type]
    redis_store = await RedisStore.connect(server.url, prefix="diffbig", **options)
    try:
        for s in (memory, redis_store):
            await s.upsert_urls(records, T0)
        for k, now in enumerate((T0 + 200.0, T0 + 300.0, T0 + 2_000.0, T0 + 2_001.0)):
            grants = [
                (await s.lease_next(now, 100, 60.0, k % 2 == 1)).grants
                for s in (memory, redis_store)
            ]
            assert _leased(grants[0]) == _leased(grants[1])
    finally:
        await redis_store.close()


async def test_dispatch_observations_fold_the_same(server: LocalRedis) -> None:
    """The λ₀ and λ_h the dispatch use case feeds (buffered by the Redis store and folded
    in by its next lease call) end where the memory store's, which folds at once, end."""
    rng = np.random.default_rng(21)
    records = _polite_records(rng, "f", 30, lambda: 10, 1e4, 1e5, lambda: 1e-6)
    redis_store = await RedisStore.connect(server.url, prefix="difflam", shards=16)
    found = []
    try:
        for store in (MemoryStore(shards=16), redis_store):
            clock = await _dispatched(store, records, 25, 1.0, 7)
            stats = await store.stats(clock.now(), 3)
            hosts = await store.host_thresholds([f"f{h}.example" for h in range(30)])
            found.append((stats.lambda0, stats.lambda0_observations, hosts))
    finally:
        await redis_store.close()
    assert found[0][1] == found[1][1] > 0
    assert found[0][0] == pytest.approx(found[1][0], rel=1e-12)
    assert found[0][2] == pytest.approx(found[1][2], rel=1e-12)


def _control_view(state: UrlState | None) -> tuple[object, ...] | None:
    """A URL's state with what the frontier controls keep of it."""
    if state is None:
        return None
    return (
        *(_view(state) or ()), state.retired_at, state.retire_reason, state.gone_count,
        state.refetch_after,
    )  # fmt: skip


#: Statuses of the controlled stream, 200 the most frequent.
_STATUSES = [200, 200, 200, 200, 304, 429, 503, 500, 0, 404, 404, 410, 301]


@pytest.mark.parametrize("seed", [21, 22, 23, 24])
async def test_same_controls_same_decisions(server: LocalRedis, seed: int) -> None:
    """Back-offs (429, 5xx, 0, with and without Retry-After), 404/410 retirement,
    redirects, refetch_after, pauses, operator blocks, in-flight caps and crawl delays
    changed on the way, re-registration, and the minimum revisit interval: the two stores
    give the same leases (and gating), URL states and host states."""
    rng = np.random.default_rng(seed)
    controls = ControlRules(min_revisit_s=30.0, backoff_base_s=20.0, max_block_s=600.0,
                            gone_after=3, max_in_flight=2)  # fmt: skip
    options = {**OPTIONS, "controls": controls}
    records = _records(rng)
    urls = [r.url for r in records]
    hosts = sorted({r.host for r in records})
    memory = MemoryStore(**options)  # type: ignore[arg-type]
    redis_store = await RedisStore.connect(server.url, prefix=f"ctl{seed}", **options)
    stores: list[Store] = [memory, redis_store]
    try:
        for s in stores:
            await s.upsert_urls(records, T0)
        now = T0
        open_leases: list[tuple[LeaseGrant, LeaseGrant]] = []
        retired = 0
        for _ in range(80):
            now += float(rng.exponential(15.0))
            if rng.random() < 0.15:  # an operator's change
                host = hosts[int(rng.integers(len(hosts)))]
                change = [
                    HostChange(paused=bool(rng.random() < 0.5)),
                    HostChange(
                        blocked_until=[0.0, now + float(rng.random() * 200)][int(rng.integers(2))]
                    ),
                    HostChange(max_in_flight=int(rng.integers(1, 4))),
                    HostChange(crawl_delay_s=float(rng.choice([0.5, 5.0, 30.0]))),
                ][int(rng.integers(4))]
                answers = [await s.change_host(host, change, now) for s in stores]
                assert answers[0] == answers[1]
            if rng.random() < 0.05:  # re-registration brings retired URLs back
                again = [r for r in records if rng.random() < 0.3]
                for s in stores:
                    await s.upsert_urls(again, now)
            if rng.random() < 0.1:
                picked = [urls[i] for i in rng.integers(len(urls), size=2)]
                signals = [SignalEvent(u, now) for u in picked]
                got = [await s.record_signals(signals, 5.0, DECAY_S) for s in stores]
                assert got[0] == got[1]
            n, ahead = int(rng.integers(1, 10)), bool(rng.random() < 0.6)
            grants = [(await s.lease_next(now, n, 120.0, ahead)).grants for s in stores]
            assert _leased(grants[0]) == _leased(grants[1])
            open_leases += list(zip(grants[0], grants[1], strict=True))
            rng.shuffle(open_leases)  # type: ignore[arg-type]
            settle, open_leases = open_leases[:4], open_leases[4:]
            plan = []
            for _pair in settle:
                status = int(rng.choice(_STATUSES))
                retry_after = float(rng.choice([5.0, 90.0, 1e5])) if rng.random() < 0.3 else None
                refetch = now + float(rng.random() * 100) if rng.random() < 0.1 else None
                retire = (
                    RetireReason.REDIRECT
                    if status == 301
                    else RetireReason.DONE
                    if rng.random() < 0.02
                    else None
                )
                plan.append((status, retry_after, refetch, retire))
            for k, s in enumerate(stores):
                outcomes = [
                    CrawlOutcome(
                        pair[k].state.url,
                        pair[k].lease_id,
                        now,
                        200 <= st < 400,
                        (True if 200 <= st < 300 else None),
                        status=st,
                        retry_after_s=ra,
                        refetch_after=rf,
                        retire=rt,
                    )  # fmt: skip
                    for pair, (st, ra, rf, rt) in zip(settle, plan, strict=True)
                ]
                await s.settle(outcomes, 60.0, 5.0, WINDOW)
            states = [await s.get_urls(urls) for s in stores]
            assert [_control_view(x) for x in states[0]] == [_control_view(x) for x in states[1]]
            views = [[await s.get_host(h, now) for h in hosts] for s in stores]
            assert views[0] == views[1]
            retired = max(retired, sum(1 for x in states[0] if x and x.retired_at is not None))
        stats = [await s.stats(now, 0) for s in stores]
        assert (stats[0].urls, stats[0].retired, stats[0].blocked_hosts, stats[0].due_backlog) == (
            stats[1].urls, stats[1].retired, stats[1].blocked_hosts, stats[1].due_backlog,
        )  # fmt: skip
        assert retired > 0  # the stream retired some URLs
    finally:
        await redis_store.close()


async def test_stale_hosts_in_slices_match(
    server: LocalRedis, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The Redis store reads the stale hosts in slices of an HSCAN of each shard's hosts
    (here 16 hosts a call, ~600 hosts a shard: a hash table, not a listpack); the hosts
    it finds, their Λ_h and their order under a URL cap are the memory store's."""
    from service.store.redis import multipliers

    monkeypatch.setattr(multipliers, "_STALE_SLICE", 16)
    rng = np.random.default_rng(31)
    records = _polite_records(
        rng, "s", 1200, lambda: int(rng.integers(1, 3)), 1e4, 1e5,
        lambda: float(10 ** rng.uniform(-8, -4)),
    )  # fmt: skip
    fresh = {f"s{h}.example" for h in range(1200) if rng.random() < 0.5}
    redis_store = await RedisStore.connect(server.url, prefix="diffstale", shards=2)
    found = []
    try:
        for store in (MemoryStore(shards=2), redis_store):
            await _dispatched(store, records, 10, 1.0, 20)
            if store is redis_store:
                encoding = await redis_store.client.object("encoding", redis_store._keys[0].hosts)
                assert encoding == b"hashtable"
            # about half the hosts scored for their current Λ_h: no longer stale
            for host, lam in (await store.hosts_needing_rescore(0.05, 10**6)).hosts:
                if host in fresh:
                    await store.set_thresholds(host, {}, lam)
            found.append(
                (
                    await store.hosts_needing_rescore(0.05, 10**6),
                    await store.hosts_needing_rescore(0.05, 60),
                )
            )
    finally:
        await redis_store.close()
    for mem, red in zip(found[0], found[1], strict=True):  # every host, then a cap
        assert [h for h, _ in mem.hosts] == [h for h, _ in red.hosts]
        assert [x for _, x in mem.hosts] == pytest.approx([x for _, x in red.hosts], rel=1e-12)
        assert mem.urls == red.urls  # the backlog: every stale host's URLs, capped or not
    every, capped = found[0]
    assert 0 < len(capped.hosts) < len(every.hosts) < 1200  # the cap binds; some are fresh
    stale = {h for h, _ in every.hosts}
    assert capped.urls == every.urls == sum(r.host in stale for r in records)


async def test_stats_in_slices_match(server: LocalRedis, monkeypatch: pytest.MonkeyPatch) -> None:
    """The Redis store counts its hosts in slices of an HSCAN of each shard's hosts (here
    16 hosts a call, ~600 hosts a shard: a hash table); the counts and every host's
    snapshot are the memory store's, and the top hosts by λ_h are the same hosts."""
    from service.store.redis import hosts as redis_hosts_module

    monkeypatch.setattr(redis_hosts_module, "_STATS_SLICE", 16)
    rng = np.random.default_rng(41)
    records = _polite_records(
        rng, "t", 1200, lambda: int(rng.integers(1, 3)), 1.0, 1e3, lambda: 1e-6
    )
    redis_store = await RedisStore.connect(server.url, prefix="diffstats", shards=2)
    found = []
    try:
        for store in (MemoryStore(shards=2), redis_store):
            clock = await _dispatched(store, records, 10, 100.0, 40)
            for h in range(0, 1200, 7):
                await store.change_host(f"t{h}.example", HostChange(paused=True), clock.now())
            found.append(
                (await store.stats(clock.now(), 1 << 30), await store.stats(clock.now(), 5))
            )
        hashed = await redis_store.client.object("encoding", redis_store._keys[0].hosts)
    finally:
        await redis_store.close()
    assert hashed == b"hashtable"
    (mem_all, mem_top), (red_all, red_top) = found
    assert (red_all.urls, red_all.hosts, red_all.due_backlog, red_all.leases_active) == (
        mem_all.urls, mem_all.hosts, mem_all.due_backlog, mem_all.leases_active,
    )  # fmt: skip
    assert red_all.blocked_hosts == mem_all.blocked_hosts > 0
    assert 0 < red_all.due_backlog < len(records)
    assert {s.host: s for s in red_all.top_hosts} == {s.host: s for s in mem_all.top_hosts}
    assert len(red_all.top_hosts) == 1200
    lam = sorted((s.lambda_h for s in mem_all.top_hosts), reverse=True)[:5]
    assert [s.lambda_h for s in red_top.top_hosts] == [s.lambda_h for s in mem_top.top_hosts] == lam


async def test_params_written_in_slices_match(
    server: LocalRedis, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The Redis store writes new parameters in calls of a few URLs (here 3: a host's URLs
    span several calls, some calls hold several hosts); every URL ends as in the memory
    store, the hosts' ready times too."""
    from service.store.redis import store as redis_store_module

    monkeypatch.setattr(redis_store_module, "_PARAMS_SLICE", 3)
    rng = np.random.default_rng(51)
    records = [
        UrlRecord(
            url=f"https://p{h}.example/{j}",
            host=f"p{h}.example",
            weight=1.0,
            change_rate=0.01,
            recall=0.0,
            false_signal_rate=0.0,
            signal_time_equivalent_s=0.0,
            threshold_s=float(rng.uniform(10.0, 1e3)),
            scored_lambda=1.0,
            last_crawled_at=T0,
        )
        for h in range(30)
        for j in range(int(rng.integers(1, 8)))
    ]
    updates = [
        (
            f"p{h}.example",
            {
                r.url: ScoredParams(
                    float(rng.uniform(0.5, 2)), 0.02, 0.1, 1e-3, 5.0, float(rng.uniform(1, 5e3))
                )
                for r in records
                if r.host == f"p{h}.example" and rng.random() < 0.7
            },
            float(rng.uniform(0.5, 2.0)),
        )
        for h in range(30)
    ]
    redis_store = await RedisStore.connect(server.url, prefix="diffparams", shards=4)
    found = []
    try:
        for store in (MemoryStore(shards=4), redis_store):
            await store.upsert_urls(records, T0)
            await store.set_params_many(updates)
            states = await store.get_urls([r.url for r in records])
            grants = (await store.lease_next(T0 + 2_000.0, 1000, 60.0, False)).grants
            found.append(([_view(s) for s in states], _leased(grants)))
    finally:
        await redis_store.close()
    assert found[0] == found[1]
    assert sum(len(p) for _, p, _ in updates) > 3 * 10
