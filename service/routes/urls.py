"""``/urls`` and ``/hosts``: the frontier's membership and its explanations."""

from __future__ import annotations

from fastapi import APIRouter, Request
from starlette.convertors import PathConvertor, register_url_convertor

from service.auth import ReadCaller, Role, require
from service.deps import CtxDep, IdempotencyKeyHeader
from service.error_bodies import quote
from service.errors import NotFound
from service.responses import documented
from service.routes.hosts import host_arg
from service.scheduler import registry
from service.schemas import HostOut, RegisterOut, RemoveOut, UrlExplanation, UrlsIn, UrlsRemoveIn
from service.urls import canonical_url

router = APIRouter(tags=["frontier"])


class _UrlConvertor(PathConvertor):
    """A URL in the path, but not ``purge`` (``POST /urls/purge`` is its own route; no
    registered URL can be spelled ``purge``, so ``GET /urls/purge`` is not a URL's)."""

    regex = r"(?!purge$).*"


register_url_convertor("url", _UrlConvertor())

#: OpenAPI link: a URL just registered can be explained (clients and fuzzers follow it).
_EXPLAIN_REGISTERED = {
    "ExplainFirstUrl": {
        "operationId": "explain_url_urls__url__get",
        "parameters": {"url": "$request.body#/urls/0/url"},
        "description": "the first URL of the batch, as registered",
    }
}


@router.post(
    "/urls",
    response_model=RegisterOut,
    response_model_exclude_none=True,
    responses={
        200: {"description": "Counts of new and updated URLs", "links": _EXPLAIN_REGISTERED},
        **documented(400, 401, 403, 408, 413, 422, 503),
    },
    dependencies=[require(Role.ADMIN)],
)
async def register_urls(
    body: UrlsIn, ctx: CtxDep, idempotency_key: IdempotencyKeyHeader = None
) -> RegisterOut:
    """Register URLs (or update their priors; with ``keep_known``, leave known ones alone)."""
    return await registry.register(ctx, body.urls, idempotency_key, keep_known=body.keep_known)


@router.delete(
    "/urls",
    response_model=RemoveOut,
    responses=documented(400, 401, 403, 408, 413, 422, 503),
    dependencies=[require(Role.ADMIN)],
)
async def remove_urls(body: UrlsRemoveIn, ctx: CtxDep) -> RemoveOut:
    """Drop URLs and their leases."""
    return RemoveOut(removed=await registry.unregister(ctx, body.urls))


@router.get(
    "/urls/{url:url}",
    response_model=UrlExplanation,
    responses=documented(401, 403, 404, 408, 413, 422, 503),
)
async def explain_url(
    url: str, request: Request, ctx: CtxDep, caller: ReadCaller
) -> UrlExplanation:
    """Why a URL is (not) being crawled.  The URL is percent-encoded or plain; the
    query string of a plain one is part of it (``/urls/https://q.example/p?id=1``).
    The lease id only to ``admin`` (whoever holds it could settle the lease)."""
    query = request.scope.get("query_string", b"").decode("utf-8", "replace")
    raw = f"{url}?{query}" if query else url
    try:
        canonical = canonical_url(raw)
    except ValueError:  # not a URL that could have been registered
        raise NotFound(f"URL not registered: {quote(raw)}") from None
    explanation = await registry.explain_url(ctx, canonical)
    if caller is Role.ADMIN:
        return explanation
    return explanation.model_copy(update={"lease_id": None})


@router.get(
    "/hosts/{host}",
    response_model=HostOut,
    responses=documented(401, 403, 404, 408, 413, 422, 503),
    dependencies=[require(Role.READ)],
)
async def explain_host(host: str, ctx: CtxDep) -> HostOut:
    """A host's politeness gate, block, in-flight leases, queue and multiplier λ_h
    (``host`` or ``host:port``, an internationalised name in Unicode or punycode)."""
    return await registry.explain_host(ctx, host_arg(host))
