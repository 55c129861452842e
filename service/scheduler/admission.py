"""Backpressure on the signal and click streams: the fold's lag stays bounded.

Signals and clicks are acknowledged once appended, and the fold applies them
(re-estimating the URLs) within ``fold_lag_s`` (1 s) while it keeps up
(:mod:`service.scheduler.fold`).  When they come faster than the fold applies them,
the lag would grow without bound and due times would follow them later and later.
With ``ingest_backpressure`` (default on) a batch of signals or clicks is refused while
the fold lags more than ``ingest_max_lag_s`` (10 s) behind: nothing of it is appended, and
the caller is told to send it again after ``Retry-After`` seconds (``503``; the clients
of :mod:`crawlsched.client` and :mod:`service.client` do).  Crawl results are never
refused: each settles a lease at once, refusing them would stall the crawl itself, and
their pace is the leases ``/next`` hands out.

The lag is the one ``/metrics`` exports (``crawlsched_fold_lag_seconds``: events not yet
folded, or folded and their URL not yet re-estimated), read from the store at most every
quarter of that bound per process, so the check costs no round trip per request.
Source: ``docs/operations.md``, "Backpressure".
"""

from __future__ import annotations

import asyncio
import math
import time

from service.errors import Overloaded
from service.store.base import Store

__all__ = ["IngestGate"]


class IngestGate:
    """The fold's lag as this process last read it, and the check of a batch against it."""

    def __init__(self) -> None:
        self._lag_s = 0.0
        self._read_at = -math.inf  # time.monotonic() of the last read
        self._lock = asyncio.Lock()

    async def lag_s(self, store: Store, every_s: float) -> float:
        """The fold's lag, wall s, read from ``store`` when the last reading is older than
        ``every_s`` wall s (one reader at a time; the others take its reading).

        Raises
        ------
        StoreUnavailable
            If the store cannot be reached.
        """
        if time.monotonic() - self._read_at < every_s:
            return self._lag_s
        async with self._lock:
            if time.monotonic() - self._read_at >= every_s:
                self._lag_s = max(await store.fold_lag(), await store.backlog_lag())
                self._read_at = time.monotonic()
        return self._lag_s

    async def admit(self, store: Store, bound_s: float) -> None:
        """Let a batch of events through unless the fold lags more than
        ``bound_s`` wall s behind (the reading is at most ``bound_s / 4`` old).

        Raises
        ------
        Overloaded
            If it lags more: the batch must not be appended; retry after a quarter of the
            bound (at least 1 s), when the lag is read again.
        StoreUnavailable
            If the store cannot be reached.
        """
        lag = await self.lag_s(store, bound_s / 4)
        if lag > bound_s:
            raise Overloaded(lag, bound_s, retry_after_s=max(1, math.ceil(bound_s / 4)))
