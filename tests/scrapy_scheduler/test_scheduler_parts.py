"""The Scrapy scheduler's parts without a crawl: settings, what enqueue_request does
with each kind of request, the dupefilter, change detection and the service clock."""

from __future__ import annotations

import time

import pytest
from scrapy import Request, Spider
from scrapy.exceptions import NotConfigured
from scrapy.utils.test import get_crawler

from crawlsched.scrapy import (
    LEASE_META,
    ChangeDetector,
    DupeFilter,
    RequestTemplates,
    Scheduler,
    ServiceClock,
)

SETTINGS = {"CRAWLSCHED_URL": "http://127.0.0.1:9", "CONCURRENT_REQUESTS": 7}


def _scheduler(**settings: object) -> Scheduler:
    return Scheduler.from_crawler(get_crawler(settings_dict={**SETTINGS, **settings}))


def test_settings_configure_the_scheduler() -> None:
    with pytest.raises(NotConfigured, match="CRAWLSCHED_URL"):
        Scheduler.from_crawler(get_crawler(settings_dict={}))
    s = _scheduler(CRAWLSCHED_RATE_PER_S=0.5, CRAWLSCHED_POLITENESS_MARGIN_S=0.1)
    assert (s.batch, s.rate_per_s, s.delays.margin_s, s.idle_close_s) == (7, 0.5, 0.1, None)
    assert _scheduler(CRAWLSCHED_BATCH=3).batch == 3
    with pytest.raises(ValueError, match="margin_s"):
        _scheduler(CRAWLSCHED_POLITENESS_MARGIN_S=-1)
    with pytest.raises(ValueError, match="rate_per_s"):
        _scheduler(CRAWLSCHED_RATE_PER_S=0)


def test_found_requests_are_registered_once_with_their_fields() -> None:
    s = _scheduler()
    priors = {"crawlsched": {"weight": 0.0, "fixed": True}}
    assert s.enqueue_request(Request("HTTP://Shop.Example:80/a#frag", meta=priors))
    assert not s.enqueue_request(Request("http://shop.example/a"))  # the same URL
    assert s.enqueue_request(Request("http://shop.example/a", dont_filter=True))
    assert not s.enqueue_request(Request("ftp://shop.example/file"))  # not http(s)
    assert s._registrations == [
        {"weight": 0.0, "fixed": True, "url": "http://shop.example/a"},
        {"url": "http://shop.example/a"},
    ]
    assert s.next_request() is None  # registered, not fetched: the service says when
    assert s.has_pending_requests()


def test_leased_follow_ups_retries_and_copies() -> None:
    s = _scheduler()
    lease = {"lease_id": "L1", "url": "http://shop.example/a", "host": "shop.example"}
    leased = Request(lease["url"], meta={LEASE_META: lease})
    s._injecting["L1"] = leased
    assert s.enqueue_request(leased) and s.next_request() is leased
    retry = leased.replace(meta={**leased.meta, "retry_times": 1})
    assert not s.enqueue_request(retry)  # the service schedules retries
    moved = leased.replace(
        url="http://shop.example/b", meta={**leased.meta, "redirect_urls": [lease["url"]]}
    )
    assert s.enqueue_request(moved) and s.next_request() is moved  # the fetch goes on
    copied = leased.replace(url="http://shop.example/c")  # a spider copied the meta
    assert s.enqueue_request(copied)
    assert s._registrations == [{"url": "http://shop.example/c"}]


def test_robots_crawl_delay_rides_along_with_registrations() -> None:
    s = _scheduler()
    s.delays._delays["shop.example"] = 30.0  # as GET /hosts said
    s.enqueue_request(Request("http://shop.example/x"))
    s.delays.from_robots("shop.example", 30.0)
    s.enqueue_request(Request("http://shop.example/y"))
    assert s._registrations == [
        {"url": "http://shop.example/x"},  # the service's own value: not sent back
        {"url": "http://shop.example/y", "crawl_delay_s": 30.0},
    ]


def test_dupefilter_remembers_the_last_urls_it_let_through() -> None:
    df = DupeFilter(memo_size=2)
    assert not df.request_seen(Request("http://a.example/1"))
    assert df.request_seen(Request("http://A.example:80/1#x"))  # canonically the same
    assert not df.request_seen(Request("http://a.example/2"))
    assert not df.request_seen(Request("http://a.example/3"))  # forgets /1
    assert not df.request_seen(Request("http://a.example/1"))
    crawler = get_crawler(settings_dict={"CRAWLSCHED_DUPEFILTER_MEMO": 5})
    assert DupeFilter.from_crawler(crawler)._size == 5
    with pytest.raises(ValueError):
        DupeFilter(memo_size=0)


def test_change_detection_falls_back_from_etag_to_last_modified_to_content() -> None:
    d = ChangeDetector(size=2)
    url = "https://a.example/"
    assert d.observe(url, 200, None, "Mon, 01 Jan 2024 00:00:00 GMT", b"x") is None
    assert d.conditional_headers(url) == {"If-Modified-Since": "Mon, 01 Jan 2024 00:00:00 GMT"}
    assert d.observe(url, 200, None, "Mon, 01 Jan 2024 00:00:00 GMT", b"y") is False
    assert d.observe(url, 200, None, None, b"y") is False  # by digest
    assert d.observe(url, 200, None, None, b"z") is True
    assert d.observe(url, 503, None, None, b"") is None  # says nothing, keeps the copy
    assert d.observe(url, 304, None, None, b"") is False
    d.observe("https://b.example/", 200, '"1"', None, b"")
    d.observe("https://c.example/", 200, '"1"', None, b"")  # forgets a.example
    assert d.conditional_headers(url) == {}


def test_service_clock_extrapolates_at_its_rate() -> None:
    clock = ServiceClock(1000.0, 100.0, time.monotonic() - 0.5)
    assert clock.now() == pytest.approx(1050.0, abs=5.0)
    clock.anchor(2000.0, time.monotonic())
    assert clock.now() == pytest.approx(2000.0, abs=5.0)
    with pytest.raises(ValueError):
        ServiceClock(0.0, 0.0)


class _Spider(Spider):
    name = "t"

    def on_item(self, response: object) -> None:
        """A callback of the spider's own."""


def test_templates_bring_back_callback_and_meta_for_the_lease() -> None:
    spider = _Spider()
    templates = RequestTemplates(size=2)
    found = Request(
        "http://a.example/1", callback=spider.on_item, cb_kwargs={"k": 1},
        meta={"depth": 2, "proxy": "http://p", LEASE_META: {}, "mine": "x"},
    )  # fmt: skip
    templates.remember("http://a.example/1", found, spider)
    again = templates.request("http://a.example/1", spider)
    assert again.callback == spider.on_item and again.cb_kwargs == {"k": 1}
    assert again.meta == {"depth": 2, "mine": "x"}  # nothing of one download
    templates.remember("http://a.example/2", Request("http://a.example/2", callback=print), spider)
    plain = templates.request("http://a.example/2", spider)  # not a spider method: parse
    assert plain.callback is None and plain.url == "http://a.example/2"
    for k in (3, 4):  # two more kept: the first is forgotten
        templates.remember(f"http://a.example/{k}", Request(f"http://a.example/{k}"), spider)
    assert templates.request("http://a.example/1", spider).callback is None
