"""``Idempotency-Key``: a batch repeated with its key gets its first answer again and
changes nothing; without a key, or with another batch, it is a new batch.  On both
stores, over every event route and registration; signals and clicks count once across
their append and their fold."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from typing import Any

import httpx
import pytest
from prometheus_client.parser import text_string_to_metric_families

from service.clock import ManualClock
from service.settings import Settings

pytestmark = pytest.mark.anyio
A = "https://a.example/1"
B = "https://b.example/2"
UNKNOWN = "https://nowhere.example/"


def _key(key: str) -> dict[str, str]:
    return {"Idempotency-Key": key}


async def _counts(api: httpx.AsyncClient, url: str) -> tuple[int, int, int, int]:
    body = (await api.get(f"/urls/{url}")).json()
    return body["clicks"], body["signals"], body["crawls"], body["fetch_errors"]


async def _events_total(api: httpx.AsyncClient, kind: str, status: str) -> float:
    """``crawlsched_events_total{kind, status}`` as /metrics reports it (0 if absent)."""
    text = (await api.get("/metrics")).text
    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            if sample.name == "crawlsched_events_total" and sample.labels == {
                "kind": kind,
                "status": status,
            }:
                return sample.value
    return 0.0


async def _register(api: httpx.AsyncClient) -> None:
    response = await api.post("/urls", json={"urls": [{"url": A}, {"url": B}]})
    assert response.status_code == 200, response.text


@pytest.mark.parametrize(
    ("path", "field", "column"), [("/click", "clicks", 0), ("/signal", "signals", 1)]
)
async def test_repeated_event_batch_counts_once(
    store_api: httpx.AsyncClient,
    clock: ManualClock,
    fold: Callable[[], Awaitable[int]],
    path: str,
    field: str,
    column: int,
) -> None:
    await _register(store_api)
    now = clock.now()
    batch = {
        field: [{"url": A, "time": now}, {"url": UNKNOWN, "time": now}, {"url": B, "time": now}]
    }
    first = await store_api.post(path, json=batch, headers=_key("batch-1"))
    assert first.status_code == 200, first.text
    assert first.json() == {"accepted": 3, "ignored": []}  # appended: classified by the fold
    for _ in range(2):
        again = await store_api.post(path, json=batch, headers=_key("batch-1"))
        assert again.status_code == 200 and again.json() == first.json()
    await fold()
    assert [(await _counts(store_api, u))[column] for u in (A, B)] == [1, 1]
    kind = field.removesuffix("s")
    assert await _events_total(store_api, kind, "unknown_url") == 1
    assert await _events_total(store_api, kind, "accepted") == 2
    # without the key the same events are new events
    assert (await store_api.post(path, json=batch)).status_code == 200
    await fold()
    assert [(await _counts(store_api, u))[column] for u in (A, B)] == [2, 2]
    assert await _events_total(store_api, kind, "unknown_url") == 2


async def test_repeated_results_settle_once_and_answer_as_the_first_time(
    store_api: httpx.AsyncClient, clock: ManualClock
) -> None:
    await _register(store_api)
    leases = (await store_api.get("/next", params={"n": 2})).json()["leases"]
    results = [
        {"url": x["url"], "lease_id": x["lease_id"], "fetched_at": clock.now(), "status": s}
        for x, s in zip(leases, (200, 503), strict=True)
    ]
    body = {"results": [*results, {**results[0], "lease_id": "f" * 32}]}
    first = await store_api.post("/crawl-result", json=body, headers=_key("r-1"))
    assert first.status_code == 200, first.text
    assert first.json() == {"accepted": 2, "ignored": [{"index": 2, "status": "unknown_lease"}]}
    again = await store_api.post("/crawl-result", json=body, headers=_key("r-1"))
    assert again.json() == first.json()  # not "duplicate": the same batch, answered again
    counts = {x["url"]: await _counts(store_api, x["url"]) for x in leases}
    assert sorted(c[2:] for c in counts.values()) == [(0, 1), (1, 0)]
    # a new batch of the same results (another key) is told they are duplicates
    other = await store_api.post("/crawl-result", json=body, headers=_key("r-2"))
    assert [x["status"] for x in other.json()["ignored"]] == [
        "duplicate", "duplicate", "unknown_lease",
    ]  # fmt: skip


async def test_repeated_registration_answers_as_the_first_time(
    store_api: httpx.AsyncClient,
) -> None:
    body = {"urls": [{"url": A}, {"url": B}]}
    first = await store_api.post("/urls", json=body, headers=_key("reg-1"))
    assert first.json() == {"created": 2, "updated": 0}
    assert (await store_api.post("/urls", json=body, headers=_key("reg-1"))).json() == first.json()
    assert (await store_api.post("/urls", json=body)).json() == {"created": 0, "updated": 2}


async def test_a_key_names_its_batch_and_route(
    store_api: httpx.AsyncClient, clock: ManualClock, fold: Callable[[], Awaitable[int]]
) -> None:
    """The same key with another batch, or on another route, is another batch."""
    await _register(store_api)
    now = clock.now()
    one = {"clicks": [{"url": A, "time": now}]}
    two = {"clicks": [{"url": A, "time": now}, {"url": B, "time": now}]}
    for body in (one, two, one):
        assert (await store_api.post("/click", json=body, headers=_key("k"))).status_code == 200
    signal = {"signals": [{"url": A, "time": now}]}
    assert (await store_api.post("/signal", json=signal, headers=_key("k"))).status_code == 200
    await fold()
    assert await _counts(store_api, A) == (2, 1, 0, 0)
    assert await _counts(store_api, B) == (1, 0, 0, 0)


@pytest.mark.parametrize(
    "settings",
    [Settings(lease_ttl_s=60.0, future_tolerance_s=60.0, idempotency_s=0.2)],
)
async def test_a_key_is_forgotten_after_idempotency_s(
    store_api: httpx.AsyncClient,
    clock: ManualClock,
    settings: Settings,
    fold: Callable[[], Awaitable[int]],
) -> None:
    await _register(store_api)
    body = {"clicks": [{"url": A, "time": clock.now()}]}
    for _ in range(2):
        await store_api.post("/click", json=body, headers=_key("short"))
    await fold()
    assert (await _counts(store_api, A))[0] == 1
    await asyncio.sleep(settings.idempotency_s + 0.1)  # wall time: the TTL is wall seconds
    await store_api.post("/click", json=body, headers=_key("short"))
    await fold()
    assert (await _counts(store_api, A))[0] == 2


@pytest.mark.parametrize("key", ["", "k" * 256])
async def test_bad_keys_are_refused(
    store_api: httpx.AsyncClient, clock: ManualClock, key: str
) -> None:
    await _register(store_api)
    body: dict[str, Any] = {"clicks": [{"url": A, "time": clock.now()}]}
    response = await store_api.post("/click", json=body, headers=_key(key))
    assert response.status_code == 422, response.text
    assert response.json()["detail"][0]["loc"] == ["header", "Idempotency-Key"]
    assert (await _counts(store_api, A))[0] == 0
