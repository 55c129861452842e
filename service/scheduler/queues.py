"""Use cases that read the URL frontier queue by queue (a queue is a host) and keep
the content signatures crawlers send: what URLFrontier's calls ask of crawlsched
besides registration (:mod:`~service.scheduler.registry`), dispatch
(:mod:`~service.scheduler.dispatch`) and crawl results (:mod:`~service.scheduler.events`).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from service.scheduler.context import Context
from service.scheduler.hosts import MAX_PAGE
from service.store.base import HostOrder, HostState, UrlState
from service.store.host_pages import is_blocked

__all__ = [
    "CrawlCounts",
    "all_hosts",
    "crawl_counts",
    "host_state",
    "host_urls",
    "is_active",
    "signature_changes",
    "url_states",
]


@dataclass(frozen=True, slots=True)
class CrawlCounts:
    """Counts of the whole frontier (URLFrontier's ``GetStats`` without a key)."""

    urls: int  # registered and not retired
    leased: int  # under an active lease
    due: int  # unleased and due now
    hosts: int
    leases_expired_total: int
    retired: int  # URLs that will not be fetched again unless signalled or registered
    blocked_hosts: int  # hosts blocked or paused now


async def crawl_counts(ctx: Context) -> CrawlCounts:
    """Counts of the whole frontier at the store's clock (expired leases reclaimed
    first)."""
    st = await ctx.store.stats(ctx.clock, 0)
    return CrawlCounts(
        st.urls, st.leases_active, st.due_backlog, st.hosts, st.leases_expired_total,
        st.retired, st.blocked_hosts,
    )  # fmt: skip


async def host_state(ctx: Context, host: str) -> HostState | None:
    """One host's queue and politeness gate, or None if it holds no URL."""
    return await ctx.store.get_host(host, ctx.clock.now())


async def all_hosts(ctx: Context) -> list[HostState]:
    """Every host of the frontier, by name (code point order), at the clock's now."""
    now = ctx.clock.now()
    states: list[HostState] = []
    cursor: str | None = None
    while True:
        page = await ctx.store.list_hosts(now, HostOrder.DUE, MAX_PAGE, cursor)
        states += page.hosts
        if page.cursor is None:
            return sorted(states, key=lambda h: h.host)
        cursor = page.cursor


def is_active(host: HostState, now: float) -> bool:
    """URLFrontier's active queue: URLs waiting, neither paused nor blocked at ``now``."""
    return host.queued > 0 and not is_blocked(host, now)


async def host_urls(ctx: Context, host: str) -> list[UrlState]:
    """Every URL of a host, by URL."""
    return await ctx.store.host_urls(host)


async def url_states(ctx: Context, urls: Sequence[str]) -> list[UrlState | None]:
    """Snapshots of the named URLs (canonical form; None where not registered)."""
    return await ctx.store.get_urls(urls)


async def signature_changes(
    ctx: Context, signatures: Sequence[tuple[str, str]]
) -> list[bool | None]:
    """Whether each URL's content changed, judged by its content signature (an ETag or
    a digest of the body): keeps each (URL, signature) and compares it with the one
    kept before.  None where no signature was kept before (a first fetch: unknown)."""
    previous = await ctx.store.swap_signatures(signatures)
    return [
        None if old is None else old != new
        for old, (_, new) in zip(previous, signatures, strict=True)
    ]
