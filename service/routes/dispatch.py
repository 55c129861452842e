"""``GET /next``: URLs for crawler workers, under leases."""

from __future__ import annotations

from fastapi import APIRouter

from service.auth import Role, require
from service.deps import CtxDep
from service.scheduler.dispatch import next_urls
from service.schemas import NextOut

router = APIRouter(tags=["dispatch"])


@router.get("/next", response_model=NextOut, dependencies=[require(Role.WORKER)])
async def get_next(ctx: CtxDep, n: int = 1) -> NextOut:
    """Up to ``n`` URLs of highest crawl value, each under a lease."""
    return await next_urls(ctx, n)
