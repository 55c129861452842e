"""Use cases of the event streams: signals, clicks and crawl results.

Each batch is validated whole before anything is applied: a bad event makes the whole
batch fail with :class:`InvalidInput` and nothing changes.  Signals and clicks are
accepted once appended (:meth:`~service.store.base.Store.append_events`); the fold
(:mod:`service.scheduler.fold`) applies them within ``fold_lag_s`` and classifies them
(unknown URL, stale signal) in the metrics.  While the fold lags more than a bound behind,
every batch of them is refused whole (:mod:`service.scheduler.admission`).  Events come as the
pydantic models of :mod:`service.schemas` or as the msgspec rows of
:mod:`service.event_bodies` (the same fields and values).  Crawl results settle their
leases at once
and are answered per item: a duplicate result, or one for a lease the store does not
know, is answered and ignored; what must hold at once (the host's back-off or block,
retirement, redirect targets, ``refetch_after``, the minimum revisit, the host's leases
in flight, the due time under the stored parameters) is done by the settlement, and the
re-estimation of the URLs' parameters is left to the fold.  A batch sent with an
idempotency key applies at most once (:mod:`service.scheduler.idempotency`).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence

import numpy as np

from service.errors import InvalidInput, Overloaded
from service.event_bodies import ClickRow, CrawlResultRow, SignalRow
from service.scheduler.context import Context
from service.scheduler.idempotency import batch_key
from service.scheduler.redirects import redirect_targets
from service.schemas import BatchOut, ClickIn, CrawlResultIn, IgnoredEvent, SignalIn
from service.store.base import (
    CrawlOutcome,
    EventBatch,
    EventKind,
    EventStatus,
    LeaseStatus,
    RetireReason,
    is_back_off,
)

__all__ = ["ingest_clicks", "ingest_results", "ingest_signals"]


def _answer(ctx: Context, kind: str, statuses: Sequence[EventStatus]) -> BatchOut:
    ignored = [
        IgnoredEvent(index=i, status=st.value)
        for i, st in enumerate(statuses)
        if st is not EventStatus.ACCEPTED
    ]
    for st, count in Counter(statuses).items():
        ctx.metrics.events.labels(kind, st.value).inc(count)
    return BatchOut(accepted=len(statuses) - len(ignored), ignored=ignored)


async def _admit(ctx: Context, kind: EventKind, count: int) -> None:
    """With ``ingest_backpressure``, refuse a batch of ``count`` events while the fold
    lags more than ``ingest_max_lag_s`` behind (:mod:`service.scheduler.admission`).

    Raises
    ------
    Overloaded
        It lags more: nothing of the batch may change (counted by kind in the metrics).
    """
    s = ctx.settings
    if not s.ingest_backpressure:
        return
    try:
        await ctx.ingest_gate.admit(ctx.store, s.ingest_max_lag_s)
    except Overloaded:
        ctx.metrics.refused.labels(kind.value).inc(count)
        raise


async def _append(
    ctx: Context,
    kind: EventKind,
    items: Sequence[SignalIn | SignalRow] | Sequence[ClickIn | ClickRow],
    key: str | None,
) -> BatchOut:
    field = f"{kind.value}s"
    ctx.check_batch(field, len(items))
    ctx.check_times(field, "time", (i.time for i in items), ctx.clock.now())
    times = np.fromiter((i.time for i in items), dtype=np.float64, count=len(items))
    await _admit(ctx, kind, len(items))
    batch = EventBatch(kind, [i.url for i in items], times)
    await ctx.store.append_events(batch, batch_key(ctx, kind.value, key, items))
    ctx.metrics.appended.labels(kind.value).inc(len(items))
    return BatchOut(accepted=len(items), ignored=[])


async def ingest_signals(
    ctx: Context, items: Sequence[SignalIn | SignalRow], key: str | None = None
) -> BatchOut:
    """Append change-indicating signals; every one is accepted once appended.  The fold
    (:mod:`service.scheduler.fold`) counts them: each moves its URL's due time earlier
    by β, a signal within ``signal_discard_s`` of the last crawl is stale, and the URLs
    are re-estimated.  ``key``: the batch's idempotency key.

    Raises
    ------
    InvalidInput
        Batch too large or an event time in the future.
    Overloaded
        With ``ingest_backpressure``, while the fold lags more than ``ingest_max_lag_s``
        behind (:mod:`service.scheduler.admission`): nothing was appended.
    """
    return await _append(ctx, EventKind.SIGNAL, items, key)


async def ingest_clicks(
    ctx: Context, items: Sequence[ClickIn | ClickRow], key: str | None = None
) -> BatchOut:
    """Append requests (clicks) per URL; the fold counts them (``key``: the batch's
    idempotency key).

    Raises
    ------
    InvalidInput
        Batch too large or an event time in the future.
    Overloaded
        With ``ingest_backpressure``, while the fold lags more than ``ingest_max_lag_s``
        behind (:mod:`service.scheduler.admission`): nothing was appended.
    """
    return await _append(ctx, EventKind.CLICK, items, key)


async def ingest_results(
    ctx: Context,
    items: Sequence[CrawlResultIn | CrawlResultRow],
    key: str | None = None,
) -> BatchOut:
    """Settle leases with fetch outcomes: τ resets, the URL is queued at its new due time
    (under its stored parameters; the fold re-estimates them within ``fold_lag_s``).

    A 2xx/3xx status refreshes the copy; any other status (or 0, a network
    error) keeps the old copy and retries after ``retry_delay_s``.  A result for a
    lease the store has no record of (never issued, forgotten, or lost with an
    embedded store's restart) is answered ``unknown_lease``.  ``key``: the batch's
    idempotency key.

    Raises
    ------
    InvalidInput
        Batch too large, a fetch time in the future, a lease issued for another
        URL, or a fetch time earlier than its lease's issue time by more than the
        crawlers' clock skew (``future_tolerance_s`` wall seconds).
    """
    ctx.check_batch("results", len(items))
    now = ctx.clock.now()
    ctx.check_times("results", "fetched_at", (i.fetched_at for i in items), now)
    known = await ctx.store.lease_status([i.lease_id for i in items])
    skew = ctx.settings.future_tolerance_s * ctx.clock.rate
    for k, (item, lease) in enumerate(zip(items, known, strict=True)):
        if lease.status is LeaseStatus.UNKNOWN:
            continue  # answered by the store
        if lease.url != item.url:
            raise InvalidInput(("results", k, "url"), f"lease was issued for {lease.url}")
        if lease.issued_at is not None and item.fetched_at < lease.issued_at - skew:
            raise InvalidInput(
                ("results", k, "fetched_at"),
                f"time {item.fetched_at:.3f} is before its lease was issued "
                f"({lease.issued_at:.3f})",
            )
    outcomes = [
        CrawlOutcome(
            url=i.url,
            lease_id=i.lease_id,
            fetched_at=i.fetched_at,
            ok=200 <= i.status < 400,
            changed=i.changed,
            status=i.status,
            retry_after_s=i.retry_after_s,
            refetch_after=i.refetch_after,
            retire=_retirement(i),
        )
        for i in items
    ]
    s = ctx.settings
    once = batch_key(ctx, "crawl-result", key, items)
    statuses = await ctx.store.settle(
        outcomes, s.retry_delay_s, s.signal_discard_s, s.outcome_window, once
    )
    accepted = [i for i, st in zip(items, statuses, strict=True) if st is EventStatus.ACCEPTED]
    ctx.metrics.back_offs.inc(sum(1 for i in accepted if is_back_off(i.status)))
    await redirect_targets(ctx, [i for i in accepted if _retirement(i) is RetireReason.REDIRECT])
    return _answer(ctx, "crawl_result", statuses)


def _retirement(item: CrawlResultIn | CrawlResultRow) -> RetireReason | None:
    """Why a result retires its URL: a permanent redirect elsewhere, or ``retire``."""
    if item.status in (301, 308) and item.redirect_to not in (None, item.url):
        return RetireReason.REDIRECT
    return RetireReason.DONE if item.retire else None
