"""Backpressure: while the fold lags more than ``ingest_max_lag_s`` behind, a batch of signals
or clicks is refused whole (503, ``Retry-After``, nothing appended, counted in
``crawlsched_events_refused_total``); ``/next`` and crawl results are served; once the
fold has caught up, batches are accepted again.  On each store; the apps run no fold loop, the
test folds by hand, and the lag is real wall time."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Awaitable, Callable

import httpx
import pytest
from fastapi import FastAPI

from service.app import create_app
from service.clock import ManualClock
from service.scheduler.fold import fold_now
from service.settings import Settings
from service.store.base import Store
from service.store.redis.local import LocalRedis

pytestmark = pytest.mark.anyio
BOUND_S = 0.2  # ingest_max_lag_s: the gate reads the lag at most every BOUND_S / 4
URL = "https://a.example/p"


@pytest.fixture(params=["memory", "redis"])
async def app(
    request: pytest.FixtureRequest,
    clock: ManualClock,
    open_empty_store: Callable[[str, Settings, LocalRedis | None], Awaitable[Store]],
) -> AsyncIterator[FastAPI]:
    settings = Settings(
        lease_ttl_s=60.0,
        default_crawl_delay_s=1.0,
        min_revisit_s=0.0,
        ingest_max_lag_s=BOUND_S,
        ingest_backpressure=True,
    )
    server: LocalRedis | None = (
        request.getfixturevalue("api_redis") if request.param == "redis" else None
    )
    store = await open_empty_store(request.param, settings, server)
    try:
        yield create_app(settings, clock=clock, store=store)
    finally:
        await store.close()


def _metric(text: str, name: str, kind: str) -> float:
    for line in text.splitlines():
        if line.startswith(f'{name}{{kind="{kind}"}} '):
            return float(line.split()[1])
    return 0.0


async def test_events_wait_for_a_lagging_fold(app: FastAPI, clock: ManualClock) -> None:
    ctx = app.state.context
    transport = httpx.ASGITransport(app=app)
    async with httpx.AsyncClient(transport=transport, base_url="http://crawlsched") as api:
        assert (await api.post("/urls", json={"urls": [{"url": URL}]})).is_success
        lease = (await api.get("/next", params={"n": 1})).json()["leases"][0]
        result = {"url": URL, "lease_id": lease["lease_id"], "fetched_at": clock.now()}
        results = {"results": [{**result, "status": 200}]}
        t = clock.now() - 1.0
        first = await api.post("/click", json={"clicks": [{"url": URL, "time": t}]})
        assert first.json() == {"accepted": 1, "ignored": []}
        await asyncio.sleep(2 * BOUND_S)  # the click waits, unfolded, longer than the bound
        for route, body in (
            ("/click", {"clicks": [{"url": URL, "time": t}] * 3}),
            ("/signal", {"signals": [{"url": URL, "time": t}] * 3}),
        ):
            refused = await api.post(route, json=body)
            assert refused.status_code == 503
            assert refused.headers["Retry-After"] == "1"
            assert "the fold lags" in refused.json()["detail"]
            assert "CRAWLSCHED_INGEST_MAX_LAG_S" in refused.json()["detail"]
        # a bad batch is still a 422, not a 503
        bad = await api.post("/click", json={"clicks": [{"url": URL, "time": "x"}]})
        assert bad.status_code == 422
        text = (await api.get("/metrics")).text
        assert _metric(text, "crawlsched_events_refused_total", "click") == 3
        assert _metric(text, "crawlsched_events_refused_total", "signal") == 3
        # crawl results settle whatever the lag
        assert (await api.post("/crawl-result", json=results)).json()["accepted"] == 1
        # nothing of the refused batches was appended: the fold finds the first click only
        await fold_now(ctx)
        state = (await api.get(f"/urls/{URL}")).json()
        assert (state["clicks"], state["signals"], state["crawls"]) == (1, 0, 1)
        await asyncio.sleep(BOUND_S / 2)  # the gate reads the lag again: 0 now
        again = await api.post("/signal", json={"signals": [{"url": URL, "time": clock.now()}]})
        assert again.json() == {"accepted": 1, "ignored": []}
        await fold_now(ctx)
        state = (await api.get(f"/urls/{URL}")).json()
        assert (state["clicks"], state["signals"], state["crawls"]) == (1, 1, 1)
