"""``GET /next``: URLs for crawler workers, under leases."""

from __future__ import annotations

from typing import Annotated

import orjson
from fastapi import APIRouter, Query, Response
from fastapi.exceptions import RequestValidationError

from service.auth import Role, require
from service.deps import CtxDep
from service.openapi import bound_by
from service.responses import documented
from service.scheduler.dispatch import Dispatched, dispatch
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


def encode_next(d: Dispatched) -> bytes:
    """The :class:`~service.schemas.NextOut` JSON of a dispatch, from its columns (no
    per-lease model; infinities as null, as the model would write them)."""
    cols = d.leases
    leases = [
        {
            "url": url,
            "host": host,
            "lease_id": lease_id,
            "deadline": deadline,
            "crawl_value": value,
            "threshold": threshold,
            "due_at": due_at,
        }  # fmt: skip
        for url, host, lease_id, deadline, value, threshold, due_at in zip(
            cols.urls,
            cols.hosts,
            cols.lease_ids,
            cols.deadline.tolist(),
            d.values.tolist(),
            cols.threshold.tolist(),
            cols.state["due_at"].tolist(),
            strict=True,
        )  # fmt: skip
    ]
    return orjson.dumps({"now": cols.now, "leases": leases})


@router.get(
    "/next",
    response_model=NextOut,
    responses=documented(401, 403, 408, 413, 422, 503),
    dependencies=[require(Role.WORKER)],
)
async def get_next(ctx: CtxDep, n: Count = 1) -> Response:
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
    return Response(encode_next(await dispatch(ctx, n)), media_type="application/json")
