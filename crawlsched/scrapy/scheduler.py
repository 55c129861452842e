"""A Scrapy scheduler that takes its requests from crawlsched's ``/next``.

``SCHEDULER = "crawlsched.scrapy.Scheduler"`` and ``CRAWLSCHED_URL`` in a Scrapy
project's settings.  A request the spider yields is registered with the service, not
fetched; leases from ``/next`` become requests (conditional on the previous copy),
handed to the engine; each leased fetch is reported as a crawl result when its
response is downloaded; each host's download slot is spaced by its crawl delay.  The
HTTP calls run as tasks on Twisted's asyncio reactor, never blocking it.  Every
setting and the whole flow: ``docs/scrapy.md``.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import math
import time
from collections import deque
from typing import TYPE_CHECKING, Any

from scrapy import Request, signals
from scrapy.core.scheduler import BaseScheduler
from scrapy.exceptions import NotConfigured
from scrapy.utils.asyncio import is_asyncio_available
from scrapy.utils.defer import deferred_from_coro

from crawlsched.client import AsyncClient, CrawlschedError
from crawlsched.scrapy.changes import ChangeDetector, ServiceClock
from crawlsched.scrapy.dupefilter import DupeFilter
from crawlsched.scrapy.politeness import HostDelays
from crawlsched.scrapy.retry_after import retry_after_s
from crawlsched.scrapy.templates import LEASE_META, REGISTRATION_META, RequestTemplates
from service.urls import canonical_url, host_of

if TYPE_CHECKING:
    from typing import Self

    from scrapy import Spider
    from scrapy.crawler import Crawler
    from scrapy.http import Response
    from scrapy.robotstxt import RobotParser
    from twisted.internet.defer import Deferred

__all__ = ["LEASE_META", "REGISTRATION_META", "Scheduler"]

log = logging.getLogger(__name__)

_MAX_POST = 1000  # events per POST


class Scheduler(BaseScheduler):
    """Scrapy's scheduler contract on top of crawlsched's URL frontier (see the module).

    Parameters
    ----------
    crawler : scrapy.crawler.Crawler
    url : str
        The service (``CRAWLSCHED_URL``).
    token : str, optional
        Its bearer token.
    batch : int
        Most leases held at once: queued here or being fetched (> 0).
    rate_per_s : float, optional
        The crawl budget: leases taken per second of the service's clock; None: as
        many as ``batch`` allows.
    poll_s : float
        Wall s between polls of ``/next`` when it had no lease for us (> 0).
    idle_close_s : float, optional
        Report no pending requests (so that Scrapy closes the spider when idle)
        once ``/next`` has had nothing for this many wall s; None: never.
    politeness_slots : bool
        Give each host's download slot its crawl delay (see the module).
    politeness_margin_s : float
        Added to each slot's delay, wall s (>= 0): requests sent a crawl delay
        apart can arrive closer by their trips' jitter.
    templates : int
        Requests remembered (their callback and meta) for when their lease comes.

    Raises
    ------
    NotConfigured
        From :meth:`from_crawler` without ``CRAWLSCHED_URL``.
    ValueError
        On a non-positive ``batch``, ``poll_s`` or ``rate_per_s``, or a negative
        ``politeness_margin_s``.
    """

    def __init__(
        self,
        crawler: Crawler,
        url: str,
        *,
        token: str | None = None,
        batch: int = 16,
        rate_per_s: float | None = None,
        poll_s: float = 0.05,
        idle_close_s: float | None = None,
        politeness_slots: bool = True,
        politeness_margin_s: float = 0.05,
        templates: int = 100_000,
    ) -> None:
        if batch < 1 or not poll_s > 0 or (rate_per_s is not None and not rate_per_s > 0):
            raise ValueError("`batch`, `poll_s` and `rate_per_s` must be > 0")
        self.crawler, self.url, self.token = crawler, url, token
        self.batch, self.rate_per_s, self.poll_s = batch, rate_per_s, poll_s
        self.idle_close_s, self.politeness_slots = idle_close_s, politeness_slots
        self.df = DupeFilter.from_crawler(crawler)
        self.changes = ChangeDetector(crawler.settings.getint("CRAWLSCHED_VALIDATORS", 1_000_000))
        self.templates = RequestTemplates(templates)
        self._ready: deque[Request] = deque()
        self._injecting: dict[str, Request] = {}
        self._outstanding: dict[str, dict[str, Any]] = {}  # lease id -> lease, until settled
        self._registrations: list[dict[str, Any]] = []
        self._results: list[dict[str, Any]] = []
        self.delays = HostDelays(politeness_margin_s)
        self._client: AsyncClient | None = None
        self._clock: ServiceClock | None = None
        self._task: asyncio.Task[None] | None = None
        self._closing = False
        self._credit, self._credit_at = 0.0, time.monotonic()
        self._last_lease_at = time.monotonic()
        self.spider: Spider | None = None

    @classmethod
    def from_crawler(cls, crawler: Crawler) -> Self:
        """Build from the crawler's ``CRAWLSCHED_*`` settings (see the module)."""
        s = crawler.settings
        url = s.get("CRAWLSCHED_URL")
        if not url:
            raise NotConfigured("crawlsched.scrapy.Scheduler needs the CRAWLSCHED_URL setting")
        rate, idle = s.get("CRAWLSCHED_RATE_PER_S"), s.get("CRAWLSCHED_IDLE_CLOSE_S")
        return cls(
            crawler,
            str(url),
            token=s.get("CRAWLSCHED_TOKEN") or None,
            batch=s.getint("CRAWLSCHED_BATCH") or s.getint("CONCURRENT_REQUESTS", 16),
            rate_per_s=None if rate is None else float(rate),
            poll_s=s.getfloat("CRAWLSCHED_POLL_S", 0.05),
            idle_close_s=None if idle is None else float(idle),
            politeness_slots=s.getbool("CRAWLSCHED_POLITENESS_SLOTS", True),
            politeness_margin_s=s.getfloat("CRAWLSCHED_POLITENESS_MARGIN_S", 0.05),
            templates=s.getint("CRAWLSCHED_TEMPLATES", 100_000),
        )

    # ------------------------------------------------------------ open / close
    def open(self, spider: Spider) -> Deferred[None]:
        """Read the service's clock, connect the signals, start polling ``/next``.

        Raises
        ------
        RuntimeError
            If no asyncio event loop runs Scrapy (another Twisted reactor).
        """
        try:
            asyncio_runs = is_asyncio_available()
        except RuntimeError:  # no reactor at all
            asyncio_runs = False
        if not asyncio_runs:
            raise RuntimeError(
                "crawlsched.scrapy.Scheduler needs TWISTED_REACTOR = "
                '"twisted.internet.asyncioreactor.AsyncioSelectorReactor"'
            )
        self.spider = spider
        return deferred_from_coro(self._open())

    async def _open(self) -> None:
        self._client = AsyncClient(self.url, token=self.token)
        health = await self._client.healthz()
        self._clock = ServiceClock(float(health["now"]), float(health["clock_rate"]))
        connect = self.crawler.signals.connect
        connect(self._on_downloaded, signal=signals.response_downloaded)
        connect(self._on_left_downloader, signal=signals.request_left_downloader)
        connect(self._on_reached_downloader, signal=signals.request_reached_downloader)
        connect(self._on_robots, signal=signals.robots_parsed)
        self.df.open()
        self._task = asyncio.create_task(self._run(), name="crawlsched-scheduler")

    def close(self, reason: str) -> Deferred[None]:
        """Stop polling, post what is left to post, close the client."""
        return deferred_from_coro(self._close(reason))

    async def _close(self, reason: str) -> None:
        self._closing = True
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task
        if self._client is not None:
            with contextlib.suppress(CrawlschedError, OSError):
                await self._post()
            await self._client.aclose()
        self.df.close(reason)

    # ------------------------------------------------------ Scrapy's contract
    def has_pending_requests(self) -> bool:
        """True while requests are queued or in flight, events wait to be posted, or
        the service may still lease (always, unless ``idle_close_s`` ran out)."""
        if self._ready or self._registrations or self._results or self._outstanding:
            return True
        if self.idle_close_s is None:
            return not self._closing
        return time.monotonic() - self._last_lease_at < self.idle_close_s

    def enqueue_request(self, request: Request) -> bool:
        """Queue a leased request for download, or register a found one with the service.

        Returns False (Scrapy then fires ``request_dropped``) for a URL this process
        already registered, one that is not http(s), and Scrapy's retries of leased
        requests (the service schedules retries).
        """
        lease = request.meta.get(LEASE_META)
        if lease is not None:
            if self._injecting.get(lease["lease_id"]) is request:
                self._ready.append(request)
                return True
            if request.meta.get("redirect_urls"):  # the leased fetch goes on elsewhere
                self._ready.appendleft(request)
                return True
            if "retry_times" in request.meta:
                self._inc("crawlsched/retries_left_to_service")
                return False
            meta = {k: v for k, v in request.meta.items() if k != LEASE_META}
            request = request.replace(meta=meta)
        try:
            url = canonical_url(request.url)
        except ValueError:
            self._inc("crawlsched/unregistrable")
            return False
        if not request.dont_filter and self.df.request_seen(request):
            if self.spider is not None:
                self.df.log(request, self.spider)
            return False
        item = {**request.meta.get(REGISTRATION_META, {}), "url": url}
        delay = self.delays.robots_delay(host_of(url))
        if delay is not None:
            item.setdefault("crawl_delay_s", delay)
        self._registrations.append(item)
        if self.spider is not None:
            self.templates.remember(url, request, self.spider)
        return True

    def next_request(self) -> Request | None:
        """The next leased request, or None while the service has none for us."""
        return self._ready.popleft() if self._ready else None

    # ------------------------------------------------------------ the loop
    async def _run(self) -> None:
        """Post registrations and results, then lease; again every poll (at once
        while ``/next`` fills the room we ask for)."""
        while not self._closing:
            full = False
            try:
                await self._post()
                full = await self._lease()
            except asyncio.CancelledError:
                raise
            except Exception:  # the crawl goes on; the next round retries
                log.exception("crawlsched: call to %s failed", self.url)
            await asyncio.sleep(0 if full else self.poll_s)

    async def _post(self) -> None:
        assert self._client is not None
        while self._registrations:
            chunk, self._registrations = (
                self._registrations[:_MAX_POST],
                self._registrations[_MAX_POST:],
            )
            answer = await self._client.discover(chunk)
            self._inc("crawlsched/registered", answer.get("created", 0))
            self._inc("crawlsched/already_registered", answer.get("kept", 0))
        while self._results:
            chunk, self._results = self._results[:_MAX_POST], self._results[_MAX_POST:]
            try:
                answer = await self._client.results(chunk)
            except CrawlschedError as exc:  # refused as a whole: nothing was applied
                log.error("crawlsched refused %d crawl results: %s", len(chunk), exc.detail)
                self._inc("crawlsched/results_refused", len(chunk))
                continue
            self._inc("crawlsched/results_accepted", answer["accepted"])

    async def _lease(self) -> bool:
        """Ask ``/next`` for as many leases as there is room and budget for; True if it
        filled the request."""
        assert self._client is not None and self._clock is not None
        now_wall = time.monotonic()
        self._expire(self._clock.now())
        room = self.batch - len(self._ready) - len(self._outstanding)
        n = room
        if self.rate_per_s is not None:
            gained = (now_wall - self._credit_at) * self.rate_per_s * self._clock.rate
            self._credit = min(self._credit + gained, float(self.batch))
            n = min(n, math.floor(self._credit))
        self._credit_at = now_wall
        if n < 1:
            return False
        answer = await self._client.next(n)
        self._inc("crawlsched/asked", n)
        self._clock.anchor(float(answer["now"]), time.monotonic())
        leases = answer["leases"]
        if self.rate_per_s is not None:
            self._credit -= len(leases)
            if len(leases) < n:
                self._credit = min(self._credit, 1.0)  # idle budget is lost, not banked
        if leases:
            self._last_lease_at = time.monotonic()
            await self.delays.learn(self._client, {lease["host"] for lease in leases})
        self._inc("crawlsched/leased", len(leases))
        for lease in leases:
            self._inject(lease)
        return len(leases) == n

    def _expire(self, now: float) -> None:
        """Forget leases past their deadline that never settled (dropped by a middleware):
        the service hands their URLs out again."""
        for lease_id in [k for k, v in self._outstanding.items() if v["deadline"] < now]:
            del self._outstanding[lease_id]
            self._inc("crawlsched/leases_lapsed")

    def _inject(self, lease: dict[str, Any]) -> None:
        url = lease["url"]
        request = self.templates.request(url, self.spider)
        meta = {**request.meta, LEASE_META: lease, "download_slot": lease["host"]}
        headers = request.headers.copy()
        headers.update(self.changes.conditional_headers(url))
        request = request.replace(url=url, meta=meta, headers=headers, dont_filter=True)
        self._outstanding[lease["lease_id"]] = lease
        self._injecting[lease["lease_id"]] = request
        try:
            self.crawler.engine.crawl(request)  # -> enqueue_request; wakes the engine
        except RuntimeError:  # the spider is closing: the lease will lapse
            self._outstanding.pop(lease["lease_id"], None)
        finally:
            del self._injecting[lease["lease_id"]]

    # ------------------------------------------------------------- signals
    def _on_downloaded(self, response: Response, request: Request, spider: Spider) -> None:
        lease = request.meta.get(LEASE_META)
        if lease is None or lease["lease_id"] not in self._outstanding:
            return
        header = response.headers.get
        etag, modified = header(b"ETag"), header(b"Last-Modified")
        changed = self.changes.observe(
            lease["url"],
            response.status,
            None if etag is None else etag.decode("latin-1"),
            None if modified is None else modified.decode("latin-1"),
            response.body,
        )
        wait_s = None
        if response.status == 429 or response.status >= 500:
            wait_s = retry_after_s(header(b"Retry-After"))
        self._settle(lease, response.status, changed, wait_s)

    def _on_left_downloader(self, request: Request, spider: Spider) -> None:
        lease = request.meta.get(LEASE_META)
        if lease is not None and lease["lease_id"] in self._outstanding:
            self._settle(lease, 0, None)  # no response: a network error

    def _settle(
        self,
        lease: dict[str, Any],
        status: int,
        changed: bool | None,
        retry_after_wall_s: float | None = None,
    ) -> None:
        assert self._clock is not None
        del self._outstanding[lease["lease_id"]]
        result = {
            "url": lease["url"],
            "lease_id": lease["lease_id"],
            "fetched_at": self._clock.now(),
            "status": status,
            "changed": changed,
        }
        if retry_after_wall_s is not None:
            result["retry_after_s"] = retry_after_wall_s * self._clock.rate
        self._results.append(result)
        self._inc(f"crawlsched/fetched/{status}")

    def _on_reached_downloader(self, request: Request, spider: Spider) -> None:
        lease = request.meta.get(LEASE_META)
        if not self.politeness_slots or lease is None or self._clock is None:
            return
        assert self.crawler.engine is not None
        slot = self.crawler.engine.downloader.slots.get(request.meta.get("download_slot", ""))
        if slot is not None:
            self.delays.space(slot, lease["host"], self._clock.rate)

    def _on_robots(self, robotparser: RobotParser, request: Request) -> None:
        delay = robotparser.crawl_delay(self._user_agent(request))
        if delay is None:
            return
        try:
            url = canonical_url(request.url)
        except ValueError:
            return
        self.delays.from_robots(host_of(url), float(delay))
        # tell the service (the URL itself is left alone: keep_known)
        self._registrations.append({"url": url, "crawl_delay_s": float(delay)})

    def _user_agent(self, request: Request) -> str:
        settings = self.crawler.settings
        agent = settings.get("ROBOTSTXT_USER_AGENT") or request.headers.get(b"User-Agent")
        agent = agent or settings.get("USER_AGENT", "")
        return agent.decode("latin-1") if isinstance(agent, bytes) else str(agent)

    def _inc(self, key: str, count: int = 1) -> None:
        if self.crawler.stats is not None and count:
            self.crawler.stats.inc_value(key, count)
