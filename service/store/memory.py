"""The embedded store: one process, ``sortedcontainers`` for every order.

Per host a ``SortedList`` of ``(due_at, url)`` for its unleased URLs; per shard
a ``SortedList`` of ``(readiness, host)`` and one of ``(deadline, lease_id)``.
Every method runs without awaiting, so each is atomic on the event loop, and reads
its clock when it starts: the moment of its decision.
"""

from __future__ import annotations

import heapq
import math
import secrets
import struct
from collections import OrderedDict
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import fields
from itertools import islice

from scheduler_core.due import due_time
from scheduler_core.estimate.rates import add_event
from scheduler_core.multipliers import LogMean, TrackerConfig, host_multiplier, update_log_mean
from service.clock import TimeSource, read_time
from service.store.base import (
    ClickEvent,
    CrawlOutcome,
    DispatchObservation,
    EventStatus,
    HostState,
    IdempotencyKey,
    LeaseGrant,
    LeaseInfo,
    Leases,
    LeaseStatus,
    Observations,
    ScoredParams,
    SignalEvent,
    StoreStats,
    UrlRecord,
    UrlState,
    shard_of,
)
from service.store.columns import LeaseColumns, columns_of
from service.store.memory_records import Answers, Host, Lease, Shard, Url

__all__ = ["MemoryStore"]

#: The fields a URL snapshot copies.
_STATE_FIELDS = tuple(f.name for f in fields(UrlState) if f.name != "observations")
_TAU = struct.Struct("<f")  # outcomes keep τ as a 32-bit float, as the Redis store does
_MAX_N = 65_535


class MemoryStore:
    """In-process implementation of :class:`service.store.base.Store`.

    Parameters
    ----------
    shards : int
        Number of host shards.
    default_crawl_delay_s : float
        Politeness of a host registered without one, s.
    max_revisit_s : float
        Cap on any revisit interval, s.
    lease_history : int
        Finished leases remembered (to answer duplicates).
    initial_lambda0 : float, optional
        λ₀ before the first dispatch.
    """

    def __init__(
        self,
        *,
        shards: int = 16,
        default_crawl_delay_s: float = 1.0,
        max_revisit_s: float = 30 * 86_400.0,
        lease_history: int = 200_000,
        initial_lambda0: float | None = None,
    ) -> None:
        self._shards = [Shard() for _ in range(shards)]
        self._default_delay = default_crawl_delay_s
        self._max_revisit_s = max_revisit_s
        self._history_size = lease_history
        self._urls: dict[str, Url] = {}
        self._hosts: dict[str, Host] = {}
        self._active: dict[str, Lease] = {}
        self._finished: OrderedDict[str, Lease] = OrderedDict()
        self._expired_total = 0
        self._groups: dict[str, tuple[float, ...]] = {}
        self._lambda0 = LogMean(None if initial_lambda0 is None else math.log(initial_lambda0))
        # answers of batches under an idempotency key: registrations, events
        self._registered: Answers[bool] = Answers()
        self._answers: Answers[EventStatus] = Answers()

    # -- helpers ---------------------------------------------------------------------------
    def _host(self, name: str, crawl_delay_s: float | None) -> Host:
        host = self._hosts.get(name)
        if host is None:
            delay = self._default_delay if crawl_delay_s is None else crawl_delay_s
            host = self._hosts[name] = Host(name, shard_of(name, len(self._shards)), delay)
        elif crawl_delay_s is not None:
            host.crawl_delay_s = crawl_delay_s
        return host

    def _refresh(self, host: Host) -> None:
        """Re-key the host in its shard's ready set: max(earliest due, gate)."""
        ready = self._shards[host.shard].ready
        if host.ready_key is not None:
            ready.remove(host.ready_key)
            host.ready_key = None
        if host.queue:
            host.ready_key = (max(host.queue[0][0], host.gate_at), host.name)
            ready.add(host.ready_key)

    def _rescore(self, u: Url) -> None:
        """Re-derive u.due_at and move u in its host queue (if unleased)."""
        new_due = due_time(
            last_crawl_at=u.last_crawl_at,
            registered_at=u.registered_at,
            threshold_s=u.threshold_s,
            signal_time_equivalent_s=u.signal_time_equivalent_s,
            signals_since_crawl=u.signals_since_crawl,
            last_signal_at=u.last_signal_at,
            max_revisit_s=self._max_revisit_s,
        )
        self._move(u, new_due)

    def _move(self, u: Url, new_due: float) -> None:
        host = self._hosts[u.host]
        if u.lease_id is None:
            host.queue.discard((u.due_at, u.url))
            host.queue.add((new_due, u.url))
            u.due_at = new_due
            self._refresh(host)
        else:
            u.due_at = new_due

    def _finish(self, lease_id: str, lease: Lease, status: LeaseStatus) -> None:
        lease.status = status
        self._active.pop(lease_id, None)
        self._finished[lease_id] = lease
        self._finished.move_to_end(lease_id)
        while len(self._finished) > self._history_size:
            self._finished.popitem(last=False)

    def _lambda_of(self, host: Host) -> float:
        lam0 = self._lambda0.value or 0.0
        return lam0 + host_multiplier(self._lambda0.value, host.estimate)

    @staticmethod
    def _snapshot(u: Url) -> UrlState:
        # A shallow copy field by field: dataclasses.asdict deep-copies, ~10× slower.
        obs = Observations(
            u.click_mass, u.click_ref, u.signal_mass, u.signal_ref, tuple(u.outcomes)
        )
        return UrlState(**{name: getattr(u, name) for name in _STATE_FIELDS}, observations=obs)

    # -- registration ------------------------------------------------------------------------
    async def upsert_urls(
        self, records: Sequence[UrlRecord], now: float, once: IdempotencyKey | None = None
    ) -> list[bool]:
        registered = self._registered.replay(once)
        if registered is not None:
            return registered
        created = []
        for r in records:
            host = self._host(r.host, r.crawl_delay_s)
            u = self._urls.get(r.url)
            is_new = u is None
            if u is None:
                u = self._urls[r.url] = Url(
                    r.url, r.host, r.weight, r.change_rate, r.recall, r.false_signal_rate,
                    r.signal_time_equivalent_s, r.threshold_s, r.scored_lambda, registered_at=now,
                    due_at=math.nan,
                )  # fmt: skip
                host.urls.add(r.url)
            else:
                u.weight, u.change_rate = r.weight, r.change_rate
                u.recall, u.false_signal_rate = r.recall, r.false_signal_rate
                u.signal_time_equivalent_s = r.signal_time_equivalent_s
                u.threshold_s, u.scored_lambda = r.threshold_s, r.scored_lambda
            u.prior = r.prior
            if r.last_crawled_at is not None and (
                u.last_crawl_at is None or r.last_crawled_at > u.last_crawl_at
            ):
                u.last_crawl_at, u.signals_since_crawl = r.last_crawled_at, 0
            self._rescore(u)
            created.append(is_new)
        self._registered.remember(once, created)
        return created

    async def remove_urls(self, urls: Sequence[str]) -> int:
        removed = 0
        for url in urls:
            u = self._urls.pop(url, None)
            if u is None:
                continue
            removed += 1
            host = self._hosts[u.host]
            host.urls.discard(url)
            if u.lease_id is not None:
                lease = self._active[u.lease_id]
                self._shards[lease.shard].leases.discard((lease.deadline, u.lease_id))
                self._finish(u.lease_id, lease, LeaseStatus.EXPIRED)
            else:
                host.queue.discard((u.due_at, url))
            self._refresh(host)
        return removed

    # -- reads ---------------------------------------------------------------------------------
    async def get_urls(self, urls: Sequence[str]) -> list[UrlState | None]:
        return [None if (u := self._urls.get(url)) is None else self._snapshot(u) for url in urls]

    async def get_host(self, host: str, now: float) -> HostState | None:
        h = self._hosts.get(host)
        return None if h is None else self._host_state(h, now)

    def _host_state(self, h: Host, now: float) -> HostState:
        due = h.queue.bisect_right((now, "\U0010ffff"))
        return HostState(
            host=h.name, crawl_delay_s=h.crawl_delay_s, gate_at=h.gate_at, urls=len(h.urls),
            queued=len(h.queue), due=due, next_due_at=h.queue[0][0] if h.queue else None,
            lambda_h=host_multiplier(self._lambda0.value, h.estimate),
            threshold=self._lambda_of(h), scored_lambda=h.scored_lambda,
        )  # fmt: skip

    async def host_urls(self, host: str) -> list[UrlState]:
        h = self._hosts.get(host)
        return [] if h is None else [self._snapshot(self._urls[url]) for url in sorted(h.urls)]

    async def host_thresholds(self, hosts: Sequence[str]) -> dict[str, float]:
        lam0 = self._lambda0.value or 0.0
        return {
            name: self._lambda_of(h) if (h := self._hosts.get(name)) else lam0 for name in hosts
        }

    # -- rescoring -------------------------------------------------------------------------------
    async def set_params(
        self, host: str, params: Mapping[str, ScoredParams], scored_lambda: float
    ) -> None:
        for url, p in params.items():
            u = self._urls.get(url)
            if u is None or u.host != host:
                continue
            u.weight, u.change_rate = p.weight, p.change_rate
            u.recall, u.false_signal_rate = p.recall, p.false_signal_rate
            u.signal_time_equivalent_s = p.signal_time_equivalent_s
            u.threshold_s, u.scored_lambda = p.threshold_s, scored_lambda
            self._rescore(u)

    async def set_params_many(
        self, updates: Sequence[tuple[str, Mapping[str, ScoredParams], float]]
    ) -> None:
        for host, params, scored_lambda in updates:
            await self.set_params(host, params, scored_lambda)

    async def set_thresholds(
        self, host: str, thresholds_s: Mapping[str, float], scored_lambda: float
    ) -> None:
        h = self._hosts.get(host)
        if h is None:
            return
        for url, threshold in thresholds_s.items():
            u = self._urls.get(url)
            if u is not None and u.host == host:
                u.threshold_s, u.scored_lambda = threshold, scored_lambda
                self._rescore(u)
        h.scored_lambda = scored_lambda

    async def hosts_needing_rescore(
        self, tolerance: float, max_urls: int
    ) -> list[tuple[str, float]]:
        limit = math.log1p(tolerance)
        stale: list[tuple[float, str, float]] = []
        for h in self._hosts.values():
            if not h.urls:
                continue
            target = self._lambda_of(h)
            scored = h.scored_lambda
            if scored is None or (scored > 0) != (target > 0):
                drift = math.inf
            elif target == 0:
                continue
            else:
                drift = abs(math.log(target / scored))
            if drift > limit:
                stale.append((drift, h.name, target))
        stale.sort(reverse=True)
        chosen: list[tuple[str, float]] = []
        total = 0
        for _, name, target in stale:
            if chosen and total + len(self._hosts[name].urls) > max_urls:
                break
            chosen.append((name, target))
            total += len(self._hosts[name].urls)
        return chosen

    # -- events ------------------------------------------------------------------------------------
    async def record_signals(
        self,
        events: Sequence[SignalEvent],
        discard_within_s: float,
        decay_s: float,
        once: IdempotencyKey | None = None,
    ) -> list[EventStatus]:
        seen = self._answers.replay(once)
        if seen is not None:
            return seen
        out = []
        for ev in events:
            u = self._urls.get(ev.url)
            if u is None:
                out.append(EventStatus.UNKNOWN_URL)
                continue
            u.signals += 1
            u.signal_mass, u.signal_ref = add_event(u.signal_mass, u.signal_ref, ev.time, decay_s)
            if u.last_crawl_at is not None and ev.time <= u.last_crawl_at + discard_within_s:
                out.append(EventStatus.STALE)
                continue
            if u.last_crawl_at is not None:
                u.signals_since_crawl += 1
            u.last_signal_at = max(u.last_signal_at or -math.inf, ev.time)
            self._rescore(u)
            out.append(EventStatus.ACCEPTED)
        self._answers.remember(once, out)
        return out

    async def record_clicks(
        self, events: Sequence[ClickEvent], decay_s: float, once: IdempotencyKey | None = None
    ) -> list[EventStatus]:
        seen = self._answers.replay(once)
        if seen is not None:
            return seen
        out = []
        for ev in events:
            u = self._urls.get(ev.url)
            if u is None:
                out.append(EventStatus.UNKNOWN_URL)
                continue
            u.clicks += 1
            u.click_mass, u.click_ref = add_event(u.click_mass, u.click_ref, ev.time, decay_s)
            u.last_click_at = ev.time if u.last_click_at is None else max(u.last_click_at, ev.time)
            out.append(EventStatus.ACCEPTED)
        self._answers.remember(once, out)
        return out

    # -- leases ----------------------------------------------------------------------------------
    def _reclaim(self, now: float) -> None:
        for shard in self._shards:
            while shard.leases and shard.leases[0][0] <= now:
                _, lease_id = shard.leases.pop(0)
                lease = self._active[lease_id]
                self._finish(lease_id, lease, LeaseStatus.EXPIRED)
                self._expired_total += 1
                u = self._urls[lease.url]
                u.lease_id = u.lease_deadline = None
                host = self._hosts[u.host]
                host.queue.add((u.due_at, u.url))
                self._refresh(host)

    def _lease_one(self, host: Host, now: float, ttl_s: float) -> LeaseGrant:
        due_at, url = host.queue.pop(0)
        gated = due_at <= now and host.gate_at > due_at
        host.gate_at = now + host.crawl_delay_s
        self._refresh(host)
        lease_id = secrets.token_hex(16)
        deadline = now + ttl_s
        self._active[lease_id] = Lease(url, host.shard, deadline, now)
        self._shards[host.shard].leases.add((deadline, lease_id))
        u = self._urls[url]
        u.lease_id, u.lease_deadline = lease_id, deadline
        return LeaseGrant(lease_id, deadline, self._snapshot(u), gated, self._lambda_of(host))

    def _ready_hosts(self, now: float) -> Iterator[Host]:
        """Hosts whose gate has opened, by readiness (merged over shards)."""
        merged = heapq.merge(*(iter(s.ready) for s in self._shards))
        for _, name in merged:
            host = self._hosts[name]
            if host.gate_at <= now:
                yield host

    async def lease_next(
        self, now: TimeSource, n: int, lease_ttl_s: float, dispatch_ahead: bool
    ) -> Leases:
        t = read_time(now)  # once, when the store decides
        return Leases(t, self._lease(t, n, lease_ttl_s, dispatch_ahead))

    async def lease_columns(
        self, now: TimeSource, n: int, lease_ttl_s: float, dispatch_ahead: bool
    ) -> LeaseColumns:
        t = read_time(now)
        return columns_of(t, self._lease(t, n, lease_ttl_s, dispatch_ahead))

    def _lease(
        self, now: float, n: int, lease_ttl_s: float, dispatch_ahead: bool
    ) -> list[LeaseGrant]:
        self._reclaim(now)
        grants: list[LeaseGrant] = []
        while len(grants) < n:
            heads = [s.ready[0] for s in self._shards if s.ready]
            if not heads:
                break
            readiness, name = min(heads)
            if readiness > now:
                break
            grants.append(self._lease_one(self._hosts[name], now, lease_ttl_s))
        while dispatch_ahead and len(grants) < n:
            # below threshold: not-yet-due URLs of open hosts, earliest due first
            hosts = list(islice(self._ready_hosts(now), n - len(grants)))
            if not hosts:
                break
            grants.extend(self._lease_one(h, now, lease_ttl_s) for h in hosts)
        return grants

    async def lease_status(self, lease_ids: Sequence[str]) -> list[LeaseInfo]:
        out = []
        for lease_id in lease_ids:
            lease = self._active.get(lease_id) or self._finished.get(lease_id)
            if lease is None:
                out.append(LeaseInfo(LeaseStatus.UNKNOWN, None, None))
            else:
                out.append(LeaseInfo(lease.status, lease.url, lease.issued_at))
        return out

    async def settle(
        self,
        outcomes: Sequence[CrawlOutcome],
        retry_delay_s: float,
        discard_within_s: float,
        outcome_window: int,
        once: IdempotencyKey | None = None,
    ) -> list[EventStatus]:
        seen = self._answers.replay(once)
        if seen is not None:
            return seen
        out = [
            self._settle_one(o, retry_delay_s, discard_within_s, outcome_window) for o in outcomes
        ]
        self._answers.remember(once, out)
        return out

    def _settle_one(
        self, o: CrawlOutcome, retry_delay_s: float, discard_s: float, window: int
    ) -> EventStatus:
        lease = self._active.get(o.lease_id) or self._finished.get(o.lease_id)
        if lease is None:
            return EventStatus.UNKNOWN_LEASE
        if lease.url != o.url:
            return EventStatus.STALE
        if lease.status is LeaseStatus.SETTLED:
            return EventStatus.DUPLICATE
        u = self._urls.get(o.url)
        if u is None or (lease.status is LeaseStatus.EXPIRED and u.lease_id is not None):
            return EventStatus.STALE  # URL dropped, or leased again since this lease expired
        host = self._hosts[u.host]
        if lease.status is LeaseStatus.ACTIVE:
            self._shards[lease.shard].leases.discard((lease.deadline, o.lease_id))
        else:
            host.queue.discard((u.due_at, u.url))  # expired lease: the URL was queued again
        self._finish(o.lease_id, lease, LeaseStatus.SETTLED)
        u.lease_id = u.lease_deadline = None
        if o.ok:
            u.crawls += 1
            u.changes += bool(o.changed)
            if o.changed is not None and u.last_crawl_at is not None:
                tau = o.fetched_at - u.last_crawl_at
                if tau > 0:
                    (tau32,) = _TAU.unpack(_TAU.pack(tau))
                    u.outcomes.append((tau32, min(u.signals_since_crawl, _MAX_N), o.changed))
                    del u.outcomes[:-window]
            if u.last_crawl_at is None or o.fetched_at > u.last_crawl_at:
                u.last_crawl_at = o.fetched_at
                late = u.last_signal_at is not None and u.last_signal_at > o.fetched_at + discard_s
                u.signals_since_crawl = 1 if late else 0
            host.queue.add((u.due_at, u.url))
            self._rescore(u)
        else:
            u.fetch_errors += 1
            host.queue.add((u.due_at, u.url))
            self._move(u, max(u.due_at, o.fetched_at + retry_delay_s))
        return EventStatus.ACCEPTED

    # -- multipliers -----------------------------------------------------------------------------
    async def observe_dispatch(
        self, observations: Sequence[DispatchObservation], config: TrackerConfig
    ) -> None:
        free = [o.log_value for o in observations if not o.gated]
        self._lambda0 = update_log_mean(self._lambda0, free, config)
        log_lam0 = self._lambda0.log_mean
        for o in observations:
            host = self._hosts.get(o.host)
            if host is None:
                continue
            x = o.log_value if o.gated else log_lam0
            if x is not None:
                host.estimate = update_log_mean(host.estimate, (x,), config)

    # -- estimator groups --------------------------------------------------------------------------
    async def get_groups(self, keys: Sequence[str]) -> list[tuple[float, ...] | None]:
        return [self._groups.get(k) for k in keys]

    async def put_groups(self, groups: Mapping[str, Sequence[float]]) -> None:
        for key, values in groups.items():
            self._groups[key] = tuple(float(v) for v in values)

    # -- operations --------------------------------------------------------------------------------
    async def stats(self, now: TimeSource, top_hosts: int) -> StoreStats:
        t = read_time(now)
        self._reclaim(t)
        states = [self._host_state(h, t) for h in self._hosts.values()]
        top = sorted(states, key=lambda s: s.lambda_h, reverse=True)[:top_hosts]
        return StoreStats(
            urls=len(self._urls), hosts=len(self._hosts), due_backlog=sum(s.due for s in states),
            leases_active=len(self._active), leases_expired_total=self._expired_total,
            lambda0=self._lambda0.value, lambda0_observations=self._lambda0.count,
            top_hosts=tuple(top),
        )  # fmt: skip

    async def clock_epoch(self, proposal: float) -> float:
        return proposal  # one process: its own epoch

    async def try_lead(self, role: str, owner: str, ttl_s: float) -> bool:
        return True  # one process: always the leader

    async def ping(self) -> bool:
        return True

    async def close(self) -> None:
        return None
