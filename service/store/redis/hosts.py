"""The Redis store's host control: an operator's changes, deleting a host, paging over
hosts, purging retired URLs (docs/operations.md, "Frontier controls")."""

from __future__ import annotations

from typing import Any

from service.store.base import HostChange, HostOrder, HostPage, HostState
from service.store.host_pages import page_of
from service.store.redis.client import text, unavailable
from service.store.redis.dispatch import RedisDispatch
from service.store.redis.records import unpack_host

__all__ = ["RedisHosts"]


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
