"""The dispatch use case behind ``GET /next``."""

from __future__ import annotations

import math

from service.errors import InvalidInput
from service.scheduler.context import Context
from service.scheduler.scoring import values_at
from service.schemas import LeaseOut, NextOut
from service.store.base import DispatchObservation

__all__ = ["next_urls"]


async def next_urls(ctx: Context, n: int) -> NextOut:
    """Lease up to ``n`` URLs of highest crawl value, within every host's politeness.

    Due URLs go first (earliest due first: the threshold policy of MATH.md, "From
    values to decisions"); with ``dispatch_ahead`` the rest of the capacity goes to
    the URLs due soonest (below threshold, which pulls λ₀ down).  The values at
    dispatch feed the λ₀ / λ_h estimates.

    Raises
    ------
    InvalidInput
        If ``n`` is not in [1, ``max_next``].
    """
    s = ctx.settings
    if not 1 <= n <= s.max_next:
        raise InvalidInput(("n",), f"must lie in [1, {s.max_next}]")
    now = ctx.clock.now()
    grants = await ctx.store.lease_next(now, n, s.lease_ttl_s, s.dispatch_ahead)
    states = [g.state for g in grants]
    values = values_at(states, now, s.value_terms)
    await ctx.store.observe_dispatch(
        [
            DispatchObservation(g.state.host, math.log(v) if v > 0 else -math.inf, g.gated)
            for g, v in zip(grants, values, strict=True)
        ],
        ctx.tracker,
    )
    lambda_of = await ctx.store.host_thresholds(sorted({g.state.host for g in grants}))
    ctx.metrics.dispatched.inc(len(grants))
    ctx.metrics.dispatch_shortfall.inc(n - len(grants))
    return NextOut(
        now=now,
        leases=[
            LeaseOut(
                url=g.state.url,
                host=g.state.host,
                lease_id=g.lease_id,
                deadline=g.deadline,
                crawl_value=float(v),
                threshold=lambda_of[g.state.host],
                due_at=g.state.due_at,
            )
            for g, v in zip(grants, values, strict=True)
        ],
    )
