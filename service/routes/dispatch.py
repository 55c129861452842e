"""``GET /next``: URLs for crawler workers, under leases."""

from __future__ import annotations

import orjson
from fastapi import APIRouter, Response

from service.auth import Role, require
from service.deps import CtxDep
from service.scheduler.dispatch import Dispatched, dispatch
from service.schemas import NextOut

router = APIRouter(tags=["dispatch"])


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


@router.get("/next", response_model=NextOut, dependencies=[require(Role.WORKER)])
async def get_next(ctx: CtxDep, n: int = 1) -> Response:
    """Up to ``n`` URLs of highest crawl value, each under a lease."""
    return Response(encode_next(await dispatch(ctx, n)), media_type="application/json")
