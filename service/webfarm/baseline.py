"""Uniform round-robin over real HTTP: the baseline a crawl scheduler must beat on a farm.

It lists the farm's URLs from the hosts' sitemaps and fetches them in a fixed
cycle in which each host's URLs are spread evenly, at the farm's crawl budget R,
never sooner after the previous fetch of a host than its crawl delay.  It knows
nothing of clicks or signals.
"""

from __future__ import annotations

import asyncio
import time
import xml.etree.ElementTree as ET
from collections import Counter
from dataclasses import dataclass, field
from typing import Any

import httpx

__all__ = ["RoundRobinStats", "crawl_round_robin"]

_SITEMAP_NS = "{http://www.sitemaps.org/schemas/sitemap/0.9}"


@dataclass
class RoundRobinStats:
    """What the round-robin crawler did: answers by status, waits for politeness, and
    the world time its cycle started at (s; after listing the URLs)."""

    statuses: Counter[int] = field(default_factory=Counter)
    polite_waits: int = 0
    started_at_s: float = 0.0

    @property
    def fetches(self) -> int:
        """Requests sent."""
        return sum(self.statuses.values())


def _interleave(by_host: list[list[str]]) -> list[tuple[int, str]]:
    """(host, URL) in the cycle's order: each host's URLs spread evenly over the cycle
    (its k-th of n at position (k + ½)/n), so that a host's fetches are evenly spaced."""
    slots = [
        ((k + 0.5) / len(urls), j, url)
        for j, urls in enumerate(by_host)
        for k, url in enumerate(urls)
    ]
    return [(j, url) for _, j, url in sorted(slots)]


async def _urls(http: httpx.AsyncClient, hosts: list[dict[str, Any]]) -> list[list[str]]:
    by_host = []
    for host in hosts:
        answer = await http.get(host["sitemap"])
        answer.raise_for_status()
        root = ET.fromstring(answer.content)
        by_host.append([str(loc.text) for loc in root.iter(f"{_SITEMAP_NS}loc")])
    return by_host


async def crawl_round_robin(
    farm_url: str, *, budget_per_s: float | None = None, tick_s: float = 0.005
) -> RoundRobinStats:
    """Crawl the farm at ``farm_url`` round-robin until its world's span is over.

    Requests go through the farm as an HTTP proxy (absolute-form targets).

    Parameters
    ----------
    farm_url : str
        The farm's base URL (``http://127.0.0.1:P``).
    budget_per_s : float, optional
        Fetches per clock second; default the world's budget R.
    tick_s : float
        Wall s between checks of the budget.

    Raises
    ------
    httpx.HTTPError
        If the farm does not answer its ``/_farm/…`` calls or a sitemap.
    """
    stats = RoundRobinStats()
    async with httpx.AsyncClient(base_url=farm_url, timeout=30.0) as farm:
        info = (await farm.get("/_farm/world")).raise_for_status().json()
        hosts = (await farm.get("/_farm/hosts")).raise_for_status().json()
    rate, budget = float(info["rate"]), budget_per_s or float(info["budget_per_s"])
    wall0, world0 = time.monotonic(), float(info["world_time_s"])

    def world_time() -> float:
        return world0 + (time.monotonic() - wall0) * rate

    delays_wall = [float(h["crawl_delay_s"]) / rate for h in hosts]
    last_wall = [-float("inf")] * len(hosts)
    async with httpx.AsyncClient(proxy=farm_url, timeout=30.0, trust_env=False) as http:
        cycle = _interleave(await _urls(http, hosts))
        if not cycle:
            return stats
        credit, k, t_prev = 0.0, 0, world_time()
        stats.started_at_s = t_prev
        while (t := world_time()) < float(info["duration_s"]):
            credit = min(credit + (t - t_prev) * budget, 10.0)
            t_prev = t
            if credit < 1.0:
                await asyncio.sleep(tick_s)
                continue
            j, url = cycle[k % len(cycle)]
            wait = last_wall[j] + delays_wall[j] - time.monotonic()
            if wait > 0:
                stats.polite_waits += 1
                await asyncio.sleep(wait)
            last_wall[j] = time.monotonic()
            try:
                answer = await http.get(url)
                stats.statuses[answer.status_code] += 1
            except httpx.TransportError:
                stats.statuses[0] += 1
            if k == 0 and not info["started"]:  # the first page request started the world
                async with httpx.AsyncClient(base_url=farm_url, timeout=30.0) as farm:
                    info = (await farm.get("/_farm/world")).raise_for_status().json()
                wall0, world0 = time.monotonic(), float(info["world_time_s"])
                stats.started_at_s = t_prev = world0
            credit -= 1.0
            k += 1
    return stats
