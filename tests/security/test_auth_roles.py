"""Bearer tokens and roles on every route, against the memory store and a private
``redis-server``: 401 without a known token, 403 for a role the route does not
admit, the answer itself otherwise; refused calls change nothing; lease ids only
to ``admin``."""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterator
from typing import Any

import httpx
import pytest
import redis
from pydantic import SecretStr

from service.app import create_app
from service.clock import ManualClock
from service.settings import Settings
from service.store.base import Store
from service.store.memory import MemoryStore
from service.store.redis import RedisStore
from service.store.redis.local import LocalRedis

pytestmark = pytest.mark.anyio

T0 = 1_700_000_000.0
TOKENS = {
    "admin": "adm1n-t0ken",
    "worker": "w0rker-t0ken",
    "events": "ev3nts-t0ken",
    "read": "r3ad",
}
URL = "https://a.example/p/1"
OTHER = "https://c.example/"  # registered after URL is leased: a /next would lease it
NEW = "https://b.example/"  # registered by the POST /urls case
OPTIONS = {"shards": 4, "default_crawl_delay_s": 1.0}


@pytest.fixture(scope="module")
def redis_server() -> Iterator[LocalRedis]:
    with LocalRedis() as server:
        yield server


@pytest.fixture(params=["memory", "redis"])
async def store(request: pytest.FixtureRequest) -> AsyncIterator[Store]:
    s: Store
    if request.param == "memory":
        s = MemoryStore(**OPTIONS)  # type: ignore[arg-type]
    else:
        server: LocalRedis = request.getfixturevalue("redis_server")
        with redis.Redis(port=server.port) as raw:
            raw.flushall()
        s = await RedisStore.connect(server.url, **OPTIONS)  # type: ignore[arg-type]
    yield s
    await s.close()


def _settings(tokens: str | None) -> Settings:
    return Settings(
        shards=4,
        default_crawl_delay_s=1.0,
        lease_ttl_s=60.0,
        future_tolerance_s=60.0,
        auth_tokens=None if tokens is None else SecretStr(tokens),
    )


async def _client(settings: Settings, store: Store) -> httpx.AsyncClient:
    app = create_app(settings, clock=ManualClock(T0), store=store)
    return httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://cs")


@pytest.fixture
async def api(store: Store) -> AsyncIterator[httpx.AsyncClient]:
    pairs = ",".join(f"{role}:{token}" for role, token in TOKENS.items())
    async with await _client(_settings(pairs), store) as client:
        yield client


def bearer(role: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {TOKENS[role]}"}


async def _lease(api: httpx.AsyncClient) -> dict[str, Any]:
    """Register URL and lease it, then register OTHER (as admin)."""
    answer = await api.post("/urls", json={"urls": [{"url": URL}]}, headers=bearer("admin"))
    assert answer.status_code == 200, answer.text
    leased = await api.get("/next", params={"n": 1}, headers=bearer("admin"))
    assert leased.status_code == 200, leased.text
    (lease,) = leased.json()["leases"]
    assert lease["url"] == URL
    answer = await api.post("/urls", json={"urls": [{"url": OTHER}]}, headers=bearer("admin"))
    assert answer.status_code == 200, answer.text
    return dict(lease)


def _request(route: str, lease: dict[str, Any]) -> tuple[str, str, dict[str, Any] | None]:
    """Method, path and JSON body of a valid call of ``route``."""
    now = T0
    bodies: dict[str, tuple[str, str, dict[str, Any] | None]] = {
        "POST /urls": ("POST", "/urls", {"urls": [{"url": NEW}]}),
        "DELETE /urls": ("DELETE", "/urls", {"urls": [URL]}),
        "GET /next": ("GET", "/next?n=1", None),
        "POST /crawl-result": (
            "POST",
            "/crawl-result",
            {
                "results": [
                    {
                        "url": URL,
                        "lease_id": lease["lease_id"],
                        "fetched_at": now,
                        "status": 200,
                        "changed": True,
                    }
                ]
            },
        ),
        "POST /signal": ("POST", "/signal", {"signals": [{"url": URL, "time": now}]}),
        "POST /click": ("POST", "/click", {"clicks": [{"url": URL, "time": now}]}),
        "GET /urls/{url}": ("GET", f"/urls/{URL}", None),
        "GET /hosts/{host}": ("GET", "/hosts/a.example", None),
        "GET /metrics": ("GET", "/metrics", None),
        "GET /hosts": ("GET", "/hosts", None),
        "PATCH /hosts/{host}": ("PATCH", "/hosts/a.example", {"paused": True}),
        "DELETE /hosts/{host}": ("DELETE", "/hosts/a.example", None),
        "POST /urls/purge": ("POST", f"/urls/purge?retired_before={now + 1e6}", None),
    }
    return bodies[route]


#: Which roles each route admits (admin admits everything).
ADMITS = {
    "POST /urls": {"admin"},
    "DELETE /urls": {"admin"},
    "GET /next": {"admin", "worker"},
    "POST /crawl-result": {"admin", "worker"},
    "POST /signal": {"admin", "events"},
    "POST /click": {"admin", "events"},
    "GET /urls/{url}": {"admin", "read"},
    "GET /hosts/{host}": {"admin", "read"},
    "GET /metrics": {"admin", "read"},
    "GET /hosts": {"admin"},
    "PATCH /hosts/{host}": {"admin"},
    "DELETE /hosts/{host}": {"admin"},
    "POST /urls/purge": {"admin"},
}


async def _state(api: httpx.AsyncClient) -> list[Any]:
    """What a refused call must leave alone: the URLs' records (leases, counters), the
    metrics (dispatch and event counters; not the request durations, which count
    every request) and whether NEW is registered."""
    state: list[Any] = []
    for path in (f"/urls/{URL}", f"/urls/{OTHER}", f"/urls/{NEW}", "/metrics"):
        answer = await api.get(path, headers=bearer("admin"))
        text = answer.text
        if path == "/metrics":
            lines = text.splitlines()
            text = "\n".join(x for x in lines if "crawlsched_http_request_duration" not in x)
        state += [answer.status_code, text]
    return state


@pytest.mark.parametrize("route", list(ADMITS))
@pytest.mark.parametrize("caller", ["none", "unknown", "basic", *TOKENS])
async def test_each_route_admits_exactly_its_roles(
    api: httpx.AsyncClient, route: str, caller: str
) -> None:
    lease = await _lease(api)
    method, path, body = _request(route, lease)
    anonymous: dict[str, dict[str, str]] = {
        "none": {},
        "unknown": {"Authorization": "Bearer not-a-configured-token"},
        "basic": {"Authorization": f"Basic {TOKENS['admin']}"},  # not a bearer token
    }
    headers = anonymous[caller] if caller in anonymous else bearer(caller)
    before = await _state(api)
    answer = await api.request(method, path, json=body, headers=headers)
    if caller in anonymous:
        assert answer.status_code == 401, answer.text
        assert answer.headers["WWW-Authenticate"].startswith("Bearer")
        assert await _state(api) == before
    elif caller not in ADMITS[route]:
        assert answer.status_code == 403, answer.text
        assert "needs the role" in answer.json()["detail"]
        assert await _state(api) == before
    else:
        assert answer.status_code == 200, answer.text
    assert TOKENS["admin"] not in answer.text


async def test_health_and_schema_stay_open(api: httpx.AsyncClient) -> None:
    for path in ("/healthz", "/openapi.json", "/docs"):
        assert (await api.get(path)).status_code == 200, path
    schema = (await api.get("/openapi.json")).json()
    assert schema["components"]["securitySchemes"]["HTTPBearer"]["scheme"] == "bearer"


async def test_authentication_comes_before_validation(api: httpx.AsyncClient) -> None:
    # an anonymous caller learns nothing about the body's schema, nor gets it parsed
    bad = {"urls": [{"url": "ftp://nope", "weight": -1}]}
    assert (await api.post("/urls", json=bad)).status_code == 401
    not_json = {"content-type": "application/json"}
    assert (await api.post("/urls", content=b"{nope", headers=not_json)).status_code == 401
    assert (await api.get("/no-such-route")).status_code == 401
    with_token = {**not_json, **bearer("admin")}
    assert (await api.post("/urls", content=b"{nope", headers=with_token)).status_code == 422
    assert (await api.post("/urls", json=bad, headers=bearer("worker"))).status_code == 403
    assert (await api.post("/urls", json=bad, headers=bearer("admin"))).status_code == 422


async def test_lease_ids_are_shown_to_admin_only(api: httpx.AsyncClient) -> None:
    lease = await _lease(api)
    as_admin = (await api.get(f"/urls/{URL}", headers=bearer("admin"))).json()
    as_reader = (await api.get(f"/urls/{URL}", headers=bearer("read"))).json()
    assert as_admin["lease_id"] == lease["lease_id"]
    assert as_reader["lease_id"] is None
    # the rest of the explanation is the same: the reader still sees that it is leased
    assert as_reader["lease_deadline"] == as_admin["lease_deadline"] == lease["deadline"]
    assert lease["lease_id"] not in (await api.get(f"/urls/{URL}", headers=bearer("read"))).text


async def test_without_tokens_everyone_is_admin(store: Store) -> None:
    async with await _client(_settings(None), store) as api:
        assert (await api.post("/urls", json={"urls": [{"url": URL}]})).status_code == 200
        (lease,) = (await api.get("/next")).json()["leases"]
        shown = (await api.get(f"/urls/{URL}")).json()
        assert shown["lease_id"] == lease["lease_id"]
        # a token is not needed, and one sent is not checked
        anyone = {"Authorization": "Bearer whatever"}
        assert (await api.get("/metrics", headers=anyone)).status_code == 200


async def test_a_role_may_hold_several_tokens(store: Store) -> None:
    settings = _settings("admin:first-admin,admin:second-admin,read:r")
    async with await _client(settings, store) as api:
        for token in ("first-admin", "second-admin"):
            answer = await api.post(
                "/urls", json={"urls": [{"url": URL}]}, headers={"Authorization": f"Bearer {token}"}
            )
            assert answer.status_code == 200, token
        refused = await api.post(
            "/urls", json={"urls": [{"url": URL}]}, headers={"Authorization": "Bearer r"}
        )
        assert refused.status_code == 403
