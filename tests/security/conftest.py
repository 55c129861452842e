"""Real sockets and a private Redis for the security tests."""

from __future__ import annotations

import contextlib
import threading
import time
from collections.abc import Callable, Iterator
from typing import Any

import pytest
import redis
import uvicorn

from service.ports import free_port
from service.store.redis.local import LocalRedis

Serve = Callable[..., contextlib.AbstractContextManager[str]]


@contextlib.contextmanager
def _serving(app: Any, **options: Any) -> Iterator[str]:
    """Run ``app`` under uvicorn in a thread on a free port; yield its base URL."""
    port = free_port()
    config = uvicorn.Config(app, host="127.0.0.1", port=port, log_level="warning", **options)
    server = uvicorn.Server(config)
    thread = threading.Thread(target=server.run, name=f"uvicorn-{port}", daemon=True)
    thread.start()
    deadline = time.monotonic() + 30.0
    while not server.started:
        if not thread.is_alive() or time.monotonic() > deadline:
            raise RuntimeError("uvicorn did not start")
        time.sleep(0.01)
    try:
        yield f"http://127.0.0.1:{port}"
    finally:
        server.should_exit = True
        thread.join(timeout=15.0)


@pytest.fixture
def serve() -> Serve:
    """``with serve(app, **uvicorn_options) as base_url:`` a real socket server."""
    return _serving


@pytest.fixture(scope="session")
def redis_server() -> Iterator[LocalRedis]:
    with LocalRedis() as server:
        yield server


@pytest.fixture(params=["memory", "redis"])
def store_setting(request: pytest.FixtureRequest) -> str:
    """``CRAWLSCHED_STORE`` of each store: memory, or a private Redis emptied first."""
    if request.param == "memory":
        return "memory"
    server: LocalRedis = request.getfixturevalue("redis_server")
    with redis.Redis(port=server.port) as client:
        client.flushall()
    return server.url
