"""``/metrics`` and ``/healthz``."""

from __future__ import annotations

from fastapi import APIRouter, Response
from prometheus_client import CONTENT_TYPE_LATEST

from service import examples
from service.auth import Role, require
from service.deps import CtxDep
from service.errors import NoWorker, StoreUnavailable
from service.responses import documented
from service.scheduler.context import Context
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
    """Prometheus text: λ₀, λ_h of the top hosts, backlog, leases, event counters, the
    fold's lag, whether a worker runs."""
    stats = await ctx.store.stats(ctx.clock, ctx.settings.metrics_top_hosts)
    relearn_lag = await ctx.store.backlog_lag()
    ctx.metrics.relearn_lag.set(relearn_lag)
    ctx.metrics.fold_lag.set(max(await ctx.store.fold_lag(), relearn_lag))
    ctx.metrics.worker_up.set(1.0 if await _worker_runs(ctx) else 0.0)
    return Response(ctx.metrics.render(stats), media_type=CONTENT_TYPE_LATEST)


@router.get("/healthz", response_model=HealthOut, responses=documented(408, 413, 503))
async def healthz(ctx: CtxDep) -> HealthOut:
    """Liveness and readiness: the store answers and, with the Redis store, a
    ``crawlsched worker`` runs; the clock's reading and rate."""
    if not await ctx.store.ping():
        raise StoreUnavailable("store does not answer")
    if not await _worker_runs(ctx):
        raise NoWorker(
            "no live crawlsched worker: signals and clicks are not folded, thresholds "
            "not rescored; start `crawlsched worker` with this CRAWLSCHED_STORE"
        )
    kind = "memory" if ctx.settings.store == "memory" else "redis"
    return HealthOut(status="ok", now=ctx.clock.now(), clock_rate=ctx.clock.rate, store=kind)


async def _worker_runs(ctx: Context) -> bool:
    """The background work runs: in this process (memory store) or in a live worker."""
    return ctx.settings.store == "memory" or await ctx.store.worker_alive()
