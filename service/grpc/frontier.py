"""URLFrontier's items as crawlsched's use cases: a discovered URL is a registration
that leaves known URLs alone, a known URL a crawl result, and GetURLs a dispatch
whose leases last ``delay_requestable``.

Each item gets one :class:`Ack`: ``OK`` (applied, or applied before), ``SKIPPED``
(never applicable: a malformed URL, a result for a lease that is gone; do not send it
again) or ``FAIL`` (the store did not answer; send it again).
"""

from __future__ import annotations

import enum
from collections.abc import Sequence

from pydantic import ValidationError

from service.errors import InvalidInput
from service.grpc import urlfrontier_pb2 as pb
from service.grpc.mapping import (
    fetch_status,
    lease_of,
    metadata_of,
    redirect_of,
    retry_after_of,
    signature_of,
    url_info,
)
from service.scheduler.context import Context
from service.scheduler.dispatch import dispatch
from service.scheduler.events import ingest_results
from service.scheduler.queues import signature_changes, url_states
from service.scheduler.registry import register
from service.schemas import CrawlResultIn, UrlIn

__all__ = ["Ack", "discover", "lease", "put_known"]


class Ack(enum.IntEnum):
    """AckMessage.Status, by value."""

    OK = pb.AckMessage.OK
    SKIPPED = pb.AckMessage.SKIPPED
    FAIL = pb.AckMessage.FAIL


async def lease(
    ctx: Context, max_queues: int, delay_requestable_s: int, key: str = ""
) -> list[pb.URLInfo]:
    """URLs to fetch now, one per queue (host) at most, from at most ``max_queues``
    queues (0: up to ``max_next``), or from the queue ``key`` alone (a host; "" any),
    each under a lease of ``delay_requestable_s``
    seconds (0: the ``lease_ttl_s`` setting); the lease id travels in the metadata
    (:data:`~service.grpc.mapping.LEASE_KEY`).

    Raises
    ------
    StoreUnavailable
        If the store does not answer.
    """
    s = ctx.settings
    n = min(max_queues or s.max_next, s.max_next)
    ttl = float(delay_requestable_s) if delay_requestable_s > 0 else s.lease_ttl_s
    cols = (await dispatch(ctx, n, lease_ttl_s=ttl, host=key or None)).leases
    return [
        url_info(url, host, lease_id)
        for url, host, lease_id in zip(cols.urls, cols.hosts, cols.lease_ids, strict=True)
    ]


def _valid_url(raw: str | None) -> str | None:
    """``raw`` as a canonical http(s) URL, or None (absent or not one)."""
    if raw is None:
        return None
    try:
        return UrlIn(url=raw).url
    except ValidationError:
        return None


def _url_in(info: pb.URLInfo) -> UrlIn | None:
    try:
        return UrlIn(url=info.url)
    except ValidationError:
        return None


async def discover(ctx: Context, infos: Sequence[pb.URLInfo]) -> list[Ack]:
    """Register discovered URLs, leaving the ones already registered as they are;
    a URL that is not a valid http(s) URL is ``SKIPPED``.  Batches larger than
    ``max_batch`` go in parts.

    Raises
    ------
    StoreUnavailable
        If the store does not answer (nothing is acknowledged then).
    """
    parsed = [_url_in(info) for info in infos]
    valid = [item for item in parsed if item is not None]
    size = ctx.settings.max_batch
    for start in range(0, len(valid), size):
        await register(ctx, valid[start : start + size], keep_known=True)
    return [Ack.SKIPPED if item is None else Ack.OK for item in parsed]


async def put_known(
    ctx: Context, info: pb.URLInfo, refetchable_from_date: int, *, may_register: bool
) -> Ack:
    """A fetched URL: settle its lease with the outcome its metadata tell.

    The status is ``fetch.statusCode`` (200 if absent).  "Changed" is False for a 304,
    otherwise the content signature (``signature`` or an ETag) compared with the
    last one kept for the URL (unknown on the first).  The lease is the one the
    metadata name (as GetURLs sent it), else the URL's current one.
    ``refetchable_from_date`` 0 retires the URL (it is not fetched again unless
    signalled or registered again); any other date (Unix s) is a lower bound on its
    next lease.  A Retry-After (``protocol.retry-after``, seconds) and a redirect
    target (``_redirTo``) in the metadata are passed on.  A URL the frontier does not
    hold is registered as fetched now if ``may_register`` (the caller's role may
    register URLs), else ``SKIPPED``.

    Raises
    ------
    StoreUnavailable
        If the store does not answer.
    """
    item = _url_in(info)
    if item is None:
        return Ack.SKIPPED
    meta = metadata_of(info)
    status = fetch_status(meta) or 200
    lease_id = lease_of(meta)
    if lease_id is None:
        (state,) = await url_states(ctx, [item.url])
        if state is None and not may_register:
            return Ack.SKIPPED
        if state is None:  # a URL fetched before the frontier held it
            now = ctx.clock.now()
            await register(ctx, [UrlIn(url=item.url, last_crawled_at=now)], keep_known=True)
            await _changed(ctx, item.url, status, meta)
            return Ack.OK
        if state.lease_id is None:
            return Ack.SKIPPED  # nothing to settle: its lease expired and it is queued again
        lease_id = state.lease_id
    changed = await _changed(ctx, item.url, status, meta)
    try:
        result = CrawlResultIn(
            url=item.url,
            lease_id=lease_id,
            fetched_at=ctx.clock.now(),
            status=status,
            changed=changed,
            retry_after_s=retry_after_of(meta),
            redirect_to=_valid_url(redirect_of(meta)),
            refetch_after=float(refetchable_from_date) if refetchable_from_date else None,
            retire=refetchable_from_date == 0,
        )
        answer = await ingest_results(ctx, [result])
    except (ValidationError, InvalidInput):
        return Ack.SKIPPED  # a lease id of another URL, or not one of ours
    if answer.accepted or any(i.status == "duplicate" for i in answer.ignored):
        return Ack.OK
    return Ack.SKIPPED


async def _changed(ctx: Context, url: str, status: int, meta: dict[str, list[str]]) -> bool | None:
    """Whether the fetch found new content: False for a 304; else by signature (and
    the signature is kept) when the fetch succeeded and sent one; else unknown."""
    if status == 304:
        return False
    signature = signature_of(meta)
    if signature is None or not 200 <= status < 300:
        return None
    (changed,) = await signature_changes(ctx, [(url, signature)])
    return changed
