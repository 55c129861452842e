import asyncio
import os
import time

from crawlsched import AsyncClient

SERVICE = os.environ.get("CRAWLSCHED_URL", "http://127.0.0.1:8000")
TOKEN = os.environ.get("CRAWLSCHED_TOKEN")  # if the service asks for one


async def main() -> None:
    async with AsyncClient(SERVICE, token=TOKEN) as crawlsched:
        await crawlsched.register([{"url": "https://example.com/", "crawl_delay_s": 5}])
        for lease in (await crawlsched.next(10))["leases"]:
            # fetch lease["url"] here and compare its ETag or content hash with your copy
            result = {
                "url": lease["url"],
                "lease_id": lease["lease_id"],
                "fetched_at": time.time(),
                "status": 200,
                "changed": True,
            }
            print(await crawlsched.results([result]))
        print((await crawlsched.explain("https://example.com/"))["decision"])


asyncio.run(main())
