"""Bearer tokens in gRPC metadata: the HTTP API's tokens and roles."""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator
from typing import Any

import grpc
import pytest

from service.grpc import servicer
from service.grpc import urlfrontier_pb2 as pb
from urlfrontier.conftest import Frontier, Serve, bearer
from urlfrontier.test_crawl_cycle import discovered, get, items, known, put

pytestmark = pytest.mark.anyio
TOKENS = "admin:adm-1,worker:wrk-1,read:rd-1,events:ev-1"


async def _code(coro: Any) -> grpc.StatusCode:
    try:
        await coro
    except grpc.aio.AioRpcError as err:
        assert err.details(), "every refusal says why"
        return err.code()
    return grpc.StatusCode.OK


async def _as(f: Frontier, token: str | None) -> dict[str, grpc.StatusCode]:
    md, stub = bearer(token), f.stub
    return {
        "GetStats": await _code(stub.GetStats(pb.QueueWithinCrawlParams(), metadata=md)),
        "GetURLs": await _code(get(stub, md)),
        "PutURLs known": await _code(put(stub, [known(pb.URLInfo(url="https://k.example/"))], md)),
        "PutURLs discovered": await _code(put(stub, [discovered("https://d.example/")], md)),
        "SetActive": await _code(stub.SetActive(pb.Active(state=True), metadata=md)),
    }


async def test_roles_admit_the_calls_of_their_http_routes(serve: Serve) -> None:
    ok, denied = grpc.StatusCode.OK, grpc.StatusCode.PERMISSION_DENIED
    async with serve(auth_tokens=TOKENS) as f:
        assert await _as(f, "adm-1") == dict.fromkeys(
            ["GetStats", "GetURLs", "PutURLs known", "PutURLs discovered", "SetActive"], ok
        )
        assert await _as(f, "wrk-1") == {
            "GetStats": denied, "GetURLs": ok, "PutURLs known": ok,
            "PutURLs discovered": denied, "SetActive": denied,
        }  # fmt: skip
        assert await _as(f, "rd-1") == {
            "GetStats": ok, "GetURLs": denied, "PutURLs known": denied,
            "PutURLs discovered": denied, "SetActive": denied,
        }  # fmt: skip
        assert set((await _as(f, "ev-1")).values()) == {denied}


async def test_a_worker_cannot_register_through_a_known_item(serve: Serve) -> None:
    async with serve(auth_tokens=TOKENS) as f:
        (ack,) = await put(f.stub, [known(pb.URLInfo(url="https://new.example/"))], bearer("wrk-1"))
        assert ack.status == pb.AckMessage.SKIPPED
        counted = await f.stub.CountURLs(pb.CountUrlParams(), metadata=bearer("adm-1"))
        assert counted.value == 0


async def test_a_missing_or_unknown_token_is_unauthenticated(serve: Serve) -> None:
    async with serve(auth_tokens=TOKENS) as f:
        assert set((await _as(f, None)).values()) == {grpc.StatusCode.UNAUTHENTICATED}
        assert set((await _as(f, "nope")).values()) == {grpc.StatusCode.UNAUTHENTICATED}
        # nothing was registered by the refused calls
        counted = await f.stub.CountURLs(pb.CountUrlParams(), metadata=bearer("rd-1"))
        assert counted.value == 0


async def test_a_refused_stream_is_answered_to_a_client_still_writing(serve: Serve) -> None:
    # A refused PutURLs or PutDiscovered reads the rest of the client's stream before it
    # answers: grpcio's asyncio client, still writing, would report an INTERNAL error of
    # its own instead of the refusal (grpc/grpc#36066; without the reading, most of
    # these calls read INTERNAL here).
    many = [known(pb.URLInfo(url=f"https://k.example/{i}")) for i in range(50)]
    other_crawl = pb.URLItem(
        discovered=pb.DiscoveredURLItem(info=pb.URLInfo(url="https://k.example/x", crawlID="x"))
    )
    batches = [pb.DiscoveredBatch(ID=str(i), items=[pb.URLInfo(url="https://d.example/")])
               for i in range(50)]  # fmt: skip
    async with serve(auth_tokens=TOKENS) as f:
        stub = f.stub
        for _ in range(5):
            assert await _code(put(stub, many, bearer("nope"))) is grpc.StatusCode.UNAUTHENTICATED
            mixed = [*many[:5], discovered("https://d.example/"), *many[5:]]
            denied = await _code(put(stub, mixed, bearer("wrk-1")))
            assert denied is grpc.StatusCode.PERMISSION_DENIED
            invalid = await _code(put(stub, [other_crawl, *many], bearer("adm-1")))
            assert invalid is grpc.StatusCode.INVALID_ARGUMENT
            refused = stub.PutDiscovered(items(batches), metadata=bearer("wrk-1"))
            assert await _code(_all(refused)) is grpc.StatusCode.PERMISSION_DENIED
        counted = await stub.CountURLs(pb.CountUrlParams(), metadata=bearer("rd-1"))
        assert counted.value == 0


async def test_a_refused_stream_reads_its_rest_for_a_bounded_time(
    serve: Serve, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(servicer, "DRAIN_S", 0.2)

    async def endless() -> AsyncIterator[pb.URLItem]:
        yield known(pb.URLInfo(url="https://k.example/"))
        await asyncio.Event().wait()  # never half-closes

    async with serve(auth_tokens=TOKENS) as f:
        started = time.monotonic()
        call = f.stub.PutURLs(endless(), metadata=bearer("nope"))
        assert await _code(_all(call)) is grpc.StatusCode.UNAUTHENTICATED
        assert 0.2 <= time.monotonic() - started < servicer.DRAIN_S + 5.0


async def _all(call: Any) -> list[Any]:
    return [answer async for answer in call]
