"""The README's Scrapy example, run as written (``scrapy runspider``), against a served
crawlsched and a webfarm used as the HTTP proxy."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import httpx
import pytest

from service.loadgen.demo import served_app
from service.webfarm.server import served_farm

pytestmark = [pytest.mark.e2e, pytest.mark.slow]
SPIDER = Path(__file__).parents[2] / "docs" / "examples" / "farm_spider.py"


def test_example_spider_crawls_the_farm_through_crawlsched(tmp_path: Path) -> None:
    # hosts ask for 2 s between fetches (robots.txt counts: the index page waits that
    # long after it); the service starts new hosts at 60 s, so that no second page is
    # leased before the spider stops (a lease waiting in Scrapy's download slot would
    # hold its shutdown up to the crawl delay)
    world = tmp_path / "world.json"
    world.write_text(json.dumps({"crawl_delay_s": 2, "urls": 200, "hosts": 10}))
    env = {"CRAWLSCHED_STORE": "memory", "CRAWLSCHED_DEFAULT_CRAWL_DELAY_S": "60"}
    farm_args = ["--world", str(world), "--strict-share", "0", "--down-share", "0"]
    with (
        served_app(env) as service,
        served_farm([*farm_args, "--service", service, "--feed"]) as farm,
    ):
        env = {**os.environ, "CRAWLSCHED_URL": service, "http_proxy": farm}
        env["no_proxy"] = "127.0.0.1,localhost"
        scrapy = Path(sys.executable).with_name("scrapy")
        done = subprocess.run(
            [str(scrapy), "runspider", str(SPIDER), "-s", "CLOSESPIDER_TIMEOUT=5"],
            env=env, capture_output=True, text=True, timeout=90, check=False,
        )  # fmt: skip
        assert done.returncode == 0, done.stderr[-3000:]
        assert "Traceback" not in done.stderr, done.stderr[-3000:]
        host = httpx.get(f"{service}/hosts/host000.example").json()
        metrics = httpx.get(f"{service}/metrics").text
        score = httpx.get(f"{farm}/_farm/score").json()
    assert host["crawl_delay_s"] == 2.0  # robots.txt's Crawl-delay, registered
    assert host["urls"] > 1  # the index page and the links found on it
    accepted = 'crawlsched_events_total{kind="crawl_result",status="accepted"} '
    results = [float(x.split()[-1]) for x in metrics.splitlines() if x.startswith(accepted)]
    assert results and results[0] >= 5  # the five index pages at least
    assert score["violations"] == 0 and score["requests"].get("200", 0) >= 5
