"""Coalescing concurrent lease calls of one process into one store call.

While a lease call is in flight, the calls that arrive wait and then go out together
as the next call, for the sum of their sizes; its leases are split among them in
arrival order (the first caller gets the first rows: the most overdue).  One sorted
set of all hosts hands out the same URLs to one call of n₁ + n₂ as to a call of n₁
followed by a call of n₂ as long as each host's gate stays closed between the two (a
host gives one URL per call); when the joint call comes back short, the callers not
yet served in full go out again, as their own calls would have, until a call gives
nothing more.  Coalescing changes how many round trips a burst costs, not what it
gets.

The store answers a call undecoded (:class:`Answered`): once its answer is in and it
served every caller, the next call goes out before this one's answer is decoded, so
that the store works on the next call while this process decodes the last.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, field

import numpy as np

from service.clock import TimeSource
from service.store.columns import LeaseColumns

__all__ = ["Answered", "LeaseCoalescer", "join_rows", "take_rows"]


@dataclass(frozen=True)
class Answered:
    """A store's answer to one lease call, not yet decoded: how many leases it holds,
    and the function that decodes them."""

    size: int
    decode: Callable[[], LeaseColumns]


LeaseFn = Callable[[TimeSource, int, float, bool], Awaitable[Answered]]


def take_rows(cols: LeaseColumns, start: int, stop: int) -> LeaseColumns:
    """Rows ``start:stop`` of a batch of leases (its ``now`` kept)."""
    return LeaseColumns(
        cols.now, cols.lease_ids[start:stop], cols.urls[start:stop], cols.hosts[start:stop],
        cols.deadline[start:stop], cols.gated[start:stop], cols.threshold[start:stop],
        cols.state[start:stop], cols.host_observed[start:stop],
    )  # fmt: skip


def join_rows(parts: Sequence[LeaseColumns]) -> LeaseColumns:
    """Batches of leases one after the other; ``now`` is the latest reading."""
    if len(parts) == 1:
        return parts[0]
    return LeaseColumns(
        max(p.now for p in parts), [x for p in parts for x in p.lease_ids],
        [x for p in parts for x in p.urls], [x for p in parts for x in p.hosts],
        np.concatenate([p.deadline for p in parts]), np.concatenate([p.gated for p in parts]),
        np.concatenate([p.threshold for p in parts]), np.concatenate([p.state for p in parts]),
        np.concatenate([p.host_observed for p in parts]),
    )  # fmt: skip


@dataclass
class _Waiting:
    key: tuple[float, float, bool]
    now: TimeSource
    n: int
    future: asyncio.Future[LeaseColumns] = field(repr=False)
    parts: list[LeaseColumns] = field(default_factory=list)


class LeaseCoalescer:
    """Calls ``lease`` (``(now, n, lease_ttl_s, dispatch_ahead) -> LeaseColumns``) one at
    a time; calls that arrive meanwhile with the same clock, TTL and dispatch-ahead
    setting join the next one."""

    def __init__(self, lease: LeaseFn) -> None:
        self._lease = lease
        self._queue: list[_Waiting] = []
        self._busy = False
        # kept: the loop holds only a weak reference to a task
        self._serving: set[asyncio.Task[None]] = set()

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
                answered = await self._lease(now, n, lease_ttl_s, dispatch_ahead)
            finally:
                self._release()
            await asyncio.sleep(0)  # the next call goes out, then this one is decoded
            return answered.decode()
        future: asyncio.Future[LeaseColumns] = asyncio.get_running_loop().create_future()
        clock = now if isinstance(now, float | int) else id(now)  # a reading, or a clock
        self._queue.append(_Waiting((clock, lease_ttl_s, dispatch_ahead), now, n, future))
        return await future

    def _release(self) -> None:
        """The call in flight is answered: send the next."""
        self._busy = False
        self._next()

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
        task = asyncio.get_running_loop().create_task(self._serve(batch))
        self._serving.add(task)
        task.add_done_callback(self._serving.discard)

    async def _serve(self, batch: list[_Waiting]) -> None:
        first = batch[0]
        _, ttl, ahead = first.key
        need = {id(w): w.n for w in batch}
        released = False
        try:
            while batch:
                total = sum(need[id(w)] for w in batch)
                answered = await self._lease(first.now, total, ttl, ahead)
                if answered.size in (0, total):  # no follow-up: the next call may go
                    released = True
                    self._release()
                    await asyncio.sleep(0)
                cols = answered.decode()
                start, short = 0, []
                for w in batch:
                    stop = min(start + need[id(w)], len(cols))
                    if stop > start:
                        w.parts.append(take_rows(cols, start, stop))
                        need[id(w)] -= stop - start
                    start = stop
                    if need[id(w)] and len(cols):
                        short.append(w)  # served again, as its own call would be
                    else:
                        _resolve(w, cols)
                batch = short
        except Exception as exc:
            for w in batch:
                if not w.future.done():
                    w.future.set_exception(exc)
        finally:
            if not released:
                self._release()


def _resolve(w: _Waiting, last: LeaseColumns) -> None:
    """Answer ``w`` with its leases (none: the empty rows of the ``last`` call)."""
    if not w.future.done():
        w.future.set_result(join_rows(w.parts) if w.parts else take_rows(last, 0, 0))
