"""Bad input gets 422 naming the field and the reason, and changes nothing."""

from __future__ import annotations

from typing import Any

import httpx
import pytest

from service.clock import ManualClock

pytestmark = pytest.mark.anyio
URL = "https://shop.example/p/1"


async def _snapshot(api: httpx.AsyncClient) -> tuple[int, Any]:
    explained = await api.get(f"/urls/{URL}")
    return explained.status_code, (explained.json() if explained.status_code == 200 else None)


def _loc(response: httpx.Response) -> list[Any]:
    assert response.status_code == 422, response.text
    (err, *_) = response.json()["detail"]
    assert err["msg"]
    return list(err["loc"])


@pytest.mark.parametrize(
    ("item", "field"),
    [
        ({"url": "ftp://shop.example/x"}, "url"),
        ({"url": "javascript:alert(1)"}, "url"),
        ({"url": "https://" + "a" * 2100 + ".example/"}, "url"),
        ({"url": "https:///nohost"}, "url"),
        ({"url": URL, "change_rate": -1.0}, "change_rate"),
        ({"url": URL, "weight": -0.1}, "weight"),
        ({"url": URL, "false_signal_rate": -2}, "false_signal_rate"),
        ({"url": URL, "recall": 1.5}, "recall"),
        ({"url": URL, "recall": -0.1}, "recall"),
        ({"url": URL, "crawl_delay_s": 0}, "crawl_delay_s"),
        ({"url": URL, "bogus": 1}, "bogus"),
    ],
)
async def test_bad_url_registration_is_rejected_whole(
    api: httpx.AsyncClient, item: dict[str, Any], field: str
) -> None:
    good = {"url": "https://other.example/ok"}
    response = await api.post("/urls", json={"urls": [good, item]})
    loc = _loc(response)
    assert loc[:3] == ["body", "urls", 1] and field in loc
    assert (await api.get("/urls/https://other.example/ok")).status_code == 404


async def test_future_timestamps_are_rejected(api: httpx.AsyncClient, clock: ManualClock) -> None:
    await api.post("/urls", json={"urls": [{"url": URL}]})
    before = await _snapshot(api)
    far = clock.now() + 3600.0
    ok = {"url": URL, "time": clock.now()}
    for path, key, bad in [
        ("/signal", "signals", {"url": URL, "time": far}),
        ("/click", "clicks", {"url": URL, "time": far}),
    ]:
        loc = _loc(await api.post(path, json={key: [ok, bad]}))
        assert loc == ["body", key, 1, "time"]
    loc = _loc(await api.post("/urls", json={"urls": [{"url": URL, "last_crawled_at": far}]}))
    assert loc == ["body", "urls", 0, "last_crawled_at"]
    assert await _snapshot(api) == before


async def test_lease_for_another_url_is_rejected(
    api: httpx.AsyncClient, clock: ManualClock
) -> None:
    await api.post("/urls", json={"urls": [{"url": URL}]})
    (lease,) = (await api.get("/next")).json()["leases"]
    wrong = {"url": "https://shop.example/p/2", "lease_id": lease["lease_id"], "fetched_at": 0}
    assert _loc(await api.post("/crawl-result", json={"results": [wrong]})) == [
        "body", "results", 0, "url",
    ]  # fmt: skip


@pytest.mark.parametrize(
    ("path", "body"),
    [
        ("/signal", {"signals": []}),
        ("/click", {"clicks": [{"url": URL, "time": -1}]}),
        ("/click", {"clicks": [{"url": URL, "time": "soon"}]}),
        (
            "/crawl-result",
            {"results": [{"url": URL, "lease_id": "x", "fetched_at": 1, "status": 700}]},
        ),
        ("/urls", {"urls": [{"url": URL, "change_rate": "NaN"}]}),
        ("/urls", {}),
    ],
)
async def test_malformed_bodies_get_422(api: httpx.AsyncClient, path: str, body: Any) -> None:
    response = await api.post(path, json=body)
    assert response.status_code == 422
    assert response.json()["detail"][0]["loc"][0] == "body"


async def test_next_rejects_bad_n(api: httpx.AsyncClient) -> None:
    assert (await api.get("/next", params={"n": 0})).status_code == 422
    assert (await api.get("/next", params={"n": 10**6})).status_code == 422
    assert (await api.get("/next", params={"n": "many"})).status_code == 422


async def test_unknown_url_and_host_are_404(api: httpx.AsyncClient) -> None:
    assert (await api.get("/urls/https://none.example/")).status_code == 404
    assert (await api.get("/urls/not a url")).status_code == 404
    assert (await api.get("/hosts/none.example")).status_code == 404
