"""URLFrontier's other calls on each store: queues, URLs, counts, the frontier's
state, and the calls crawlsched answers UNIMPLEMENTED."""

from __future__ import annotations

from typing import Any

import grpc
import pytest

from service.grpc import urlfrontier_pb2 as pb
from urlfrontier.conftest import Serve
from urlfrontier.test_crawl_cycle import discovered, get, items, known, put

pytestmark = pytest.mark.anyio
URLS = [f"https://h{i}.example/p{j}" for i in range(3) for j in range(4)]  # 3 queues of 4


async def test_list_queues_pages_and_skips_inactive_ones(serve: Serve) -> None:
    async with serve() as f:
        await put(f.stub, [discovered(u) for u in URLS])
        page = await f.stub.ListQueues(pb.Pagination(start=1, size=1, include_inactive=True))
        assert (list(page.values), page.total, page.start, page.size) == (["h1.example"], 3, 1, 1)
        everything = await f.stub.ListQueues(pb.Pagination())
        assert list(everything.values) == ["h0.example", "h1.example", "h2.example"]
        # a queue whose every URL is out for fetching is inactive
        await put(f.stub, [discovered("https://z.example/only")])
        got = [i for i in await get(f.stub) if i.key == "z.example"]
        assert got
        active = await f.stub.ListQueues(pb.Pagination())
        assert "z.example" not in active.values
        assert "z.example" in (await f.stub.ListQueues(pb.Pagination(include_inactive=True))).values


async def test_url_status_lists_and_counts(serve: Serve) -> None:
    async with serve() as f:
        await put(f.stub, [discovered(u) for u in URLS])
        item = await f.stub.GetURLStatus(pb.URLStatusRequest(url=URLS[0]))
        assert item.WhichOneof("item") == "discovered"
        assert item.discovered.info.key == "h0.example"
        assert item.creation_date == int(f.clock.now())
        with pytest.raises(grpc.aio.AioRpcError) as err:
            await f.stub.GetURLStatus(pb.URLStatusRequest(url="https://nowhere.example/"))
        assert err.value.code() is grpc.StatusCode.NOT_FOUND
        with pytest.raises(grpc.aio.AioRpcError) as err:
            await f.stub.GetURLStatus(pb.URLStatusRequest(url="not a url"))
        assert err.value.code() is grpc.StatusCode.INVALID_ARGUMENT

        listed = [i async for i in f.stub.ListURLs(pb.ListUrlParams(key="h1.example"))]
        assert [i.discovered.info.url for i in listed] == URLS[4:8]
        page = [i async for i in f.stub.ListURLs(pb.ListUrlParams(start=2, size=3))]
        assert [i.discovered.info.url for i in page] == URLS[2:5]
        found = f.stub.ListURLs(pb.ListUrlParams(filter="P3", ignoreCase=True))
        assert [i.discovered.info.url async for i in found] == URLS[3::4]

        assert (await f.stub.CountURLs(pb.CountUrlParams())).value == 12
        assert (await f.stub.CountURLs(pb.CountUrlParams(key="h2.example"))).value == 4
        assert (await f.stub.CountURLs(pb.CountUrlParams(key="none.example"))).value == 0
        assert (await f.stub.CountURLs(pb.CountUrlParams(filter="p3"))).value == 3
        assert (await f.stub.CountURLs(pb.CountUrlParams(filter="P3"))).value == 0

        (info,) = await get(f.stub, max_queues=1)
        await put(f.stub, [known(info, signature="x")])
        crawled = await f.stub.GetURLStatus(pb.URLStatusRequest(url=info.url))
        assert crawled.WhichOneof("item") == "known"
        due_at = float(crawled.known.info.metadata["crawlsched.due_at"].values[0])
        assert crawled.known.refetchable_from_date == max(int(due_at), 1)


async def test_put_discovered_acks_each_batch_in_order(serve: Serve) -> None:
    async with serve() as f:
        batches = [
            pb.DiscoveredBatch(ID="b1", items=[pb.URLInfo(url=URLS[0]), pb.URLInfo(url="nope")]),
            pb.DiscoveredBatch(ID="b2", items=[pb.URLInfo(url=u) for u in URLS[1:6]]),
            pb.DiscoveredBatch(ID="b3"),
        ]
        acks = [a async for a in f.stub.PutDiscovered(items(batches))]
        OK, SKIPPED = pb.AckMessage.OK, pb.AckMessage.SKIPPED
        assert [(a.ID, list(a.statuses)) for a in acks] == [
            ("b1", [OK, SKIPPED]), ("b2", [OK] * 5), ("b3", []),
        ]  # fmt: skip
        assert (await f.stub.CountURLs(pb.CountUrlParams())).value == 6


async def test_nodes_crawls_and_log_level(serve: Serve) -> None:
    async with serve() as f:
        nodes = await f.stub.ListNodes(pb.Empty())
        assert list(nodes.values) == [f"127.0.0.1:{f.port}"]
        assert list((await f.stub.ListCrawls(pb.Local())).values) == ["DEFAULT"]
        level = pb.LogLevelParams(package="service.grpc", level=pb.LogLevelParams.WARN)
        assert await f.stub.SetLogLevel(level) == pb.Empty()


UNIMPLEMENTED: list[tuple[str, Any]] = [
    ("DeleteCrawl", pb.DeleteCrawlMessage(value="DEFAULT")),
    ("SetCrawlLimit", pb.CrawlLimitParams(key="h0.example", limit=3)),
    ("PurgeURLs", pb.PurgeUrlParams(days=3)),
]


@pytest.mark.parametrize(("call", "request_"), UNIMPLEMENTED, ids=[c for c, _ in UNIMPLEMENTED])
async def test_unimplemented_calls_say_so(serve: Serve, call: str, request_: Any) -> None:
    async with serve() as f:
        with pytest.raises(grpc.aio.AioRpcError) as err:
            await getattr(f.stub, call)(request_, timeout=10)
        assert err.value.code() is grpc.StatusCode.UNIMPLEMENTED
        assert call in (err.value.details() or "")


async def test_get_urls_with_a_key_leases_from_that_queue_alone(serve: Serve) -> None:
    async with serve() as f:
        await put(f.stub, [discovered(u) for u in URLS])
        got = await get(f.stub, key="h1.example", delay_requestable=30)
        assert [(i.url, i.key) for i in got] == [(URLS[4], "h1.example")]
        assert await get(f.stub, key="h1.example") == []  # one lease out: its cap
        assert await get(f.stub, key="nowhere.example") == []
        await put(f.stub, [known(got[0])])
        assert await get(f.stub, key="h1.example") == []  # its crawl delay holds it
        f.clock.advance(1.0)
        assert [i.url for i in await get(f.stub, key="h1.example")] == [URLS[5]]
        assert (await f.stub.GetStats(pb.QueueWithinCrawlParams(key="h1.example"))).inProcess == 1
