"""The Store contract: leasing from one host alone (``lease_host``)."""

from __future__ import annotations

import pytest

from service.store.base import HostChange, Store, UrlRecord

pytestmark = pytest.mark.anyio
T0 = 1_000_000.0
TTL_S = 60.0


def rec(url: str, threshold_s: float = 100.0, last: float | None = None) -> UrlRecord:
    host = url.split("/")[2]
    return UrlRecord(
        url=url, host=host, weight=1.0, change_rate=0.01, recall=0.5, false_signal_rate=0.01,
        signal_time_equivalent_s=0.0, threshold_s=threshold_s, scored_lambda=1.0,
        last_crawled_at=last, crawl_delay_s=10.0,
    )  # fmt: skip


async def test_lease_host_leases_from_that_host_alone(store: Store) -> None:
    urls = ["https://a.example/1", "https://a.example/2", "https://b.example/1"]
    await store.upsert_urls([rec(u) for u in urls], T0)
    got = await store.lease_host(T0, "a.example", TTL_S, False)
    assert got.urls == ["https://a.example/1"] and got.hosts == ["a.example"]
    assert got.deadline.tolist() == [T0 + TTL_S] and got.now == T0
    assert (await store.get_urls([urls[0]]))[0].lease_id == got.lease_ids[0]  # type: ignore[union-attr]
    # its politeness gate holds the host; the call is safe to repeat
    assert (await store.lease_host(T0 + 1, "a.example", TTL_S, False)).urls == []
    assert (await store.lease_host(T0 + 1, "a.example", TTL_S, True)).urls == []
    assert (await store.lease_host(T0 + 1, "b.example", TTL_S, False)).urls == [urls[2]]
    assert (await store.lease_host(T0 + 1, "nowhere.example", TTL_S, True)).urls == []
    assert (await store.lease_host(T0 + 10, "a.example", TTL_S, False)).urls == [urls[1]]
    # a blocked host gives nothing
    await store.upsert_urls([rec("https://a.example/3")], T0 + 10)
    await store.change_host("a.example", HostChange(blocked_until=T0 + 100), T0 + 10)
    assert (await store.lease_host(T0 + 50, "a.example", TTL_S, True)).urls == []
    after = await store.lease_host(T0 + 100, "a.example", TTL_S, True)
    assert after.urls == ["https://a.example/1"]  # its first lease expired: due again first


async def test_a_host_not_yet_due_gives_only_with_dispatch_ahead(store: Store) -> None:
    url = "https://c.example/later"
    await store.upsert_urls([rec(url, threshold_s=1000.0, last=T0)], T0)  # due at T0 + 1000
    assert (await store.lease_host(T0 + 1, "c.example", TTL_S, False)).urls == []
    assert (await store.lease_host(T0 + 1, "c.example", TTL_S, True)).urls == [url]
