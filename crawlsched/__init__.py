"""crawlsched for crawlers: the Python SDK and the Scrapy scheduler.

``from crawlsched import Client, AsyncClient`` gives a synchronous and an asyncio
client of the HTTP API; ``crawlsched.scrapy.Scheduler`` (``pip install
crawlsched[scrapy]``) makes Scrapy take its requests from the service.
"""

from crawlsched.client import AsyncClient, Client, ClientStats, CrawlschedError
from service import __version__

__all__ = ["AsyncClient", "Client", "ClientStats", "CrawlschedError", "__version__"]
