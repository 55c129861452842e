"""The published OpenAPI document states what the service does: the limits of its own
settings, the URL pattern and value bounds, every error answer per route, text for
/metrics, an example for every body; and 405 lists every method of a path."""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

import httpx
import pytest
from pydantic import BaseModel

from service import host_schemas, schemas
from service.app import create_app
from service.clock import ManualClock
from service.responses import ErrorOut, ValidationErrorsOut
from service.settings import Settings
from service.urls import URL_PATTERN

pytestmark = pytest.mark.anyio
LIMITS = Settings(max_next=7, max_batch=5)
ANSWERS = {  # the error answers each route documents
    ("post", "/urls"): {400, 401, 403, 408, 413, 422, 503},
    ("delete", "/urls"): {400, 401, 403, 408, 413, 422, 503},
    ("get", "/urls/{url}"): {401, 403, 404, 408, 413, 422, 503},
    ("get", "/hosts/{host}"): {401, 403, 404, 408, 413, 422, 503},
    ("post", "/signal"): {400, 401, 403, 408, 413, 422, 503},
    ("post", "/click"): {400, 401, 403, 408, 413, 422, 503},
    ("post", "/crawl-result"): {400, 401, 403, 408, 413, 422, 503},
    ("get", "/next"): {401, 403, 408, 413, 422, 503},
    ("get", "/metrics"): {401, 403, 408, 413, 503},
    ("get", "/healthz"): {408, 413, 503},
    ("get", "/hosts"): {401, 403, 408, 413, 422, 503},
    ("patch", "/hosts/{host}"): {400, 401, 403, 404, 408, 413, 422, 503},
    ("delete", "/hosts/{host}"): {401, 403, 404, 408, 413, 422, 503},
    ("post", "/urls/purge"): {401, 403, 408, 413, 422, 503},
}


@pytest.fixture
async def api() -> AsyncIterator[httpx.AsyncClient]:
    app = create_app(LIMITS, clock=ManualClock(1_700_000_000.0))
    transport = httpx.ASGITransport(app=app)
    async with httpx.AsyncClient(transport=transport, base_url="http://crawlsched") as client:
        yield client


@pytest.fixture
async def document(api: httpx.AsyncClient) -> dict[str, Any]:
    answer = await api.get("/openapi.json")
    assert answer.status_code == 200
    return dict(answer.json())


def _operations(document: dict[str, Any]) -> dict[tuple[str, str], Any]:
    return {(m, p): op for p, ops in document["paths"].items() for m, op in ops.items()}


async def test_limits_of_the_settings_are_in_the_schema(document: dict[str, Any]) -> None:
    (n,) = _operations(document)[("get", "/next")]["parameters"]
    assert (n["in"], n["schema"]["minimum"], n["schema"]["maximum"]) == ("query", 1, 7)
    components = document["components"]["schemas"]
    for model, field in [("UrlsIn", "urls"), ("UrlsRemoveIn", "urls"), ("SignalsIn", "signals"),
                         ("ClicksIn", "clicks"), ("CrawlResultsIn", "results")]:  # fmt: skip
        batch = components[model]["properties"][field]
        assert (batch["minItems"], batch["maxItems"]) == (1, 5), model
    assert "x-crawlsched-limit" not in str(document)


def _keys(node: Any) -> set[str]:
    if isinstance(node, dict):
        return set(node).union(*(_keys(v) for v in node.values()))
    if isinstance(node, list):
        return set().union(*(_keys(v) for v in node))
    return set()


async def test_every_constraint_is_in_json_schema_words(document: dict[str, Any]) -> None:
    """No constraint is left in pydantic's words, which validators ignore."""
    schemas = document["components"]["schemas"]
    assert not _keys(schemas) & {"ge", "le", "gt", "lt", "min_length", "max_length"}


async def test_url_pattern_and_value_bounds_are_in_the_schema(document: dict[str, Any]) -> None:
    components = document["components"]["schemas"]
    for model in ["UrlIn", "SignalIn", "ClickIn", "CrawlResultIn"]:
        assert components[model]["properties"]["url"]["pattern"] == URL_PATTERN
    assert components["UrlsRemoveIn"]["properties"]["urls"]["items"]["pattern"] == URL_PATTERN
    url_in = components["UrlIn"]["properties"]
    for rate in ["weight", "change_rate", "false_signal_rate"]:
        zero, positive, null = url_in[rate]["anyOf"]
        assert zero["const"] == 0 and null == {"type": "null"}
        assert (positive["minimum"], positive["maximum"]) == (1e-100, 1e6)
    delay = url_in["crawl_delay_s"]["anyOf"][0]
    assert (delay["exclusiveMinimum"], delay["maximum"]) == (0, 86_400)
    zero, positive, _ = url_in["recall"]["anyOf"]
    assert zero["const"] == 0 and (positive["minimum"], positive["maximum"]) == (1e-100, 1)
    assert components["ClickIn"]["properties"]["time"]["maximum"] == 1e11


async def test_every_route_documents_its_error_answers(document: dict[str, Any]) -> None:
    operations = _operations(document)
    assert set(operations) == set(ANSWERS)
    for key, op in operations.items():
        assert {int(code) for code in op["responses"]} - {200} == ANSWERS[key], key
        for code, answer in op["responses"].items():
            assert answer["description"], (key, code)
    unauthorised = operations[("post", "/urls")]["responses"]["401"]
    assert "WWW-Authenticate" in unauthorised["headers"]
    assert "Retry-After" in operations[("get", "/next")]["responses"]["503"]["headers"]


async def test_metrics_are_documented_as_text(
    document: dict[str, Any], api: httpx.AsyncClient
) -> None:
    ok = _operations(document)[("get", "/metrics")]["responses"]["200"]
    assert list(ok["content"]) == ["text/plain"]
    assert (await api.get("/metrics")).headers["content-type"].startswith("text/plain")


def _resolve(document: dict[str, Any], schema: dict[str, Any]) -> dict[str, Any]:
    ref = schema.get("$ref")
    return document["components"]["schemas"][ref.rsplit("/", 1)[1]] if ref else schema


async def test_every_body_has_an_example_the_models_accept(document: dict[str, Any]) -> None:
    models: dict[str, type[BaseModel]] = {
        name: getattr(module, name)
        for module in (schemas, host_schemas)
        for name in module.__all__
        if name[0].isupper()
    } | {"ErrorOut": ErrorOut, "ValidationErrorsOut": ValidationErrorsOut}
    bodies = 0
    for key, op in _operations(document).items():
        contents = [op["requestBody"]["content"]] if "requestBody" in op else []
        contents += [
            answer["content"] for answer in op["responses"].values() if "content" in answer
        ]
        for content in contents:
            for media_type, body in content.items():
                bodies += 1
                schema = _resolve(document, body.get("schema", {}))
                examples = [body["example"]] if "example" in body else schema.get("examples", [])
                assert examples, (key, media_type)
                name = body.get("schema", {}).get("$ref", "").rsplit("/", 1)[-1]
                for example in examples:
                    if name:
                        models[name].model_validate(example)
                    else:
                        assert media_type == "text/plain" and isinstance(example, str)
    assert bodies > 50


@pytest.mark.parametrize(
    ("method", "path", "allow"),
    [("OPTIONS", "/urls", "DELETE, POST"), ("PUT", "/urls", "DELETE, POST"),
     ("OPTIONS", "/next", "GET"), ("POST", "/urls/https://a.example/", "GET"),
     ("DELETE", "/healthz", "GET")],
)  # fmt: skip
async def test_method_not_allowed_lists_every_method_of_the_path(
    api: httpx.AsyncClient, method: str, path: str, allow: str
) -> None:
    answer = await api.request(method, path)
    assert (answer.status_code, answer.headers["allow"]) == (405, allow)


async def test_published_limits_are_the_enforced_ones(api: httpx.AsyncClient) -> None:
    assert (await api.get("/next", params={"n": 7})).status_code == 200
    too_many = await api.get("/next", params={"n": 8})
    assert too_many.status_code == 422
    assert too_many.json()["detail"][0]["loc"] == ["query", "n"]
    urls = [{"url": f"https://a.example/{i}"} for i in range(6)]
    assert (await api.post("/urls", json={"urls": urls[:5]})).status_code == 200
    refused = await api.post("/urls", json={"urls": urls})
    assert refused.status_code == 422 and refused.json()["detail"][0]["loc"] == ["body", "urls"]
