"""``/metrics`` and ``/healthz``."""

from __future__ import annotations

from fastapi import APIRouter, Response
from prometheus_client import CONTENT_TYPE_LATEST

from service import examples
from service.auth import Role, require
from service.deps import CtxDep
from service.errors import StoreUnavailable
from service.responses import documented
from service.schemas import HealthOut

router = APIRouter(tags=["operations"])


@router.get(
    "/metrics",
    response_class=Response,
    dependencies=[require(Role.READ)],
    responses={
        200: {
            "description": "Prometheus text exposition format",
            "content": {
                "text/plain": {"schema": {"type": "string"}, "example": examples.METRICS_TEXT}
            },
        },
        **documented(401, 403, 408, 413, 503),
    },
)
async def metrics(ctx: CtxDep) -> Response:
    """Prometheus text: λ₀, λ_h of the top hosts, backlog, leases, event counters."""
    stats = await ctx.store.stats(ctx.clock, ctx.settings.metrics_top_hosts)
    return Response(ctx.metrics.render(stats), media_type=CONTENT_TYPE_LATEST)


@router.get("/healthz", response_model=HealthOut, responses=documented(408, 413, 503))
async def healthz(ctx: CtxDep) -> HealthOut:
    """Liveness and readiness: the store answers; the clock's reading and rate."""
    if not await ctx.store.ping():
        raise StoreUnavailable("store does not answer")
    kind = "memory" if ctx.settings.store == "memory" else "redis"
    return HealthOut(status="ok", now=ctx.clock.now(), clock_rate=ctx.clock.rate, store=kind)
