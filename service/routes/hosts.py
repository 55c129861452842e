"""Host control (``PATCH``/``DELETE /hosts/{host}``, ``GET /hosts``) and purging
retired URLs (``POST /urls/purge``): the operator's side of the frontier controls."""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Query

from service.auth import Role, require
from service.deps import CtxDep
from service.error_bodies import quote
from service.errors import NotFound
from service.host_schemas import HostChangeIn, HostDeletedOut, HostsOut, PurgeOut
from service.responses import documented
from service.scheduler import hosts, registry
from service.schemas import MAX_TIMESTAMP, HostOut
from service.store.base import HostOrder
from service.urls import canonical_host

router = APIRouter(tags=["frontier"])


def host_arg(host: str) -> str:
    """``host`` or ``host:port`` in canonical form.

    Raises
    ------
    NotFound
        If it cannot name a host.
    """
    name, colon, port = host.rpartition(":")
    if not (colon and port.isascii() and port.isdigit()):
        name, colon, port = host, "", ""
    try:
        return canonical_host(name) + colon + port
    except ValueError:
        raise NotFound(f"host not known: {quote(host)}") from None


@router.get(
    "/hosts",
    response_model=HostsOut,
    responses=documented(401, 403, 408, 413, 422, 503),
    dependencies=[require(Role.ADMIN)],
)
async def list_hosts(
    ctx: CtxDep,
    order: Annotated[HostOrder, Query(description="due, lambda or blocked")] = HostOrder.DUE,
    limit: Annotated[int, Query(ge=1, le=hosts.MAX_PAGE, description="hosts per page")] = 100,
    cursor: Annotated[
        str | None, Query(pattern=r"^[0-9]{1,12}$", description="the last page's `cursor`")
    ] = None,
) -> HostsOut:
    """Page over hosts with their counts, block and λ_h: ``due`` (soonest to give out a
    URL first), ``lambda`` (largest λ_h first) or ``blocked`` (blocked or paused only)."""
    return await hosts.list_hosts(ctx, order, limit, cursor)


@router.patch(
    "/hosts/{host}",
    response_model=HostOut,
    responses=documented(400, 401, 403, 404, 408, 413, 422, 503),
    dependencies=[require(Role.ADMIN)],
)
async def change_host(host: str, body: HostChangeIn, ctx: CtxDep) -> HostOut:
    """Set a host's crawl delay, in-flight cap, block (``blocked_until``, Unix s; 0
    unblocks) or pause; it holds from the next ``/next`` on every replica."""
    return await hosts.change_host(ctx, host_arg(host), body)


@router.delete(
    "/hosts/{host}",
    response_model=HostDeletedOut,
    responses=documented(401, 403, 404, 408, 413, 422, 503),
    dependencies=[require(Role.ADMIN)],
)
async def delete_host(host: str, ctx: CtxDep) -> HostDeletedOut:
    """Remove a host, its URLs and their leases."""
    return await hosts.delete_host(ctx, host_arg(host))


@router.post(
    "/urls/purge",
    response_model=PurgeOut,
    responses=documented(401, 403, 408, 413, 422, 503),
    dependencies=[require(Role.ADMIN)],
)
async def purge_retired(
    ctx: CtxDep,
    retired_before: Annotated[
        float, Query(ge=0, le=MAX_TIMESTAMP, allow_inf_nan=False, description="Unix s")
    ],
) -> PurgeOut:
    """Delete the URLs retired (404/410, redirect, done) before ``retired_before``."""
    return PurgeOut(removed=await registry.purge(ctx, retired_before))
