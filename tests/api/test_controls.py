"""The frontier controls over HTTP, on both stores, as a crawl engineer meets them:
back-off on 429 with Retry-After, retirement after 404s, redirects, pausing a host, the
minimum revisit interval, paging over hosts, deleting a host, purging retired URLs."""

from __future__ import annotations

from typing import Any

import httpx
import pytest

from service.clock import ManualClock
from service.settings import Settings

pytestmark = pytest.mark.anyio
HOUR = 3600.0


@pytest.fixture
def settings() -> Settings:
    """The service's defaults for the controls (minimum revisit 60 s, one lease per host)."""
    return Settings(lease_ttl_s=60.0, default_crawl_delay_s=1.0, future_tolerance_s=60.0)


async def _register(api: httpx.AsyncClient, *urls: str, **extra: Any) -> None:
    body = {"urls": [{"url": u, **extra} for u in urls]}
    response = await api.post("/urls", json=body)
    assert response.status_code == 200, response.text


async def _next(api: httpx.AsyncClient, n: int = 50) -> dict[str, str]:
    response = await api.get("/next", params={"n": n})
    assert response.status_code == 200, response.text
    return {x["url"]: x["lease_id"] for x in response.json()["leases"]}


async def _report(api: httpx.AsyncClient, url: str, lease_id: str, at: float, **kw: Any) -> None:
    result = {"url": url, "lease_id": lease_id, "fetched_at": at, **kw}
    response = await api.post("/crawl-result", json={"results": [result]})
    assert response.status_code == 200, response.text
    assert response.json()["accepted"] == 1, response.text


async def test_429_with_retry_after_keeps_the_host_out_for_that_hour(
    store_api: httpx.AsyncClient, clock: ManualClock
) -> None:
    urls = [f"https://busy.example/{i}" for i in range(3)]
    await _register(store_api, *urls, "https://calm.example/a")
    leased = await _next(store_api)
    busy = next(u for u in leased if "busy" in u)
    await _report(store_api, busy, leased[busy], clock.now(), status=429, retry_after_s=HOUR)
    host = (await store_api.get("/hosts/busy.example")).json()
    assert host["blocked"] and host["block_reason"] == "back_off"
    assert host["blocked_until"] == pytest.approx(clock.now() + HOUR)
    assert host["consecutive_failures"] == 1
    assert host["why"].startswith("blocked until ") and "back-off after 1 failure" in host["why"]
    explained = (await store_api.get(f"/urls/{urls[1]}")).json()
    assert "its host is backed off until" in explained["decision"]
    for _ in range(12):  # every 5 minutes of the hour
        clock.advance(HOUR / 12 - 1.0)
        assert not any("busy" in u for u in await _next(store_api))
        clock.advance(1.0)
    assert any("busy" in u for u in await _next(store_api))
    metrics = (await store_api.get("/metrics")).text
    assert "crawlsched_back_offs_total 1.0" in metrics


async def test_three_404_retire_a_url(store_api: httpx.AsyncClient, clock: ManualClock) -> None:
    url = "https://gone.example/page"
    await _register(store_api, url)
    for k in range(3):
        leased = await _next(store_api)
        assert url in leased, k
        await _report(store_api, url, leased[url], clock.now(), status=404)
        clock.advance(2 * HOUR)  # past the retry delay (1 h)
    e = (await store_api.get(f"/urls/{url}")).json()
    assert (e["status"], e["retire_reason"], e["gone_count"]) == ("retired", "gone", 3)
    assert e["decision"].startswith("retired (gone) at ")
    assert await _next(store_api) == {}
    metrics = (await store_api.get("/metrics")).text
    assert "crawlsched_retired_urls 1.0" in metrics
    # registering it again brings it back, with its history
    await _register(store_api, url)
    e = (await store_api.get(f"/urls/{url}")).json()
    assert (e["status"], e["fetch_errors"]) == ("active", 3)
    assert url in await _next(store_api)


async def test_a_permanent_redirect_registers_the_target_and_retires_the_source(
    store_api: httpx.AsyncClient, clock: ManualClock
) -> None:
    src, dst = "https://old.example/a", "https://new.example/b"
    await _register(store_api, src, weight=0.25)
    leased = await _next(store_api)
    await _report(store_api, src, leased[src], clock.now(), status=301, redirect_to=dst)
    s = (await store_api.get(f"/urls/{src}")).json()
    assert (s["status"], s["retire_reason"]) == ("retired", "redirect")
    d = (await store_api.get(f"/urls/{dst}")).json()
    assert d["status"] == "active" and d["weight"] == pytest.approx(0.25)
    assert set(await _next(store_api)) == {dst}


async def test_pausing_a_host_keeps_it_out_until_unpaused(
    store_api: httpx.AsyncClient, clock: ManualClock
) -> None:
    await _register(store_api, "https://h.example/1", "https://other.example/1")
    response = await store_api.patch("/hosts/h.example", json={"paused": True})
    assert response.status_code == 200, response.text
    assert response.json()["paused"] and response.json()["why"].startswith("paused")
    for _ in range(3):
        assert "https://h.example/1" not in await _next(store_api)
        clock.advance(HOUR)
    await store_api.patch("/hosts/h.example", json={"paused": False})
    assert "https://h.example/1" in await _next(store_api)


async def test_a_url_crawled_unchanged_is_not_leased_again_within_60_s(
    store_api: httpx.AsyncClient, clock: ManualClock
) -> None:
    url = "https://fast.example/p"
    await _register(store_api, url, weight=1.0, change_rate=1.0, fixed=True)  # due at once
    leased = await _next(store_api)
    await _report(store_api, url, leased[url], clock.now(), status=200, changed=False)
    e = (await store_api.get(f"/urls/{url}")).json()
    assert "the minimum revisit interval (1 min after its last fetch) holds it" in e["decision"]
    for _ in range(59):
        clock.advance(1.0)
        assert await _next(store_api, n=100) == {}  # workers ask for more than is due
    clock.advance(1.0)
    assert url in await _next(store_api, n=100)


async def test_host_control_routes(store_api: httpx.AsyncClient, clock: ManualClock) -> None:
    await _register(store_api, "https://a.example/1", "https://a.example/2", "https://b.example/1")
    change = {"crawl_delay_s": 5.0, "max_in_flight": 2, "blocked_until": clock.now() + 600}
    response = await store_api.patch("/hosts/a.example", json=change)
    assert response.status_code == 200, response.text
    body = response.json()
    assert (body["crawl_delay_s"], body["max_in_flight"], body["block_reason"]) == (
        5.0, 2, "operator",
    )  # fmt: skip
    assert body["rate_limit_per_s"] == pytest.approx(0.2)
    page = (await store_api.get("/hosts", params={"order": "blocked"})).json()
    assert [h["host"] for h in page["hosts"]] == ["a.example"]
    page = (await store_api.get("/hosts", params={"order": "due", "limit": 1})).json()
    assert [h["host"] for h in page["hosts"]] == ["b.example"] and page["cursor"]
    rest = (await store_api.get("/hosts", params={"limit": 1, "cursor": page["cursor"]})).json()
    assert [h["host"] for h in rest["hosts"]] == ["a.example"] and rest["cursor"] is None
    unblock = await store_api.patch("/hosts/a.example", json={"blocked_until": 0})
    assert unblock.json()["blocked"] is False
    deleted = await store_api.delete("/hosts/a.example")
    assert deleted.json() == {"host": "a.example", "removed": 2}
    assert (await store_api.get("/hosts/a.example")).status_code == 404
    assert (await store_api.delete("/hosts/a.example")).status_code == 404


async def test_purge_deletes_retired_urls(store_api: httpx.AsyncClient, clock: ManualClock) -> None:
    url = "https://done.example/x"
    await _register(store_api, url)
    leased = await _next(store_api)
    await _report(store_api, url, leased[url], clock.now(), retire=True)
    assert (await store_api.get(f"/urls/{url}")).json()["retire_reason"] == "done"
    kept = await store_api.post("/urls/purge", params={"retired_before": clock.now()})
    assert kept.json() == {"removed": 0}
    gone = await store_api.post("/urls/purge", params={"retired_before": clock.now() + 1})
    assert gone.json() == {"removed": 1}
    assert (await store_api.get(f"/urls/{url}")).status_code == 404


@pytest.mark.parametrize(
    ("method", "path", "kw", "field"),
    [
        ("patch", "/hosts/a.example", {"json": {"crawl_delay_s": -1}}, "crawl_delay_s"),
        ("patch", "/hosts/a.example", {"json": {"max_in_flight": 0}}, "max_in_flight"),
        ("patch", "/hosts/a.example", {"json": {"paused": "yes"}}, "paused"),
        ("patch", "/hosts/a.example", {"json": {"blocked_until": -5}}, "blocked_until"),
        ("get", "/hosts", {"params": {"order": "size"}}, "order"),
        ("get", "/hosts", {"params": {"limit": 0}}, "limit"),
        ("get", "/hosts", {"params": {"cursor": "abc"}}, "cursor"),
        ("post", "/urls/purge", {"params": {"retired_before": "soon"}}, "retired_before"),
        ("post", "/urls/purge", {}, "retired_before"),
    ],
)
async def test_bad_control_input_is_a_4xx_naming_the_field(
    store_api: httpx.AsyncClient, method: str, path: str, kw: dict[str, Any], field: str
) -> None:
    await _register(store_api, "https://a.example/1")
    before = (await store_api.get("/hosts/a.example")).json()
    response = await getattr(store_api, method)(path, **kw)
    assert response.status_code == 422, response.text
    assert field in response.text
    assert (await store_api.get("/hosts/a.example")).json() == before


async def test_bad_crawl_result_controls_are_refused(store_api: httpx.AsyncClient) -> None:
    url = "https://a.example/1"
    await _register(store_api, url)
    leased = await _next(store_api)
    for bad in ({"retry_after_s": -1}, {"redirect_to": "ftp://x"}, {"refetch_after": "later"}):
        result = {"url": url, "lease_id": leased[url], "fetched_at": 1.7e9, **bad}
        response = await store_api.post("/crawl-result", json={"results": [result]})
        assert response.status_code == 422, response.text
        assert next(iter(bad)) in response.text


async def test_unknown_host_is_404(store_api: httpx.AsyncClient) -> None:
    response = await store_api.patch("/hosts/nope.example", json={"paused": True})
    assert response.status_code == 404 and "nope.example" in response.text
