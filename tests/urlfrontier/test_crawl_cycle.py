"""A whole crawl cycle through URLFrontier's protocol, on each store: PutURLs
discovered, GetURLs, PutURLs known with a signature, GetStats."""

from __future__ import annotations

from collections.abc import AsyncIterator, Sequence
from typing import Any

import grpc
import pytest

from service.grpc import urlfrontier_pb2 as pb
from urlfrontier.conftest import Serve

pytestmark = pytest.mark.anyio
OK, SKIPPED = pb.AckMessage.OK, pb.AckMessage.SKIPPED


def discovered(url: str, ident: str = "") -> pb.URLItem:
    return pb.URLItem(ID=ident, discovered=pb.DiscoveredURLItem(info=pb.URLInfo(url=url)))


def known(info: pb.URLInfo, refetch: int = 1, **meta: str) -> pb.URLItem:
    sent = pb.URLInfo(url=info.url, key=info.key)
    sent.metadata.MergeFrom(info.metadata)  # the lease id travels back, as crawlers do
    for key, value in meta.items():
        sent.metadata[key.replace("_", ".")].values[:] = [value]
    return pb.URLItem(known=pb.KnownURLItem(info=sent, refetchable_from_date=refetch))


async def items(xs: Sequence[Any]) -> AsyncIterator[Any]:
    for x in xs:
        yield x


async def put(stub: Any, xs: Sequence[pb.URLItem], metadata: Any = ()) -> list[pb.AckMessage]:
    return [ack async for ack in stub.PutURLs(items(xs), metadata=metadata)]


async def get(stub: Any, metadata: Any = (), **params: Any) -> list[pb.URLInfo]:
    return [info async for info in stub.GetURLs(pb.GetParams(**params), metadata=metadata)]


async def status(stub: Any, url: str) -> tuple[dict[str, str], pb.URLItem]:
    item = await stub.GetURLStatus(pb.URLStatusRequest(url=url))
    info = item.known.info if item.WhichOneof("item") == "known" else item.discovered.info
    return {k: v.values[0] for k, v in info.metadata.items()}, item


async def test_a_whole_crawl_cycle(serve: Serve) -> None:
    async with serve() as f:
        urls = ["https://a.example/1", "https://a.example/2", "https://b.example/1"]
        acks = await put(f.stub, [discovered(u, f"id{i}") for i, u in enumerate(urls)])
        assert [(a.ID, a.status) for a in acks] == [("id0", OK), ("id1", OK), ("id2", OK)]

        stats = await f.stub.GetStats(pb.QueueWithinCrawlParams())
        assert (stats.size, stats.inProcess, stats.numberOfQueues) == (3, 0, 2)
        assert stats.counts["urls"] == 3 and stats.crawlID == "DEFAULT"

        got = await get(f.stub, max_queues=10, max_urls_per_queue=5, delay_requestable=30)
        assert sorted(i.key for i in got) == ["a.example", "b.example"]  # one per queue
        assert all(i.metadata["crawlsched.lease_id"].values[0] for i in got)
        stats = await f.stub.GetStats(pb.QueueWithinCrawlParams())
        assert (stats.size, stats.inProcess) == (1, 2)

        f.clock.advance(5.0)
        acks = await put(f.stub, [known(i, fetch_statusCode="200", signature="s1") for i in got])
        assert [a.status for a in acks] == [OK, OK]
        assert [a.ID for a in acks] == [i.url for i in got]  # no ID: the URL
        stats = await f.stub.GetStats(pb.QueueWithinCrawlParams())
        assert (stats.size, stats.inProcess, stats.numberOfQueues) == (3, 0, 2)
        a_stats = await f.stub.GetStats(pb.QueueWithinCrawlParams(key="a.example"))
        assert (a_stats.size, a_stats.inProcess, a_stats.counts["urls"]) == (2, 0, 2)
        for info in got:
            meta, item = await status(f.stub, info.url)
            assert item.WhichOneof("item") == "known"
            assert (meta["crawlsched.crawls"], meta["crawlsched.changes"]) == ("1", "0")
            assert float(meta["crawlsched.last_crawl_at"]) == f.clock.now()


async def _crawl_again(f: Any, url: str, **meta: str) -> dict[str, str]:
    """Let ``url`` come due, lease it, report it with ``meta``; its status after."""
    for _ in range(100):
        f.clock.advance(86_400.0 * 30)
        got = [i for i in await get(f.stub) if i.url == url]
        if got:
            (ack,) = await put(f.stub, [known(got[0], **meta)])
            assert ack.status == OK
            return (await status(f.stub, url))[0]
    raise AssertionError(f"{url} never came due")


async def test_changed_is_inferred_from_signature_etag_and_304(serve: Serve) -> None:
    async with serve() as f:
        url = "https://a.example/p"
        await put(f.stub, [discovered(url)])
        meta = await _crawl_again(f, url, signature="v1")  # first signature: unknown
        assert (meta["crawlsched.crawls"], meta["crawlsched.changes"]) == ("1", "0")
        meta = await _crawl_again(f, url, signature="v1")  # same: unchanged
        assert (meta["crawlsched.crawls"], meta["crawlsched.changes"]) == ("2", "0")
        meta = await _crawl_again(f, url, signature="v2")  # another: changed
        assert (meta["crawlsched.crawls"], meta["crawlsched.changes"]) == ("3", "1")
        meta = await _crawl_again(f, url, fetch_statusCode="304")  # not modified
        assert (meta["crawlsched.crawls"], meta["crawlsched.changes"]) == ("4", "1")
        meta = await _crawl_again(f, url, protocol_etag='"v3"')  # an ETag is a signature
        assert (meta["crawlsched.crawls"], meta["crawlsched.changes"]) == ("5", "2")
        explained = (await f.http.get(f"/urls/{url}")).json()
        assert explained["crawls"] == 5 and explained["changes"] == 2


async def test_a_discovered_url_already_known_is_left_alone(serve: Serve) -> None:
    async with serve() as f:
        url = "https://a.example/p"
        await put(f.stub, [discovered(url)])
        meta = await _crawl_again(f, url, signature="v1")
        acks = await put(f.stub, [discovered(url, "again")])
        assert [(a.ID, a.status) for a in acks] == [("again", OK)]
        # the background learner may re-estimate the URL meanwhile (its due time moves
        # then); the discovery leaves its crawl history alone
        after = (await status(f.stub, url))[0]
        due = "crawlsched.due_at"
        assert {k: v for k, v in after.items() if k != due} == {
            k: v for k, v in meta.items() if k != due
        }
        assert meta["crawlsched.crawls"] == "1"


async def test_malformed_urls_and_stale_results_are_skipped(serve: Serve) -> None:
    async with serve() as f:
        acks = await put(f.stub, [discovered("ftp://a.example/x", "bad"), discovered("", "empty")])
        assert [a.status for a in acks] == [SKIPPED, SKIPPED]
        await put(f.stub, [discovered("https://a.example/p")])
        (info,) = await get(f.stub)
        (ack,) = await put(f.stub, [known(info)])
        assert ack.status == OK
        (ack,) = await put(f.stub, [known(info)])  # the same lease again: applied already
        assert ack.status == OK
        # a lease id of another URL
        other = pb.URLInfo(url="https://a.example/q")
        other.metadata["crawlsched.lease_id"].values.append(
            info.metadata["crawlsched.lease_id"].values[0]
        )
        await put(f.stub, [discovered(other.url)])
        (ack,) = await put(f.stub, [known(other)])
        assert ack.status == SKIPPED
        stats = await f.stub.GetStats(pb.QueueWithinCrawlParams())
        assert stats.counts["urls"] == 2


async def test_a_known_url_the_frontier_never_held_is_registered_as_fetched(
    serve: Serve,
) -> None:
    async with serve() as f:
        (ack,) = await put(f.stub, [known(pb.URLInfo(url="https://c.example/x"), signature="s")])
        assert ack.status == OK
        meta, item = await status(f.stub, "https://c.example/x")
        assert item.WhichOneof("item") == "known"
        assert float(meta["crawlsched.last_crawl_at"]) == f.clock.now()


async def test_leases_are_redelivered_after_delay_requestable(serve: Serve) -> None:
    async with serve() as f:
        await put(f.stub, [discovered(f"https://h{i}.example/p") for i in range(4)])
        first = await get(f.stub, delay_requestable=20)
        assert len(first) == 4
        f.clock.advance(19.0)
        assert await get(f.stub, delay_requestable=20) == []  # still locked
        f.clock.advance(2.0)
        again = await get(f.stub, delay_requestable=20)
        assert sorted(i.url for i in again) == sorted(i.url for i in first)
        old = {i.metadata["crawlsched.lease_id"].values[0] for i in first}
        assert old.isdisjoint(i.metadata["crawlsched.lease_id"].values[0] for i in again)


async def test_get_urls_takes_at_most_max_queues(serve: Serve) -> None:
    async with serve() as f:
        await put(
            f.stub, [discovered(f"https://h{i}.example/p{j}") for i in range(5) for j in (1, 2)]
        )
        got = await get(f.stub, max_queues=3, max_urls_per_queue=1)
        assert len(got) == 3 and len({i.key for i in got}) == 3
        assert (await f.stub.GetStats(pb.QueueWithinCrawlParams())).inProcess == 3


async def test_get_urls_gives_nothing_while_inactive(serve: Serve) -> None:
    async with serve() as f:
        await put(f.stub, [discovered("https://a.example/p")])
        await f.stub.SetActive(pb.Active(state=False))
        assert (await f.stub.GetActive(pb.Local())).state is False
        assert await get(f.stub) == []
        await f.stub.SetActive(pb.Active(state=True))
        assert len(await get(f.stub)) == 1


async def test_another_crawl_id_is_refused_with_a_reason(serve: Serve) -> None:
    async with serve() as f:
        with pytest.raises(grpc.aio.AioRpcError) as err:
            await get(f.stub, crawlID="news")
        assert err.value.code() is grpc.StatusCode.INVALID_ARGUMENT
        assert "crawlID" in (err.value.details() or "")
        info = pb.URLInfo(url="https://a.example/p", crawlID="news")
        with pytest.raises(grpc.aio.AioRpcError) as err:
            await put(f.stub, [pb.URLItem(discovered=pb.DiscoveredURLItem(info=info))])
        assert err.value.code() is grpc.StatusCode.INVALID_ARGUMENT
        with pytest.raises(grpc.aio.AioRpcError) as err:
            await f.stub.GetStats(pb.QueueWithinCrawlParams(crawlID="news"))
        assert err.value.code() is grpc.StatusCode.INVALID_ARGUMENT
        assert (await f.stub.GetStats(pb.QueueWithinCrawlParams(crawlID="DEFAULT"))).size == 0
        assert await get(f.stub, anyCrawlID=pb.AnyCrawlID()) == []
