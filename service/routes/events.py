"""``/signal``, ``/click``, ``/crawl-result``: the event streams (batches).

Bodies are decoded by msgspec on the fast path (:mod:`service.routes.fast_bodies`);
a body it does not accept goes to the pydantic models below, which answer as before.
Answers are JSON bytes (orjson) on both paths.
"""

from __future__ import annotations

from fastapi import APIRouter, Response

from service.auth import Role, require
from service.deps import CtxDep, IdempotencyKeyHeader
from service.event_bodies import decode_clicks, decode_results, decode_signals
from service.responses import documented
from service.routes.fast_bodies import FAST_HANDLERS, FastBodyRoute, batch_response
from service.scheduler import events
from service.scheduler.context import Context
from service.schemas import BatchOut, ClicksIn, CrawlResultsIn, SignalsIn

router = APIRouter(tags=["events"], route_class=FastBodyRoute)
_ANSWERS = documented(400, 401, 403, 408, 413, 422, 503)


@router.post(
    "/signal", response_model=BatchOut, responses=_ANSWERS, dependencies=[require(Role.EVENTS)]
)
async def post_signals(
    body: SignalsIn, ctx: CtxDep, idempotency_key: IdempotencyKeyHeader = None
) -> Response:
    """Change-indicating signals (sitemap lastmod, CDN pings, IndexNow): accepted once
    durably appended, applied by the fold within ``CRAWLSCHED_FOLD_LAG_S``; what became
    of each (``unknown_url``, ``stale``) is counted in ``crawlsched_events_total``.  While
    the fold lags more than ``CRAWLSCHED_INGEST_MAX_LAG_S`` (10 s) behind,
    the batch is refused whole: ``503`` with ``Retry-After``, nothing appended."""
    return batch_response(await events.ingest_signals(ctx, body.signals, idempotency_key))


@router.post(
    "/click", response_model=BatchOut, responses=_ANSWERS, dependencies=[require(Role.EVENTS)]
)
async def post_clicks(
    body: ClicksIn, ctx: CtxDep, idempotency_key: IdempotencyKeyHeader = None
) -> Response:
    """Requests (clicks) for cached copies, the importance signal: accepted once durably
    appended, applied by the fold within ``CRAWLSCHED_FOLD_LAG_S``; clicks of unknown URLs
    are counted in ``crawlsched_events_total``.  While the fold lags more than
    ``CRAWLSCHED_INGEST_MAX_LAG_S`` (10 s) behind, the batch is refused
    whole: ``503`` with ``Retry-After``, nothing appended."""
    return batch_response(await events.ingest_clicks(ctx, body.clicks, idempotency_key))


@router.post(
    "/crawl-result",
    response_model=BatchOut,
    responses=_ANSWERS,
    dependencies=[require(Role.WORKER)],
)
async def post_results(
    body: CrawlResultsIn, ctx: CtxDep, idempotency_key: IdempotencyKeyHeader = None
) -> Response:
    """Outcomes of leased fetches: each lease settles at once, exactly once, and each
    result is answered (``duplicate``, ``unknown_lease``, ``stale`` are ignored); never
    refused for the fold's lag."""
    return batch_response(await events.ingest_results(ctx, body.results, idempotency_key))


async def _fast_signals(ctx: Context, body: bytes, key: str | None) -> Response | None:
    rows = decode_signals(body)
    return None if rows is None else batch_response(await events.ingest_signals(ctx, rows, key))


async def _fast_clicks(ctx: Context, body: bytes, key: str | None) -> Response | None:
    rows = decode_clicks(body)
    return None if rows is None else batch_response(await events.ingest_clicks(ctx, rows, key))


async def _fast_results(ctx: Context, body: bytes, key: str | None) -> Response | None:
    rows = decode_results(body)
    return None if rows is None else batch_response(await events.ingest_results(ctx, rows, key))


FAST_HANDLERS[post_signals] = (Role.EVENTS, _fast_signals)
FAST_HANDLERS[post_clicks] = (Role.EVENTS, _fast_clicks)
FAST_HANDLERS[post_results] = (Role.WORKER, _fast_results)
