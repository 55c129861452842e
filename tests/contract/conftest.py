"""The ``store`` fixture: one contract suite, every store implementation."""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest

from service.store.base import Store
from service.store.memory import MemoryStore

STORES = ["memory"]


@pytest.fixture(params=STORES)
async def store(request: pytest.FixtureRequest) -> AsyncIterator[Store]:
    if request.param == "memory":
        s: Store = MemoryStore(shards=4, default_crawl_delay_s=10.0, max_revisit_s=1e6)
    else:  # pragma: no cover - new stores register here
        raise AssertionError(request.param)
    yield s
    await s.close()
