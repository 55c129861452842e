"""``/urls`` and ``/hosts``: the frontier's membership and its explanations."""

from __future__ import annotations

from fastapi import APIRouter

from service.auth import ReadCaller, Role, require
from service.deps import CtxDep, IdempotencyKeyHeader
from service.scheduler import registry
from service.schemas import HostOut, RegisterOut, RemoveOut, UrlExplanation, UrlsIn, UrlsRemoveIn
from service.urls import canonical_url

router = APIRouter(tags=["frontier"])


@router.post(
    "/urls",
    response_model=RegisterOut,
    response_model_exclude_none=True,
    dependencies=[require(Role.ADMIN)],
)
async def register_urls(
    body: UrlsIn, ctx: CtxDep, idempotency_key: IdempotencyKeyHeader = None
) -> RegisterOut:
    """Register URLs (or update their priors; with ``keep_known``, leave known ones alone)."""
    return await registry.register(ctx, body.urls, idempotency_key, keep_known=body.keep_known)


@router.delete("/urls", response_model=RemoveOut, dependencies=[require(Role.ADMIN)])
async def remove_urls(body: UrlsRemoveIn, ctx: CtxDep) -> RemoveOut:
    """Drop URLs and their leases."""
    return RemoveOut(removed=await registry.unregister(ctx, body.urls))


@router.get("/urls/{url:path}", response_model=UrlExplanation)
async def explain_url(url: str, ctx: CtxDep, caller: ReadCaller) -> UrlExplanation:
    """Why a URL is (not) being crawled (the URL percent-encoded or plain); the lease id
    only to ``admin`` (whoever holds it could settle the lease)."""
    try:
        canonical = canonical_url(url)
    except ValueError:
        canonical = url  # not a URL we could have registered: explain_url says 404
    explanation = await registry.explain_url(ctx, canonical)
    if caller is Role.ADMIN:
        return explanation
    return explanation.model_copy(update={"lease_id": None})


@router.get("/hosts/{host}", response_model=HostOut, dependencies=[require(Role.READ)])
async def explain_host(host: str, ctx: CtxDep) -> HostOut:
    """A host's politeness gate, queue and multiplier λ_h."""
    return await registry.explain_host(ctx, host.lower())
