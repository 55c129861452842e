"""Recompute thresholds when λ₀ or λ_h drift (ARCHITECTURE.md, "Flow" 4).

A URL's due time is ``t_last + ι(Λ_h) − β·n`` with ι computed for the Λ_h of the
moment; when Λ_h moves by more than ``rescore_tolerance`` the host's URLs are
re-thresholded, host by host, in the background.

A pass goes in slices of whole hosts, about ``rescore_slice`` URLs each: read, search
and write back, then the event loop serves what waits before the next slice (with the
embedded store the pass shares the API's event loop; a slice's search runs inline, as
a thread would hold the interpreter lock for most of it anyway).  Hosts are
independent, so the slices decide exactly what one pass over all of them would.
"""

from __future__ import annotations

import asyncio
from collections.abc import Sequence

from scheduler_core.params import UrlParams
from service.scheduler.background import run_leading
from service.scheduler.context import Context
from service.scheduler.scoring import thresholds

__all__ = ["rescore_once", "rescore_hosts", "run_rescorer"]


async def rescore_hosts(ctx: Context, hosts: Sequence[tuple[str, float]]) -> int:
    """Re-threshold the URLs of ``hosts`` ((host, Λ_h) pairs, Λ_h in W·s) in one slice:
    their columns read (:meth:`~service.store.base.Store.rescore_columns`), the
    thresholds searched, the columns written back
    (:meth:`~service.store.base.Store.set_rescored`); returns URLs rescored."""
    cols = await ctx.store.rescore_columns(hosts)
    if not len(cols):
        return 0
    p = cols.params
    params = UrlParams.create(
        weight=p[:, 0], change_rate=p[:, 1], recall=p[:, 2], false_signal_rate=p[:, 3]
    )
    thr = thresholds(params, cols.row_lambdas(), ctx.settings.value_terms, p[:, 4])
    await asyncio.sleep(0)  # requests first, then the write-back
    await ctx.store.set_rescored(cols, thr)
    ctx.metrics.rescored.inc(len(cols))
    return len(cols)


async def rescore_once(ctx: Context) -> int:
    """One pass over the hosts whose threshold drifted (at most ``rescore_batch``
    URLs), in slices of about ``rescore_slice`` URLs (:func:`rescore_hosts`) with the
    event loop free between them; returns URLs rescored."""
    s = ctx.settings
    stale = await ctx.store.hosts_needing_rescore(s.rescore_tolerance, s.rescore_batch)
    total, k, take = 0, 0, 1
    while k < len(stale):
        part = stale[k : k + take]
        k += len(part)
        n = await rescore_hosts(ctx, part)
        total += n
        # the next slice's host count from this one's URLs per host
        take = max(1, round(s.rescore_slice * len(part) / n)) if n else 2 * take
        await asyncio.sleep(0)
    return total


async def run_rescorer(ctx: Context, stop: asyncio.Event | None = None) -> None:
    """Rescore every ``rescore_interval_s`` wall seconds until ``stop`` is set or the
    task is cancelled (one process of several: the ``rescorer`` role's holder)."""
    await run_leading(ctx, "rescorer", ctx.settings.rescore_interval_s, rescore_once, stop)
