"""The ``urlfrontier.URLFrontier`` servicer: each call checks the caller's token,
refuses crawl ids other than the default one, calls one use case and shapes the
answer (docs/urlfrontier.md tells what each call does).

Errors: bad input ``INVALID_ARGUMENT`` (naming the field), an unknown URL
``NOT_FOUND``, a store that does not answer ``UNAVAILABLE``, a call crawlsched does
not implement ``UNIMPLEMENTED``; each with a message.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any

import grpc
from pydantic import ValidationError

from service.auth import Role, TokenTable
from service.errors import InvalidInput, NotFound, StoreUnavailable
from service.grpc import urlfrontier_pb2 as pb
from service.grpc.auth import BeforeRefusal, admit, refuse
from service.grpc.frontier import Ack, discover, lease, put_known
from service.grpc.mapping import DEFAULT_CRAWL, url_item
from service.host_schemas import HostChangeIn
from service.scheduler.context import Context
from service.scheduler.hosts import change_host, delete_host
from service.scheduler.queues import (
    all_hosts,
    crawl_counts,
    host_state,
    host_urls,
    is_active,
    url_states,
)
from service.schemas import UrlIn

__all__ = ["FrontierServicer"]

log = logging.getLogger(__name__)

Ctx = grpc.aio.ServicerContext[Any, Any]
#: Page size of ListQueues and ListURLs when the request says 0 (URLFrontier's default).
DEFAULT_PAGE = 100


@contextlib.asynccontextmanager
async def _answering(context: Ctx) -> AsyncIterator[None]:
    """Turn the use cases' errors into statuses (the call is aborted)."""
    try:
        yield
    except InvalidInput as exc:
        await context.abort(grpc.StatusCode.INVALID_ARGUMENT, str(exc))
    except NotFound as exc:
        await context.abort(grpc.StatusCode.NOT_FOUND, str(exc))
    except StoreUnavailable as exc:
        await context.abort(grpc.StatusCode.UNAVAILABLE, str(exc))


#: At most what a refused request-streaming call reads of the rest of its stream, in
#: messages and in seconds, before it answers (:func:`drainer`).
DRAIN_MESSAGES = 10_000
DRAIN_S = 5.0


def drainer(requests: AsyncIterator[Any]) -> Callable[[], Awaitable[None]]:
    """What a request-streaming call does before it refuses: read the rest of the
    client's stream (at most :data:`DRAIN_MESSAGES` messages or :data:`DRAIN_S`
    seconds) and drop it.  grpcio's asyncio client, still writing its stream when the
    refusal arrives, reports its own failed write (``INTERNAL``, "Internal error from
    Core") instead of the server's status (grpc/grpc#36066); once it has half-closed
    its stream it reports the status."""

    async def drain() -> None:
        with contextlib.suppress(TimeoutError):
            async with asyncio.timeout(DRAIN_S):
                read = 0
                async for _ in requests:
                    read += 1
                    if read >= DRAIN_MESSAGES:
                        return

    return drain


async def _one_crawl(context: Ctx, crawl_id: str, before: BeforeRefusal = None) -> None:
    """Abort unless ``crawl_id`` names the one crawl crawlsched keeps (after
    ``before``)."""
    if crawl_id not in ("", DEFAULT_CRAWL):
        await refuse(
            context,
            grpc.StatusCode.INVALID_ARGUMENT,
            f"crawlID: crawlsched keeps one crawl; send an empty crawlID or "
            f"{DEFAULT_CRAWL!r}, not {crawl_id[:100]!r}",
            before,
        )


async def _need_key(context: Ctx, key: str, call: str) -> None:
    if not key:
        await context.abort(
            grpc.StatusCode.INVALID_ARGUMENT, f"key: {call} needs a queue key (a host)"
        )


async def _unimplemented(context: Ctx, call: str, why: str) -> Any:
    await context.abort(grpc.StatusCode.UNIMPLEMENTED, f"{call} is not implemented: {why}")


def _page(start: int, size: int) -> slice:
    return slice(start, start + (size or DEFAULT_PAGE))


class FrontierServicer:
    """Answers URLFrontier's calls on one :class:`Context` (the HTTP API's).

    Parameters
    ----------
    ctx : Context
        The store, clock, settings and metrics the use cases work with.
    tokens : TokenTable
        The bearer tokens and roles (none: authentication off, every caller admin).
    node : str
        This server's address, as ListNodes answers it.
    """

    def __init__(self, ctx: Context, tokens: TokenTable, node: str) -> None:
        self.ctx = ctx
        self.tokens = tokens
        self.node = node
        self.active = True  # SetActive: this node's own state, as in URLFrontier

    # -- crawls and nodes ----------------------------------------------------------------------
    async def ListNodes(self, request: pb.Empty, context: Ctx) -> pb.StringList:
        await admit(context, self.tokens, Role.READ)
        return pb.StringList(values=[self.node])

    async def ListCrawls(self, request: pb.Local, context: Ctx) -> pb.StringList:
        await admit(context, self.tokens, Role.READ)
        return pb.StringList(values=[DEFAULT_CRAWL])

    async def DeleteCrawl(self, request: pb.DeleteCrawlMessage, context: Ctx) -> pb.Long:
        await admit(context, self.tokens, Role.ADMIN)
        await _one_crawl(context, request.value)
        return await _unimplemented(  # type: ignore[no-any-return]
            context, "DeleteCrawl", "drop URLs with DELETE /urls or queues with DeleteQueue"
        )

    # -- URLs in and out -----------------------------------------------------------------------
    async def GetURLs(self, request: pb.GetParams, context: Ctx) -> AsyncIterator[pb.URLInfo]:
        await admit(context, self.tokens, Role.WORKER)
        if request.WhichOneof("item") == "crawlID":
            await _one_crawl(context, request.crawlID)
        if not self.active:
            return
        async with _answering(context):
            infos = await lease(
                self.ctx, request.max_queues, request.delay_requestable, request.key
            )
        for info in infos:
            yield info

    async def PutURLs(
        self, request_iterator: AsyncIterator[pb.URLItem], context: Ctx
    ) -> AsyncIterator[pb.AckMessage]:
        drain = drainer(request_iterator)
        role = await admit(context, self.tokens, Role.WORKER, drain)
        async for item in request_iterator:
            kind = item.WhichOneof("item")
            info: pb.URLInfo = getattr(item, kind).info if kind else pb.URLInfo()
            await _one_crawl(context, info.crawlID, drain)
            ident = item.ID or info.url
            if kind == "discovered" and role is not Role.ADMIN:
                await refuse(
                    context,
                    grpc.StatusCode.PERMISSION_DENIED,
                    f"{ident}: a DiscoveredURLItem registers a URL, which needs the role "
                    f"admin; the token has {role.value}",
                    drain,
                )
            try:
                if kind == "discovered":
                    (ack,) = await discover(self.ctx, [info])
                elif kind == "known":
                    ack = await put_known(
                        self.ctx,
                        info,
                        item.known.refetchable_from_date,
                        may_register=role is Role.ADMIN,
                    )
                else:
                    ack = Ack.SKIPPED  # neither discovered nor known
            except StoreUnavailable as exc:
                log.warning("PutURLs: %s not applied: %s", ident, exc)
                ack = Ack.FAIL
            yield pb.AckMessage(ID=ident, status=ack.value)

    async def PutDiscovered(
        self, request_iterator: AsyncIterator[pb.DiscoveredBatch], context: Ctx
    ) -> AsyncIterator[pb.BatchAck]:
        drain = drainer(request_iterator)
        await admit(context, self.tokens, Role.ADMIN, drain)
        async for batch in request_iterator:
            for info in batch.items:
                await _one_crawl(context, info.crawlID, drain)
            try:
                acks = await discover(self.ctx, batch.items)
            except StoreUnavailable as exc:
                log.warning("PutDiscovered: batch %s not applied: %s", batch.ID, exc)
                acks = [Ack.FAIL] * len(batch.items)
            yield pb.BatchAck(ID=batch.ID, statuses=[a.value for a in acks])

    # -- queues and counts ---------------------------------------------------------------------
    async def GetStats(self, request: pb.QueueWithinCrawlParams, context: Ctx) -> pb.Stats:
        await admit(context, self.tokens, Role.READ)
        await _one_crawl(context, request.crawlID)
        async with _answering(context):
            if request.key:
                host = await host_state(self.ctx, request.key)
                if host is None:
                    return pb.Stats(crawlID=DEFAULT_CRAWL)
                return pb.Stats(
                    size=host.queued,
                    inProcess=host.in_flight,
                    counts={
                        "due": host.due,
                        "urls": host.urls,
                        "completed": host.retired,
                        "active_queues": int(is_active(host, self.ctx.clock.now())),
                    },
                    numberOfQueues=1,
                    crawlID=DEFAULT_CRAWL,
                )
            c = await crawl_counts(self.ctx)
            return pb.Stats(
                size=c.urls - c.leased,
                inProcess=c.leased,
                counts={
                    "due": c.due,
                    "urls": c.urls,
                    "completed": c.retired,
                    "blocked_queues": c.blocked_hosts,
                    "leases_expired_total": c.leases_expired_total,
                },
                numberOfQueues=c.hosts,
                crawlID=DEFAULT_CRAWL,
            )
        raise AssertionError("unreachable")  # pragma: no cover - _answering aborts

    async def ListQueues(self, request: pb.Pagination, context: Ctx) -> pb.QueueList:
        await admit(context, self.tokens, Role.READ)
        await _one_crawl(context, request.crawlID)
        async with _answering(context):
            now = self.ctx.clock.now()
            states = await all_hosts(self.ctx)
            hosts = [h.host for h in states if request.include_inactive or is_active(h, now)]
            page = hosts[_page(request.start, request.size)]
            return pb.QueueList(
                values=page, total=len(hosts), start=request.start, size=len(page),
                crawlID=DEFAULT_CRAWL,
            )  # fmt: skip
        raise AssertionError("unreachable")  # pragma: no cover

    async def DeleteQueue(self, request: pb.QueueWithinCrawlParams, context: Ctx) -> pb.Long:
        await admit(context, self.tokens, Role.ADMIN)
        await _one_crawl(context, request.crawlID)
        await _need_key(context, request.key, "DeleteQueue")
        async with _answering(context):
            try:
                return pb.Long(value=(await delete_host(self.ctx, request.key)).removed)
            except NotFound:
                return pb.Long(value=0)
        raise AssertionError("unreachable")  # pragma: no cover

    async def BlockQueueUntil(self, request: pb.BlockQueueParams, context: Ctx) -> pb.Empty:
        await admit(context, self.tokens, Role.ADMIN)
        await _one_crawl(context, request.crawlID)
        await _need_key(context, request.key, "BlockQueueUntil")
        await self._change(context, request.key, "time", blocked_until=float(request.time))
        return pb.Empty()

    async def SetDelay(self, request: pb.QueueDelayParams, context: Ctx) -> pb.Empty:
        await admit(context, self.tokens, Role.ADMIN)
        await _one_crawl(context, request.crawlID)
        if not request.key:
            await _unimplemented(
                context, "SetDelay without a key (every queue's default)",
                "set CRAWLSCHED_DEFAULT_CRAWL_DELAY_S",
            )  # fmt: skip
        delay = float(request.delay_requestable) or self.ctx.settings.default_crawl_delay_s
        await self._change(context, request.key, "delay_requestable", crawl_delay_s=delay)
        return pb.Empty()

    async def _change(self, context: Ctx, host: str, field: str, **change: float) -> None:
        """Apply a host change (NOT_FOUND for an unknown host; INVALID_ARGUMENT naming
        ``field`` for a value out of range)."""
        try:
            body = HostChangeIn(**change)  # type: ignore[arg-type]
        except ValidationError as exc:
            reason = exc.errors()[0]["msg"]
            await context.abort(grpc.StatusCode.INVALID_ARGUMENT, f"{field}: {reason}")
        async with _answering(context):
            await change_host(self.ctx, host, body)

    async def SetCrawlLimit(self, request: pb.CrawlLimitParams, context: Ctx) -> pb.Empty:
        await admit(context, self.tokens, Role.ADMIN)
        await _one_crawl(context, request.crawlID)
        return await _unimplemented(  # type: ignore[no-any-return]
            context, "SetCrawlLimit", "crawlsched spends its crawl budget by crawl value"
        )

    # -- the frontier's state ------------------------------------------------------------------
    async def SetActive(self, request: pb.Active, context: Ctx) -> pb.Empty:
        await admit(context, self.tokens, Role.ADMIN)
        self.active = request.state
        return pb.Empty()

    async def GetActive(self, request: pb.Local, context: Ctx) -> pb.Boolean:
        await admit(context, self.tokens, Role.READ)
        return pb.Boolean(state=self.active)

    async def SetLogLevel(self, request: pb.LogLevelParams, context: Ctx) -> pb.Empty:
        await admit(context, self.tokens, Role.ADMIN)
        name = pb.LogLevelParams.Level.Name(request.level)
        level = {"TRACE": "DEBUG", "WARN": "WARNING"}.get(name, name)
        logging.getLogger(request.package or None).setLevel(level)
        return pb.Empty()

    # -- URLs ----------------------------------------------------------------------------------
    async def GetURLStatus(self, request: pb.URLStatusRequest, context: Ctx) -> pb.URLItem:
        await admit(context, self.tokens, Role.READ)
        await _one_crawl(context, request.crawlID)
        try:
            url = UrlIn(url=request.url).url
        except ValidationError:
            await context.abort(
                grpc.StatusCode.INVALID_ARGUMENT, f"url: not an http(s) URL: {request.url[:200]!r}"
            )
        async with _answering(context):
            (state,) = await url_states(self.ctx, [url])
            if state is None:
                raise NotFound(f"URL not registered: {url}")
            return url_item(state)
        raise AssertionError("unreachable")  # pragma: no cover

    async def _urls_of(self, key: str) -> list[pb.URLItem]:
        hosts = [key] if key else [h.host for h in await all_hosts(self.ctx)]
        return [url_item(s) for h in hosts for s in await host_urls(self.ctx, h)]

    @staticmethod
    def _matches(item: pb.URLItem, text: str | None, ignore_case: bool) -> bool:
        if not text:
            return True
        kind = item.WhichOneof("item")
        url: str = getattr(item, kind or "known").info.url
        return text.lower() in url.lower() if ignore_case else text in url

    async def ListURLs(self, request: pb.ListUrlParams, context: Ctx) -> AsyncIterator[pb.URLItem]:
        await admit(context, self.tokens, Role.READ)
        await _one_crawl(context, request.crawlID)
        text = request.filter if request.HasField("filter") else None
        async with _answering(context):
            items = await self._urls_of(request.key)
        matching = [i for i in items if self._matches(i, text, request.ignoreCase)]
        for item in matching[_page(request.start, request.size)]:
            yield item

    async def CountURLs(self, request: pb.CountUrlParams, context: Ctx) -> pb.Long:
        await admit(context, self.tokens, Role.READ)
        await _one_crawl(context, request.crawlID)
        text = request.filter if request.HasField("filter") else None
        async with _answering(context):
            if not text:
                if request.key:
                    host = await host_state(self.ctx, request.key)
                    return pb.Long(value=0 if host is None else host.urls)
                return pb.Long(value=(await crawl_counts(self.ctx)).urls)
            items = await self._urls_of(request.key)
            return pb.Long(value=sum(self._matches(i, text, request.ignoreCase) for i in items))
        raise AssertionError("unreachable")  # pragma: no cover

    async def PurgeURLs(self, request: pb.PurgeUrlParams, context: Ctx) -> pb.Long:
        await admit(context, self.tokens, Role.ADMIN)
        await _one_crawl(context, request.crawlID)
        return await _unimplemented(  # type: ignore[no-any-return]
            context, "PurgeURLs", "drop URLs with DELETE /urls"
        )
