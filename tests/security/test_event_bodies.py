"""The event routes' fast path (msgspec) is exactly as strict as the pydantic models.

Two layers, on seeded mutations of valid bodies (every field: wrong type, out of
range, missing, extra, too long, bad URL, NaN/±Infinity, huge numbers, lone
surrogates, empty and oversized batches, duplicate keys, broken JSON):

- the decoders: whatever :mod:`service.event_bodies` accepts, the models accept too
  (``json.loads`` then ``model_validate``, as FastAPI does), with the same values and
  types, field by field; the valid bodies are all taken by the fast path;
- the HTTP answers: over real sockets, each body gets the same status, body and
  content type with the fast path on and off (then the models answer alone).
"""

from __future__ import annotations

import json
import random
from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager
from typing import Any

import httpx
import msgspec
import pydantic
import pytest

from service.app import create_app
from service.auth import Role
from service.clock import ManualClock
from service.event_bodies import decode_clicks, decode_results, decode_signals
from service.metrics import Metrics
from service.routes import events as event_routes
from service.routes.fast_bodies import FAST_HANDLERS
from service.scheduler.context import Context
from service.scheduler.idempotency import batch_key
from service.schemas import ClicksIn, CrawlResultsIn, SignalsIn
from service.settings import Settings
from service.store.memory import MemoryStore
from service.urls import all_canonical, canonical_url

Serve = Callable[..., AbstractContextManager[str]]
T0 = 1_700_000_000.0
SEED = 1515
URL = "https://shop.example/p/1"
MAX_BATCH = 50

#: route, list field, model, fast decoder, valid items
ROUTES: list[tuple[str, str, type[pydantic.BaseModel], Callable[[bytes], Any], list[Any]]] = [
    (
        "/signal", "signals", SignalsIn, decode_signals,
        [{"url": URL, "time": T0 - 5}, {"url": "HTTPS://Shop.Example:443/q#f", "time": 3,
         "source": "sitemap"}, {"url": "https://bücher.example/", "time": T0, "source": None}],
    ),
    (
        "/click", "clicks", ClicksIn, decode_clicks,
        [{"url": URL, "time": T0 - 1.5}, {"url": "http://a.example:8080", "time": 0}],
    ),
    (
        "/crawl-result", "results", CrawlResultsIn, decode_results,
        [
            {"url": URL, "lease_id": "no-such-lease", "fetched_at": T0 - 2},
            {"url": URL, "lease_id": "l2", "fetched_at": T0, "status": 301, "changed": True,
             "retry_after_s": 0, "redirect_to": "https://Shop.example/new", "refetch_after": 1e9,
             "retire": False},
            {"url": "https://b.example/x", "lease_id": "l3", "fetched_at": 7, "status": 0,
             "changed": None, "retry_after_s": None, "redirect_to": None, "retire": True},
        ],
    ),
]  # fmt: skip

#: Values every field is tried with (raw JSON text, so NaN, huge and broken numbers and
#: lone surrogates reach the decoders as a client would send them).
PALETTE = [
    "null", "true", "false", "0", "-0.0", "-1", "1.5", "200", "200.0", "599", "600", "1e11",
    "100000000001", "1e400", "-1e400", "NaN", "Infinity", "-Infinity",
    "123456789012345678901234567890", '""', '"x"', '"200"', '"' + "x" * 64 + '"',
    '"' + "x" * 65 + '"', '"' + "y" * 128 + '"', '"' + "y" * 129 + '"', "[]", "{}", "[1]",
    '"\\ud800"', '"a\\u0000b"', '"ftp://shop.example/"', '"https:///nohost"',
    '"https://shop.example/a b"', '"HTTPS://SHOP.EXAMPLE:0443/x"', '"https://shop.example:99999/"',
    '"https://' + "a" * 2030 + '.example/"', '"https://' + "a" * 2029 + '.example/"',
    '"https://bücher.example/"', '"https://xn--bcher-kva.example/"', '"https://☃.example/"',
    '"https://shop.example/?"', '"http://user@shop.example/"', '"https://shop.example/#"',
    '"https://a.example/x\\nhttps://b.example/"', '"https://a.example/\\u00e4"',
]  # fmt: skip


def _item_text(item: dict[str, str]) -> str:
    return "{" + ",".join(f"{json.dumps(k)}:{v}" for k, v in item.items()) + "}"


def _texts(items: list[dict[str, Any]]) -> list[dict[str, str]]:
    return [{k: json.dumps(v, ensure_ascii=False) for k, v in item.items()} for item in items]


def _body(field: str, items: list[dict[str, str]], extra: str = "") -> bytes:
    inner = ",".join(_item_text(i) for i in items)
    return f'{{"{field}":[{inner}]{extra}}}'.encode("utf-8", "surrogatepass")


def _mutants(field: str, valid: list[dict[str, Any]], rng: random.Random) -> Iterator[bytes]:
    """Valid bodies, then every field of every item set to every palette value, deleted
    and joined by an unknown one, then seeded random combinations and byte damage."""
    base = _texts(valid)
    names = sorted({k for item in valid for k in item} | {"bogus", "status", "source"})
    yield _body(field, base)
    for k, item in enumerate(base):
        for name in names:
            for value in PALETTE:
                changed = [dict(i) for i in base]
                changed[k][name] = value
                yield _body(field, changed)
            if name in item:
                yield _body(field, [{n: v for n, v in i.items() if n != name} for i in base])
    yield _body(field, [])
    yield _body(field, base, extra=',"bogus":1')
    yield _body(field, base, extra=f',"{field}":[]')  # duplicate key: the last counts
    yield _body(field, base * 20)
    yield f'{{"{field}":{_item_text(base[0])}}}'.encode()
    yield b"[" + _body(field, base) + b"]"
    yield b'{"other":[]}'
    for _ in range(300):
        changed = [dict(i) for i in base]
        for _ in range(rng.randint(1, 3)):
            target = rng.choice(changed)
            name = rng.choice(names)
            if rng.random() < 0.2:
                target.pop(name, None)
            else:
                target[name] = rng.choice(PALETTE)
        yield _body(field, changed)
    for _ in range(150):
        raw = bytearray(_body(field, base))
        for _ in range(rng.randint(1, 3)):
            raw[rng.randrange(len(raw))] = rng.randrange(256)
        yield bytes(raw)
        yield bytes(raw[: rng.randrange(len(raw))])


def _pydantic(model: type[pydantic.BaseModel], field: str, body: bytes) -> list[Any] | None:
    """What FastAPI makes of ``body``: ``json.loads``, then the model; None if refused."""
    try:
        data = json.loads(body)
        items: list[Any] = getattr(model.model_validate(data), field)
    except (ValueError, pydantic.ValidationError):
        return None
    return items


def _row(item: pydantic.BaseModel) -> tuple[Any, ...]:
    return tuple(getattr(item, name) for name in type(item).model_fields)


@pytest.mark.parametrize(("path", "field", "model", "decode", "valid"), ROUTES)
def test_fast_decoders_accept_only_what_the_models_accept(
    path: str,
    field: str,
    model: type[pydantic.BaseModel],
    decode: Callable[[bytes], Any],
    valid: list[dict[str, Any]],
) -> None:
    rng = random.Random(f"{SEED}{path}")
    accepted = refused_by_both = slower = 0
    for body in _mutants(field, valid, rng):
        fast = decode(body)
        slow = _pydantic(model, field, body)
        if fast is None:
            if slow is None:
                refused_by_both += 1
            else:
                slower += 1  # the models answer: correct, only slower
            continue
        assert slow is not None, f"the fast path accepts what the models refuse: {body[:300]!r}"
        fast_rows = [msgspec.structs.astuple(r) for r in fast]
        slow_rows = [_row(i) for i in slow]
        assert fast_rows == slow_rows, body[:300]
        assert [tuple(map(type, r)) for r in fast_rows] == [tuple(map(type, r)) for r in slow_rows]
        accepted += 1
    assert decode(_body(field, _texts(valid))) is not None
    assert accepted > 50 and refused_by_both > 200, (accepted, refused_by_both, slower)


def test_batch_url_check_agrees_with_canonical_url() -> None:
    """Whatever :func:`all_canonical` passes, :func:`canonical_url` leaves as it is."""
    rng = random.Random(SEED)
    alphabet = "aZ0.-/:?#%@ \n\x7f\u00e4h"
    bases = ["https://a.example/", "http://b-c.example/x?y=1", "https://x.example:8080/p"]
    passed = 0
    for _ in range(20_000):
        urls = []
        for _ in range(rng.randint(1, 3)):
            chars = list(rng.choice(bases))
            for _ in range(rng.randint(0, 3)):
                at = rng.randrange(len(chars) + 1)
                if rng.random() < 0.5:
                    chars.insert(at, rng.choice(alphabet))
                elif chars:
                    chars.pop(min(at, len(chars) - 1))
            urls.append("".join(chars))
        if all_canonical(urls):
            passed += 1
            assert [canonical_url(u) for u in urls] == urls
    assert passed > 1000


def test_idempotency_digest_is_the_same_on_both_paths() -> None:
    ctx = Context(MemoryStore(), ManualClock(T0), Settings(), Metrics())
    for _, field, model, decode, valid in ROUTES:
        body = _body(field, _texts(valid))
        slow = _pydantic(model, field, body)
        assert slow is not None
        assert batch_key(ctx, field, "k", decode(body)) == batch_key(ctx, field, "k", slow)


def _app(settings: Settings) -> Any:
    store = MemoryStore(shards=settings.shards, default_crawl_delay_s=1.0)
    return create_app(settings, clock=ManualClock(T0), store=store)


HEADERS = [
    {"content-type": "application/json"},
    {"content-type": "application/json", "idempotency-key": "k-1"},
    {"content-type": "application/json", "idempotency-key": ""},
    {"content-type": "application/json", "idempotency-key": "k" * 256},
    {"content-type": "application/json; charset=utf-8"},
    {"content-type": "text/plain"},
    {},
]


def _compare(base: str, app: Any, requests: list[tuple[str, bytes, dict[str, str]]]) -> int:
    """Send each request with the fast path on, then off: the same answers.  Returns how
    many the fast handlers served."""
    served = 0
    originals = dict(FAST_HANDLERS)

    def counting(fast: Any) -> Any:
        async def wrapped(*args: Any) -> Any:
            nonlocal served
            answer = await fast(*args)
            served += answer is not None
            return answer

        return wrapped

    for endpoint, (role, fast) in originals.items():
        FAST_HANDLERS[endpoint] = (role, counting(fast))
    try:
        with httpx.Client(base_url=base, timeout=30.0) as client:
            for path, body, headers in requests:
                app.state.fast_bodies = True
                on = client.post(path, content=body, headers=headers)
                app.state.fast_bodies = False
                off = client.post(path, content=body, headers=headers)
                assert on.status_code < 500, (path, body[:200], on.text)
                assert (on.status_code, on.content, on.headers.get("content-type")) == (
                    off.status_code, off.content, off.headers.get("content-type"),
                ), (path, body[:300], headers)  # fmt: skip
    finally:
        FAST_HANDLERS.update(originals)
    return served


def test_http_answers_are_the_same_with_and_without_the_fast_path(serve: Serve) -> None:
    settings = Settings(max_batch=MAX_BATCH, future_tolerance_s=60.0)
    app = _app(settings)
    rng = random.Random(SEED)
    requests: list[tuple[str, bytes, dict[str, str]]] = []
    for path, field, _, _, valid in ROUTES:
        bodies = list(_mutants(field, valid, rng))
        sample = bodies[:1] + rng.sample(bodies, 120)
        late = [dict(i) for i in valid]
        late[-1]["time" if "time" in late[-1] else "fetched_at"] = T0 + 3600  # the future
        sample += [_body(field, _texts(late)), _body(field, _texts(valid[:1]) * (MAX_BATCH + 1))]
        sample += [b"", b"{", b"null", b"{}"]
        for body in sample:
            requests.append((path, body, HEADERS[0]))
        for headers in HEADERS[1:]:
            requests += [(path, sample[0], headers), (path, sample[-5], headers)]
    with serve(app) as base:
        with httpx.Client(base_url=base) as client:
            client.post("/urls", json={"urls": [{"url": URL}]}).raise_for_status()
        served = _compare(base, app, requests)
    assert served >= 3 * 2  # each route's valid body and its keyed retry, at least


def test_roles_are_checked_alike_on_both_paths(serve: Serve) -> None:
    tokens = "events:tok-events,worker:tok-worker,read:tok-read"
    app = _app(Settings(auth_tokens=tokens))
    requests = []
    for path, field, _, _, valid in ROUTES:
        body = _body(field, _texts(valid))
        for auth in ["Bearer tok-events", "Bearer tok-worker", "Bearer tok-read", "Basic x", ""]:
            headers = {"content-type": "application/json", "authorization": auth}
            requests.append((path, body, headers))
    with serve(app) as base:
        served = _compare(base, app, requests)
    assert served == 3  # signals and clicks with the events token, results with the worker's
    assert {role for role, _ in FAST_HANDLERS.values()} == {Role.EVENTS, Role.WORKER}
    assert FAST_HANDLERS[event_routes.post_results][0] is Role.WORKER
