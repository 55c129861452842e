"""Streams on each store: flow control holds a PutURLs stream whose acks are not
read, and a client that goes away mid-stream leaves a working frontier (its leases
come back after ``delay_requestable``)."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator

import grpc
import pytest

from service.grpc import urlfrontier_pb2 as pb
from urlfrontier.conftest import Serve
from urlfrontier.test_crawl_cycle import discovered, get, items, put

pytestmark = pytest.mark.anyio
BIG = 64 * 1024  # bytes of each item's ID, echoed in its ack


async def count(stub: object) -> int:
    return int((await stub.CountURLs(pb.CountUrlParams())).value)  # type: ignore[attr-defined]


async def test_put_urls_waits_for_a_client_that_does_not_read_its_acks(serve: Serve) -> None:
    n = 400  # 400 acks of 64 KiB: far beyond any HTTP/2 window the stream can open
    async with serve() as f:
        sent = [
            discovered(f"https://h{i % 7}.example/p{i}", f"{i:06d}".ljust(BIG, "x"))
            for i in range(n)
        ]
        call = f.stub.PutURLs(items(sent))
        first = await call.read()
        assert first.ID.startswith("000000")
        registered = 0
        for _ in range(50):  # let the server run ahead as far as flow control lets it
            await asyncio.sleep(0.02)
            registered = await count(f.stub)
        assert 1 <= registered < n  # held back: the unread acks fill the window
        rest = []
        while (ack := await call.read()) is not grpc.aio.EOF:
            rest.append(ack)
        assert [a.ID[:6] for a in [first, *rest]] == [f"{i:06d}" for i in range(n)]
        assert all(a.status == pb.AckMessage.OK for a in rest)
        assert await count(f.stub) == n


async def test_a_client_leaving_get_urls_mid_stream_gets_its_urls_again_later(
    serve: Serve,
) -> None:
    async with serve() as f:
        await put(f.stub, [discovered(f"https://h{i}.example/p") for i in range(10)])
        call = f.stub.GetURLs(pb.GetParams(delay_requestable=30))
        read = [await call.read(), await call.read()]
        call.cancel()
        with pytest.raises(asyncio.CancelledError):
            await call.read()
        assert (await f.stub.GetStats(pb.QueueWithinCrawlParams())).inProcess == 10
        assert await get(f.stub, delay_requestable=30) == []  # all ten are leased
        f.clock.advance(31.0)
        again = await get(f.stub, delay_requestable=30)
        assert len(again) == 10
        assert {i.url for i in read} < {i.url for i in again}


async def test_a_client_leaving_put_urls_mid_stream_keeps_what_was_acked(serve: Serve) -> None:
    async with serve() as f:
        never = asyncio.Event()

        async def five_then_silence() -> AsyncIterator[pb.URLItem]:
            for i in range(5):
                yield discovered(f"https://h{i}.example/p")
            await never.wait()

        call = f.stub.PutURLs(five_then_silence())
        acks = [await call.read() for _ in range(5)]
        assert all(a.status == pb.AckMessage.OK for a in acks)
        call.cancel()
        assert await count(f.stub) == 5
        assert len(await get(f.stub)) == 5  # the frontier still serves


async def test_no_call_hangs_on_an_unimplemented_method_or_bad_request(serve: Serve) -> None:
    async with serve() as f:
        for call, request in [
            (f.stub.PurgeURLs, pb.PurgeUrlParams()),
            (f.stub.GetURLStatus, pb.URLStatusRequest(url="")),
        ]:
            with pytest.raises(grpc.aio.AioRpcError) as err:
                await call(request, timeout=10)
            assert err.value.code() is not grpc.StatusCode.DEADLINE_EXCEEDED
