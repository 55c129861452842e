"""``/metrics`` and ``/healthz``."""

from __future__ import annotations

from fastapi import APIRouter, Response
from prometheus_client import CONTENT_TYPE_LATEST

from service.auth import Role, require
from service.deps import CtxDep
from service.errors import StoreUnavailable
from service.schemas import HealthOut

router = APIRouter(tags=["operations"])


@router.get("/metrics", dependencies=[require(Role.READ)])
async def metrics(ctx: CtxDep) -> Response:
    """Prometheus text: λ₀, λ_h of the top hosts, backlog, leases, event counters."""
    stats = await ctx.store.stats(ctx.clock, ctx.settings.metrics_top_hosts)
    return Response(ctx.metrics.render(stats), media_type=CONTENT_TYPE_LATEST)


@router.get("/healthz", response_model=HealthOut)
async def healthz(ctx: CtxDep) -> HealthOut:
    """Liveness and readiness: the store answers; the clock's reading and rate."""
    if not await ctx.store.ping():
        raise StoreUnavailable("store does not answer")
    kind = "memory" if ctx.settings.store == "memory" else "redis"
    return HealthOut(status="ok", now=ctx.clock.now(), clock_rate=ctx.clock.rate, store=kind)
