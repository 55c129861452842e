"""A Redis deployment without a ``crawlsched worker`` is reported unhealthy (``/healthz``
503 naming the reason, ``crawlsched_worker_up 0``); once a real worker subprocess runs
it is healthy, and the worker folds what the API appended; when the worker stops, its
heartbeat lapses and the deployment is unhealthy again.  Without a worker the appended
events wait: once they wait longer than ``CRAWLSCHED_INGEST_MAX_LAG_S``, signals and clicks
are refused (503, backpressure) until the worker has caught up."""

from __future__ import annotations

import time
from collections.abc import Callable

import httpx
import pytest

from service.loadgen.demo import served_app, served_worker
from service.store.redis.local import LocalRedis

pytestmark = [pytest.mark.redis, pytest.mark.slow]
URL = "https://a.example/p"


def _until(check: Callable[[], bool], timeout_s: float = 30.0) -> bool:
    """Poll ``check`` until it holds (True) or ``timeout_s`` wall seconds pass (False)."""
    deadline = time.monotonic() + timeout_s
    while not check():
        if time.monotonic() > deadline:
            return False
        time.sleep(0.1)
    return True


def _gauge(http: httpx.Client, name: str) -> float:
    for line in http.get("/metrics").text.splitlines():
        if line.startswith(f"{name} "):
            return float(line.split()[1])
    raise AssertionError(f"{name} not exported")


def test_healthz_needs_a_live_worker_and_the_worker_folds() -> None:
    with LocalRedis() as server:
        env = {
            "CRAWLSCHED_STORE": server.url,
            "CRAWLSCHED_SHARDS": "4",
            "CRAWLSCHED_WORKER_TTL_S": "1.5",
            "CRAWLSCHED_FOLD_LAG_S": "0.5",
            "CRAWLSCHED_INGEST_MAX_LAG_S": "0.5",
        }
        with served_app(env, worker=False) as base, httpx.Client(base_url=base) as http:
            health = http.get("/healthz")
            assert health.status_code == 503
            assert "no live crawlsched worker" in health.json()["detail"]
            assert _gauge(http, "crawlsched_worker_up") == 0
            assert http.post("/urls", json={"urls": [{"url": URL}]}).is_success
            clicks = [{"url": URL, "time": time.time() - 1.0} for _ in range(3)]
            assert http.post("/click", json={"clicks": clicks}).json()["accepted"] == 3
            assert http.get(f"/urls/{URL}").json()["clicks"] == 0  # appended, not folded
            # no worker folds: once the clicks wait longer than the bound (0.5 s), more
            # are refused whole (backpressure), nothing appended
            time.sleep(1.0)
            assert _gauge(http, "crawlsched_fold_lag_seconds") > 0.5
            refused = http.post("/click", json={"clicks": clicks})
            assert refused.status_code == 503
            assert int(refused.headers["Retry-After"]) >= 1
            assert "the fold lags" in refused.json()["detail"]

            with served_worker(env):
                assert _until(lambda: http.get("/healthz").status_code == 200)
                assert _gauge(http, "crawlsched_worker_up") == 1
                assert _until(lambda: http.get(f"/urls/{URL}").json()["clicks"] == 3)
                assert _gauge(http, "crawlsched_fold_lag_seconds") == 0
                time.sleep(0.5)  # the API reads the lag again: clicks are accepted again
                assert http.post("/click", json={"clicks": clicks}).json()["accepted"] == 3
                assert _until(lambda: http.get(f"/urls/{URL}").json()["clicks"] == 6)
            # the worker stopped: its heartbeat lapses after its TTL
            assert _until(lambda: http.get("/healthz").status_code == 503)
            assert _gauge(http, "crawlsched_worker_up") == 0
