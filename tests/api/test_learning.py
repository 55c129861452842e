"""Online estimation through the API: events move the estimates, GET /urls shows them."""

from __future__ import annotations

import math
from collections.abc import Awaitable, Callable
from typing import Any
from urllib.parse import quote

import httpx
import pytest

from service.clock import ManualClock
from service.scheduler.context import Context
from service.scheduler.learning import learn_pass
from service.settings import DAY_S

pytestmark = pytest.mark.anyio

URL = "https://shop.example/item/1"


async def explain(api: httpx.AsyncClient, url: str) -> dict[str, Any]:
    r = await api.get(f"/urls/{quote(url, safe='')}")
    assert r.status_code == 200, r.text
    body: dict[str, Any] = r.json()
    return body


async def crawl(api: httpx.AsyncClient, clock: ManualClock, url: str, changed: bool) -> None:
    """Lease ``url`` (the only due one) and report a fetch at the clock's time."""
    lease = None
    for _ in range(50):
        leases = (await api.get("/next", params={"n": 1})).json()["leases"]
        if leases and leases[0]["url"] == url:
            lease = leases[0]
            break
        clock.advance(1.0)
    assert lease is not None, "the URL was never leased"
    body = {
        "url": url,
        "lease_id": lease["lease_id"],
        "fetched_at": clock.now(),
        "changed": changed,
    }
    r = await api.post("/crawl-result", json={"results": [body]})
    assert r.status_code == 200 and r.json()["accepted"] == 1, r.text


async def test_a_bare_url_learns_its_change_rate_from_crawl_outcomes(
    api: httpx.AsyncClient, clock: ManualClock, fold: Callable[[], Awaitable[int]]
) -> None:
    t0 = clock.now()
    r = await api.post("/urls", json={"urls": [{"url": URL, "last_crawled_at": t0}]})
    assert r.status_code == 200
    start = await explain(api, URL)
    assert start["learning"]["fixed"] is False
    assert start["learning"]["unsignalled_change_rate"]["observations"] == 0
    # every crawl a day apart finds the page changed: Δ̂ must rise
    for _ in range(6):
        clock.set(clock.now() + DAY_S)
        await crawl(api, clock, URL, changed=True)
    settled = await explain(api, URL)  # settled at once, re-estimated by the fold
    assert settled["learning"]["unsignalled_change_rate"]["observations"] == 6
    assert settled["change_rate"] == start["change_rate"]
    assert await fold() > 0
    after = await explain(api, URL)
    learned = after["learning"]["unsignalled_change_rate"]
    assert learned["observations"] == 6
    assert after["change_rate"] > 2 * start["change_rate"]
    # Δ = α + γ·precision, γ still its prior's (no signal seen yet)
    assert 0 < learned["estimate"] <= after["change_rate"]


async def test_clicks_and_signals_move_importance_and_signal_rate(
    api: httpx.AsyncClient, clock: ManualClock, fold: Callable[[], Awaitable[int]]
) -> None:
    t0 = clock.now()
    await api.post("/urls", json={"urls": [{"url": URL, "last_crawled_at": t0}]})
    before = await explain(api, URL)
    clock.set(t0 + 10 * DAY_S)
    clicks = [{"url": URL, "time": t0 + k * 1800.0} for k in range(1, 400)]  # 40/day
    signals = [{"url": URL, "time": t0 + k * 3 * 3600.0} for k in range(1, 80)]  # 8/day
    assert (await api.post("/click", json={"clicks": clicks})).status_code == 200
    assert (await api.post("/signal", json={"signals": signals})).status_code == 200
    await fold()
    after = await explain(api, URL)
    assert after["weight"] * DAY_S == pytest.approx(40.0, rel=0.25)
    assert after["signal_rate"] * DAY_S == pytest.approx(8.0, rel=0.3)
    assert after["learning"]["weight"]["observations"] > 300
    assert after["weight"] > 10 * before["weight"]


async def test_fixed_parameters_do_not_move(
    api: httpx.AsyncClient, clock: ManualClock, fold: Callable[[], Awaitable[int]]
) -> None:
    t0 = clock.now()
    item = {"url": URL, "weight": 1e-5, "change_rate": 2e-6, "fixed": True, "last_crawled_at": t0}
    await api.post("/urls", json={"urls": [item]})
    clock.set(t0 + DAY_S)
    await api.post("/click", json={"clicks": [{"url": URL, "time": t0 + k} for k in range(100)]})
    assert await fold() == 1
    out = await explain(api, URL)
    assert out["weight"] == 1e-5 and out["change_rate"] == 2e-6
    assert out["learning"]["fixed"] is True and out["learning"]["weight"]["prior_mean"] is None


async def test_registered_values_are_priors_and_the_starting_point(
    api: httpx.AsyncClient, clock: ManualClock
) -> None:
    item = {"url": URL, "weight": 3e-5, "change_rate": 4e-6, "recall": 0.5,
            "false_signal_rate": 1e-6, "label": "shoes"}  # fmt: skip
    await api.post("/urls", json={"urls": [item]})
    out = await explain(api, URL)
    assert out["weight"] == pytest.approx(3e-5, rel=1e-9)
    assert out["change_rate"] == pytest.approx(4e-6, rel=1e-9)
    assert out["recall"] == pytest.approx(0.5, rel=1e-9)
    assert out["false_signal_rate"] == pytest.approx(1e-6, rel=1e-9)
    assert out["learning"]["label"] == "shoes"
    assert out["learning"]["weight"]["prior_shape"] == 2.0  # prior_strength


async def test_a_new_url_starts_from_its_host_and_label(
    api: httpx.AsyncClient, clock: ManualClock, fold: Callable[[], Awaitable[int]]
) -> None:
    """After a learning pass, a URL with no history starts near its host's click rate."""
    t0 = clock.now()
    urls = [f"https://busy.example/p/{k}" for k in range(30)]
    others = [f"https://quiet.example/p/{k}" for k in range(30)]
    await api.post(
        "/urls", json={"urls": [{"url": u, "last_crawled_at": t0} for u in urls + others]}
    )
    clock.set(t0 + 20 * DAY_S)
    clicks = [{"url": u, "time": t0 + k * 3600.0} for u in urls for k in range(1, 480)]  # 24/day
    for k in range(0, len(clicks), 5000):
        await api.post("/click", json={"clicks": clicks[k : k + 5000]})
    await fold()
    ctx: Context = api._transport.app.state.context  # type: ignore[attr-defined]
    await learn_pass(ctx)
    new_busy, new_quiet = "https://busy.example/new", "https://quiet.example/new"
    await api.post("/urls", json={"urls": [{"url": new_busy}, {"url": new_quiet}]})
    busy, quiet = await explain(api, new_busy), await explain(api, new_quiet)
    assert busy["learning"]["weight"]["observations"] == 0
    # the busy host's URLs see 24 clicks a day, the quiet host's none: each new URL
    # starts from its host's 30 URLs shrunk towards all 60 (5 URLs' worth of pull)
    assert busy["weight"] * DAY_S > 15.0
    assert busy["weight"] > 5 * quiet["weight"]


async def test_labels_must_be_one_token(api: httpx.AsyncClient) -> None:
    r = await api.post("/urls", json={"urls": [{"url": URL, "label": "two words"}]})
    assert r.status_code == 422
    assert "label" in r.text
    assert (await api.get(f"/urls/{quote(URL, safe='')}")).status_code == 404


async def test_estimates_are_finite_for_a_never_changing_page(
    api: httpx.AsyncClient, clock: ManualClock
) -> None:
    t0 = clock.now()
    await api.post("/urls", json={"urls": [{"url": URL, "last_crawled_at": t0}]})
    for _ in range(8):
        clock.set(clock.now() + DAY_S)
        await crawl(api, clock, URL, changed=False)
    out = await explain(api, URL)
    assert math.isfinite(out["change_rate"]) and out["change_rate"] > 0
    assert out["learning"]["unsignalled_change_rate"]["observations"] == 8


async def test_the_host_shows_its_signal_sources_precision(
    api: httpx.AsyncClient, clock: ManualClock, fold: Callable[[], Awaitable[int]]
) -> None:
    """Every signal is followed by a changed crawl, silence by an unchanged one: the
    host's pooled precision comes out high once the learner has passed."""
    t0 = clock.now()
    await api.post("/urls", json={"urls": [{"url": URL, "last_crawled_at": t0}]})
    host = (await api.get("/hosts/shop.example")).json()
    assert host["signal_precision"] is None and host["signal_outcomes"] == 0
    for k in range(24):
        clock.set(clock.now() + DAY_S)
        if k % 2 == 0:
            signal = {"url": URL, "time": clock.now() - 3600.0}
            assert (await api.post("/signal", json={"signals": [signal]})).status_code == 200
            await fold()
        await crawl(api, clock, URL, changed=k % 2 == 0)
    ctx: Context = api._transport.app.state.context  # type: ignore[attr-defined]
    await learn_pass(ctx)
    host = (await api.get("/hosts/shop.example")).json()
    assert host["signal_outcomes"] == 12
    assert host["signal_precision"] > 0.8
