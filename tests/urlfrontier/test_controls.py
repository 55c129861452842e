"""URLFrontier's calls on the frontier controls, on each store: DeleteQueue,
BlockQueueUntil, SetDelay, and a KnownURLItem's ``refetchable_from_date``."""

from __future__ import annotations

import grpc
import pytest

from service.grpc import urlfrontier_pb2 as pb
from urlfrontier.conftest import Serve
from urlfrontier.test_crawl_cycle import discovered, get, known, put, status

pytestmark = pytest.mark.anyio
DAY = 86_400.0


async def test_delete_queue_drops_the_host_and_counts_its_urls(serve: Serve) -> None:
    async with serve() as f:
        await put(f.stub, [discovered(f"https://a.example/{i}") for i in range(3)])
        await put(f.stub, [discovered("https://b.example/")])
        gone = await f.stub.DeleteQueue(pb.QueueWithinCrawlParams(key="a.example"))
        assert gone.value == 3
        assert (await f.stub.DeleteQueue(pb.QueueWithinCrawlParams(key="a.example"))).value == 0
        assert (await f.stub.CountURLs(pb.CountUrlParams())).value == 1
        with pytest.raises(grpc.aio.AioRpcError) as err:
            await f.stub.DeleteQueue(pb.QueueWithinCrawlParams())
        assert err.value.code() is grpc.StatusCode.INVALID_ARGUMENT
        assert "key" in (err.value.details() or "")


async def test_a_blocked_queue_gives_nothing_until_its_time_or_unblocked(serve: Serve) -> None:
    async with serve() as f:
        await put(f.stub, [discovered("https://a.example/"), discovered("https://b.example/")])
        until = int(f.clock.now() + 100)
        await f.stub.BlockQueueUntil(pb.BlockQueueParams(key="a.example", time=until))
        assert [i.key for i in await get(f.stub, delay_requestable=1000)] == ["b.example"]
        queues = await f.stub.ListQueues(pb.Pagination(include_inactive=True))
        assert list(queues.values) == ["a.example", "b.example"]
        assert list((await f.stub.ListQueues(pb.Pagination())).values) == []  # a blocked, b out
        await f.stub.BlockQueueUntil(pb.BlockQueueParams(key="a.example", time=0))  # unblock
        assert [i.key for i in await get(f.stub, delay_requestable=1000)] == ["a.example"]

        await put(f.stub, [discovered("https://c.example/")])
        await f.stub.BlockQueueUntil(pb.BlockQueueParams(key="c.example", time=until))
        f.clock.advance(101.0)
        assert [i.key for i in await get(f.stub)] == ["c.example"]  # the block ran out
        with pytest.raises(grpc.aio.AioRpcError) as err:
            await f.stub.BlockQueueUntil(pb.BlockQueueParams(key="nowhere.example", time=until))
        assert err.value.code() is grpc.StatusCode.NOT_FOUND
        with pytest.raises(grpc.aio.AioRpcError) as err:
            await f.stub.BlockQueueUntil(pb.BlockQueueParams(key="a.example", time=10**12))
        assert err.value.code() is grpc.StatusCode.INVALID_ARGUMENT
        assert (err.value.details() or "").startswith("time:")


async def test_set_delay_spaces_the_queues_fetches(serve: Serve) -> None:
    async with serve() as f:
        await put(f.stub, [discovered(f"https://a.example/{i}") for i in range(3)])
        await f.stub.SetDelay(pb.QueueDelayParams(key="a.example", delay_requestable=3600))
        host = (await f.http.get("/hosts/a.example")).json()
        assert host["crawl_delay_s"] == 3600
        assert len(await get(f.stub, delay_requestable=10)) == 1
        f.clock.advance(3599.0)
        assert await get(f.stub, delay_requestable=10) == []  # its lease expired; the gate holds
        f.clock.advance(2.0)
        assert len(await get(f.stub, delay_requestable=10)) == 1
        await f.stub.SetDelay(pb.QueueDelayParams(key="a.example"))  # 0: the default again
        host = (await f.http.get("/hosts/a.example")).json()
        assert host["crawl_delay_s"] == 0.5
        with pytest.raises(grpc.aio.AioRpcError) as err:
            await f.stub.SetDelay(pb.QueueDelayParams(delay_requestable=3))
        assert err.value.code() is grpc.StatusCode.UNIMPLEMENTED


async def test_refetchable_from_zero_retires_the_url(serve: Serve) -> None:
    async with serve() as f:
        url = "https://a.example/done"
        await put(f.stub, [discovered(url)])
        (info,) = await get(f.stub)
        (ack,) = await put(f.stub, [known(info, refetch=0)])
        assert ack.status == pb.AckMessage.OK
        meta, item = await status(f.stub, url)
        assert item.known.refetchable_from_date == 0 and meta["crawlsched.retired"] == "done"
        stats = await f.stub.GetStats(pb.QueueWithinCrawlParams())
        assert stats.counts["completed"] == 1 and stats.size == 0
        for _ in range(20):
            f.clock.advance(30 * DAY)
            assert await get(f.stub) == []


async def test_refetchable_from_a_date_is_a_lower_bound_on_the_next_lease(serve: Serve) -> None:
    async with serve() as f:
        url = "https://a.example/later"
        await put(f.stub, [discovered(url)])
        (info,) = await get(f.stub)
        not_before = int(f.clock.now() + 200 * DAY)
        (ack,) = await put(f.stub, [known(info, refetch=not_before)])
        assert ack.status == pb.AckMessage.OK
        meta, _ = await status(f.stub, url)
        assert float(meta["crawlsched.refetch_after"]) == not_before
        while f.clock.now() + 10 * DAY < not_before:
            f.clock.advance(10 * DAY)
            assert await get(f.stub) == []
        for _ in range(100):
            f.clock.advance(10 * DAY)
            if got := await get(f.stub):
                assert [i.url for i in got] == [url] and f.clock.now() >= not_before
                return
        raise AssertionError("never leased again")
