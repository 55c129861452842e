"""URLs and hosts as input: one host per internationalised name, the query string kept
when explaining a URL, 404 (never 500) for what is not a URL, on both stores; and the
published URL pattern is exactly what the service accepts."""

from __future__ import annotations

import re
from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager
from urllib.parse import quote

import httpx
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from service.app import create_app
from service.clock import ManualClock
from service.settings import Settings
from service.urls import URL_PATTERN, canonical_url, host_of

Serve = Callable[..., AbstractContextManager[str]]
T0 = 1_700_000_000.0
PATTERN = re.compile(URL_PATTERN)


@pytest.fixture
def api(store_setting: str, serve: Serve) -> Iterator[httpx.Client]:
    app = create_app(Settings(store=store_setting, shards=4), clock=ManualClock(T0))
    with serve(app) as base, httpx.Client(base_url=base) as client:
        yield client


def test_unicode_and_punycode_spellings_are_one_host(api: httpx.Client) -> None:
    urls = [
        "https://bücher.example/a",
        "https://xn--bcher-kva.example/b",
        "https://BÜCHER.example/a",
    ]
    answer = api.post("/urls", json={"urls": [{"url": u} for u in urls]})
    assert answer.json() == {"created": 2, "updated": 1}
    for spelling in ["bücher.example", "xn--bcher-kva.example", "BÜCHER.EXAMPLE"]:
        host = api.get(f"/hosts/{spelling}")
        assert host.status_code == 200 and host.json()["host"] == "xn--bcher-kva.example"
        assert host.json()["urls"] == 2
    explained = api.get("/urls/https://bücher.example/b").json()
    assert explained["url"] == "https://xn--bcher-kva.example/b"
    assert "crawlsched_hosts 1.0" in api.get("/metrics").text


def test_host_with_port_is_found_in_either_spelling(api: httpx.Client) -> None:
    api.post("/urls", json={"urls": [{"url": "https://bücher.example:8443/"}]})
    for spelling in ["bücher.example:8443", "xn--bcher-kva.example:8443"]:
        assert api.get(f"/hosts/{spelling}").json()["host"] == "xn--bcher-kva.example:8443"


def test_explaining_a_url_keeps_its_query_string(api: httpx.Client) -> None:
    api.post(
        "/urls",
        json={"urls": [{"url": "https://q.example/p?id=1"}, {"url": "https://q.example/p"}]},
    )
    plain = api.get("/urls/https://q.example/p?id=1")
    assert plain.status_code == 200 and plain.json()["url"] == "https://q.example/p?id=1"
    encoded = api.get("/urls/" + quote("https://q.example/p?id=1", safe=""))
    assert encoded.status_code == 200 and encoded.json()["url"] == "https://q.example/p?id=1"
    assert api.get("/urls/https://q.example/p").json()["url"] == "https://q.example/p"
    assert api.get("/urls/https://q.example/p?id=2").status_code == 404


@pytest.mark.parametrize(
    "path", ["0", "abc", "http:", "http://", "https:///x", "ftp://a.example/", "https://[::1]/"]
)
def test_what_is_not_a_url_is_not_found(api: httpx.Client, path: str) -> None:
    answer = api.get(f"/urls/{path}")
    assert answer.status_code == 404 and answer.json()["detail"].startswith("URL not registered")


@pytest.mark.parametrize("host", ["0", "abc", "a b", "ü" * 300, "x:1:2"])
def test_unknown_hosts_are_not_found(api: httpx.Client, host: str) -> None:
    assert api.get(f"/hosts/{quote(host)}").status_code == 404


@settings(
    max_examples=300, derandomize=True, database=None, suppress_health_check=[HealthCheck.too_slow]
)
@given(st.from_regex(PATTERN, fullmatch=True).filter(lambda u: len(u) <= 2048))
def test_every_url_the_pattern_admits_is_accepted_in_a_canonical_form(raw: str) -> None:
    """Canonical: ASCII host, matches the pattern, its own canonical form."""
    url = canonical_url(raw)
    assert PATTERN.fullmatch(url) and host_of(url).isascii()
    assert canonical_url(url) == url


@settings(max_examples=300, derandomize=True, database=None)
@given(
    st.one_of(
        st.text(max_size=40),
        st.builds(
            lambda s, rest: f"{s}://{rest}", st.sampled_from(["http", "HTTPS", "ftp"]), st.text()
        ),
    )
)
def test_the_service_accepts_exactly_what_the_pattern_admits(raw: str) -> None:
    try:
        raw.encode("utf-8")
    except UnicodeEncodeError:
        return  # not valid Unicode: refused, but no JSON schema can say so
    try:
        canonical_url(raw)
        accepted = True
    except ValueError:
        accepted = False
    assert accepted == bool(PATTERN.fullmatch(raw)), raw


@pytest.mark.parametrize(
    ("raw", "canonical"),
    [
        ("https://bücher.example/", "https://xn--bcher-kva.example/"),
        ("https://ＢÜCHER。example/p", "https://xn--bcher-kva.example/p"),
        ("https://faß.de/", "https://xn--fa-hia.de/"),
        ("https://☃.example/", "https://xn--n3h.example/"),
        ("HTTP://user:pw@A.example:0080/x?#f", "http://a.example/x"),
        ("https://a.example?q=1", "https://a.example/?q=1"),
    ],
)
def test_canonical_forms(raw: str, canonical: str) -> None:
    assert canonical_url(raw) == canonical


@pytest.mark.parametrize(
    "raw",
    ["https://a.example:0/", "https://a.example:65536/", "https://[::1]/", "https://a@b@c/",
     "https://%41.example/", "https://a.example/\x00", "https://a.example/\ud800"],
)  # fmt: skip
def test_refused_urls(raw: str) -> None:
    with pytest.raises(ValueError):
        canonical_url(raw)
