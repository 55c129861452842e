"""Recompute thresholds when λ₀ or λ_h drift (ARCHITECTURE.md, "Flow" 4).

A URL's due time is ``t_last + ι(Λ_h) − β·n`` with ι computed for the Λ_h of the
moment; when Λ_h moves by more than ``rescore_tolerance``, or by more than λ₀'s own
noise where that is larger (:func:`scheduler_core.multipliers.drift_tolerance`), the
host's URLs are re-thresholded, host by host, in the background.

A URL never crawled is due at its registration whatever its threshold: a pass leaves
it out, and the fold gives it a threshold with its first crawl
(:func:`service.scheduler.learning.apply`).  A fresh frontier of millions of URLs then
costs no rescoring until it is crawled.

A pass reads and writes back in slices of whole hosts, about ``rescore_slice`` URLs
each, and the process serves what waits between slices (with the embedded store the
pass shares the API's event loop, and these steps are Python work on its records).
The search between them runs on the whole pass at once, in a thread when it is large
(numpy and scipy release the interpreter lock over large arrays, so it overlaps the
requests).  Hosts and rows are independent, so the slices decide exactly what one
read, one search and one write-back of all the hosts would.
"""

from __future__ import annotations

import asyncio

import numpy as np

from scheduler_core.multipliers import drift_tolerance
from service.scheduler.background import run_leading
from service.scheduler.context import Context
from service.scheduler.scoring import params_of_table, thresholds
from service.store.columns import RescoreColumns

__all__ = ["rescore_once", "run_rescorer"]

#: Passes of at least this many URLs search in a thread; smaller ones inline, where
#: the hand-off costs more than it frees.
_THREAD_MIN = 2048


async def rescore_once(ctx: Context) -> int:
    """One pass over the hosts whose threshold drifted (at most ``rescore_batch``
    URLs); returns URLs rescored.  The hosts' URLs come and go as columns
    (:meth:`~service.store.base.Store.rescore_columns`,
    :meth:`~service.store.base.Store.set_rescored`), in slices of about
    ``rescore_slice`` URLs with the event loop free between them.  The URLs of the
    stale hosts it leaves for later passes go to ``crawlsched_rescore_backlog_urls``."""
    s = ctx.settings
    lam0 = await ctx.store.lambda0_tracker()
    tolerance = drift_tolerance(s.rescore_tolerance, lam0, ctx.tracker)
    ctx.metrics.rescore_tolerance.set(tolerance)
    found = await ctx.store.hosts_needing_rescore(tolerance, s.rescore_batch)
    stale = found.hosts
    slices: list[RescoreColumns] = []
    k, take = 0, 1
    while k < len(stale):
        part = stale[k : k + take]
        k += len(part)
        cols = await ctx.store.rescore_columns(part)
        slices.append(cols)
        # the next slice's host count from this one's URLs per host (those read)
        seen = len(cols) + cols.never_crawled
        take = max(1, round(s.rescore_slice * len(part) / seen)) if seen else 2 * take
        await asyncio.sleep(0)
    total = sum(len(c) for c in slices)
    read = total + sum(c.never_crawled for c in slices)
    ctx.metrics.rescore_backlog.set(max(0, found.urls - read))
    if not slices:
        return 0
    thr = np.empty(0)
    if total:
        p = np.concatenate([c.params for c in slices])
        params = params_of_table(p)
        lambdas = np.concatenate([c.row_lambdas() for c in slices])
        args = (params, lambdas, s.value_terms, p[:, 4])
        # a large search in a thread: numpy and scipy release the GIL over large arrays
        big = total >= _THREAD_MIN
        thr = await asyncio.to_thread(thresholds, *args) if big else thresholds(*args)
    # every host gets its scored Λ, those whose URLs were all left out too
    k = 0
    for cols in slices:
        await asyncio.sleep(0)
        await ctx.store.set_rescored(cols, thr[k : k + len(cols)])
        k += len(cols)
    ctx.metrics.rescored.inc(total)
    return total


async def run_rescorer(ctx: Context, stop: asyncio.Event | None = None) -> None:
    """Rescore every ``rescore_interval_s`` wall seconds until ``stop`` is set or the
    task is cancelled (one process of several: the ``rescorer`` role's holder)."""
    await run_leading(ctx, "rescorer", ctx.settings.rescore_interval_s, rescore_once, stop)
