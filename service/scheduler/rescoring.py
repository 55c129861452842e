"""Recompute thresholds when λ₀ or λ_h drift (ARCHITECTURE.md, "Flow" 4).

A URL's due time is ``t_last + ι(Λ_h) − β·n`` with ι computed for the Λ_h of the
moment; when Λ_h moves by more than ``rescore_tolerance`` the host's URLs are
re-thresholded, host by host, in the background.
"""

from __future__ import annotations

import asyncio

import numpy as np

from service.scheduler.background import run_leading
from service.scheduler.context import Context
from service.scheduler.scoring import params_of, thresholds

__all__ = ["rescore_once", "run_rescorer"]


async def rescore_once(ctx: Context) -> int:
    """One pass over the hosts whose threshold drifted; returns URLs rescored."""
    s = ctx.settings
    stale = await ctx.store.hosts_needing_rescore(s.rescore_tolerance, s.rescore_batch)
    if not stale:
        return 0
    batches = [(host, lam, await ctx.store.host_urls(host)) for host, lam in stale]
    states = [u for _, _, urls in batches for u in urls]
    lambdas = np.concatenate([np.full(len(urls), lam) for _, lam, urls in batches])
    params = params_of(states)
    # numpy/scipy release the GIL: keep the event loop responsive on big passes
    previous = [u.threshold_s for u in states]
    thr = await asyncio.to_thread(thresholds, params, lambdas, s.value_terms, previous)
    k = 0
    for host, lam, urls in batches:
        mapping = {u.url: float(t) for u, t in zip(urls, thr[k : k + len(urls)], strict=True)}
        k += len(urls)
        await ctx.store.set_thresholds(host, mapping, lam)
    ctx.metrics.rescored.inc(len(states))
    return len(states)


async def run_rescorer(ctx: Context, stop: asyncio.Event | None = None) -> None:
    """Rescore every ``rescore_interval_s`` wall seconds until ``stop`` is set or the
    task is cancelled (one process of several: the ``rescorer`` role's holder)."""
    await run_leading(ctx, "rescorer", ctx.settings.rescore_interval_s, rescore_once, stop)
