"""Hand a farm's clicks and signals to a crawl scheduler as they happen.

The farm's users request cached copies (clicks, the importance signal) and its
hosts announce changes (the world's change-indicating signals, true or false;
the same ones its sitemaps' ``lastmod`` show).  A search engine's front end and
a push source (IndexNow, CDN pings) would post them; :func:`feed_events` does,
on the farm's clock, which must be the service's (``crawlsched webfarm --service``).
"""

from __future__ import annotations

import asyncio
import logging
from dataclasses import dataclass

import httpx
import numpy as np

from scheduler_core.sim import CLICK, SIGNAL
from service.client import CrawlschedClient, CrawlschedError
from service.webfarm.farm import Farm

__all__ = ["FeedStats", "feed_events"]

log = logging.getLogger(__name__)


@dataclass
class FeedStats:
    """Events posted and accepted so far."""

    clicks: int = 0
    signals: int = 0
    accepted: int = 0
    failed_batches: int = 0


async def feed_events(
    farm: Farm,
    client: CrawlschedClient,
    *,
    tick_s: float = 0.02,
    max_batch: int = 2000,
    stats: FeedStats | None = None,
) -> FeedStats:
    """Post the world's clicks and signals, in batches, as the farm's clock passes them.

    Each event goes out with its own time (``origin + t``) once the clock has
    passed it (after the world started); events of the world's span only, then the
    coroutine returns.
    A batch the service refuses (4xx, or unavailable once the client's retries
    ran out) is logged and counted in ``failed_batches``, not retried.

    Parameters
    ----------
    farm : Farm
    client : CrawlschedClient
        The service sharing the farm's clock.
    tick_s : float
        Wall s between posts.
    max_batch : int
        Largest batch posted at once.
    stats : FeedStats, optional
        Filled as the feed goes (a live view); a new one if absent.
    """
    stats = stats if stats is not None else FeedStats()
    events, world = farm.world.events(), farm.world
    t_prev = 0.0
    while not farm.started:
        await asyncio.sleep(tick_s)
    while True:
        t = min(farm.world_time(), world.duration_s)
        batch = events.window(t_prev, t)
        t_prev = t
        for kind, path in ((CLICK, "clicks"), (SIGNAL, "signals")):
            rows = [
                {
                    "url": farm.page_url(int(batch.url[j])),
                    "time": farm.origin + float(batch.time[j]),
                }
                for j in np.flatnonzero(batch.kind == kind)
            ]
            for k in range(0, len(rows), max_batch):
                chunk = rows[k : k + max_batch]
                post = client.clicks if kind == CLICK else client.signals
                try:
                    answer = await post(chunk)
                except (CrawlschedError, httpx.TransportError) as exc:
                    stats.failed_batches += 1
                    log.warning("feed: %d %s not delivered: %s", len(chunk), path, exc)
                    continue
                stats.accepted += int(answer["accepted"])
                if kind == CLICK:
                    stats.clicks += len(chunk)
                else:
                    stats.signals += len(chunk)
        if t >= world.duration_s:
            return stats
        await asyncio.sleep(tick_s)
