"""The embedded store's host control: an operator's changes, deleting a host, paging
over hosts, and purging retired URLs (docs/operations.md, "Frontier controls")."""

from __future__ import annotations

from collections.abc import Sequence

from scheduler_core.multipliers import host_multiplier
from service.store.base import (
    BlockReason,
    HostChange,
    HostOrder,
    HostPage,
    HostState,
    LeaseStatus,
    ready_score,
    score_now,
)
from service.store.host_pages import page_of
from service.store.memory_dispatch import MemoryDispatch
from service.store.memory_records import Host

__all__ = ["MemoryHosts"]


class MemoryHosts(MemoryDispatch):
    """Host snapshots and control of the embedded store."""

    def _host_state(self, h: Host, now: float) -> HostState:
        # due by now as the ready sets count it (ready_score: a due time in the last µs
        # before now is not yet due)
        due = h.queue.bisect_right((now, "\U0010ffff"))
        while due and ready_score(h.queue[due - 1][0]) > score_now(now):
            due -= 1
        return HostState(
            host=h.name, crawl_delay_s=h.crawl_delay_s, gate_at=h.gate_at,
            urls=len(h.urls) - len(h.retired), queued=len(h.queue), due=due,
            next_due_at=h.queue[0][0] if h.queue else None,
            lambda_h=host_multiplier(self._lambda0.value, h.estimate),
            threshold=self._lambda_of(h), scored_lambda=h.scored_lambda,
            max_in_flight=self._cap(h), in_flight=h.in_flight, paused=h.paused,
            blocked_until=h.blocked_until, block_reason=h.block_reason,
            consecutive_failures=h.failures, retired=len(h.retired),
        )  # fmt: skip

    async def change_host(self, host: str, change: HostChange, now: float) -> HostState | None:
        h = self._hosts.get(host)
        if h is None:
            return None
        if change.crawl_delay_s is not None:
            h.crawl_delay_s = change.crawl_delay_s
        if change.max_in_flight is not None:
            h.max_in_flight = change.max_in_flight
        if change.paused is not None:
            h.paused = change.paused
        if change.blocked_until is not None:
            if change.blocked_until == 0:
                h.blocked_until = h.block_reason = None
                h.failures = 0
            else:
                h.blocked_until, h.block_reason = change.blocked_until, BlockReason.OPERATOR
        self._refresh(h)
        return self._host_state(h, now)

    async def delete_host(self, host: str) -> int:
        h = self._hosts.get(host)
        if h is None:
            return 0
        removed = await self.remove_urls(sorted(h.urls))
        ready = self._shards[h.shard].ready
        if h.ready_key is not None:
            ready.discard(h.ready_key)
        del self._hosts[host]
        return removed

    async def list_hosts(
        self, now: float, order: HostOrder, limit: int, cursor: str | None
    ) -> HostPage:
        states = [self._host_state(h, now) for h in self._hosts.values()]
        return page_of(states, now, order, limit, cursor)

    async def purge_retired(self, retired_before: float) -> int:
        old = [
            u.url
            for u in self._urls.values()
            if u.retired_at is not None and u.retired_at < retired_before
        ]
        return await self.remove_urls(old)

    async def remove_urls(self, urls: Sequence[str]) -> int:
        removed = 0
        for url in urls:
            u = self._urls.pop(url, None)
            if u is None:
                continue
            removed += 1
            host = self._hosts[u.host]
            host.urls.discard(url)
            host.retired.discard(url)
            if u.lease_id is not None:
                lease = self._active[u.lease_id]  # its deadline's group skips it now
                self._finish(u.lease_id, lease, LeaseStatus.EXPIRED)
                host.in_flight -= 1
            else:
                host.queue.discard((u.due_at, url))
            self._refresh(host)
        for url in urls:
            self._signatures.pop(url, None)
        return removed
