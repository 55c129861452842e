"""The embedded store's dispatch: leases (as objects or as columns), their status,
settling them, and the dispatch observations behind λ₀ and λ_h."""

from __future__ import annotations

import heapq
import math
import secrets
import struct
from collections.abc import Iterator, Sequence
from itertools import islice

import numpy as np

from scheduler_core.multipliers import (
    TrackerConfig,
    dispatch_gated,
    host_observation,
    update_log_mean,
)
from service.clock import TimeSource, read_time
from service.store.base import (
    BlockReason,
    CrawlOutcome,
    DispatchObservation,
    EventBatch,
    EventKind,
    EventStatus,
    IdempotencyKey,
    LeaseGrant,
    LeaseInfo,
    Leases,
    LeaseStatus,
    RetireReason,
    back_off_s,
    is_back_off,
    ready_score,
    score_now,
)
from service.store.columns import URL_COLUMNS, LeaseColumns
from service.store.memory_base import MemoryBase
from service.store.memory_records import Host, Lease, Url

__all__ = ["MemoryDispatch"]

_TAU = struct.Struct("<f")  # outcomes keep τ as a 32-bit float, as the Redis store does
_MAX_N = 65_535
#: A URL leased: its record, its host, whether it was gated.
_Row = tuple[Url, Host, bool]


class MemoryDispatch(MemoryBase):
    """Leases, their settlement and the dispatch observations of the embedded store."""

    # -- leases ----------------------------------------------------------------------------------
    def _reclaim(self, now: float) -> None:
        if score_now(now) < self._reclaim_at:
            return  # no deadline has passed: no shard's deadline set to look at
        for shard in self._shards:
            # expired as the Redis store's deadline sets find them (base.ready_score)
            while shard.leases and ready_score(shard.leases[0][0]) <= score_now(now):
                _, nonce = shard.leases.pop(0)
                for lease_id in shard.lease_groups.pop(nonce):
                    lease = self._active.get(lease_id)
                    if lease is None:
                        continue  # settled, or ended with its URL's removal
                    self._finish(lease_id, lease, LeaseStatus.EXPIRED)
                    self._expired_total += 1
                    u = self._urls[lease.url]
                    u.lease_id = u.lease_deadline = None
                    host = self._hosts[u.host]
                    host.in_flight -= 1
                    host.queue.add((u.due_at, u.url))
                    self._refresh(host)
        heads = (ready_score(s.leases[0][0]) for s in self._shards if s.leases)
        self._reclaim_at = min(heads, default=math.inf)

    def _lease_one(self, host: Host, now: float, ttl_s: float) -> _Row | None:
        """Lease the head of a host's queue; None (and the head moved to its floor) when
        the head may not be leased yet (minimum revisit, refetch_after)."""
        due_at, url = host.queue[0]
        u = self._urls[url]
        floor = self._floor(u)
        if floor > now:
            self._move(u, max(due_at, floor))
            return None
        host.queue.pop(0)
        opened = max(host.gate_at, host.blocked_until or -math.inf)
        # held by politeness or a block (the gate opened late and it went out at once)
        gated = dispatch_gated(due_at, opened, now, host.crawl_delay_s)
        host.gate_at = now + host.crawl_delay_s
        host.in_flight += 1
        self._refresh(host)
        self._lease_seq += 1
        lease_id = f"{self._lease_nonce}{self._lease_seq:x}"  # this call's nonce, a counter
        deadline = now + ttl_s
        self._active[lease_id] = Lease(url, now)
        shard = self._shards[host.shard]
        group = shard.lease_groups.get(self._lease_nonce)
        if group is None:  # this call's first lease from the shard
            group = shard.lease_groups[self._lease_nonce] = []
            shard.leases.add((deadline, self._lease_nonce))
            self._reclaim_at = min(self._reclaim_at, ready_score(deadline))
        group.append(lease_id)
        u.lease_id, u.lease_deadline = lease_id, deadline
        return u, host, gated

    def _ready_hosts(self, now: float) -> Iterator[Host]:
        """Hosts whose gate has opened and that are not blocked, by readiness (merged
        over shards; paused and full hosts are in no ready set)."""
        merged = heapq.merge(*(iter(s.ready) for s in self._shards))
        for _, name in merged:
            host = self._hosts[name]
            if host.gate_at <= now and (host.blocked_until or -math.inf) <= now:
                yield host

    async def lease_next(
        self, now: TimeSource, n: int, lease_ttl_s: float, dispatch_ahead: bool
    ) -> Leases:
        t = read_time(now)  # once, when the store decides
        rows = self._lease(t, n, lease_ttl_s, dispatch_ahead)
        return Leases(
            t,
            [
                LeaseGrant(
                    u.lease_id or "",
                    u.lease_deadline or t,
                    self._snapshot(u),
                    gated,
                    self._lambda_of(host),
                )  # fmt: skip
                for u, host, gated in rows
            ],
        )

    async def lease_columns(
        self, now: TimeSource, n: int, lease_ttl_s: float, dispatch_ahead: bool
    ) -> LeaseColumns:
        """The leases as columns, built straight from the URL records (no snapshot)."""
        t = read_time(now)
        return self._columns(t, self._lease(t, n, lease_ttl_s, dispatch_ahead), lease_ttl_s)

    async def lease_host(
        self, now: TimeSource, host: str, lease_ttl_s: float, dispatch_ahead: bool
    ) -> LeaseColumns:
        t = read_time(now)
        self._reclaim(t)
        self._lease_nonce = secrets.token_hex(8)
        h = self._hosts.get(host)
        rows: list[_Row] = []
        if h is not None and h.ready_key is not None:  # paused and full hosts have none
            readiness = h.ready_key[0]
            opened = h.gate_at <= t and (h.blocked_until or -math.inf) <= t
            if readiness <= score_now(t) or (dispatch_ahead and opened):
                row = self._lease_one(h, t, lease_ttl_s)
                rows = [] if row is None else [row]
        return self._columns(t, rows, lease_ttl_s)

    def _columns(self, t: float, rows: list[_Row], lease_ttl_s: float) -> LeaseColumns:
        nan = math.nan
        state = np.array(
            [
                (
                    u.weight,
                    u.change_rate,
                    u.recall,
                    u.false_signal_rate,
                    u.signal_time_equivalent_s,
                    u.threshold_s,
                    u.scored_lambda,
                    u.registered_at,
                    nan if u.last_crawl_at is None else u.last_crawl_at,
                    nan if u.last_signal_at is None else u.last_signal_at,
                    nan if u.last_click_at is None else u.last_click_at,
                    u.due_at,
                    u.signals_since_crawl,
                    u.clicks,
                    u.signals,
                    u.crawls,
                    u.changes,
                    u.fetch_errors,
                )  # fmt: skip
                for u, _, _ in rows
            ],
            dtype=URL_COLUMNS,
        )
        deadline = t + lease_ttl_s
        lam: dict[str, float] = {}
        for _, host, _ in rows:
            if host.name not in lam:
                lam[host.name] = self._lambda_of(host)
        return LeaseColumns(
            now=t,
            lease_ids=[u.lease_id or "" for u, _, _ in rows],
            urls=[u.url for u, _, _ in rows],
            hosts=[host.name for _, host, _ in rows],
            deadline=np.full(len(rows), deadline),
            gated=np.array([gated for _, _, gated in rows], dtype=np.bool_),
            threshold=np.array([lam[host.name] for _, host, _ in rows], dtype=np.float64),
            state=state,
            host_observed=np.zeros(len(rows), dtype=np.bool_),
        )

    def _lease(self, now: float, n: int, lease_ttl_s: float, dispatch_ahead: bool) -> list[_Row]:
        """Up to ``n`` hosts give one URL each: due ones first, then (``dispatch_ahead``)
        open ones.  A host whose head is held back (minimum revisit, refetch_after) counts
        among the ``n`` and gives nothing in this call, as in the Redis store's lease.lua."""
        self._reclaim(now)
        grants: list[_Row] = []
        held: list[Host] = []
        tried = 0
        self._lease_nonce = secrets.token_hex(8)
        # the shards' heads in a heap: only the shard leased from changes its head
        shards, hosts, reached = self._shards, self._hosts, score_now(now)
        heads = [(*s.ready[0], k) for k, s in enumerate(shards) if s.ready]
        heapq.heapify(heads)
        while tried < n and heads:
            readiness, name, k = heads[0]
            if readiness > reached:
                break
            tried += 1
            self._try(hosts[name], now, lease_ttl_s, grants, held)
            ready = shards[k].ready
            if ready:
                heapq.heapreplace(heads, (*ready[0], k))
            else:
                heapq.heappop(heads)
        if dispatch_ahead and tried < n:
            # below threshold: not-yet-due URLs of open hosts, earliest due first
            for h in list(islice(self._ready_hosts(now), n - tried)):
                self._try(h, now, lease_ttl_s, grants, held)
        for h in held:
            self._refresh(h)  # back in its ready set, for the next call
        return grants

    def _try(
        self, host: Host, now: float, ttl_s: float, grants: list[_Row], held: list[Host]
    ) -> None:
        """Lease the head of ``host`` into ``grants``, or hold the host out of its ready
        set for the rest of this call (into ``held``) when its head is held back."""
        row = self._lease_one(host, now, ttl_s)
        if row is not None:
            grants.append(row)
            return
        if host.ready_key is not None:
            self._shards[host.shard].ready.remove(host.ready_key)
            host.ready_key = None
        held.append(host)

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
        touched: dict[str, Host] = {}
        out = [
            self._settle_one(o, retry_delay_s, discard_within_s, outcome_window, touched)
            for o in outcomes
        ]
        for host in touched.values():
            self._refresh(host)  # once per host, for all its results
        settled = [o for o, st in zip(outcomes, out, strict=True) if st is EventStatus.ACCEPTED]
        if settled:  # for the fold to re-estimate, as the Redis store's settle.lua appends
            times = np.array([o.fetched_at for o in settled], dtype=np.float64)
            self._log.append(EventBatch(EventKind.RESULT, [o.url for o in settled], times))
        self._answers.remember(once, out)
        return out

    def _settle_one(
        self,
        o: CrawlOutcome,
        retry_delay_s: float,
        discard_s: float,
        window: int,
        touched: dict[str, Host],
    ) -> EventStatus:
        """Settle one result; a host whose ready-set key may have moved goes into
        ``touched`` (the caller re-keys each once)."""
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
            host.in_flight -= 1
        else:
            host.queue.discard((u.due_at, u.url))  # expired lease: the URL was queued again
        self._finish(o.lease_id, lease, LeaseStatus.SETTLED)
        u.lease_id = u.lease_deadline = None
        self._host_answer(host, o)
        if o.refetch_after is not None:
            u.refetch_after = o.refetch_after
        if o.status in (404, 410):
            u.gone_count += 2 if o.status == 410 else 1
        else:
            u.gone_count = 0
        touched[host.name] = host
        if u.retired_at is not None:  # retired while leased (the lease was given before)
            return EventStatus.ACCEPTED
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
            u.due_at = self._due_of(u)  # back in its queue once, at its new due time
            host.queue.add((u.due_at, u.url))
        else:
            u.fetch_errors += 1
            u.due_at = max(u.due_at, o.fetched_at + retry_delay_s, self._floor(u))
            host.queue.add((u.due_at, u.url))
        if o.retire is not None:
            self._retire(u, o.retire, o.fetched_at)
        elif u.gone_count >= self._controls.gone_after:
            self._retire(u, RetireReason.GONE, o.fetched_at)
        return EventStatus.ACCEPTED

    def _host_answer(self, host: Host, o: CrawlOutcome) -> None:
        """A back-off status blocks the host (:func:`~service.store.base.back_off_s`);
        any other answer forgets its failures."""
        if not is_back_off(o.status):
            host.failures = 0
            return
        host.failures += 1
        until = o.fetched_at + back_off_s(host.name, host.failures, o.retry_after_s, self._controls)
        if host.blocked_until is None or until > host.blocked_until:
            host.blocked_until, host.block_reason = until, BlockReason.BACK_OFF

    # -- multipliers -----------------------------------------------------------------------------
    async def observe_dispatch(
        self, observations: Sequence[DispatchObservation], config: TrackerConfig
    ) -> None:
        free = [o.log_value for o in observations if not o.gated]
        self._lambda0 = update_log_mean(self._lambda0, free, config)
        log_lam0 = self._lambda0.log_mean
        if log_lam0 is None:
            return
        hosts = self._hosts
        for o in observations:  # each host's in dispatch order
            if o.host_observed:
                continue
            x = host_observation(o.log_value, o.gated, log_lam0)
            host = hosts.get(o.host)
            if x is not None and host is not None:
                host.estimate = update_log_mean(host.estimate, (x,), config)
