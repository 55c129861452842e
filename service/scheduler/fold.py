"""The fold: appended signals and clicks applied in batches, and the URLs of settled
crawl results re-estimated, off the request path.

``POST /signal`` and ``POST /click`` append their batch
(:mod:`service.scheduler.events`); ``POST /crawl-result`` settles its leases and appends
the accepted results' URLs in the same atomic step
(:meth:`~service.store.base.Store.settle`).  A fold step takes the appended batches,
applies the signals' and clicks' counts and due-time moves
(:meth:`~service.store.base.Store.fold_events`), counts them by status in the metrics
(``crawlsched_events_total``: ``accepted``, ``unknown_url``, ``stale``) and queues every
URL whose history grew for re-estimation (with its crawl outcomes when a result came
in), once however many events it got; :func:`fold_now` then re-estimates the queue in
vectorised batches (:func:`~service.scheduler.learning.flush_relearn`).  The fold runs
every ``fold_lag_s / 2`` wall seconds, in ``crawlsched worker`` with the Redis store and
in the API process with the memory store (:func:`run_folder`); the metric
``crawlsched_fold_lag_seconds`` is the age of the oldest event not yet folded.
"""

from __future__ import annotations

import asyncio
import os
import socket

from service.scheduler.background import run_leading
from service.scheduler.context import Context
from service.scheduler.learning import flush_relearn, queue_relearn

__all__ = ["consumer_name", "fold_now", "fold_step", "run_folder"]

#: Fold steps one :func:`fold_now` takes at most (it ends earlier once nothing waits).
_MAX_STEPS = 1000


def consumer_name() -> str:
    """This process's name among the folders: host name and process id."""
    return f"{socket.gethostname()}-{os.getpid()}"


async def fold_step(ctx: Context, consumer: str | None = None) -> int:
    """Fold up to ``fold_batch`` appended batches per shard and queue the URLs they
    touched for re-estimation (:func:`~service.scheduler.learning.queue_relearn`: the
    queue is flushed when full); returns the batches (parts, one per batch and shard)
    folded.

    Raises
    ------
    StoreUnavailable
        If the store cannot be reached (what was folded stays folded; the URLs not yet
        re-estimated stay queued).
    """
    s = ctx.settings
    folded = await ctx.store.fold_events(
        consumer or consumer_name(),
        s.fold_batch,
        s.signal_discard_s,
        s.estimate_decay_s,
        s.fold_claim_s,
    )
    for (kind, status), n in folded.counts.items():
        ctx.metrics.events.labels(kind.value, status.value).inc(n)
    if folded.outcomes:
        await queue_relearn(ctx, folded.outcomes, outcomes=True)
    if folded.touched:
        await queue_relearn(ctx, folded.touched, outcomes=False)
    return folded.parts


async def fold_now(ctx: Context, consumer: str | None = None, *, relearn: bool = True) -> int:
    """Fold until no appended batch waits (at most ``_MAX_STEPS`` steps), then, with
    ``relearn``, re-estimate every queued URL: every event appended before the call has
    moved its URL's due time and estimates when it returns (the fold loop, tests; the
    simulator folds each step and re-estimates when it dispatches).  Returns the parts
    folded."""
    total = 0
    for _ in range(_MAX_STEPS):
        n = await fold_step(ctx, consumer)
        total += n
        if n == 0:
            break
    if relearn:
        await flush_relearn(ctx)
    return total


async def run_folder(ctx: Context, stop: asyncio.Event | None = None) -> None:
    """:func:`fold_now` every ``fold_lag_s / 2`` wall seconds (every process that runs
    it folds: the consumer group shares the batches out)."""
    consumer = consumer_name()

    async def step(c: Context) -> int:
        return await fold_now(c, consumer)

    await run_leading(ctx, None, ctx.settings.fold_lag_s / 2, step, stop, name="fold")
