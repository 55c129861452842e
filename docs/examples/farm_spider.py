import os

import scrapy


class FarmSpider(scrapy.Spider):
    """Follow every link from five hosts of the webfarm, in the order crawlsched says."""

    name = "farm"
    start_urls = [f"http://host{j:03d}.example/" for j in range(5)]
    custom_settings = {
        "SCHEDULER": "crawlsched.scrapy.Scheduler",
        "CRAWLSCHED_URL": os.environ.get("CRAWLSCHED_URL", "http://127.0.0.1:8000"),
        "CRAWLSCHED_TOKEN": os.environ.get("CRAWLSCHED_TOKEN"),
        "ROBOTSTXT_OBEY": True,  # each host's Crawl-delay goes to crawlsched
    }

    def parse(self, response):
        yield from response.follow_all(css="a")
