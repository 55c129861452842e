"""The SDK against a served app (uvicorn subprocess, real sockets): the README examples
run as written, and ``Client`` and ``AsyncClient`` make the same calls."""

from __future__ import annotations

import os
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

import crawlsched
from crawlsched import AsyncClient, Client, CrawlschedError
from service.loadgen.demo import served_app
from service.ports import free_port

pytestmark = pytest.mark.e2e
EXAMPLES = Path(__file__).parents[2] / "docs" / "examples"


@pytest.fixture(scope="module")
def service() -> Iterator[str]:
    with served_app({"CRAWLSCHED_STORE": "memory", "CRAWLSCHED_CLOCK": "system"}) as url:
        yield url


@pytest.mark.parametrize("example", ["quickstart.py", "quickstart_sync.py"])
def test_readme_example_runs_as_written(example: str) -> None:
    # a service of its own: the example registers https://example.com/ and leases it
    with served_app({"CRAWLSCHED_STORE": "memory"}) as url:
        env = {**os.environ, "CRAWLSCHED_URL": url, "CRAWLSCHED_TOKEN": "t0ken"}
        done = subprocess.run(
            [sys.executable, str(EXAMPLES / example)],
            env=env, capture_output=True, text=True, timeout=60, check=False,
        )  # fmt: skip
        assert done.returncode == 0, done.stderr
        lines = done.stdout.splitlines()
        assert lines[0] == "{'accepted': 1, 'ignored': []}"
        assert len(lines) == 2 and lines[1]  # the decision in words
        with Client(url) as cs:
            state = cs.explain("https://example.com/")
        assert state["crawls"] == 1 and state["last_crawl_at"] is not None


def test_sync_client_makes_every_call(service: str) -> None:
    with Client(service) as cs:
        assert cs.healthz()["status"] == "ok"
        urls = [f"https://sync.example/{i}" for i in range(3)]
        assert cs.register([{"url": u, "crawl_delay_s": 0.001} for u in urls[:2]]) == {
            "created": 2, "updated": 0,
        }  # fmt: skip
        assert cs.discover(urls) == {"created": 1, "updated": 0, "kept": 2}
        now = cs.healthz()["now"]
        assert cs.clicks([{"url": urls[0], "time": now}])["accepted"] == 1
        assert cs.signals([{"url": urls[1], "time": now}])["accepted"] == 1
        leases = cs.next(1)["leases"]
        assert len(leases) == 1 and leases[0]["host"] == "sync.example"
        lease = leases[0]
        result = {"url": lease["url"], "lease_id": lease["lease_id"], "fetched_at": now}
        assert cs.results([result]) == {"accepted": 1, "ignored": []}
        assert cs.results([result])["ignored"] == [{"index": 0, "status": "duplicate"}]
        assert cs.explain(lease["url"])["crawls"] == 1
        assert cs.host("sync.example")["urls"] == 3
        assert "crawlsched_dispatched_total" in cs.metrics()
        assert cs.remove(urls) == 3
        with pytest.raises(CrawlschedError) as error:
            cs.explain(urls[0])
        assert error.value.status_code == 404
        with pytest.raises(CrawlschedError) as error:
            cs.next(0)
        assert error.value.status_code == 422
    assert cs.stats.requests >= 14 and cs.stats.retries == 0


@pytest.mark.anyio
async def test_async_client_discovers_without_touching_known_urls(service: str) -> None:
    async with AsyncClient(service, token="secret") as cs:
        assert cs._http.headers["authorization"] == "Bearer secret"
        url = "https://async.example/p"
        await cs.register([{"url": url, "weight": 0.5, "fixed": True}])
        assert await cs.discover([url, {"url": "https://async.example/q"}]) == {
            "created": 1, "updated": 0, "kept": 1,
        }  # fmt: skip
        state = await cs.explain(url)
        assert state["weight"] == 0.5 and state["learning"]["fixed"]
        assert (await cs.host("async.example"))["urls"] == 2


def test_sync_client_retries_until_the_service_is_up() -> None:
    port = free_port()
    answers: list[dict[str, object]] = []
    with Client(f"http://127.0.0.1:{port}", retry_for_s=30.0) as cs:
        caller = threading.Thread(target=lambda: answers.append(cs.healthz()))
        caller.start()
        time.sleep(0.3)  # a few refused attempts
        assert caller.is_alive()
        with served_app({"CRAWLSCHED_STORE": "memory"}, port=port):
            caller.join(timeout=20)
            assert answers and answers[0]["status"] == "ok"
    assert cs.stats.transport_errors >= 2 and cs.stats.retries == cs.stats.transport_errors
    with (
        Client(f"http://127.0.0.1:{free_port()}", retry_for_s=0.0) as cs,
        pytest.raises(httpx.ConnectError),
    ):
        cs.next(1)


def test_the_package_exports_the_clients() -> None:
    assert {"Client", "AsyncClient"} <= set(crawlsched.__all__)
    assert crawlsched.__version__
    with pytest.raises(ValueError, match="retry_for_s"):
        Client("http://127.0.0.1:1", retry_for_s=-1)


def test_sync_client_sends_one_idempotency_key_per_batch(service: str) -> None:
    sent: list[tuple[str, str | None]] = []

    def record(request: httpx.Request) -> None:
        sent.append((request.method, request.headers.get("idempotency-key")))

    url = "https://keys.example/1"
    with (
        httpx.Client(base_url=service, event_hooks={"request": [record]}) as http,
        Client(http=http) as cs,
    ):
        cs.register([{"url": url}])
        now = cs.healthz()["now"]
        cs.clicks([{"url": url, "time": now}])
        cs.signals([{"url": url, "time": now}])
        cs.remove([url])
    posts = [key for method, key in sent if method == "POST"]
    assert len(posts) == 3 and all(key and 16 <= len(key) <= 255 for key in posts)
    assert len(set(posts)) == 3  # a new key for every batch
    assert all(key is None for method, key in sent if method != "POST")
