"""The Store contract: content signatures kept per URL (``swap_signatures``)."""

from __future__ import annotations

import pytest

from service.store.base import Store, UrlRecord

pytestmark = pytest.mark.anyio
T0 = 1_000_000.0


def rec(url: str) -> UrlRecord:
    host = url.split("/")[2]
    return UrlRecord(
        url=url, host=host, weight=1.0, change_rate=0.01, recall=0.5, false_signal_rate=0.01,
        signal_time_equivalent_s=0.0, threshold_s=100.0, scored_lambda=1.0,
    )  # fmt: skip


async def test_swap_answers_the_previous_signature_and_keeps_the_new(store: Store) -> None:
    urls = [f"https://h{i % 3}.example/p{i}" for i in range(7)]  # several shards and hosts
    first = await store.swap_signatures([(u, f"etag-{i}") for i, u in enumerate(urls)])
    assert first == [None] * 7
    second = await store.swap_signatures([(urls[2], 'W/"x y"'), (urls[5], "etag-5")])
    assert second == ["etag-2", "etag-5"]
    # repeating a swap is safe: it answers what the first one stored
    assert await store.swap_signatures([(urls[2], 'W/"x y"')]) == ['W/"x y"']
    assert await store.swap_signatures([]) == []


async def test_a_removed_url_forgets_its_signature(store: Store) -> None:
    url = "https://a.example/p"
    await store.upsert_urls([rec(url)], T0)
    await store.swap_signatures([(url, "sha256:abc")])
    assert await store.remove_urls([url]) == 1
    assert await store.swap_signatures([(url, "sha256:def")]) == [None]
    # removing an unknown URL still drops a signature kept for it
    await store.remove_urls(["https://b.example/q"])


async def test_a_deleted_host_forgets_the_signatures_of_its_urls(store: Store) -> None:
    urls = ["https://a.example/p", "https://a.example/q", "https://b.example/p"]
    await store.upsert_urls([rec(u) for u in urls], T0)
    await store.swap_signatures([(u, "s") for u in urls])
    assert await store.delete_host("a.example") == 2
    assert await store.swap_signatures([(u, "t") for u in urls]) == [None, None, "s"]
