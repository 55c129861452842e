"""The dispatch use case behind ``GET /next``."""

from __future__ import annotations

import math
from typing import NamedTuple

from scheduler_core.params import FloatArray
from service.errors import InvalidInput
from service.scheduler.context import Context
from service.scheduler.scoring import due_by_revisit_cap, values_and_observed
from service.store.base import DispatchObservation
from service.store.columns import LeaseColumns

__all__ = ["Dispatched", "dispatch"]


class Dispatched(NamedTuple):
    """The leases of one dispatch, as columns, with their crawl values (shape (m,))."""

    leases: LeaseColumns
    values: FloatArray


async def dispatch(
    ctx: Context, n: int, *, lease_ttl_s: float | None = None, host: str | None = None
) -> Dispatched:
    """Lease up to ``n`` URLs of highest crawl value, within every host's politeness.

    Due URLs go first (earliest due first: the threshold policy of MATH.md, "From
    values to decisions"); with ``dispatch_ahead`` the rest of the capacity goes to
    the URLs due soonest (below threshold, which pulls λ₀ down).  The values at
    dispatch feed the λ₀ / λ_h estimates (a URL held back by its host's gate, as the
    store classifies it with ``scheduler_core.multipliers.dispatch_gated``, feeds
    λ_h, once λ₀ has an estimate), except those of URLs due only by the revisit cap
    (their value is below any threshold by construction).  The leases come as
    columns and the values are computed on them (no per-URL state object).
    ``lease_ttl_s``: how long the leases last, s (default: the ``lease_ttl_s`` setting;
    URLFrontier's ``delay_requestable``).  ``host``: from that host alone (at most one
    URL: a host gives one per dispatch; URLFrontier's queue ``key``).

    Raises
    ------
    InvalidInput
        If ``n`` is not in [1, ``max_next``].
    """
    s = ctx.settings
    if not 1 <= n <= s.max_next:
        raise InvalidInput(("n",), f"must lie in [1, {s.max_next}]")
    ttl = s.lease_ttl_s if lease_ttl_s is None else lease_ttl_s
    if not 0 < ttl < math.inf:
        raise InvalidInput(("lease_ttl_s",), "must be a positive number of seconds")
    # the store reads the clock when it decides (Redis: its own TIME)
    if host is None:
        cols = await ctx.store.lease_columns(ctx.clock, n, ttl, s.dispatch_ahead)
    else:
        cols = await ctx.store.lease_host(ctx.clock, host, ttl, s.dispatch_ahead)
    values, told = values_and_observed(cols.state, cols.now, s.value_terms)
    logs = [math.log(v) if v > 0 else -math.inf for v in told.tolist()]
    counted = (~due_by_revisit_cap(cols.state, s.max_revisit_s)).tolist()
    gated = cols.gated.tolist()
    thresholds = cols.threshold.tolist()
    observed = cols.host_observed.tolist()
    await ctx.store.observe_dispatch(
        [
            # until λ₀ has an estimate (Λ_h = 0) a gated dispatch is none of λ_h's
            # business: it counts for λ₀, or λ₀ could wait forever where politeness
            # binds from the first dispatch on
            DispatchObservation(cols.hosts[i], logs[i], gated[i] and thresholds[i] > 0, observed[i])
            for i in range(len(cols))
            if counted[i]
        ],
        ctx.tracker,
    )
    ctx.metrics.dispatch_requested.inc(n)
    ctx.metrics.dispatched.inc(len(cols))
    ctx.metrics.dispatched_ahead.inc(int((cols.state["due_at"] > cols.now).sum()))
    ctx.metrics.dispatch_shortfall.inc(n - len(cols))
    return Dispatched(cols, values)
