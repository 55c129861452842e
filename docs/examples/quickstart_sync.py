import os
import time

from crawlsched import Client

SERVICE = os.environ.get("CRAWLSCHED_URL", "http://127.0.0.1:8000")
TOKEN = os.environ.get("CRAWLSCHED_TOKEN")  # if the service asks for one

with Client(SERVICE, token=TOKEN) as crawlsched:
    crawlsched.register([{"url": "https://example.com/", "crawl_delay_s": 5}])
    for lease in crawlsched.next(10)["leases"]:
        # fetch lease["url"] here and compare its ETag or content hash with your copy
        result = {
            "url": lease["url"],
            "lease_id": lease["lease_id"],
            "fetched_at": time.time(),
            "status": 200,
            "changed": True,
        }
        print(crawlsched.results([result]))
    print(crawlsched.explain("https://example.com/")["decision"])
