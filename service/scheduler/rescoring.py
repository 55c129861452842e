"""Recompute thresholds when λ₀ or λ_h drift (ARCHITECTURE.md, "Flow" 4).

A URL's due time is ``t_last + ι(Λ_h) − β·n`` with ι computed for the Λ_h of the
moment; when Λ_h moves by more than ``rescore_tolerance`` the host's URLs are
re-thresholded, host by host, in the background.
"""

from __future__ import annotations

import asyncio

from scheduler_core.params import UrlParams
from service.scheduler.background import run_leading
from service.scheduler.context import Context
from service.scheduler.scoring import thresholds

__all__ = ["rescore_once", "run_rescorer"]


async def rescore_once(ctx: Context) -> int:
    """One pass over the hosts whose threshold drifted; returns URLs rescored.  The
    hosts' URLs come and go as columns (:meth:`~service.store.base.Store.rescore_columns`,
    :meth:`~service.store.base.Store.set_rescored`)."""
    s = ctx.settings
    stale = await ctx.store.hosts_needing_rescore(s.rescore_tolerance, s.rescore_batch)
    if not stale:
        return 0
    cols = await ctx.store.rescore_columns(stale)
    p = cols.params
    params = UrlParams.create(
        weight=p[:, 0], change_rate=p[:, 1], recall=p[:, 2], false_signal_rate=p[:, 3]
    )
    # numpy/scipy release the GIL: keep the event loop responsive on big passes
    thr = await asyncio.to_thread(thresholds, params, cols.row_lambdas(), s.value_terms, p[:, 4])
    await ctx.store.set_rescored(cols, thr)
    ctx.metrics.rescored.inc(len(cols))
    return len(cols)


async def run_rescorer(ctx: Context, stop: asyncio.Event | None = None) -> None:
    """Rescore every ``rescore_interval_s`` wall seconds until ``stop`` is set or the
    task is cancelled (one process of several: the ``rescorer`` role's holder)."""
    await run_leading(ctx, "rescorer", ctx.settings.rescore_interval_s, rescore_once, stop)
