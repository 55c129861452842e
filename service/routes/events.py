"""``/signal``, ``/click``, ``/crawl-result``: the event streams (batches)."""

from __future__ import annotations

from fastapi import APIRouter

from service.auth import Role, require
from service.deps import CtxDep, IdempotencyKeyHeader
from service.responses import documented
from service.scheduler import events
from service.schemas import BatchOut, ClicksIn, CrawlResultsIn, SignalsIn

router = APIRouter(tags=["events"])
_ANSWERS = documented(400, 401, 403, 408, 413, 422, 503)


@router.post(
    "/signal", response_model=BatchOut, responses=_ANSWERS, dependencies=[require(Role.EVENTS)]
)
async def post_signals(
    body: SignalsIn, ctx: CtxDep, idempotency_key: IdempotencyKeyHeader = None
) -> BatchOut:
    """Change-indicating signals (sitemap lastmod, CDN pings, IndexNow): accepted once
    durably appended, applied by the fold within ``CRAWLSCHED_FOLD_LAG_S``; what became
    of each (``unknown_url``, ``stale``) is counted in ``crawlsched_events_total``."""
    return await events.ingest_signals(ctx, body.signals, idempotency_key)


@router.post(
    "/click", response_model=BatchOut, responses=_ANSWERS, dependencies=[require(Role.EVENTS)]
)
async def post_clicks(
    body: ClicksIn, ctx: CtxDep, idempotency_key: IdempotencyKeyHeader = None
) -> BatchOut:
    """Requests (clicks) for cached copies, the importance signal: accepted once durably
    appended, applied by the fold within ``CRAWLSCHED_FOLD_LAG_S``; clicks of unknown URLs
    are counted in ``crawlsched_events_total``."""
    return await events.ingest_clicks(ctx, body.clicks, idempotency_key)


@router.post(
    "/crawl-result",
    response_model=BatchOut,
    responses=_ANSWERS,
    dependencies=[require(Role.WORKER)],
)
async def post_results(
    body: CrawlResultsIn, ctx: CtxDep, idempotency_key: IdempotencyKeyHeader = None
) -> BatchOut:
    """Outcomes of leased fetches: each lease settles at once, exactly once, and each
    result is answered (``duplicate``, ``unknown_lease``, ``stale`` are ignored)."""
    return await events.ingest_results(ctx, body.results, idempotency_key)
