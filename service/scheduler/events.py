"""Use cases of the event streams: signals, clicks and crawl results.

Each batch is validated whole before anything is applied: a bad event makes the
whole batch fail with :class:`InvalidInput` and nothing changes.  Events that are
well-formed but carry no news (unknown URL, stale signal, duplicate result, a result
for a lease the store does not know) are answered and ignored.  A batch sent with an
idempotency key applies at most once (:mod:`service.scheduler.idempotency`).
"""

from __future__ import annotations

from collections.abc import Sequence

from service.errors import InvalidInput
from service.scheduler.context import Context
from service.scheduler.idempotency import batch_key
from service.scheduler.learning import queue_relearn
from service.scheduler.redirects import redirect_targets
from service.schemas import BatchOut, ClickIn, CrawlResultIn, IgnoredEvent, SignalIn
from service.store.base import (
    ClickEvent,
    CrawlOutcome,
    EventStatus,
    LeaseStatus,
    RetireReason,
    SignalEvent,
    is_back_off,
)

__all__ = ["ingest_clicks", "ingest_results", "ingest_signals"]


def _answer(ctx: Context, kind: str, statuses: Sequence[EventStatus]) -> BatchOut:
    ignored = [
        IgnoredEvent(index=i, status=st.value)
        for i, st in enumerate(statuses)
        if st is not EventStatus.ACCEPTED
    ]
    for st in EventStatus:
        count = sum(1 for x in statuses if x is st)
        if count:
            ctx.metrics.events.labels(kind, st.value).inc(count)
    return BatchOut(accepted=len(statuses) - len(ignored), ignored=ignored)


def _counted(
    items: Sequence[SignalIn | ClickIn | CrawlResultIn], statuses: Sequence[EventStatus]
) -> list[str]:
    """URLs whose history an event batch added to (stale signals count too)."""
    return [
        i.url
        for i, st in zip(items, statuses, strict=True)
        if st in (EventStatus.ACCEPTED, EventStatus.STALE)
    ]


async def ingest_signals(
    ctx: Context, items: Sequence[SignalIn], key: str | None = None
) -> BatchOut:
    """Count change-indicating signals; each moves its URL's due time earlier by β,
    and the URLs are queued for new estimates (:func:`~service.scheduler.learning.queue_relearn`).
    ``key``: the batch's idempotency key.

    Raises
    ------
    InvalidInput
        Batch too large or an event time in the future.
    """
    ctx.check_batch("signals", len(items))
    ctx.check_times("signals", "time", (i.time for i in items), ctx.clock.now())
    events = [SignalEvent(i.url, i.time) for i in items]
    s = ctx.settings
    once = batch_key(ctx, "signal", key, items)
    statuses = await ctx.store.record_signals(events, s.signal_discard_s, s.estimate_decay_s, once)
    await queue_relearn(ctx, _counted(items, statuses), outcomes=False)
    return _answer(ctx, "signal", statuses)


async def ingest_clicks(ctx: Context, items: Sequence[ClickIn], key: str | None = None) -> BatchOut:
    """Count requests (clicks) per URL; ``key``: the batch's idempotency key.

    Raises
    ------
    InvalidInput
        Batch too large or an event time in the future.
    """
    ctx.check_batch("clicks", len(items))
    ctx.check_times("clicks", "time", (i.time for i in items), ctx.clock.now())
    events = [ClickEvent(i.url, i.time) for i in items]
    once = batch_key(ctx, "click", key, items)
    statuses = await ctx.store.record_clicks(events, ctx.settings.estimate_decay_s, once)
    await queue_relearn(ctx, _counted(items, statuses), outcomes=False)
    return _answer(ctx, "click", statuses)


async def ingest_results(
    ctx: Context, items: Sequence[CrawlResultIn], key: str | None = None
) -> BatchOut:
    """Settle leases with fetch outcomes: τ resets, the URL is queued at its new due time.

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
    await queue_relearn(ctx, _counted(items, statuses), outcomes=True)
    return _answer(ctx, "crawl_result", statuses)


def _retirement(item: CrawlResultIn) -> RetireReason | None:
    """Why a result retires its URL: a permanent redirect elsewhere, or ``retire``."""
    if item.status in (301, 308) and item.redirect_to not in (None, item.url):
        return RetireReason.REDIRECT
    return RetireReason.DONE if item.retire else None
