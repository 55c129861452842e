"""Permanent redirects: the target of a 301/308 is registered with the source's
importance (the source is retired by the store when it settles the result)."""

from __future__ import annotations

from collections.abc import Sequence

from service.event_bodies import CrawlResultRow
from service.scheduler.context import Context
from service.scheduler.registry import register
from service.schemas import CrawlResultIn, UrlIn

__all__ = ["redirect_targets"]


async def redirect_targets(ctx: Context, results: Sequence[CrawlResultIn | CrawlResultRow]) -> None:
    """Register the ``redirect_to`` of each result (already accepted) that is not
    registered yet, with the importance W of its source; a known target is left alone."""
    if not results:
        return
    sources = await ctx.store.get_urls([r.url for r in results])
    targets: dict[str, UrlIn] = {}
    for r, src in zip(results, sources, strict=True):
        if r.redirect_to is None or r.redirect_to in targets:
            continue
        weight = None if src is None else src.weight
        targets[r.redirect_to] = UrlIn(url=r.redirect_to, weight=weight)
    await register(ctx, list(targets.values()), keep_known=True)
