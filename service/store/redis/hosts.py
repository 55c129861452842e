"""The Redis store's host control: an operator's changes, deleting a host, paging over
hosts, purging retired URLs (docs/operations.md, "Frontier controls"); the counts of
/metrics, read host by host."""

from __future__ import annotations

from typing import Any

from service.clock import TimeSource
from service.store.base import HostChange, HostOrder, HostPage, HostState, StoreStats
from service.store.host_pages import page_of
from service.store.redis.base import clock_arg
from service.store.redis.client import text, unavailable
from service.store.redis.dispatch import RedisDispatch
from service.store.redis.records import unpack_host

__all__ = ["RedisHosts"]

#: Hosts one ``stats.lua`` call reads (HSCAN COUNT): ~1.5 ms of Redis per call at 100
#: URLs a host.
_STATS_SLICE = 128


def _arg(x: float | int | None) -> str:
    return "" if x is None else repr(x)


class RedisHosts(RedisDispatch):
    """Host snapshots and control of the Redis store."""

    def _host_of(self, host: str, answer: Any, lambda0: float | None) -> HostState:
        blob, urls, queued, due, head = answer
        return unpack_host(
            blob, host, urls=urls, queued=queued, due=due, next_due=head, lambda0=lambda0,
            default_in_flight=self._controls.max_in_flight,
        )  # fmt: skip

    @unavailable
    async def change_host(self, host: str, change: HostChange, now: float) -> HostState | None:
        paused = None if change.paused is None else int(change.paused)
        args = (
            host, _arg(change.crawl_delay_s), _arg(change.max_in_flight),
            _arg(change.blocked_until), _arg(paused), repr(now),
        )  # fmt: skip
        (answer,) = await self._run([self._call("host_ctl", self._shard(host), args)])
        if not answer:
            return None
        return self._host_of(host, answer, (await self._lambda0()).value)

    @unavailable
    async def delete_host(self, host: str) -> int:
        shard = self._shard(host)
        (n,) = await self._run([self._call("delete_host", shard, (host, self._history))])
        keys = self._keys[shard]
        await self.client.delete(keys.signatures(host), keys.stale(host))
        return int(n)

    @unavailable
    async def list_hosts(
        self, now: float, order: HostOrder, limit: int, cursor: str | None
    ) -> HostPage:
        await self._flush()
        answers = await self._run(
            [self._call("hosts", n, (repr(now),)) for n in range(self.shards)]
        )
        lam0 = (await self._lambda0()).value
        states = [
            self._host_of(text(flat[i]), flat[i + 1 : i + 6], lam0)
            for flat in answers
            for i in range(0, len(flat), 6)
        ]
        return page_of(states, now, order, limit, cursor)

    @unavailable
    async def purge_retired(self, retired_before: float) -> int:
        calls = [self._call("purge", n, (repr(retired_before),)) for n in range(self.shards)]
        answers = await self._run(calls)
        # the content signatures and stale counts of the dropped URLs go with them
        drops = [
            call
            for n, flat in enumerate(answers)
            if flat
            for call in self._drop_calls(
                n, [(0, text(flat[i]), text(flat[i + 1])) for i in range(0, len(flat), 2)]
            )
        ]
        if drops:
            await self._run(drops)
        return sum(len(flat) // 2 for flat in answers)

    @unavailable
    async def stats(self, now: TimeSource, top_hosts: int) -> StoreStats:
        """The shards' counts; their hosts read in slices of about ``_STATS_SLICE``
        (``stats.lua`` from an ``HSCAN`` cursor), one call per round trip, so that no
        call holds Redis for long (one pipeline of whole shards held it ~130 ms at
        10,000 hosts).  Each shard's counters are those its last slice read; a host the
        scan gives twice (its hash shrank meanwhile) counts twice in the backlog and the
        leases out (the sum of the hosts' records' leases out)."""
        await self._flush()
        head = (clock_arg(now), self._history, top_hosts)
        counters: list[list[Any]] = []
        backlog = blocked = leases = 0
        found: dict[str, Any] = {}
        for n in range(self.shards):
            cursor: bytes | str = "0"
            while True:
                (answer,) = await self._run([self._call("stats", n, (*head, cursor, _STATS_SLICE))])
                flat, cursor = answer[5], answer[8]
                backlog += int(answer[2])
                leases += int(answer[3])
                blocked += int(answer[7])
                for i in range(0, len(flat), 6):
                    found.setdefault(text(flat[i]), flat[i + 1 : i + 6])
                if cursor in (b"0", "0"):
                    break
            counters.append(answer)
        lam0 = await self._lambda0()
        top = [self._host_of(host, answer, lam0.value) for host, answer in found.items()]
        top.sort(key=lambda s: s.lambda_h, reverse=True)
        retired = sum(int(a[6]) for a in counters)
        return StoreStats(
            retired=retired,
            blocked_hosts=blocked,
            urls=sum(int(a[0]) for a in counters) - retired,
            hosts=sum(int(a[1]) for a in counters),
            due_backlog=backlog,
            leases_active=leases,
            leases_expired_total=sum(int(a[4]) for a in counters),
            lambda0=lam0.value,
            lambda0_observations=lam0.count,
            top_hosts=tuple(top[:top_hosts]),
        )
