"""The embedded store's append log of signals and clicks, folded by the API itself.

:meth:`~service.store.memory.MemoryStore.append_events` puts a batch at the end;
:meth:`~service.store.memory.MemoryStore.fold_events` takes batches from the front and
applies them.  One process holds the log, so a batch taken is a batch applied: the
consumer names and claim times of the Redis streams have nothing to do here.
"""

from __future__ import annotations

import time
from collections import deque

from service.store.base import EventBatch

__all__ = ["EventLog"]


class EventLog:
    """Appended batches not yet folded, oldest first, each with its append time (wall
    s, monotonic clock)."""

    def __init__(self) -> None:
        self._parts: deque[tuple[float, EventBatch]] = deque()

    def __len__(self) -> int:
        return len(self._parts)

    def append(self, batch: EventBatch) -> None:
        self._parts.append((time.monotonic(), batch))

    def take(self, max_parts: int) -> tuple[list[EventBatch], float | None]:
        """Remove and return up to ``max_parts`` batches, oldest first, and the append
        time of the first (monotonic s; None when none is taken)."""
        out: list[EventBatch] = []
        oldest = self._parts[0][0] if self._parts and max_parts > 0 else None
        while self._parts and len(out) < max_parts:
            out.append(self._parts.popleft()[1])
        return out, oldest

    def lag_s(self) -> float:
        """Age of the oldest batch, wall s (0 when empty)."""
        return time.monotonic() - self._parts[0][0] if self._parts else 0.0
