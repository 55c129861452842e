"""The embedded store: one process, ``sortedcontainers`` for every order.

Per host a ``SortedList`` of ``(due_at, url)`` for its unleased URLs; per shard
a ``SortedList`` of ``(readiness, host)`` and one of ``(deadline, lease_id)``.
Every method runs without awaiting, so each is atomic on the event loop, and reads
its clock when it starts: the moment of its decision.
"""

from __future__ import annotations

import math
import time
from collections import Counter
from collections.abc import Iterable, Mapping, Sequence

from scheduler_core.estimate.rates import add_event
from scheduler_core.multipliers import LogMean
from scheduler_core.params import FloatArray
from service.clock import TimeSource, read_time
from service.store.base import (
    ClickEvent,
    EventBatch,
    EventKind,
    EventStatus,
    Folded,
    HostState,
    IdempotencyKey,
    ScoredParams,
    SignalEvent,
    StaleHosts,
    StoreStats,
    UrlRecord,
    UrlState,
)
from service.store.columns import RescoreColumns, rescore_table
from service.store.estimate_columns import EstimateColumns, estimate_table
from service.store.host_pages import is_blocked
from service.store.memory_hosts import MemoryHosts
from service.store.memory_records import Host, Url

__all__ = ["MemoryStore"]


class MemoryStore(MemoryHosts):
    """In-process implementation of :class:`service.store.base.Store` (its state and
    helpers: :class:`~service.store.memory_base.MemoryBase`; leases:
    :class:`~service.store.memory_dispatch.MemoryDispatch`; host control:
    :class:`~service.store.memory_hosts.MemoryHosts`; the append log of signals
    and clicks: :class:`~service.store.memory_events.EventLog`)."""

    # -- registration ------------------------------------------------------------------------
    async def upsert_urls(
        self,
        records: Sequence[UrlRecord],
        now: float,
        once: IdempotencyKey | None = None,
        *,
        keep_known: bool = False,
    ) -> list[bool]:
        registered = self._registered.replay(once)
        if registered is not None:
            return registered
        created = []
        touched: dict[str, Host] = {}
        for r in records:
            host = self._host(r.host, r.crawl_delay_s)
            u = self._urls.get(r.url)
            is_new = u is None
            if keep_known and u is not None:
                created.append(False)
                continue
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
            self._unretire(u)  # registering again brings a retired URL back
            if r.last_crawled_at is not None and (
                u.last_crawl_at is None or r.last_crawled_at > u.last_crawl_at
            ):
                u.last_crawl_at, u.signals_since_crawl = r.last_crawled_at, 0
            self._rescore(u, refresh=False)
            touched[host.name] = host
            created.append(is_new)
        for host in touched.values():
            self._refresh(host)  # once per host, for all its URLs
        self._registered.remember(once, created)
        return created

    async def swap_signatures(self, signatures: Sequence[tuple[str, str]]) -> list[str | None]:
        out = []
        for url, signature in signatures:
            out.append(self._signatures.get(url))
            self._signatures[url] = signature
        return out

    # -- reads ---------------------------------------------------------------------------------
    async def get_urls(self, urls: Sequence[str]) -> list[UrlState | None]:
        return [None if (u := self._urls.get(url)) is None else self._snapshot(u) for url in urls]

    async def estimate_columns(self, urls: Sequence[str]) -> EstimateColumns:
        found = [u for url in urls if (u := self._urls.get(url)) is not None]
        return estimate_table(found, found)  # a record holds its observations itself

    async def get_host(self, host: str, now: float) -> HostState | None:
        h = self._hosts.get(host)
        return None if h is None else self._host_state(h, now)

    async def host_urls(self, host: str) -> list[UrlState]:
        h = self._hosts.get(host)
        return [] if h is None else [self._snapshot(self._urls[url]) for url in sorted(h.urls)]

    async def lambda0_tracker(self) -> LogMean:
        return self._lambda0

    async def host_thresholds(self, hosts: Sequence[str]) -> dict[str, float]:
        lam0 = self._lambda0.value or 0.0
        return {
            name: self._lambda_of(h) if (h := self._hosts.get(name)) else lam0 for name in hosts
        }

    # -- rescoring -------------------------------------------------------------------------------
    async def set_params(
        self, host: str, params: Mapping[str, ScoredParams], scored_lambda: float
    ) -> None:
        await self.set_params_many([(host, params, scored_lambda)])

    async def set_params_many(
        self, updates: Sequence[tuple[str, Mapping[str, ScoredParams], float]]
    ) -> None:
        # the records first, then every due time in one vectorised pass, then the queues
        get = self._urls.get
        batches: list[tuple[Host, list[Url]]] = []
        for host, params, scored_lambda in updates:
            us = []
            for url, p in params.items():
                u = get(url)
                if u is None or u.host != host:
                    continue
                u.weight, u.change_rate = p.weight, p.change_rate
                u.recall, u.false_signal_rate = p.recall, p.false_signal_rate
                u.signal_time_equivalent_s = p.signal_time_equivalent_s
                u.threshold_s, u.scored_lambda = p.threshold_s, scored_lambda
                us.append(u)
            if us:
                batches.append((self._hosts[host], us))
        self._requeue_batches(batches)

    async def set_thresholds(
        self, host: str, thresholds_s: Mapping[str, float], scored_lambda: float
    ) -> None:
        self._set_thresholds(host, thresholds_s.keys(), thresholds_s.values(), scored_lambda)

    def _set_thresholds(
        self, host: str, urls: Iterable[str], thresholds_s: Iterable[float], scored_lambda: float
    ) -> None:
        h = self._hosts.get(host)
        if h is None:
            return
        get = self._urls.get
        for url, threshold in zip(urls, thresholds_s, strict=True):
            u = get(url)
            if u is not None and u.host == host:
                u.threshold_s, u.scored_lambda = threshold, scored_lambda
                self._rescore(u, refresh=False)
        h.scored_lambda = scored_lambda
        self._refresh(h)  # once, for all its URLs

    async def rescore_columns(self, stale: Sequence[tuple[str, float]]) -> RescoreColumns:
        urls = self._urls
        per_host = [
            [] if (h := self._hosts.get(name)) is None else [urls[u] for u in sorted(h.urls)]
            for name, _ in stale
        ]
        return rescore_table(stale, per_host)

    async def set_rescored(self, cols: RescoreColumns, thresholds_s: FloatArray) -> None:
        # the records first, then every due time in one vectorised pass, then the queues
        get, thr = self._urls.get, thresholds_s.tolist()
        batches: list[tuple[Host, list[Url]]] = []
        k = 0
        for name, lam, n in zip(
            cols.hosts, cols.lambdas.tolist(), cols.counts.tolist(), strict=True
        ):
            h = self._hosts.get(name)
            if h is not None:
                us = []
                for url, threshold in zip(cols.urls[k : k + n], thr[k : k + n], strict=True):
                    u = get(url)
                    if u is not None and u.host == name:
                        u.threshold_s, u.scored_lambda = threshold, lam
                        us.append(u)
                h.scored_lambda = lam
                batches.append((h, us))
            k += n
        self._requeue_batches(batches)

    async def hosts_needing_rescore(self, tolerance: float, max_urls: int) -> StaleHosts:
        limit = math.log1p(tolerance)
        stale: list[tuple[float, str, float]] = []
        urls = 0
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
                urls += len(h.urls)
        stale.sort(reverse=True)
        chosen: list[tuple[str, float]] = []
        total = 0
        for _, name, target in stale:
            if chosen and total + len(self._hosts[name].urls) > max_urls:
                break
            chosen.append((name, target))
            total += len(self._hosts[name].urls)
        return StaleHosts(chosen, urls)

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
        touched: dict[str, Host] = {}
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
            self._unretire(u)  # a signal brings a retired URL back
            self._rescore(u, refresh=False)
            touched[u.host] = self._hosts[u.host]
            out.append(EventStatus.ACCEPTED)
        for host in touched.values():
            self._refresh(host)  # once per host, for all its signals
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

    async def append_events(self, batch: EventBatch, once: IdempotencyKey | None = None) -> None:
        if self._answers.replay(once) is not None:
            return
        self._log.append(batch)
        self._answers.remember(once, [EventStatus.ACCEPTED])

    async def fold_events(
        self,
        consumer: str,
        max_parts: int,
        discard_within_s: float,
        decay_s: float,
        claim_idle_s: float,
    ) -> Folded:
        counts: Counter[tuple[EventKind, EventStatus]] = Counter()
        touched: dict[str, None] = {}
        outcomes: dict[str, None] = {}
        parts, oldest_at = self._log.take(max_parts)
        for batch in parts:
            times = batch.times.tolist()
            if batch.kind is EventKind.RESULT:  # settled already: only to re-estimate
                outcomes.update(dict.fromkeys(batch.urls))
                continue
            if batch.kind is EventKind.SIGNAL:
                signals = [SignalEvent(u, t) for u, t in zip(batch.urls, times, strict=True)]
                statuses = await self.record_signals(signals, discard_within_s, decay_s)
            else:
                clicks = [ClickEvent(u, t) for u, t in zip(batch.urls, times, strict=True)]
                statuses = await self.record_clicks(clicks, decay_s)
            for url, st in zip(batch.urls, statuses, strict=True):
                counts[batch.kind, st] += 1
                if st is not EventStatus.UNKNOWN_URL:
                    touched[url] = None
                if st is EventStatus.STALE:
                    self._urls[url].stale_signals += 1
        return Folded(len(parts), dict(counts), list(touched), list(outcomes), oldest_at)

    async def stale_signals(self, urls: Sequence[str]) -> list[int]:
        return [0 if (u := self._urls.get(url)) is None else u.stale_signals for url in urls]

    async def fold_lag(self) -> float:
        return self._log.lag_s()

    async def report_backlog(self, owner: str, oldest_at: float | None, ttl_s: float) -> None:
        self._backlogs[owner] = (oldest_at, time.monotonic() + ttl_s)

    async def backlog_lag(self) -> float:
        now = time.monotonic()
        live = [at for at, until in self._backlogs.values() if at is not None and until > now]
        return max(0.0, now - min(live)) if live else 0.0

    async def heartbeat(self, owner: str, ttl_s: float) -> None:
        self._worker_until = time.monotonic() + ttl_s

    async def worker_alive(self) -> bool:
        return time.monotonic() < self._worker_until

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
        blocked = [is_blocked(s, t) for s in states]
        retired = sum(s.retired for s in states)
        return StoreStats(
            urls=len(self._urls) - retired, hosts=len(self._hosts),
            due_backlog=sum(s.due for s, b in zip(states, blocked, strict=True) if not b),
            leases_active=len(self._active), leases_expired_total=self._expired_total,
            lambda0=self._lambda0.value, lambda0_observations=self._lambda0.count,
            top_hosts=tuple(top), retired=retired, blocked_hosts=sum(blocked),
        )  # fmt: skip

    def lambda0_estimate(self) -> float | None:
        """The λ₀ tracked online (what :meth:`stats` gives as ``lambda0``), read without
        building every host's snapshot (the simulator samples it each step)."""
        return self._lambda0.value

    async def clock_epoch(self, proposal: float) -> float:
        return proposal  # one process: its own epoch

    async def try_lead(self, role: str, owner: str, ttl_s: float) -> bool:
        return True  # one process: always the leader

    async def ping(self) -> bool:
        return True

    async def close(self) -> None:
        return None
