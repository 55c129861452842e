"""The ``store`` fixture: one contract suite, every store implementation.

``redis`` and ``cluster`` run against private servers started for the session
(a single ``redis-server``; a 3-master Redis Cluster); each test starts empty.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterator

import pytest
import redis

from service.store.base import NO_LIMITS, ControlRules, Store
from service.store.memory import MemoryStore
from service.store.redis import RedisStore
from service.store.redis.local import LocalCluster, LocalRedis

STORES = ["memory", "redis", "cluster"]
#: The rules the suite's older tests assume: no minimum revisit, no in-flight cap (the
#: tests of the controls build their stores with :data:`CONTROLS`).
NO_CONTROLS = NO_LIMITS
OPTIONS = {
    "shards": 4,
    "default_crawl_delay_s": 10.0,
    "max_revisit_s": 1e6,
    "controls": NO_CONTROLS,
}


@pytest.fixture(scope="session")
def redis_server() -> Iterator[LocalRedis]:
    with LocalRedis() as server:
        yield server


@pytest.fixture(scope="session")
def redis_cluster() -> Iterator[LocalCluster]:
    with LocalCluster(3) as cluster:
        yield cluster


def _flush(ports: list[int]) -> None:
    for port in ports:
        with redis.Redis(port=port) as client:
            client.flushall()


async def _open(request: pytest.FixtureRequest, options: dict[str, object]) -> Store:
    s: Store
    if request.param == "memory":
        s = MemoryStore(**options)  # type: ignore[arg-type]
    elif request.param == "redis":
        server: LocalRedis = request.getfixturevalue("redis_server")
        _flush([server.port])
        s = await RedisStore.connect(server.url, **options)
    else:
        cluster: LocalCluster = request.getfixturevalue("redis_cluster")
        _flush([n.port for n in cluster.nodes])
        s = await RedisStore.connect(cluster.url, **options)
    return s


@pytest.fixture(params=STORES)
async def store(request: pytest.FixtureRequest) -> AsyncIterator[Store]:
    s = await _open(request, OPTIONS)
    yield s
    await s.close()


#: The frontier controls as the service has them by default (docs/operations.md).
CONTROLS = ControlRules()


@pytest.fixture(params=STORES)
async def controlled(request: pytest.FixtureRequest) -> AsyncIterator[Store]:
    """A store that obeys :data:`CONTROLS` (crawl delay 10 s by default)."""
    s = await _open(request, {**OPTIONS, "controls": CONTROLS})
    yield s
    await s.close()
