"""Fixtures of the direct script tests: a private redis-server per test module, and a
raw client on it that starts each test from an empty database."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
import redis

from service.store.redis.local import LocalRedis


@pytest.fixture(scope="module")
def server() -> Iterator[LocalRedis]:
    with LocalRedis() as s:
        yield s


@pytest.fixture
def raw(server: LocalRedis) -> Iterator[redis.Redis]:
    with redis.Redis(port=server.port) as client:
        client.flushall()
        yield client
