"""What a found request carried (callback, errback, ``cb_kwargs``, meta), kept for when
the service leases its URL."""

from __future__ import annotations

import contextlib
from collections import OrderedDict
from typing import TYPE_CHECKING, Any

from scrapy import Request
from scrapy.utils.request import request_from_dict

if TYPE_CHECKING:
    from scrapy import Spider

__all__ = ["LEASE_META", "REGISTRATION_META", "RequestTemplates"]

#: ``request.meta`` key of a leased request's lease (``lease_id``, ``url``, ``host``...).
LEASE_META = "crawlsched_lease"
#: ``request.meta`` key of extra registration fields for ``POST /urls``.
REGISTRATION_META = "crawlsched"
#: Meta keys that describe one download, not the request: not kept.
_TRANSIENT_META = frozenset(
    {
        LEASE_META, REGISTRATION_META, "download_slot", "download_latency", "proxy",
        "_auth_proxy", "retry_times", "redirect_times", "redirect_ttl", "redirect_urls",
        "redirect_reasons", "dont_obey_robotstxt",
    }
)  # fmt: skip


class RequestTemplates:
    """The last ``size`` found requests, by canonical URL, as
    :meth:`scrapy.Request.to_dict` gives them (meta about one download dropped).

    A request whose callback or errback is not a method of the spider cannot be
    kept: its lease is fetched with the spider's ``parse``.

    Raises
    ------
    ValueError
        If ``size`` is below 1.
    """

    def __init__(self, size: int = 100_000) -> None:
        if size < 1:
            raise ValueError("`size` must be >= 1")
        self._size = size
        self._kept: OrderedDict[str, dict[str, Any]] = OrderedDict()

    def remember(self, url: str, request: Request, spider: Spider) -> None:
        """Keep what ``request`` carries for ``url``."""
        try:
            template = request.to_dict(spider=spider)
        except ValueError:
            return
        meta = template.get("meta") or {}
        template["meta"] = {k: v for k, v in meta.items() if k not in _TRANSIENT_META}
        self._kept[url] = template
        self._kept.move_to_end(url)
        if len(self._kept) > self._size:
            self._kept.popitem(last=False)

    def request(self, url: str, spider: Spider | None) -> Request:
        """A request for ``url``: the kept one rebuilt, else a plain ``GET``."""
        template = self._kept.get(url)
        if template is not None:
            with contextlib.suppress(ValueError, KeyError, AttributeError):
                return request_from_dict(template, spider=spider).replace(url=url)
        return Request(url)
