"""Each host's crawl delay, as the Scrapy scheduler knows it, and Scrapy's download slots
spaced by it."""

from __future__ import annotations

import asyncio
from typing import TYPE_CHECKING, Any

from crawlsched.client import AsyncClient

if TYPE_CHECKING:
    from scrapy.core.downloader import Slot

__all__ = ["HostDelays"]


class HostDelays:
    """Per host, the crawl delay (clock s): robots.txt's ``Crawl-delay`` once parsed,
    before that the service's (``GET /hosts/{host}``).

    Parameters
    ----------
    margin_s : float
        Added to each download slot's delay, wall s (>= 0): requests sent a crawl
        delay apart can arrive closer by their trips' jitter.

    Raises
    ------
    ValueError
        If ``margin_s`` is negative.

    Examples
    --------
    >>> delays = HostDelays(margin_s=0.05)
    >>> delays.from_robots("a.example", 10.0)
    >>> delays.get("a.example"), delays.robots_delay("a.example"), delays.robots_delay("b.example")
    (10.0, 10.0, None)
    """

    def __init__(self, margin_s: float = 0.05) -> None:
        if not margin_s >= 0:
            raise ValueError("`margin_s` must be >= 0")
        self.margin_s = margin_s
        self._delays: dict[str, float] = {}
        self._from_robots: set[str] = set()

    def get(self, host: str) -> float | None:
        """The host's crawl delay, clock s, if known."""
        return self._delays.get(host)

    def robots_delay(self, host: str) -> float | None:
        """The host's crawl delay if it came from its robots.txt (worth registering)."""
        return self._delays[host] if host in self._from_robots else None

    def from_robots(self, host: str, delay_s: float) -> None:
        """Record a robots.txt ``Crawl-delay`` (it overrides the service's value)."""
        self._delays[host] = float(delay_s)
        self._from_robots.add(host)

    async def learn(self, client: AsyncClient, hosts: set[str]) -> None:
        """Ask the service for the crawl delay of the hosts not known yet (concurrently;
        a host it cannot tell stays unknown)."""
        unknown = sorted(h for h in hosts if h not in self._delays)
        answers: list[Any] = await asyncio.gather(
            *(client.host(h) for h in unknown), return_exceptions=True
        )
        for host, answer in zip(unknown, answers, strict=True):
            if isinstance(answer, dict):
                self._delays.setdefault(host, float(answer["crawl_delay_s"]))

    def space(self, slot: Slot, host: str, clock_rate: float) -> bool:
        """Give Scrapy's download slot of ``host`` its crawl delay in wall s (clock s over
        the clock rate, plus the margin), concurrency 1 and no random spread; False if
        the delay is not known."""
        delay_s = self._delays.get(host)
        if delay_s is None:
            return False
        slot.delay = delay_s / clock_rate + self.margin_s
        slot.concurrency = 1
        if hasattr(slot, "jitter"):
            slot.jitter = 0.0
        return True
