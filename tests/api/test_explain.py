"""``GET /urls/{url}``: the decision sentence follows the rule that set the due time
(one test per rule, on the memory store and on Redis), and the human forms agree
with the numbers beside them."""

from __future__ import annotations

import math
from collections.abc import AsyncIterator, Iterator
from datetime import UTC, datetime
from typing import Any

import httpx
import pytest
import redis
from fastapi import FastAPI

from scheduler_core.due import DueCause
from service.app import create_app, open_store
from service.clock import ManualClock
from service.explain_schemas import DueReason
from service.scheduler.explain import SENTENCES
from service.scheduler.fold import fold_now
from service.settings import Settings
from service.store.redis.local import LocalRedis

pytestmark = pytest.mark.anyio
T0 = 1_700_000_000.0
DAY = 86_400.0
CAP_S = 2 * DAY
RETRY_S = 3600.0


@pytest.fixture(scope="module")
def redis_server() -> Iterator[LocalRedis]:
    with LocalRedis() as server:
        yield server


@pytest.fixture
def clock() -> ManualClock:
    return ManualClock(T0)


@pytest.fixture(params=["memory", "redis"])
async def api(
    request: pytest.FixtureRequest, clock: ManualClock, built_apps: list[FastAPI]
) -> AsyncIterator[httpx.AsyncClient]:
    store = "memory"
    if request.param == "redis":
        server: LocalRedis = request.getfixturevalue("redis_server")
        with redis.Redis(port=server.port) as client:
            client.flushall()
        store = server.url
    settings = Settings(
        store=store, max_revisit_s=CAP_S, retry_delay_s=RETRY_S, initial_lambda0=1.0,
        default_crawl_delay_s=1.0, lease_ttl_s=600.0,
    )  # fmt: skip
    opened = await open_store(settings)
    app = create_app(settings, clock=clock, store=opened)
    built_apps.append(app)
    transport = httpx.ASGITransport(app=app)
    async with httpx.AsyncClient(transport=transport, base_url="http://crawlsched") as client:
        yield client
    await opened.close()


def _url(weight: float, last_crawled_at: float | None = T0) -> dict[str, Any]:
    """A URL with fixed parameters, Δ = 1/day, no signals; W/Δ = weight·DAY."""
    item: dict[str, Any] = {
        "url": "https://a.example/page", "weight": weight, "change_rate": 1 / DAY,
        "recall": 0.0, "false_signal_rate": 0.0, "fixed": True,
    }  # fmt: skip
    if last_crawled_at is not None:
        item["last_crawled_at"] = last_crawled_at
    return item


async def _register(api: httpx.AsyncClient, item: dict[str, Any]) -> None:
    answer = await api.post("/urls", json={"urls": [item]})
    assert answer.status_code == 200, answer.text


async def _explain(api: httpx.AsyncClient) -> dict[str, Any]:
    answer = await api.get("/urls/https://a.example/page")
    assert answer.status_code == 200, answer.text
    body: dict[str, Any] = answer.json()
    return body


def _iso(t: float) -> str:
    return datetime.fromtimestamp(round(t), tz=UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def test_every_reason_has_a_sentence_and_the_core_causes_are_reasons() -> None:
    assert set(SENTENCES) == set(DueReason)
    assert {c.value for c in DueCause} <= {r.value for r in DueReason}


async def test_value_branch_names_the_threshold_and_the_due_time(
    api: httpx.AsyncClient,
) -> None:
    await _register(api, _url(1e-3))  # W/Δ = 86.4 ≫ Λ = 1: ι of a few hours
    e = await _explain(api)
    assert e["due_reason"] == "value"
    assert e["threshold_s"] is not None and e["threshold_s"] < CAP_S
    assert e["due_at"] == pytest.approx(T0 + e["threshold_s"])
    assert "reaches the threshold Λ = 1" in e["decision"]
    assert "revisit cap" not in e["decision"]
    assert f"at {_iso(e['due_at'])}" in e["decision"]
    assert e["decision"].split("; ")[-1].startswith("due in ")


async def test_stale_signals_are_counted_per_url_once_folded(
    api: httpx.AsyncClient, built_apps: list[FastAPI]
) -> None:
    """A signal from before the last crawl is accepted when appended; the fold finds it
    stale: the URL's explanation counts it, its due time stays."""
    await _register(api, _url(1e-3))
    before = await _explain(api)
    assert before["stale_signals"] == 0
    signals = [{"url": "https://a.example/page", "time": T0 - 5.0}]
    answer = await api.post("/signal", json={"signals": signals})
    assert answer.json() == {"accepted": 1, "ignored": []}
    assert await fold_now(built_apps[0].state.context) == 1
    after = await _explain(api)
    assert (after["signals"], after["stale_signals"]) == (1, 1)
    assert after["due_at"] == before["due_at"] and after["signals_since_crawl"] == 0


async def test_revisit_cap_branch_does_not_credit_the_crawl_value(
    api: httpx.AsyncClient,
) -> None:
    await _register(api, _url(1.2e-5))  # W/Δ = 1.04: V reaches Λ = 1 only after ~5 days
    e = await _explain(api)
    assert e["due_reason"] == "revisit_cap"
    assert e["threshold_s"] > CAP_S
    assert e["due_at"] == pytest.approx(T0 + CAP_S)
    assert e["decision"].startswith("revisited at the 2 d revisit cap")
    assert f"only at {_iso(T0 + e['threshold_s'])}" in e["decision"]
    assert e["readable"]["max_revisit"] == "2 d"


async def test_never_worth_branch_says_the_cap_alone_brings_it_back(
    api: httpx.AsyncClient,
) -> None:
    await _register(api, _url(1e-6))  # W/Δ = 0.0864 < Λ = 1: ι = ∞
    e = await _explain(api)
    assert e["due_reason"] == "not_worth"
    assert e["threshold_s"] is None
    assert e["readable"]["threshold_interval"] == "forever"
    assert e["due_at"] == pytest.approx(T0 + CAP_S)
    assert e["decision"].startswith("not worth a crawl at the threshold Λ = 1")
    assert "W/Δ = 0.0864" in e["decision"] and "2 d revisit cap" in e["decision"]


async def test_registered_branch_waits_for_a_worker(api: httpx.AsyncClient) -> None:
    await _register(api, _url(1e-3, last_crawled_at=None))
    e = await _explain(api)
    assert e["due_reason"] == "registered"
    assert e["decision"].startswith(f"never crawled: due since its registration at {_iso(T0)}")
    assert e["decision"].endswith("waiting for a worker to ask /next")


async def test_leased_branch_names_the_lease_deadline(
    api: httpx.AsyncClient, clock: ManualClock
) -> None:
    await _register(api, _url(1e-3, last_crawled_at=None))
    (lease,) = (await api.get("/next")).json()["leases"]
    e = await _explain(api)
    assert e["due_reason"] == "leased"
    assert e["decision"] == (
        f"leased until {_iso(lease['deadline'])} (in 10 min): a worker is fetching it"
    )
    assert e["readable"]["lease_deadline"] == _iso(lease["deadline"])


@pytest.mark.parametrize("crawled", [False, True])
async def test_failed_fetch_branch_says_retry_not_waiting(
    api: httpx.AsyncClient, clock: ManualClock, crawled: bool
) -> None:
    # crawled: a copy from 10 days ago, overdue by value; else never crawled
    await _register(api, _url(1e-3, last_crawled_at=T0 - 10 * DAY if crawled else None))
    (lease,) = (await api.get("/next")).json()["leases"]
    clock.advance(5.0)
    result = {
        "url": lease["url"],
        "lease_id": lease["lease_id"],
        "fetched_at": clock.now(),
        "status": 404,
    }  # fmt: skip (404: a failed fetch that does not back the host off)
    assert (await api.post("/crawl-result", json={"results": [result]})).status_code == 200
    e = await _explain(api)
    assert e["fetch_errors"] == 1
    assert e["due_in_s"] == pytest.approx(RETRY_S)
    assert e["due_reason"] == "fetch_retry"
    model_due = T0 if not crawled else T0 - 10 * DAY + e["threshold_s"]
    assert e["decision"] == (
        "its last fetch failed (1 failed fetch so far): it is tried again 1 h after the "
        f"failure (without the failure it was due at {_iso(model_due)}); "
        f"due in 1 h, at {_iso(clock.now() + RETRY_S)}"
    )
    assert "waiting for a worker" not in e["decision"]
    clock.advance(RETRY_S + 1.0)  # the retry is due: now a worker may take it
    e = await _explain(api)
    assert e["due_reason"] == "fetch_retry"
    assert e["decision"].endswith("waiting for a worker to ask /next")


async def test_human_forms_agree_with_the_numbers(
    api: httpx.AsyncClient, clock: ManualClock
) -> None:
    await _register(api, _url(1e-3, last_crawled_at=T0 - 11_520.0))  # 3 h 12 min ago
    clock.advance(0.0)
    e = await _explain(api)
    r = e["readable"]
    assert r["now"] == _iso(T0) and r["last_crawl_at"] == _iso(T0 - 11_520.0)
    assert r["registered_at"] == _iso(e["registered_at"])
    assert r["due_at"] == _iso(e["due_at"])
    assert r["elapsed"] == "3 h 12 min" and r["effective_elapsed"] == "3 h 12 min"
    assert r["requests_per_day"] == pytest.approx(86.4)
    assert r["changes_per_day"] == pytest.approx(1.0)
    assert r["signals_per_day"] == 0.0 and r["false_signals_per_day"] == 0.0
    assert r["mean_time_between_changes"] == "1 d"
    assert r["retry_delay"] == "1 h"
    assert r["host_gate_at"] is None and r["lease_deadline"] is None
    p = math.exp(-11_520.0 / DAY)
    assert e["freshness_probability"] == pytest.approx(p)
    assert r["freshness_probability"] == f"{100 * p:.1f}%"
