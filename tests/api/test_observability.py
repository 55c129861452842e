"""What /metrics exports beyond the store snapshot (request durations, the freshness
estimate, learner lag, relearn queue, requested capacity, leases ahead of due) and
the request id."""

from __future__ import annotations

import io
import json
import logging
import math
import re
from collections.abc import Awaitable, Callable, Iterator

import httpx
import pytest
from fastapi import FastAPI
from prometheus_client.parser import text_string_to_metric_families

from service.clock import ManualClock
from service.logs import configure_structlog, formatter
from service.scheduler.fold import fold_now, fold_round, fold_step
from service.scheduler.learning import learn_once

pytestmark = pytest.mark.anyio
DAY = 86_400.0


async def _samples(api: httpx.AsyncClient) -> dict[tuple[str, tuple[tuple[str, str], ...]], float]:
    text = (await api.get("/metrics")).text
    return {
        (s.name, tuple(sorted(s.labels.items()))): s.value
        for family in text_string_to_metric_families(text)
        for s in family.samples
    }


def _count(samples: dict[tuple[str, tuple[tuple[str, str], ...]], float], **labels: str) -> float:
    key = ("crawlsched_http_request_duration_seconds_count", tuple(sorted(labels.items())))
    return samples.get(key, 0.0)


async def test_request_durations_are_labelled_by_route_template(api: httpx.AsyncClient) -> None:
    for i in range(3):
        assert (await api.get(f"/urls/https://a.example/{i}")).status_code == 404
    assert (await api.post("/urls", json={"urls": [{"url": "https://a.example/0"}]})).is_success
    assert (await api.get("/urls/https://a.example/0")).status_code == 200
    assert (await api.get("/no/such/route")).status_code == 404
    assert (await api.put("/urls", json={})).status_code == 405
    samples = await _samples(api)
    route = "/urls/{url:url}"
    assert _count(samples, route=route, method="GET", status="4xx") == 3
    assert _count(samples, route=route, method="GET", status="2xx") == 1
    assert _count(samples, route="/urls", method="POST", status="2xx") == 1
    assert _count(samples, route="unmatched", method="GET", status="4xx") == 1
    assert _count(samples, route="/urls", method="PUT", status="4xx") == 1
    # one series per route, never one per raw path
    routes = {dict(k[1]).get("route") for k in samples if k[0].startswith("crawlsched_http")}
    assert not any(r and "a.example" in r for r in routes)
    bucket = {"route": route, "method": "GET", "status": "2xx", "le": "+Inf"}
    key = ("crawlsched_http_request_duration_seconds_bucket", tuple(sorted(bucket.items())))
    assert samples[key] == 1


async def test_request_id_is_taken_or_made_and_echoed(api: httpx.AsyncClient) -> None:
    given = await api.get("/healthz", headers={"X-Request-ID": "crawler-7:run/42"})
    assert given.headers["X-Request-ID"] == "crawler-7:run/42"
    made = [(await api.get("/healthz")).headers["X-Request-ID"] for _ in range(2)]
    assert all(re.fullmatch(r"[0-9a-f]{32}", m) for m in made) and made[0] != made[1]
    for bad in ("has spaces", "x" * 129, "new\\nline"):
        echoed = (await api.get("/healthz", headers={"X-Request-ID": bad})).headers
        assert re.fullmatch(r"[0-9a-f]{32}", echoed["X-Request-ID"]), bad


@pytest.fixture
def json_logs() -> Iterator[io.StringIO]:
    """The root logger's records as JSON lines, as ``serve --log-format json`` writes them."""
    root = logging.getLogger()
    level = root.level
    sink = io.StringIO()
    handler = logging.StreamHandler(sink)
    handler.setFormatter(formatter("json"))
    root.addHandler(handler)
    root.setLevel(logging.INFO)
    configure_structlog()
    yield sink
    root.removeHandler(handler)
    root.setLevel(level)


async def test_each_request_logs_one_json_line_with_its_id(
    api: httpx.AsyncClient, json_logs: io.StringIO
) -> None:
    token_like = "Bearer s3cret-token-value"
    answer = await api.post(
        "/urls",
        json={"urls": [{"url": "https://a.example/private-body"}]},
        headers={"X-Request-ID": "req-1", "Authorization": token_like},
    )
    assert answer.status_code == 200
    records = [json.loads(line) for line in json_logs.getvalue().splitlines()]
    (access,) = [r for r in records if r.get("request_id") == "req-1"]
    assert access["event"] == "request" and access["logger"] == "service.access"
    assert (access["method"], access["route"], access["status"]) == ("POST", "/urls", 200)
    assert access["duration_ms"] > 0 and access["level"] == "info"
    text = json.dumps(records)
    assert "s3cret" not in text and "private-body" not in text


async def test_capacity_requested_beside_dispatched(api: httpx.AsyncClient) -> None:
    urls = [{"url": f"https://h{i}.example/x"} for i in range(3)]
    assert (await api.post("/urls", json={"urls": urls})).is_success
    assert len((await api.get("/next", params={"n": 5})).json()["leases"]) == 3
    samples = await _samples(api)
    assert samples[("crawlsched_dispatch_requested_total", ())] == 5
    assert samples[("crawlsched_dispatched_total", ())] == 3
    assert samples[("crawlsched_dispatch_shortfall_total", ())] == 2


async def test_dispatches_ahead_of_due_are_counted(
    store_api: httpx.AsyncClient, clock: ManualClock, built_apps: list[FastAPI]
) -> None:
    urls = ["https://a.example/x", "https://b.example/y"]
    known = {"weight": 1.0 / DAY, "change_rate": 1.0 / (7 * DAY)}  # due again in days
    body = {"urls": [{"url": u, **known} for u in urls]}
    assert (await store_api.post("/urls", json=body)).is_success
    first = (await store_api.get("/next", params={"n": 5})).json()["leases"]
    assert len(first) == 2  # never crawled: due at once
    assert (await _samples(store_api))[("crawlsched_dispatched_ahead_total", ())] == 0
    results = [
        {"url": x["url"], "lease_id": x["lease_id"], "fetched_at": clock.now(), "changed": False}
        for x in first
    ]
    assert (await store_api.post("/crawl-result", json={"results": results})).is_success
    await fold_now(built_apps[-1].state.context, relearn=False)  # the results move due times
    clock.advance(3_600.0)  # past the minimum revisit and the crawl delay, not yet due
    explained = (await store_api.get(f"/urls/{urls[0]}")).json()
    assert explained["due_at"] > clock.now()
    assert len((await store_api.get("/next", params={"n": 5})).json()["leases"]) == 2
    samples = await _samples(store_api)
    assert samples[("crawlsched_dispatched_total", ())] == 4
    assert samples[("crawlsched_dispatched_ahead_total", ())] == 2


async def test_relearn_queue_length_is_exported(
    api: httpx.AsyncClient, clock: ManualClock, built_apps: list[FastAPI]
) -> None:
    assert (await api.post("/urls", json={"urls": [{"url": "https://a.example/x"}]})).is_success
    click = {"clicks": [{"url": "https://a.example/x", "time": clock.now()}]}
    assert (await api.post("/click", json=click)).is_success
    assert await fold_step(built_apps[0].state.context) == 1  # folded, queued, not flushed
    assert (await _samples(api))[("crawlsched_relearn_queue_urls", ())] == 1
    assert (await api.get("/urls/https://a.example/x")).is_success  # flushes the queue
    assert (await _samples(api))[("crawlsched_relearn_queue_urls", ())] == 0


async def test_the_fold_loop_re_estimates_within_its_budget(
    api: httpx.AsyncClient, clock: ManualClock, built_apps: list[FastAPI]
) -> None:
    """The fold loop's call queues the touched URLs while folding and re-estimates them
    for at most its budget: a spent budget leaves them queued (each once), the next
    call re-estimates them."""
    urls = [f"https://h{i}.example/x" for i in range(5)]
    assert (await api.post("/urls", json={"urls": [{"url": u} for u in urls]})).is_success
    ctx = built_apps[0].state.context
    for _ in range(2):  # twice the same URLs: queued once
        click = {"clicks": [{"url": u, "time": clock.now()} for u in urls]}
        assert (await api.post("/click", json=click)).is_success
    assert await fold_now(ctx, relearn_budget_s=0.0) == 2
    assert len(ctx.relearn_queue) == len(urls)
    assert await fold_now(ctx, relearn_budget_s=60.0) == 0
    assert len(ctx.relearn_queue) == 0
    assert (await _samples(api))[("crawlsched_relearned_urls_total", ())] == len(urls)


async def test_the_fold_lag_counts_urls_waiting_for_re_estimation(
    api: httpx.AsyncClient, clock: ManualClock, built_apps: list[FastAPI]
) -> None:
    """An event folded whose URL is not yet re-estimated still counts in
    ``crawlsched_fold_lag_seconds`` (and ``crawlsched_relearn_lag_seconds``): the lag
    is 0 only once every effect is applied."""
    assert (await api.post("/urls", json={"urls": [{"url": "https://a.example/x"}]})).is_success
    click = {"clicks": [{"url": "https://a.example/x", "time": clock.now()}]}
    assert (await api.post("/click", json=click)).is_success
    ctx = built_apps[0].state.context
    assert await fold_round(ctx, "test", budget_s=0.0, ttl_s=60.0) == 1  # no time to re-estimate
    assert len(ctx.relearn_queue) == 1
    samples = await _samples(api)
    relearn_lag = samples[("crawlsched_relearn_lag_seconds", ())]
    assert relearn_lag > 0
    assert samples[("crawlsched_fold_lag_seconds", ())] >= relearn_lag
    assert await fold_round(ctx, "test", budget_s=60.0, ttl_s=60.0) == 0
    samples = await _samples(api)
    assert samples[("crawlsched_relearn_lag_seconds", ())] == 0
    assert samples[("crawlsched_fold_lag_seconds", ())] == 0
    assert samples[("crawlsched_relearned_urls_total", ())] == 1


async def test_the_fold_classifies_events_and_its_lag_is_exported(
    api: httpx.AsyncClient, clock: ManualClock, fold: Callable[[], Awaitable[int]]
) -> None:
    """Signals and clicks are counted as appended when accepted; the fold classifies
    them (``crawlsched_events_total``); ``crawlsched_fold_lag_seconds`` is the age of
    the oldest unfolded event, 0 once folded."""
    assert (await api.post("/urls", json={"urls": [{"url": "https://a.example/x"}]})).is_success
    now = clock.now()
    clicks = [{"url": u, "time": now} for u in ("https://a.example/x", "https://b.example/")]
    signals = [{"url": "https://a.example/x", "time": now - 10.0}]
    assert (await api.post("/click", json={"clicks": clicks})).json()["accepted"] == 2
    assert (await api.post("/signal", json={"signals": signals})).json()["accepted"] == 1
    samples = await _samples(api)
    assert samples[("crawlsched_events_appended_total", (("kind", "click"),))] == 2
    assert samples[("crawlsched_events_appended_total", (("kind", "signal"),))] == 1
    assert samples[("crawlsched_fold_lag_seconds", ())] > 0
    assert samples[("crawlsched_worker_up", ())] == 1  # the memory store's API folds itself
    assert await fold() == 2
    samples = await _samples(api)
    assert samples[("crawlsched_fold_lag_seconds", ())] == 0
    click, signal = (("kind", "click"),), (("kind", "signal"),)
    assert samples[("crawlsched_events_total", (*click, ("status", "accepted")))] == 1
    assert samples[("crawlsched_events_total", (*click, ("status", "unknown_url")))] == 1
    assert samples[("crawlsched_events_total", (*signal, ("status", "accepted")))] == 1


async def test_learner_exports_the_freshness_estimate_and_its_lag(
    api: httpx.AsyncClient, clock: ManualClock
) -> None:
    now = clock.now()
    # fixed parameters, no signals: P(fresh) = exp(−Δ τ); a URL never fetched counts 0
    urls = [
        {"url": "https://a.example/1", "weight": 3.0, "change_rate": 1 / DAY,
         "last_crawled_at": now - DAY},
        {"url": "https://b.example/2", "weight": 1.0, "change_rate": 2 / DAY,
         "last_crawled_at": now - DAY / 4},
        {"url": "https://b.example/3", "weight": 2.0, "change_rate": 1 / DAY},
    ]  # fmt: skip
    for u in urls:
        u.update(recall=0.0, false_signal_rate=0.0, fixed=True)
    assert (await api.post("/urls", json={"urls": urls})).is_success
    before = await _samples(api)
    assert not any(k[0].startswith(("crawlsched_freshness", "crawlsched_learner")) for k in before)
    ctx = api._transport.app.state.context  # type: ignore[attr-defined]
    await learn_once(ctx)  # one pass covers both hosts (learn_batch ≫ 3 URLs)
    after = await _samples(api)
    expected = (3.0 * math.exp(-1.0) + 1.0 * math.exp(-0.5) + 0.0) / 6.0
    assert after[("crawlsched_freshness_estimate", ())] == pytest.approx(expected, rel=1e-12)
    assert after[("crawlsched_learner_cycle_urls", ())] == 3
    passed = after[("crawlsched_learner_last_pass_timestamp_seconds", ())]
    cycled = after[("crawlsched_learner_last_cycle_timestamp_seconds", ())]
    assert 0 < cycled <= passed
    assert after[("crawlsched_learner_cycle_duration_seconds", ())] >= 0


async def test_refused_requests_count_under_their_route() -> None:
    from pydantic import SecretStr

    from service.app import create_app
    from service.settings import Settings

    app = create_app(Settings(auth_tokens=SecretStr("read:r1,worker:w1")), clock=ManualClock(0.0))
    transport = httpx.ASGITransport(app=app)
    async with httpx.AsyncClient(transport=transport, base_url="http://crawlsched") as api:
        answer = await api.get("/next", headers={"X-Request-ID": "denied-1"})
        assert answer.status_code == 401 and answer.headers["X-Request-ID"] == "denied-1"
        assert (await api.get("/urls/https://a.example/x")).status_code == 401
        samples = await _samples_as(api, "r1")
    assert _count(samples, route="/next", method="GET", status="4xx") == 1
    assert _count(samples, route="/urls/{url:url}", method="GET", status="4xx") == 1


async def _samples_as(
    api: httpx.AsyncClient, token: str
) -> dict[tuple[str, tuple[tuple[str, str], ...]], float]:
    text = (await api.get("/metrics", headers={"Authorization": f"Bearer {token}"})).text
    return {
        (s.name, tuple(sorted(s.labels.items()))): s.value
        for family in text_string_to_metric_families(text)
        for s in family.samples
    }
