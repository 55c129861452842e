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
every ``fold_lag_s / 4`` wall seconds (re-estimating for at most ``fold_lag_s / 2``),
in ``crawlsched worker`` with the Redis store and in the API process with the memory
store (:func:`run_folder`); the metric ``crawlsched_fold_lag_seconds`` is the age of
the oldest event whose effects are not all applied: not yet folded, or folded and its
URL not yet re-estimated (``crawlsched_relearn_lag_seconds``, from the folders'
reports).
"""

from __future__ import annotations

import asyncio
import math
import os
import socket

from service.scheduler.background import run_leading
from service.scheduler.context import Context
from service.scheduler.learning import flush_relearn, queue_relearn

__all__ = ["consumer_name", "fold_now", "fold_round", "fold_step", "run_folder"]

#: Fold steps one :func:`fold_now` takes at most (it ends earlier once nothing waits).
_MAX_STEPS = 1000


def consumer_name() -> str:
    """This process's name among the folders: host name and process id."""
    return f"{socket.gethostname()}-{os.getpid()}"


async def fold_step(ctx: Context, consumer: str | None = None, *, defer: bool = False) -> int:
    """Fold up to ``fold_batch`` appended batches per shard and queue the URLs they
    touched for re-estimation (:func:`~service.scheduler.learning.queue_relearn`: the
    queue is flushed when full, unless ``defer``: then the caller flushes it); returns
    the batches (parts, one per batch and shard) folded.

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
    for urls, outcomes in ((folded.outcomes, True), (folded.touched, False)):
        if not urls:
            continue
        since = math.inf if folded.oldest_at is None else folded.oldest_at
        if defer:
            ctx.relearn_queue.add(urls, outcomes, since)
        else:
            await queue_relearn(ctx, urls, outcomes=outcomes, since=since)
    return folded.parts


async def fold_now(
    ctx: Context,
    consumer: str | None = None,
    *,
    relearn: bool = True,
    relearn_budget_s: float | None = None,
) -> int:
    """Fold until no appended batch waits (at most ``_MAX_STEPS`` steps), then, with
    ``relearn``, re-estimate the queued URLs: every event appended before the call has
    moved its URL's due time and estimates when it returns (tests; the simulator folds
    each step and re-estimates when it dispatches).  With ``relearn_budget_s`` (wall s;
    the fold loop) the URLs are only queued while folding and the re-estimation stops
    after a batch that ends past the budget: the rest waits, deduplicated, for the next
    call, so that folding keeps up under load.  Returns the parts folded."""
    defer = relearn_budget_s is not None
    total = 0
    for _ in range(_MAX_STEPS):
        n = await fold_step(ctx, consumer, defer=defer)
        total += n
        if n == 0:
            break
    if relearn:
        await flush_relearn(ctx, relearn_budget_s)
    return total


async def fold_round(ctx: Context, consumer: str, budget_s: float, ttl_s: float) -> int:
    """One round of the fold loop: fold until nothing waits, queueing the touched URLs,
    then re-estimate them for at most ``budget_s`` wall seconds.  After the folding and
    again after the re-estimation, the append time of the oldest event whose URL still
    waits for re-estimation goes to the store
    (:meth:`~service.store.base.Store.report_backlog`, holding for ``ttl_s`` wall s):
    ``crawlsched_fold_lag_seconds`` counts the events folded but not yet applied.
    Returns the parts folded.

    Raises
    ------
    StoreUnavailable
        If the store cannot be reached (the URLs not re-estimated stay queued).
    """

    async def report() -> None:
        await ctx.store.report_backlog(consumer, ctx.relearn_queue.oldest(), ttl_s)

    try:
        n = await fold_now(ctx, consumer, relearn=False, relearn_budget_s=budget_s)
        await report()
        await flush_relearn(ctx, budget_s)
        return n
    finally:
        await report()


async def run_folder(ctx: Context, stop: asyncio.Event | None = None) -> None:
    """:func:`fold_round` every ``fold_lag_s / 4`` wall seconds, re-estimating for at
    most ``fold_lag_s / 2`` wall seconds per round, reports holding ``worker_ttl_s``
    (every process that runs it folds: the consumer group shares the batches out)."""
    consumer = consumer_name()
    s = ctx.settings

    async def step(c: Context) -> int:
        return await fold_round(c, consumer, s.fold_lag_s / 2, s.worker_ttl_s)

    await run_leading(ctx, None, s.fold_lag_s / 4, step, stop, name="fold")
