"""A Scrapy dupefilter that leaves the decision to crawlsched's registry."""

from __future__ import annotations

import logging
from collections import OrderedDict
from typing import TYPE_CHECKING

from scrapy.dupefilters import BaseDupeFilter

from service.urls import canonical_url

if TYPE_CHECKING:
    from typing import Self

    from scrapy import Request, Spider
    from scrapy.crawler import Crawler
    from scrapy.statscollectors import StatsCollector

__all__ = ["DupeFilter"]

log = logging.getLogger(__name__)


class DupeFilter(BaseDupeFilter):
    """Filter the links this process already sent to crawlsched's registry; nothing else.

    Whether a URL is new is the registry's business: the scheduler registers links
    with ``keep_known`` (a URL already registered is left as it is), whichever
    process or crawl found it first.  This filter only spares the service the same
    link twice from one crawl: it remembers the last ``memo_size`` canonical URLs
    it let through (``CRAWLSCHED_DUPEFILTER_MEMO``).  Requests with
    ``dont_filter`` are not checked (the scheduler's contract).
    """

    def __init__(self, memo_size: int = 1_000_000, stats: StatsCollector | None = None) -> None:
        if memo_size < 1:
            raise ValueError("`memo_size` must be >= 1")
        self._size = memo_size
        self._seen: OrderedDict[str, None] = OrderedDict()
        self._stats = stats

    @classmethod
    def from_crawler(cls, crawler: Crawler) -> Self:
        size = crawler.settings.getint("CRAWLSCHED_DUPEFILTER_MEMO", 1_000_000)
        return cls(size, crawler.stats)

    def request_seen(self, request: Request) -> bool:
        """Whether this process already sent the request's URL to the registry."""
        try:
            url = canonical_url(request.url)
        except ValueError:
            url = request.url
        if url in self._seen:
            self._seen.move_to_end(url)
            return True
        self._seen[url] = None
        if len(self._seen) > self._size:
            self._seen.popitem(last=False)
        return False

    def log(self, request: Request, spider: Spider) -> None:
        """Count (and debug-log) a filtered request."""
        log.debug("Filtered duplicate request: %s", request, extra={"spider": spider})
        if self._stats is not None:
            self._stats.inc_value("crawlsched/duplicates_filtered")
