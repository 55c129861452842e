"""Crawl a webfarm with Scrapy through ``crawlsched.scrapy.Scheduler``.

Run as a script: ``python farm_crawl.py CONFIG.json``; the config gives the hosts
to start from (their ``/``), Scrapy's settings, the farm (the crawl stops when its
world is over), and where to write the crawl's stats.  Requests reach the farm
through it as an HTTP proxy (``http_proxy``).
"""

from __future__ import annotations

import asyncio
import json
import sys
from pathlib import Path
from typing import Any

import httpx
import scrapy
from scrapy import signals
from scrapy.crawler import Crawler, CrawlerProcess
from scrapy.http import Response


class FarmSpider(scrapy.Spider):
    """Start at each host's index, follow every link."""

    name = "farm"

    def __init__(self, hosts: list[str], stats_path: str, farm: str, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.hosts, self.stats_path, self.farm = hosts, stats_path, farm

    @classmethod
    def from_crawler(cls, crawler: Crawler, *args: Any, **kwargs: Any) -> FarmSpider:
        spider = super().from_crawler(crawler, *args, **kwargs)
        crawler.signals.connect(spider.write_stats, signal=signals.spider_closed)
        crawler.signals.connect(spider.stop_at_deadline, signal=signals.spider_opened)
        return spider

    def stop_at_deadline(self, spider: scrapy.Spider) -> None:
        """Close the spider once the farm's world is over."""
        asyncio.get_running_loop().create_task(self._watch_the_farm())

    async def _watch_the_farm(self) -> None:
        engine = self.crawler.engine
        assert engine is not None
        async with httpx.AsyncClient(base_url=self.farm, trust_env=False) as farm:
            while True:
                world = (await farm.get("/_farm/world")).json()
                if world["started"] and world["world_time_s"] >= world["duration_s"]:
                    break
                await asyncio.sleep(0.1)
        await engine.close_spider_async(reason="world_over")

    async def start(self) -> Any:
        # index pages draw no clicks: registered as worth nothing (fetched once, for links)
        worthless = {"weight": 0.0, "change_rate": 0.0, "fixed": True}
        for host in self.hosts:
            yield scrapy.Request(f"http://{host}/", meta={"crawlsched": worthless})

    def parse(self, response: Response) -> Any:
        yield from response.follow_all(css="a")

    def write_stats(self, spider: scrapy.Spider, reason: str) -> None:
        assert self.crawler.stats is not None
        stats = {k: str(v) if not isinstance(v, int | float) else v
                 for k, v in self.crawler.stats.get_stats().items()}  # fmt: skip
        Path(self.stats_path).write_text(json.dumps({**stats, "reason": reason}, indent=1))


def main(config_path: str) -> None:
    config = json.loads(Path(config_path).read_text())
    process = CrawlerProcess(settings=config["settings"])
    process.crawl(
        FarmSpider,
        hosts=config["hosts"],
        stats_path=config["stats_path"],
        farm=config["farm"],
    )
    process.start()


if __name__ == "__main__":
    main(sys.argv[1])
