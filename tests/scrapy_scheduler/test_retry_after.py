"""A host that answers 429 with ``Retry-After`` is blocked that long by the service,
through a real Scrapy crawl (``scrapy runspider``) and a real HTTP server."""

from __future__ import annotations

import os
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import httpx
import pytest

from service.loadgen.demo import served_app

pytestmark = [pytest.mark.e2e, pytest.mark.slow]

RETRY_AFTER_S = 3600
SPIDER = """
import os

import scrapy


class BusySpider(scrapy.Spider):
    name = "busy"
    start_urls = ["http://busy.example/a", "http://busy.example/b"]
    custom_settings = {
        "SCHEDULER": "crawlsched.scrapy.Scheduler",
        "CRAWLSCHED_URL": os.environ["CRAWLSCHED_URL"],
        "ROBOTSTXT_OBEY": False,
    }

    def parse(self, response):
        return None
"""


class _TooManyRequests(BaseHTTPRequestHandler):
    """Every request: 429 with ``Retry-After`` (used as the crawl's HTTP proxy)."""

    def do_GET(self) -> None:
        self.send_response(429)
        self.send_header("Retry-After", str(RETRY_AFTER_S))
        self.send_header("Content-Length", "0")
        self.end_headers()

    def log_message(self, format: str, *args: object) -> None:
        pass


@contextmanager
def _busy_proxy() -> Iterator[str]:
    server = ThreadingHTTPServer(("127.0.0.1", 0), _TooManyRequests)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}"
    finally:
        server.shutdown()
        server.server_close()


def test_a_429_with_retry_after_blocks_the_host_for_that_long(tmp_path: Path) -> None:
    spider = tmp_path / "busy_spider.py"
    spider.write_text(SPIDER)
    with served_app({"CRAWLSCHED_STORE": "memory"}) as service, _busy_proxy() as proxy:
        env = {**os.environ, "CRAWLSCHED_URL": service, "http_proxy": proxy}
        env["no_proxy"] = "127.0.0.1,localhost"
        scrapy = Path(sys.executable).with_name("scrapy")
        started = time.time()
        done = subprocess.run(
            [str(scrapy), "runspider", str(spider), "-s", "CLOSESPIDER_TIMEOUT=4"],
            env=env, capture_output=True, text=True, timeout=90, check=False,
        )  # fmt: skip
        assert done.returncode == 0, done.stderr[-3000:]
        assert "Traceback" not in done.stderr, done.stderr[-3000:]
        host = httpx.get(f"{service}/hosts/busy.example").json()
        leased = httpx.get(f"{service}/next", params={"n": 10}).json()["leases"]
    assert host["blocked"] is True, host
    # blocked for the Retry-After, from the fetch (within the crawl's few seconds)
    assert started + RETRY_AFTER_S - 1 <= host["blocked_until"] <= time.time() + RETRY_AFTER_S
    assert host["consecutive_failures"] >= 1
    assert leased == []  # neither URL of the host goes out while it is blocked
