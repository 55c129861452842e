"""A simulated web behind one HTTP server: a world's pages, changing on its clock.

The farm maps each URL of a :class:`~scheduler_core.sim.World` to
``http://<host><path>`` (plain HTTP: the farm has no certificates) and answers a
request by its ``Host`` (or an absolute-form request target, as HTTP proxies get)
and path.  World time t is clock time ``origin + t``; a page's version at t is its
number of changes in (0, t].  It answers with ETag and Last-Modified, ``304`` to a
conditional request whose validator still holds, ``429`` on strict hosts fetched
sooner than their crawl delay, ``503`` while a host is down, and ``404`` for
anything else.  robots.txt gives each host's ``Crawl-delay`` (clock s) and its
sitemap, whose ``lastmod`` is each URL's latest change-indicating signal (true or
false, as the world drew them).

Every page request is logged: the ``200`` and ``304`` answers to world URLs are
the crawl the farm scores (:meth:`Farm.score`), and the spacing of page requests
per host is audited against its crawl delay.

Politeness per simulated host: each simulated host keeps its own name
(``host017.example``) and is reached through the farm as an HTTP proxy (or with a
``Host`` header), so every host model sees one host per simulated host:
crawlsched's (a URL's ``host[:port]``), Scrapy's download slots (by host name) and
the farm's audit alike.  A path prefix (``http://127.0.0.1:P/h/host017.example/…``)
would put the whole farm on one network host behind one politeness gate.
robots.txt and sitemap requests do not count against a crawl delay.  The farm's
times (``Crawl-delay``, ``Retry-After``, ``Last-Modified``, ``lastmod``) are clock
times: under an accelerated clock a crawler spaces a host's requests by its crawl
delay over the clock rate, in wall seconds.
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Mapping
from dataclasses import dataclass, field
from functools import cached_property
from urllib.parse import urlsplit

import numpy as np

from scheduler_core.sim import SIGNAL, World, round_robin_freshness, schedule_freshness
from service.clock import Clock
from service.webfarm import pages
from service.webfarm.plan import FarmOptions, HostPlan, plan_hosts
from service.webfarm.score import FarmScore, HostAudit

__all__ = ["Answer", "Farm"]

#: Paths every host answers besides its pages.
ROBOTS, SITEMAP, INDEX = "/robots.txt", "/sitemap.xml", "/"


@dataclass(frozen=True)
class Answer:
    """An HTTP answer: status, headers and body."""

    status: int
    headers: Mapping[str, str] = field(default_factory=dict)
    body: bytes = b""


class Farm:
    """A world served over HTTP on a clock, with its fetch log and score.

    Parameters
    ----------
    world : World
        The simulated web (URLs, hosts, crawl delays, changes, signals, clicks).
    clock : Clock
        The farm's time; share the crawl scheduler's (see ``service.webfarm.server``).
    options : FarmOptions, optional
        Strict and flaky hosts, links per page, politeness tolerance.
    plan : HostPlan, optional
        Strict hosts and outages; drawn from ``options`` if absent.
    origin : float, optional
        Clock time of world time 0, s; default: the clock's reading now.
    start_on_request : bool
        Without ``origin``: world time stands at 0 until the first page request,
        and starts then (a crawler's start-up costs it nothing).
    """

    def __init__(
        self,
        world: World,
        clock: Clock,
        *,
        options: FarmOptions | None = None,
        plan: HostPlan | None = None,
        origin: float | None = None,
        start_on_request: bool = False,
    ) -> None:
        self.world = world
        self.clock = clock
        self.options = options or FarmOptions()
        self.plan = plan or plan_hosts(world, self.options)
        self._origin: float | None = None
        if origin is not None or not start_on_request:
            self._origin = clock.now() if origin is None else float(origin)
        self._host_index = {h.lower(): j for j, h in enumerate(world.hosts)}
        self.paths: list[str] = []
        self._page_index: dict[tuple[int, str], int] = {}
        for i, url in enumerate(world.urls):
            parts = urlsplit(url)
            path = (parts.path or "/") + (f"?{parts.query}" if parts.query else "")
            self.paths.append(path)
            self._page_index[int(world.host_of[i]), path] = i
        self._members = [np.flatnonzero(world.host_of == j) for j in range(len(world.hosts))]
        h = len(world.hosts)
        self._last_request = np.full(h, -math.inf)
        self._min_interval = np.full(h, math.inf)
        self._violations = np.zeros(h, dtype=np.int64)
        self._page_requests = np.zeros(h, dtype=np.int64)
        self._throttled = np.zeros(h, dtype=np.int64)
        self._unavailable = np.zeros(h, dtype=np.int64)
        self._fetch_url: list[int] = []
        self._fetch_time: list[float] = []
        self.status_counts: Counter[int] = Counter()

    # ------------------------------------------------------------------ time
    @property
    def started(self) -> bool:
        """Whether world time runs (see ``start_on_request``)."""
        return self._origin is not None

    @property
    def origin(self) -> float:
        """Clock time of world time 0, s (the clock's reading now, until started)."""
        return self.clock.now() if self._origin is None else self._origin

    def world_time(self) -> float:
        """World time now, s (clock time minus :attr:`origin`; 0 until started)."""
        return 0.0 if self._origin is None else self.clock.now() - self._origin

    @property
    def tolerance_s(self) -> float:
        """Politeness slack, clock s (``tolerance_wall_s`` × the clock rate)."""
        return self.options.tolerance_wall_s * self.clock.rate

    # ------------------------------------------------------------- addresses
    def page_url(self, i: int) -> str:
        """The farm's URL of world URL ``i``: ``http://<host><path>``."""
        return f"http://{self.world.hosts[int(self.world.host_of[i])]}{self.paths[i]}"

    def host_of(self, host_header: str) -> int | None:
        """Host index of a ``Host`` header value (any port ignored), or None."""
        name = host_header.strip().lower()
        j = self._host_index.get(name)
        if j is None and ":" in name:
            j = self._host_index.get(name.rsplit(":", 1)[0])
        return j

    # ----------------------------------------------------------------- pages
    def version(self, i: int, t: float) -> tuple[int, float]:
        """(number of changes of URL ``i`` in (0, t], world time of the last one or 0)."""
        changes = self.world.change_times(i)
        v = int(np.searchsorted(changes, t, side="right"))
        return v, float(changes[v - 1]) if v else 0.0

    def lastmod(self, i: int, t: float) -> float | None:
        """World time of URL ``i``'s latest signal at or before ``t``, or None."""
        times, offsets = self._signals
        own = times[offsets[i] : offsets[i + 1]]
        k = int(np.searchsorted(own, t, side="right"))
        return float(own[k - 1]) if k else None

    @cached_property
    def _signals(self) -> tuple[np.ndarray, np.ndarray]:
        """Signal times by URL then time (CSR: times, offsets of shape (m + 1,))."""
        log = self.world.events()
        position = np.flatnonzero(log.kind == SIGNAL)
        order = np.lexsort((log.time[position], log.url[position]))
        urls = log.url[position][order]
        offsets = np.zeros(len(self.world.urls) + 1, dtype=np.int64)
        np.cumsum(np.bincount(urls, minlength=len(self.world.urls)), out=offsets[1:])
        return np.asarray(log.time[position][order]), offsets

    @cached_property
    def _links(self) -> np.ndarray:
        """Link targets of each page, shape (m, links_per_page): the first half on its
        own host, the rest anywhere (one seeded draw)."""
        k, m = self.options.links_per_page, len(self.world.urls)
        seed = self.world.seed if self.options.seed is None else self.options.seed
        rng = np.random.default_rng([seed, 0x11AC])
        same = (k + 1) // 2
        host = self.world.host_of
        sizes = np.array([len(g) for g in self._members])
        starts = np.concatenate([[0], np.cumsum(sizes)[:-1]])
        flat = np.concatenate(self._members) if m else np.empty(0, np.int64)
        pick = np.floor(rng.random((m, same)) * sizes[host][:, None]).astype(np.int64)
        own = flat[starts[host][:, None] + pick]
        anywhere = rng.integers(0, max(m, 1), size=(m, k - same))
        return np.concatenate([own, anywhere], axis=1)

    # ------------------------------------------------------------- answering
    def handle(
        self, method: str, host_header: str, target: str, headers: Mapping[str, str]
    ) -> Answer:
        """Answer one request; ``target`` is the path (and query) or an absolute URL,
        ``headers`` the request's, lower-case names.  Logs page requests."""
        if target.startswith(("http://", "https://")):
            parts = urlsplit(target)
            host_header = parts.netloc
            target = (parts.path or "/") + (f"?{parts.query}" if parts.query else "")
        answer = self._answer(method, host_header, target, headers)
        self.status_counts[answer.status] += 1
        if method == "HEAD":
            answer = Answer(answer.status, answer.headers)
        return answer

    def _answer(
        self, method: str, host_header: str, target: str, headers: Mapping[str, str]
    ) -> Answer:
        if method not in ("GET", "HEAD"):
            return Answer(405, {"Allow": "GET, HEAD"})
        j = self.host_of(host_header)
        if j is None:
            return Answer(404, {"Content-Type": "text/plain"}, b"no such host on this farm\n")
        t = self.world_time()
        host = self.world.hosts[j]
        if target == ROBOTS:
            body = pages.robots_txt(host, float(self.world.crawl_delay_s[j]))
            return Answer(200, {"Content-Type": "text/plain"}, body)
        if target == SITEMAP:
            return self._sitemap(j, t)
        i = self._page_index.get((j, target))
        if i is None and target != INDEX:
            return Answer(404, {"Content-Type": "text/plain"}, b"no such page\n")
        if self._origin is None:
            self._origin, t = self.clock.now(), 0.0
        refused = self._arrive(j, t)
        if refused is not None:
            return refused
        if i is None:
            links = [self.paths[int(u)] for u in self._members[j]]
            return Answer(200, {"Content-Type": "text/html"}, pages.index_html(host, links))
        return self._page(i, t, headers, counts=method == "GET")

    def _arrive(self, j: int, t: float) -> Answer | None:
        """Audit a page request of host ``j`` at world time ``t``; a 429 or 503 if refused."""
        delay = float(self.world.crawl_delay_s[j])
        gap = t - float(self._last_request[j])
        self._page_requests[j] += 1
        self._last_request[j] = t
        self._min_interval[j] = min(self._min_interval[j], gap)
        early = gap < delay - self.tolerance_s
        self._violations[j] += early
        up_at = self.plan.down_until(j, t)
        if up_at is not None:
            self._unavailable[j] += 1
            return Answer(503, {"Retry-After": str(math.ceil(up_at - t))})
        if early and self.plan.strict[j]:
            self._throttled[j] += 1
            return Answer(429, {"Retry-After": str(max(1, math.ceil(delay - gap)))})
        return None

    def _page(self, i: int, t: float, headers: Mapping[str, str], *, counts: bool) -> Answer:
        """Page ``i`` at world time ``t``; a GET (``counts``) is logged as a fetch."""
        version, changed = self.version(i, t)
        tag = pages.etag(i, version)
        modified = self.origin + changed
        validators = {"ETag": tag, "Last-Modified": pages.http_date(modified)}
        if counts and t <= self.world.duration_s:
            self._fetch_url.append(i)
            self._fetch_time.append(t)
        if self._not_modified(headers, tag, modified):
            return Answer(304, validators)
        host = int(self.world.host_of[i])
        links = []
        for u in self._links[i].tolist():
            same = int(self.world.host_of[u]) == host
            links.append((self.paths[u] if same else self.page_url(u), f"page {u}"))
        title = f"{self.world.hosts[host]} page {i}"
        body = pages.page_html(title, version, pages.http_date(modified), links)
        return Answer(200, {**validators, "Content-Type": "text/html"}, body)

    @staticmethod
    def _not_modified(headers: Mapping[str, str], tag: str, modified: float) -> bool:
        """RFC 9110 §13.2.2: If-None-Match decides when present, else If-Modified-Since."""
        if "if-none-match" in headers:
            return pages.etag_matches(headers["if-none-match"], tag)
        since = pages.parse_http_date(headers.get("if-modified-since", ""))
        return since is not None and math.floor(modified) <= since

    def _sitemap(self, j: int, t: float) -> Answer:
        entries = []
        for i in self._members[j].tolist():
            signal = self.lastmod(i, t)
            entries.append((self.page_url(i), None if signal is None else self.origin + signal))
        return Answer(200, {"Content-Type": "application/xml"}, pages.sitemap_xml(entries))

    # --------------------------------------------------------------- scoring
    @cached_property
    def round_robin_reference(self) -> float:
        """Click-weighted freshness of uniform round-robin at the world's budget
        (politeness not modelled): :func:`scheduler_core.sim.round_robin_freshness`."""
        return round_robin_freshness(self.world).click_weighted

    def fetches(self) -> tuple[np.ndarray, np.ndarray]:
        """The crawl so far: URL index (c,) and world time (c,) of each 200 or 304
        answer to a world URL within the world's span."""
        n = min(len(self._fetch_url), len(self._fetch_time))
        urls = np.asarray(self._fetch_url[:n], dtype=np.int64)
        return urls, np.asarray(self._fetch_time[:n], dtype=np.float64)

    def score(self) -> FarmScore:
        """Freshness of the crawl so far and the politeness audit.

        Freshness is :func:`scheduler_core.sim.schedule_freshness` of
        :meth:`fetches`: the share of the world's clicks after its warm-up that
        found the copy last fetched fresh (every URL counts as fetched at world
        time 0, as in the simulator).  Before the world's end it still counts
        every click of the world, most of them not yet come.
        """
        urls, times = self.fetches()
        fresh = schedule_freshness(self.world, urls, times)
        audits = tuple(
            HostAudit(
                host=self.world.hosts[j],
                crawl_delay_s=float(self.world.crawl_delay_s[j]),
                strict=bool(self.plan.strict[j]),
                outages=len(self.plan.outages[j]),
                page_requests=int(self._page_requests[j]),
                min_interval_s=(
                    float(self._min_interval[j]) if math.isfinite(self._min_interval[j]) else None
                ),
                violations=int(self._violations[j]),
                throttled=int(self._throttled[j]),
                unavailable=int(self._unavailable[j]),
            )
            for j in range(len(self.world.hosts))
        )
        now = self.world_time()
        return FarmScore(
            freshness=fresh.click_weighted,
            freshness_stderr=fresh.click_stderr,
            clicks=fresh.clicks,
            freshness_time_weighted=fresh.time_weighted,
            crawls=fresh.crawls,
            round_robin_reference=self.round_robin_reference,
            requests={str(k): v for k, v in sorted(self.status_counts.items())},
            violations=sum(a.violations for a in audits),
            tolerance_s=self.tolerance_s,
            world_time_s=now,
            duration_s=self.world.duration_s,
            done=now >= self.world.duration_s,
            hosts=audits,
        )
