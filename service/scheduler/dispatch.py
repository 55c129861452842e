"""The dispatch use case behind ``GET /next``."""

from __future__ import annotations

import math

from scheduler_core.due import value_due_time
from service.errors import InvalidInput
from service.scheduler.context import Context
from service.scheduler.scoring import values_at
from service.schemas import LeaseOut, NextOut
from service.store.base import DispatchObservation, UrlState

__all__ = ["next_urls"]


def _due_by_revisit_cap(state: UrlState, max_revisit_s: float) -> bool:
    """The URL went out because of the revisit cap, not its value: it says nothing of λ."""
    if state.last_crawl_at is None:
        return False
    value_due = value_due_time(
        last_crawl_at=state.last_crawl_at,
        threshold_s=state.threshold_s,
        signal_time_equivalent_s=state.signal_time_equivalent_s,
        signals_since_crawl=state.signals_since_crawl,
        last_signal_at=state.last_signal_at,
    )
    return value_due > state.last_crawl_at + max_revisit_s


async def next_urls(ctx: Context, n: int) -> NextOut:
    """Lease up to ``n`` URLs of highest crawl value, within every host's politeness.

    Due URLs go first (earliest due first: the threshold policy of MATH.md, "From
    values to decisions"); with ``dispatch_ahead`` the rest of the capacity goes to
    the URLs due soonest (below threshold, which pulls λ₀ down).  The values at
    dispatch feed the λ₀ / λ_h estimates (a URL held back by its host's gate feeds
    λ_h, once λ₀ has an estimate), except those of URLs due only by the revisit cap
    (their value is below any threshold by construction).

    Raises
    ------
    InvalidInput
        If ``n`` is not in [1, ``max_next``].
    """
    s = ctx.settings
    if not 1 <= n <= s.max_next:
        raise InvalidInput(("n",), f"must lie in [1, {s.max_next}]")
    # the store reads the clock when it decides (Redis: its own TIME)
    now, grants = await ctx.store.lease_next(ctx.clock, n, s.lease_ttl_s, s.dispatch_ahead)
    states = [g.state for g in grants]
    values = values_at(states, now, s.value_terms)
    await ctx.store.observe_dispatch(
        [
            # until λ₀ has an estimate (Λ_h = 0) a gated dispatch is none of λ_h's
            # business: it counts for λ₀, or λ₀ could wait forever where politeness
            # binds from the first dispatch on
            DispatchObservation(
                g.state.host, math.log(v) if v > 0 else -math.inf, g.gated and g.threshold > 0
            )
            for g, v in zip(grants, values, strict=True)
            if not _due_by_revisit_cap(g.state, s.max_revisit_s)
        ],
        ctx.tracker,
    )
    ctx.metrics.dispatch_requested.inc(n)
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
                threshold=g.threshold,
                due_at=g.state.due_at,
            )
            for g, v in zip(grants, values, strict=True)
        ],
    )
