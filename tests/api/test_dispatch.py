"""/next under leases: politeness, expiry, duplicates, concurrency; events; metrics."""

from __future__ import annotations

import asyncio
import json
import math
from collections import defaultdict
from collections.abc import Awaitable, Callable

import httpx
import numpy as np
import pytest

from service.clock import ManualClock
from service.routes.dispatch import encode_next
from service.scheduler.dispatch import Dispatched
from service.scheduler.rescoring import rescore_once
from service.schemas import LeaseOut, NextOut
from service.store.base import LeaseGrant, UrlState
from service.store.columns import columns_of

pytestmark = pytest.mark.anyio
DAY = 86_400.0


async def _register(api: httpx.AsyncClient, urls: list[dict[str, object]]) -> None:
    response = await api.post("/urls", json={"urls": urls})
    assert response.status_code == 200, response.text


async def test_host_politeness_is_never_exceeded(
    api: httpx.AsyncClient, clock: ManualClock
) -> None:
    urls = [
        {"url": f"https://{h}.example/{i}", "crawl_delay_s": delay, "change_rate": 1 / DAY}
        for h, delay in (("slow", 10.0), ("fast", 2.0))
        for i in range(20)
    ]
    await _register(api, urls)
    dispatched: dict[str, list[float]] = defaultdict(list)
    for _ in range(120):
        leases = (await api.get("/next", params={"n": 7})).json()["leases"]
        results = []
        for lease in leases:
            dispatched[lease["host"]].append(clock.now())
            results.append({"url": lease["url"], "lease_id": lease["lease_id"],
                            "fetched_at": clock.now(), "changed": True})  # fmt: skip
        if results:
            assert (await api.post("/crawl-result", json={"results": results})).status_code == 200
        clock.advance(0.5)
    for host, delay in (("slow.example", 10.0), ("fast.example", 2.0)):
        times = dispatched[host]
        assert len(times) >= 55 / delay  # the gate is the binding limit
        gaps = [b - a for a, b in zip(times, times[1:], strict=False)]
        assert min(gaps) >= delay


async def test_expired_lease_makes_url_due_again(
    api: httpx.AsyncClient, clock: ManualClock
) -> None:
    await _register(api, [{"url": "https://a.example/x"}])
    (first,) = (await api.get("/next")).json()["leases"]
    assert (await api.get("/next")).json()["leases"] == []  # leased: not handed out twice
    clock.advance(61.0)  # lease_ttl_s = 60
    (second,) = (await api.get("/next")).json()["leases"]
    assert second["url"] == first["url"] and second["lease_id"] != first["lease_id"]
    late = {"url": first["url"], "lease_id": first["lease_id"], "fetched_at": clock.now()}
    answer = (await api.post("/crawl-result", json={"results": [late]})).json()
    assert answer == {"accepted": 0, "ignored": [{"index": 0, "status": "stale"}]}
    metrics = (await api.get("/metrics")).text
    assert "crawlsched_leases_expired_total 1.0" in metrics


async def test_result_posted_twice_counts_once(api: httpx.AsyncClient, clock: ManualClock) -> None:
    await _register(api, [{"url": "https://a.example/x"}])
    (lease,) = (await api.get("/next")).json()["leases"]
    clock.advance(1.0)
    result = {"url": lease["url"], "lease_id": lease["lease_id"], "fetched_at": clock.now(),
              "status": 200, "changed": True}  # fmt: skip
    assert (await api.post("/crawl-result", json={"results": [result]})).json()["accepted"] == 1
    again = (await api.post("/crawl-result", json={"results": [result]})).json()
    assert again == {"accepted": 0, "ignored": [{"index": 0, "status": "duplicate"}]}
    explained = (await api.get("/urls/https://a.example/x")).json()
    assert (explained["crawls"], explained["changes"]) == (1, 1)
    assert explained["last_crawl_at"] == clock.now()


async def test_concurrent_next_callers_never_share_a_url(api: httpx.AsyncClient) -> None:
    await _register(api, [{"url": f"https://h{i % 40}.example/{i}"} for i in range(400)])
    answers = await asyncio.gather(*(api.get("/next", params={"n": 9}) for _ in range(60)))
    urls = [lease["url"] for a in answers for lease in a.json()["leases"]]
    assert len(urls) == len(set(urls)) == 40  # one per host: the gate (1 s) holds the rest


async def test_signals_pull_a_url_forward(
    api: httpx.AsyncClient, clock: ManualClock, fold: Callable[[], Awaitable[int]]
) -> None:
    t0 = clock.now()
    common = {"weight": 1 / DAY, "change_rate": 1 / DAY, "last_crawled_at": t0}
    await _register(
        api,
        [
            {"url": "https://a.example/quiet", "recall": 0.9, "false_signal_rate": 0.1 / DAY}
            | common,
            {"url": "https://b.example/pinged", "recall": 0.9, "false_signal_rate": 0.1 / DAY}
            | common,
        ],
    )
    clock.advance(0.1 * DAY)
    before = (await api.get("/urls/https://b.example/pinged")).json()
    signal = {"url": "https://b.example/pinged", "time": clock.now(), "source": "sitemap"}
    assert (await api.post("/signal", json={"signals": [signal]})).json()["accepted"] == 1
    assert await fold() == 1
    after = (await api.get("/urls/https://b.example/pinged")).json()
    assert after["signals_since_crawl"] == 1
    assert after["due_at"] < before["due_at"]
    assert after["crawl_value"] > before["crawl_value"]
    assert after["freshness_probability"] < before["freshness_probability"]
    (lease,) = (await api.get("/next", params={"n": 1})).json()["leases"]
    assert lease["url"] == "https://b.example/pinged"


async def test_multipliers_are_learned_and_exported(
    api: httpx.AsyncClient, clock: ManualClock
) -> None:
    await _register(
        api,
        [
            {
                "url": f"https://h{i % 10}.example/{i}",
                "weight": (1 + i % 7) / DAY,
                "change_rate": (1 + i % 5) / (10 * DAY),
                "last_crawled_at": clock.now(),
            }
            for i in range(100)
        ],  # fmt: skip
    )
    for _ in range(200):
        clock.advance(600.0)
        leases = (await api.get("/next", params={"n": 2})).json()["leases"]
        results = [{"url": x["url"], "lease_id": x["lease_id"], "fetched_at": clock.now()}
                   for x in leases]  # fmt: skip
        await api.post("/crawl-result", json={"results": results})
        if _ % 20 == 0:
            await rescore_once(api._transport.app.state.context)  # type: ignore[attr-defined]
    metrics = (await api.get("/metrics")).text
    assert "crawlsched_lambda0 " in metrics
    assert "crawlsched_dispatched_total 400.0" in metrics
    explained = (await api.get("/urls/https://h3.example/3")).json()
    assert explained["lambda0"] > 0
    assert explained["threshold_s"] is None or explained["threshold_s"] > 0
    assert explained["decision"]
    host = (await api.get("/hosts/h3.example")).json()
    assert host["urls"] == 10


async def test_lambda0_is_learned_where_politeness_binds_from_the_start(
    api: httpx.AsyncClient, clock: ManualClock
) -> None:
    # a crawler's start page (worth nothing) opens the host's gate; the pages it links
    # to are registered before the gate opens again, so every one of their dispatches
    # is held back by politeness: λ₀ must still get an estimate from them
    start = {"url": "https://h.example/", "weight": 0, "change_rate": 0, "fixed": True}
    await _register(api, [{**start, "crawl_delay_s": 100.0}])
    (lease,) = (await api.get("/next", params={"n": 1})).json()["leases"]
    result = {"url": lease["url"], "lease_id": lease["lease_id"], "fetched_at": clock.now()}
    await api.post("/crawl-result", json={"results": [result]})
    await _register(api, [{"url": f"https://h.example/p{i}"} for i in range(5)])
    for _ in range(6):
        clock.advance(100.0)
        (lease,) = (await api.get("/next", params={"n": 1})).json()["leases"]
        result = {"url": lease["url"], "lease_id": lease["lease_id"], "fetched_at": clock.now()}
        await api.post("/crawl-result", json={"results": [result]})
    explained = (await api.get("/urls/https://h.example/p0")).json()
    assert explained["lambda0"] is not None and explained["lambda0"] > 0
    assert explained["threshold"] > 0


async def test_remove_urls(api: httpx.AsyncClient) -> None:
    await _register(api, [{"url": "https://a.example/x"}, {"url": "https://a.example/y"}])
    response = await api.request("DELETE", "/urls", json={"urls": ["https://a.example/x"]})
    assert response.json() == {"removed": 1}
    assert (await api.get("/urls/https://a.example/x")).status_code == 404


async def test_healthz_reports_clock(api: httpx.AsyncClient, clock: ManualClock) -> None:
    body = (await api.get("/healthz")).json()
    assert body == {"status": "ok", "now": clock.now(), "clock_rate": 1.0, "store": "memory"}


async def test_next_answer_has_the_model_shape(api: httpx.AsyncClient) -> None:
    """The answer, encoded from columns, is what the ``NextOut`` model would write."""
    await _register(api, [{"url": f"https://s{i}.example/x"} for i in range(5)])
    r = await api.get("/next", params={"n": 5})
    assert r.headers["content-type"] == "application/json"
    body = r.json()
    assert len(body["leases"]) == 5
    assert NextOut.model_validate_json(r.content).model_dump(mode="json") == body


def test_infinities_are_encoded_as_the_model_encodes_them() -> None:
    grant = LeaseGrant(
        "l1", 2.0,
        UrlState(
            url="https://a.example/", host="a.example", weight=1.0, change_rate=0.0, recall=0.0,
            false_signal_rate=0.0, signal_time_equivalent_s=math.inf, threshold_s=math.inf,
            scored_lambda=1.0, registered_at=0.0, last_crawl_at=None, signals_since_crawl=0,
            last_signal_at=None, due_at=math.inf, lease_id="l1", lease_deadline=2.0, clicks=0,
            signals=0, crawls=0, changes=0, fetch_errors=0, last_click_at=None,
        ),
        False, math.inf,
    )  # fmt: skip
    d = Dispatched(columns_of(1.0, [grant]), np.array([math.inf]))
    model = NextOut(
        now=1.0,
        leases=[
            LeaseOut(url="https://a.example/", host="a.example", lease_id="l1", deadline=2.0,
                     crawl_value=math.inf, threshold=math.inf, due_at=math.inf)
        ],
    )  # fmt: skip
    assert json.loads(encode_next(d)) == json.loads(model.model_dump_json())
