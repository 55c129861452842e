"""``GET /next``: URLs for crawler workers, under leases."""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Query
from fastapi.exceptions import RequestValidationError

from service.auth import Role, require
from service.deps import CtxDep
from service.openapi import bound_by
from service.responses import documented
from service.scheduler.dispatch import next_urls
from service.schemas import NextOut

router = APIRouter(tags=["dispatch"])

Count = Annotated[
    int,
    Query(
        ge=1,
        description="how many URLs the worker can fetch now; at most `max_next` "
        "(CRAWLSCHED_MAX_NEXT)",
        json_schema_extra=bound_by("max_next"),
    ),
]


@router.get(
    "/next",
    response_model=NextOut,
    responses=documented(401, 403, 408, 413, 422, 503),
    dependencies=[require(Role.WORKER)],
)
async def get_next(ctx: CtxDep, n: Count = 1) -> NextOut:
    """Up to ``n`` URLs of highest crawl value, each under a lease."""
    most = ctx.settings.max_next
    if n > most:
        raise RequestValidationError(
            [
                {
                    "type": "less_than_equal",
                    "loc": ("query", "n"),
                    "msg": f"Input should be less than or equal to {most}",
                    "input": n,
                    "ctx": {"le": most},
                }
            ]
        )
    return await next_urls(ctx, n)
