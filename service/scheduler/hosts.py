"""Use cases of host control: explain a host, change it (politeness, in-flight cap,
block, pause), delete it, page over hosts (docs/operations.md, "Frontier controls").

A change takes effect on the next ``/next`` of every API process: the store keeps it.
"""

from __future__ import annotations

import math

from scheduler_core.estimate.hierarchy import GroupStats
from scheduler_core.estimate.source import SourcePosterior
from service import humanize as hz
from service.error_bodies import quote
from service.errors import InvalidInput, NotFound
from service.host_schemas import HostChangeIn, HostDeletedOut, HostsOut
from service.scheduler.context import Context
from service.scheduler.learning import host_key
from service.schemas import HostOut
from service.store.base import HostChange, HostOrder, HostState

__all__ = ["change_host", "delete_host", "explain_host", "host_out", "list_hosts", "why"]

#: Most hosts on one page of ``GET /hosts``.
MAX_PAGE = 1000


def _finite(x: float | None) -> float | None:
    return None if x is None or not math.isfinite(x) else x


def why(h: HostState, now: float) -> str:
    """In a sentence: whether the host gives out URLs at ``now``, and if not, why."""
    if h.paused:
        return "paused by an operator: out of /next until unpaused"
    if h.blocked_until is not None and h.blocked_until > now:
        until = hz.iso_time(h.blocked_until)
        if h.block_reason == "operator":
            return f"blocked by an operator until {until}"
        failures = h.consecutive_failures
        plural = "s" if failures != 1 else ""
        return f"blocked until {until} (back-off after {failures} failure{plural} in a row)"
    if h.in_flight >= h.max_in_flight:
        return f"{h.in_flight} lease(s) out, its cap: the next when one is settled or expires"
    if h.queued == 0:
        return "no URL queued"
    if h.gate_at > now:
        return f"politeness holds it until {hz.iso_time(h.gate_at)}"
    if h.due > 0:
        return f"gives out URLs now: {h.due} due"
    return f"open; its next URL is due at {hz.iso_time(h.next_due_at)}"


def host_out(h: HostState, now: float, group: GroupStats | None = None) -> HostOut:
    """The view of a host ``GET /hosts/{host}`` and ``GET /hosts`` give."""
    theta = group.pooled_theta if group is not None else 0.0
    source = None if group is None else SourcePosterior.from_tuple(group.source)
    blocked = h.paused or (h.blocked_until is not None and h.blocked_until > now)
    return HostOut(
        host=h.host,
        crawl_delay_s=h.crawl_delay_s,
        gate_at=_finite(h.gate_at),
        urls=h.urls,
        queued=h.queued,
        due=h.due,
        next_due_at=h.next_due_at,
        lambda_h=h.lambda_h,
        threshold=h.threshold,
        scored_threshold=h.scored_lambda,
        signal_precision=None if not theta > 0 else -math.expm1(-theta),
        signal_outcomes=group.pooled_outcomes if group is not None else 0.0,
        source_precision=None if source is None else source.precision,
        source_recall=None if source is None else source.recall,
        max_in_flight=h.max_in_flight,
        in_flight=h.in_flight,
        paused=h.paused,
        blocked=blocked,
        blocked_until=_finite(h.blocked_until),
        block_reason=None if h.block_reason is None else str(h.block_reason),
        consecutive_failures=h.consecutive_failures,
        retired=h.retired,
        rate_limit_per_s=_finite(1.0 / h.crawl_delay_s) if h.crawl_delay_s > 0 else None,
        why=why(h, now),
    )


async def explain_host(ctx: Context, host: str) -> HostOut:
    """A host's politeness, block, queue and multiplier.

    Raises
    ------
    NotFound
        If no URL of the host was ever registered.
    """
    now = ctx.clock.now()
    h = await ctx.store.get_host(host, now)
    if h is None:
        raise NotFound(f"host not known: {quote(host)}")
    (stats,) = await ctx.store.get_groups([host_key(host)])
    return host_out(h, now, GroupStats.from_tuple(stats))


async def change_host(ctx: Context, host: str, change: HostChangeIn) -> HostOut:
    """Apply an operator's change; it holds on every replica from the next ``/next``.

    Raises
    ------
    NotFound
        If the host is not known.
    """
    now = ctx.clock.now()
    h = await ctx.store.change_host(
        host,
        HostChange(
            crawl_delay_s=change.crawl_delay_s,
            max_in_flight=change.max_in_flight,
            blocked_until=change.blocked_until,
            paused=change.paused,
        ),
        now,
    )
    if h is None:
        raise NotFound(f"host not known: {quote(host)}")
    return host_out(h, now)


async def delete_host(ctx: Context, host: str) -> HostDeletedOut:
    """Drop a host with its URLs and their leases.

    Raises
    ------
    NotFound
        If the host is not known.
    """
    if await ctx.store.get_host(host, ctx.clock.now()) is None:
        raise NotFound(f"host not known: {quote(host)}")
    return HostDeletedOut(host=host, removed=await ctx.store.delete_host(host))


async def list_hosts(ctx: Context, order: HostOrder, limit: int, cursor: str | None) -> HostsOut:
    """A page of hosts in ``order`` (``due``: soonest to give out a URL first;
    ``lambda``: largest λ_h first; ``blocked``: blocked or paused hosts only).

    Raises
    ------
    InvalidInput
        If ``limit`` is outside [1, 1000] or ``cursor`` is not one this listing gave.
    """
    if not 1 <= limit <= MAX_PAGE:
        raise InvalidInput(("query", "limit"), f"must lie in [1, {MAX_PAGE}]")
    now = ctx.clock.now()
    try:
        page = await ctx.store.list_hosts(now, order, limit, cursor)
    except ValueError as e:
        raise InvalidInput(("query", "cursor"), str(e)) from None
    return HostsOut(hosts=[host_out(h, now) for h in page.hosts], cursor=page.cursor)
