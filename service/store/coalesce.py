"""Coalescing concurrent lease calls of one process into one store call.

While a lease call is in flight, the calls that arrive wait and then go out together
as the next call, for the sum of their sizes; its leases are split among them in
arrival order (the first caller gets the first rows: the most overdue).  One sorted
set of all hosts hands out the same URLs to one call of n₁ + n₂ as to a call of n₁
followed by a call of n₂ (each host gives one URL per call and its gate closes), so
coalescing changes how many round trips a burst costs, not what it gets.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field

from service.clock import TimeSource
from service.store.columns import LeaseColumns

__all__ = ["LeaseCoalescer", "take_rows"]

LeaseFn = Callable[[TimeSource, int, float, bool], Awaitable[LeaseColumns]]


def take_rows(cols: LeaseColumns, start: int, stop: int) -> LeaseColumns:
    """Rows ``start:stop`` of a batch of leases (its ``now`` kept)."""
    return LeaseColumns(
        cols.now, cols.lease_ids[start:stop], cols.urls[start:stop], cols.hosts[start:stop],
        cols.deadline[start:stop], cols.gated[start:stop], cols.threshold[start:stop],
        cols.state[start:stop],
    )  # fmt: skip


@dataclass
class _Waiting:
    key: tuple[float, float, bool]
    now: TimeSource
    n: int
    future: asyncio.Future[LeaseColumns] = field(repr=False)


class LeaseCoalescer:
    """Calls ``lease`` (``(now, n, lease_ttl_s, dispatch_ahead) -> LeaseColumns``) one at
    a time; calls that arrive meanwhile with the same clock, TTL and dispatch-ahead
    setting join the next one."""

    def __init__(self, lease: LeaseFn) -> None:
        self._lease = lease
        self._queue: list[_Waiting] = []
        self._busy = False

    async def __call__(
        self, now: TimeSource, n: int, lease_ttl_s: float, dispatch_ahead: bool
    ) -> LeaseColumns:
        """Up to ``n`` leases, as ``lease`` would give them.

        Raises
        ------
        Exception
            Whatever the store call that served this caller raised.
        """
        if not self._busy and not self._queue:  # nothing in flight: go now
            self._busy = True
            try:
                return await self._lease(now, n, lease_ttl_s, dispatch_ahead)
            finally:
                self._busy = False
                self._next()
        future: asyncio.Future[LeaseColumns] = asyncio.get_running_loop().create_future()
        clock = now if isinstance(now, float | int) else id(now)  # a reading, or a clock
        self._queue.append(_Waiting((clock, lease_ttl_s, dispatch_ahead), now, n, future))
        return await future

    def _next(self) -> None:
        """Send the waiting calls that share the first one's settings, as one."""
        if self._busy or not self._queue:
            return
        key = self._queue[0].key
        batch = [w for w in self._queue if w.key == key and not w.future.cancelled()]
        self._queue = [w for w in self._queue if w.key != key and not w.future.cancelled()]
        if not batch:
            self._next()
            return
        self._busy = True
        asyncio.get_running_loop().create_task(self._serve(batch))

    async def _serve(self, batch: list[_Waiting]) -> None:
        first = batch[0]
        _, ttl, ahead = first.key
        try:
            cols = await self._lease(first.now, sum(w.n for w in batch), ttl, ahead)
        except Exception as exc:
            for w in batch:
                if not w.future.done():
                    w.future.set_exception(exc)
        else:
            start = 0
            for w in batch:
                stop = min(start + w.n, len(cols))
                if not w.future.done():
                    w.future.set_result(take_rows(cols, start, stop))
                start = stop
        finally:
            self._busy = False
            self._next()
