"""``crawlsched worker``: the background work of a Redis deployment, out of the API.

A worker folds the appended signals and clicks and re-estimates the URLs they and the
settled crawl results touched (:mod:`service.scheduler.fold`), rescores
hosts whose multiplier drifted (:mod:`service.scheduler.rescoring`), runs the learner's
passes (:mod:`service.scheduler.learning`) and beats: it keeps the store's worker key
alive (:meth:`~service.store.base.Store.heartbeat`, ``worker_ttl_s``), which the API's
``/healthz`` and ``crawlsched_worker_up`` read.  Several workers may run: the fold's
consumer group shares the appended batches out, and the rescorer and learner roles go
to one of them at a time.  With the memory store the API process does all of this
itself.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import signal

from service.app import build_clock, open_store, shared_clock
from service.errors import StoreUnavailable
from service.metrics import Metrics
from service.scheduler.context import Context
from service.scheduler.fold import consumer_name, run_folder
from service.scheduler.learning import run_learner
from service.scheduler.rescoring import run_rescorer
from service.settings import Settings

__all__ = ["beat", "run_worker"]

log = logging.getLogger(__name__)


async def beat(ctx: Context, owner: str, stop: asyncio.Event) -> None:
    """Renew the worker's heartbeat every ``worker_ttl_s / 3`` wall seconds until
    ``stop`` is set (a store outage is logged once and retried)."""
    ttl_s = ctx.settings.worker_ttl_s
    down = False
    while not stop.is_set():
        try:
            await ctx.store.heartbeat(owner, ttl_s)
            down = False
        except StoreUnavailable as exc:
            if not down:
                log.warning("heartbeat paused: %s", exc)
            down = True
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(stop.wait(), ttl_s / 3)


async def run_worker(
    settings: Settings, stop: asyncio.Event | None = None, metrics: Metrics | None = None
) -> None:
    """Run the worker on the store the settings name until ``stop`` is set (or SIGTERM /
    SIGINT arrive, when run as the main program's loop).

    Raises
    ------
    ValueError
        If the settings name the memory store (its API process does the work itself),
        or the Redis data was written with another shard count.
    StoreUnavailable
        If Redis does not answer within 30 s at the start.
    """
    if settings.store == "memory":
        raise ValueError(
            "a worker serves a Redis store (CRAWLSCHED_STORE=redis://…); with the memory "
            "store the API process folds, rescores and learns itself"
        )
    stop = stop or asyncio.Event()
    store = await open_store(settings)
    try:
        clock = await shared_clock(settings, build_clock(settings), store)
        ctx = Context(store, clock, settings, metrics or Metrics())
        owner = consumer_name()
        log.info("worker %s serving %s", owner, settings.store)
        tasks = {
            asyncio.create_task(beat(ctx, owner, stop), name="heartbeat"),
            asyncio.create_task(run_folder(ctx, stop), name="fold"),
            asyncio.create_task(run_rescorer(ctx, stop), name="rescorer"),
            asyncio.create_task(run_learner(ctx, stop), name="learner"),
        }
        await stop.wait()
        for task in tasks:
            task.cancel()
        _, pending = await asyncio.wait(tasks, timeout=5.0)
        if pending:
            log.warning("worker tasks did not stop within 5 s; stopping anyway")
    finally:
        await store.close()


def main_loop(settings: Settings, metrics_port: int = 0, metrics_host: str = "127.0.0.1") -> None:
    """:func:`run_worker` in a new event loop, stopped by SIGTERM or SIGINT; with a
    ``metrics_port``, the worker's Prometheus metrics (the fold's event counts, the
    learner's figures) are served there."""
    metrics = Metrics()
    if metrics_port:
        from prometheus_client import start_http_server

        start_http_server(metrics_port, metrics_host, registry=metrics.registry)

    async def main() -> None:
        stop = asyncio.Event()
        loop = asyncio.get_running_loop()
        for sig in (signal.SIGTERM, signal.SIGINT):
            loop.add_signal_handler(sig, stop.set)
        await run_worker(settings, stop, metrics)

    asyncio.run(main())
