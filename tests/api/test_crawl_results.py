"""Crawl results the service cannot match: a lease it has no record of is answered per
item (``unknown_lease``); a lease of another URL, or a fetch time before the lease
was issued, fails the batch with 422 and changes nothing.  On both stores."""

from __future__ import annotations

from typing import Any

import httpx
import pytest

from service.app import create_app
from service.clock import ManualClock
from service.settings import Settings
from service.store.memory import MemoryStore

pytestmark = pytest.mark.anyio
URL = "https://shop.example/p/1"
OTHER = "https://other.example/p/2"


async def _lease(api: httpx.AsyncClient, *urls: str) -> dict[str, Any]:
    await api.post("/urls", json={"urls": [{"url": u} for u in urls]})
    body = (await api.get("/next", params={"n": len(urls)})).json()
    return {lease["url"]: lease for lease in body["leases"]}


async def _state(api: httpx.AsyncClient, url: str) -> dict[str, Any]:
    response = await api.get(f"/urls/{url}")
    assert response.status_code == 200, response.text
    body: dict[str, Any] = response.json()
    return {k: body[k] for k in ("crawls", "fetch_errors", "last_crawl_at", "lease_id")}


def _result(url: str, lease_id: str, fetched_at: float) -> dict[str, Any]:
    return {"url": url, "lease_id": lease_id, "fetched_at": fetched_at, "changed": True}


@pytest.mark.parametrize(
    "lease_id", ["f" * 32, "zz", "0.1.deadbeef", "3.999999.abcdef12", "9999.1.x"]
)
async def test_unknown_lease_is_answered_per_item(
    store_api: httpx.AsyncClient, clock: ManualClock, lease_id: str
) -> None:
    leases = await _lease(store_api, URL)
    good = _result(URL, leases[URL]["lease_id"], clock.now())
    bad = _result(URL, lease_id, clock.now())
    response = await store_api.post("/crawl-result", json={"results": [bad, good, bad]})
    assert response.status_code == 200, response.text
    assert response.json() == {
        "accepted": 1,
        "ignored": [
            {"index": 0, "status": "unknown_lease"},
            {"index": 2, "status": "unknown_lease"},
        ],
    }
    state = await _state(store_api, URL)
    assert state["crawls"] == 1 and state["lease_id"] is None
    metrics = (await store_api.get("/metrics")).text
    assert 'crawlsched_events_total{kind="crawl_result",status="unknown_lease"} 2.0' in metrics


async def test_leases_lost_with_a_memory_store_restart_are_answered_unknown(
    settings: Settings, clock: ManualClock
) -> None:
    def app() -> httpx.AsyncClient:
        store = MemoryStore(shards=settings.shards, default_crawl_delay_s=1.0)
        transport = httpx.ASGITransport(app=create_app(settings, clock=clock, store=store))
        return httpx.AsyncClient(transport=transport, base_url="http://crawlsched")

    async with app() as before:
        old = await _lease(before, URL, OTHER)
    async with app() as after:  # the embedded store kept nothing
        new = await _lease(after, URL)
        results = [
            _result(URL, old[URL]["lease_id"], clock.now()),
            _result(OTHER, old[OTHER]["lease_id"], clock.now()),
            _result(URL, new[URL]["lease_id"], clock.now()),
        ]
        response = await after.post("/crawl-result", json={"results": results})
        assert response.status_code == 200, response.text
        assert response.json()["ignored"] == [
            {"index": 0, "status": "unknown_lease"},
            {"index": 1, "status": "unknown_lease"},
        ]
        assert (await _state(after, URL))["crawls"] == 1


async def test_lease_of_another_url_fails_the_batch(
    store_api: httpx.AsyncClient, clock: ManualClock
) -> None:
    leases = await _lease(store_api, URL, OTHER)
    before = [await _state(store_api, u) for u in (URL, OTHER)]
    good = _result(URL, leases[URL]["lease_id"], clock.now())
    wrong = _result(URL, leases[OTHER]["lease_id"], clock.now())
    response = await store_api.post("/crawl-result", json={"results": [good, wrong]})
    assert response.status_code == 422, response.text
    (err,) = response.json()["detail"]
    assert err["loc"] == ["body", "results", 1, "url"] and OTHER in err["msg"]
    assert [await _state(store_api, u) for u in (URL, OTHER)] == before


@pytest.mark.parametrize("fetched_at", [1000.0, 0.0])
async def test_fetch_time_long_before_the_lease_fails_the_batch(
    store_api: httpx.AsyncClient, clock: ManualClock, fetched_at: float
) -> None:
    leases = await _lease(store_api, URL, OTHER)
    before = [await _state(store_api, u) for u in (URL, OTHER)]
    good = _result(OTHER, leases[OTHER]["lease_id"], clock.now())
    early = _result(URL, leases[URL]["lease_id"], fetched_at)
    response = await store_api.post("/crawl-result", json={"results": [good, early]})
    assert response.status_code == 422, response.text
    (err,) = response.json()["detail"]
    assert err["loc"] == ["body", "results", 1, "fetched_at"]
    assert "before its lease was issued" in err["msg"]
    assert [await _state(store_api, u) for u in (URL, OTHER)] == before


async def test_fetch_time_before_the_lease_within_the_clock_skew_tolerance(
    store_api: httpx.AsyncClient, clock: ManualClock, settings: Settings
) -> None:
    """A crawler whose clock lags by less than ``future_tolerance_s`` is believed."""
    leases = await _lease(store_api, URL, OTHER)
    issued = clock.now()
    skew = settings.future_tolerance_s
    late = _result(URL, leases[URL]["lease_id"], issued - skew + 1.0)
    response = await store_api.post("/crawl-result", json={"results": [late]})
    assert response.status_code == 200 and response.json()["accepted"] == 1, response.text
    assert (await _state(store_api, URL))["last_crawl_at"] == issued - skew + 1.0
    too_late = _result(OTHER, leases[OTHER]["lease_id"], issued - skew - 1.0)
    response = await store_api.post("/crawl-result", json={"results": [too_late]})
    assert response.status_code == 422, response.text
    assert response.json()["detail"][0]["loc"] == ["body", "results", 0, "fetched_at"]


async def test_next_answers_the_time_the_store_decided_at(
    store_api: httpx.AsyncClient, clock: ManualClock, settings: Settings
) -> None:
    await store_api.post("/urls", json={"urls": [{"url": URL}]})
    body = (await store_api.get("/next", params={"n": 1})).json()
    (lease,) = body["leases"]
    assert body["now"] == clock.now() and lease["deadline"] == clock.now() + settings.lease_ttl_s
