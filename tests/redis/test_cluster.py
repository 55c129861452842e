"""The same code on a 3-master Redis Cluster: shards spread over the masters, and the
service working end to end on it."""

from __future__ import annotations

from collections.abc import Iterator

import httpx
import pytest
import redis

from service.app import create_app
from service.clock import ManualClock
from service.scheduler.fold import fold_now
from service.settings import Settings
from service.store.redis.local import LocalCluster

pytestmark = pytest.mark.anyio
T0 = 1_700_000_000.0


@pytest.fixture(scope="module")
def cluster() -> Iterator[LocalCluster]:
    with LocalCluster(3) as c:
        yield c


async def test_service_runs_end_to_end_on_a_cluster(cluster: LocalCluster) -> None:
    settings = Settings(store=cluster.url, shards=16, lease_ttl_s=60.0, default_crawl_delay_s=1.0)
    clock = ManualClock(T0)
    app = create_app(settings, clock=clock)
    urls = [f"https://h{i}.example/p{j}" for i in range(40) for j in range(3)]
    async with app.router.lifespan_context(app):
        transport = httpx.ASGITransport(app=app)
        async with httpx.AsyncClient(transport=transport, base_url="http://c") as api:
            r = await api.post("/urls", json={"urls": [{"url": u} for u in urls]})
            assert r.json() == {"created": 120, "updated": 0}
            leases = (await api.get("/next", params={"n": 100})).json()["leases"]
            assert len(leases) == 40  # one per host: politeness
            assert len({x["host"] for x in leases}) == 40
            clock.advance(5.0)
            results = [
                {"url": x["url"], "lease_id": x["lease_id"], "fetched_at": T0 + 1, "status": 200,
                 "changed": True}
                for x in leases
            ]  # fmt: skip
            assert (await api.post("/crawl-result", json={"results": results})).json()[
                "accepted"
            ] == 40
            sig = [{"url": x["url"], "time": T0 + 2} for x in leases]
            assert (await api.post("/signal", json={"signals": sig})).json()["accepted"] == 40
            # as a worker would: the settled results and the signals, 16 shards each
            assert await fold_now(app.state.context, "test") == 32
            explained = (await api.get(f"/urls/{leases[0]['url']}")).json()
            assert explained["crawls"] == 1 and explained["signals_since_crawl"] == 1
            metrics = (await api.get("/metrics")).text
            assert "crawlsched_urls 120.0" in metrics
            assert (await api.get("/healthz")).status_code == 503  # no worker beats
            await app.state.context.store.heartbeat("test", 10.0)
            assert (await api.get("/healthz")).json()["store"] == "redis"
    # every master holds some of the 16 shards
    sizes = []
    for node in cluster.nodes:
        with redis.Redis(port=node.port) as raw:
            sizes.append(raw.dbsize())
    assert all(size > 0 for size in sizes), sizes
