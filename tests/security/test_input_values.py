"""Non-finite and implausible values get a 422 naming the field, over a real socket,
on both stores: the body is strict JSON, quotes at most 200 characters of the input,
the keep-alive connection stays usable, and nothing changes."""

from __future__ import annotations

import http.client
import itertools
import json
from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager
from typing import Any
from urllib.parse import urlsplit

import pytest

from service.app import create_app
from service.clock import ManualClock
from service.settings import Settings

Serve = Callable[..., AbstractContextManager[str]]
T0 = 1_700_000_000.0
URL = "https://shop.example/p/1"
GOOD_URL = f'{{"url":"{URL}"}}'


@pytest.fixture
def base_url(store_setting: str, serve: Serve) -> Iterator[str]:
    """A served app on a manual clock at T0, on the memory or a private Redis store; its
    background passes run once at start and not again, so that only the requests of a
    test change the state it compares."""
    quiet = {"rescore_interval_s": 1e6, "learn_interval_s": 1e6, "relearn_interval_s": 1e6}
    app = create_app(Settings(store=store_setting, shards=4, **quiet), clock=ManualClock(T0))
    with serve(app) as base:
        yield base


def _strict_json(body: bytes) -> Any:
    def refuse(token: str) -> None:
        raise AssertionError(f"not strict JSON: {token}")

    return json.loads(body, parse_constant=refuse)


class Connection:
    """One keep-alive connection (http.client drops its socket when the server says
    ``Connection: close``, and fails if the server resets it)."""

    def __init__(self, base_url: str) -> None:
        parts = urlsplit(base_url)
        self.http = http.client.HTTPConnection(parts.hostname or "", parts.port, timeout=30)
        self.http.connect()
        self.socket = self.http.sock

    def call(self, method: str, path: str, body: bytes | None = None) -> tuple[int, bytes]:
        headers = {"Content-Type": "application/json"} if body is not None else {}
        self.http.request(method, path, body=body, headers=headers)
        response = self.http.getresponse()
        return response.status, response.read()

    def state(self) -> tuple[Any, ...]:
        """What a refused request must not change: the URL, its host, the counts."""
        url = self.call("GET", f"/urls/{URL}")
        host = self.call("GET", "/hosts/shop.example")
        status, metrics = self.call("GET", "/metrics")
        counts = [
            line for line in metrics.decode().splitlines()
            if line.startswith(("crawlsched_urls ", "crawlsched_hosts ", "crawlsched_events_total"))
        ]  # fmt: skip
        return url, host, counts

    def still_open(self) -> bool:
        # /metrics answers whether or not a worker runs (/healthz says 503 without one)
        return self.http.sock is self.socket and self.call("GET", "/metrics")[0] == 200


@pytest.fixture
def conn(base_url: str) -> Iterator[Connection]:
    connection = Connection(base_url)
    yield connection
    connection.http.close()


def _urls(item: str) -> bytes:
    return f'{{"urls":[{GOOD_URL},{item}]}}'.encode()


BAD = [
    # non-finite numbers, as Python's and JavaScript's JSON writers spell them
    ("/urls", _urls(f'{{"url":"{URL}","weight":NaN}}'), ["urls", 1, "weight"]),
    ("/urls", _urls(f'{{"url":"{URL}","recall":Infinity}}'), ["urls", 1, "recall"]),
    ("/urls", _urls(f'{{"url":"{URL}","change_rate":-Infinity}}'), ["urls", 1, "change_rate"]),
    ("/signal", f'{{"signals":[{{"url":"{URL}","time":NaN}}]}}'.encode(), ["signals", 0, "time"]),
    (
        "/click",
        f'{{"clicks":[{{"url":"{URL}","time":-Infinity}}]}}'.encode(),
        ["clicks", 0, "time"],
    ),
    (
        "/crawl-result",
        f'{{"results":[{{"url":"{URL}","lease_id":"x","fetched_at":NaN}}]}}'.encode(),
        ["results", 0, "fetched_at"],
    ),
    # finite but implausible
    ("/urls", _urls(f'{{"url":"{URL}","weight":1e308}}'), ["urls", 1, "weight"]),
    ("/urls", _urls(f'{{"url":"{URL}","change_rate":1e308}}'), ["urls", 1, "change_rate"]),
    (
        "/urls",
        _urls(f'{{"url":"{URL}","false_signal_rate":1e308}}'),
        ["urls", 1, "false_signal_rate"],
    ),
    ("/urls", _urls(f'{{"url":"{URL}","crawl_delay_s":1e308}}'), ["urls", 1, "crawl_delay_s"]),
    ("/urls", _urls(f'{{"url":"{URL}","crawl_delay_s":86401}}'), ["urls", 1, "crawl_delay_s"]),
    ("/urls", _urls(f'{{"url":"{URL}","change_rate":1e-300}}'), ["urls", 1, "change_rate"]),
    ("/urls", _urls(f'{{"url":"{URL}","last_crawled_at":1e12}}'), ["urls", 1, "last_crawled_at"]),
    ("/click", f'{{"clicks":[{{"url":"{URL}","time":1e300}}]}}'.encode(), ["clicks", 0, "time"]),
    # wrong types are not coerced
    ("/urls", _urls(f'{{"url":"{URL}","weight":true}}'), ["urls", 1, "weight"]),
    ("/urls", _urls(f'{{"url":"{URL}","fixed":1}}'), ["urls", 1, "fixed"]),
    ("/urls", _urls(f'{{"url":"{URL}","change_rate":"0.1"}}'), ["urls", 1, "change_rate"]),
    # text that is not valid Unicode (a lone surrogate)
    ("/urls", _urls(f'{{"url":"{URL}","label":"a\\ud800"}}'), ["urls", 1, "label"]),
    ("/urls", _urls('{"url":"https://a.example/\\udc00"}'), ["urls", 1, "url"]),
    (
        "/signal",
        f'{{"signals":[{{"url":"{URL}","time":1,"source":"\\ud800"}}]}}'.encode(),
        ["signals", 0, "source"],
    ),
    (
        "/crawl-result",
        f'{{"results":[{{"url":"{URL}","lease_id":"\\ud800","fetched_at":1}}]}}'.encode(),
        ["results", 0, "lease_id"],
    ),
    ("/urls", _urls('{"url":"https://a.example/","x\\ud800":1}'), ["urls", 1]),
]


@pytest.mark.parametrize(
    ("path", "body", "loc"), BAD, ids=[f"{p}:{where[-1]}" for p, _, where in BAD]
)
def test_bad_value_gets_422_naming_the_field_and_changes_nothing(
    conn: Connection, path: str, body: bytes, loc: list[Any]
) -> None:
    assert conn.call("POST", "/urls", f'{{"urls":[{GOOD_URL}]}}'.encode())[0] == 200
    before = conn.state()
    status, answer = conn.call("POST", path, body)
    assert status == 422, answer
    (error, *_) = _strict_json(answer)["detail"]
    assert error["loc"] == ["body", *loc] and error["msg"]
    assert conn.state() == before
    assert conn.still_open()


def test_error_quotes_at_most_200_characters_of_a_long_input(conn: Connection) -> None:
    long_url = "https://a.example/" + "x" * 5_000_000  # 5 MB: under the body limit
    status, answer = conn.call("POST", "/urls", json.dumps({"urls": [{"url": long_url}]}).encode())
    assert status == 422 and len(answer) < 1000
    (error,) = _strict_json(answer)["detail"]
    assert error["loc"] == ["body", "urls", 0, "url"]
    assert len(error["input"]) == 200 and long_url.startswith(error["input"][:-1])
    status, answer = conn.call("GET", "/urls/https://a.example/" + "y" * 20_000)
    assert status == 404 and len(answer) < 1000
    assert conn.still_open()


def test_a_batch_of_bad_items_gets_a_short_answer(conn: Connection) -> None:
    items = [{"url": f"https://a.example/{i}", "time": -1} for i in range(10_000)]
    status, answer = conn.call("POST", "/click", json.dumps({"clicks": items}).encode())
    assert status == 422 and len(answer) < 10_000
    detail = _strict_json(answer)["detail"]
    assert len(detail) == 20 and detail[0]["loc"] == ["body", "clicks", 0, "time"]
    whole = {"clicks": [{"url": "ftp://x", "time": 1}] * 2, "extra": "z" * 10_000}
    status, answer = conn.call("POST", "/click", json.dumps(whole).encode())
    assert status == 422 and len(answer) < 2000
    assert conn.still_open()


@pytest.mark.parametrize("n", ["0", "1001", "-5", "NaN", "1e3", "many"])
def test_bad_n_is_a_query_error(conn: Connection, n: str) -> None:
    status, answer = conn.call("GET", f"/next?n={n}")
    assert status == 422
    (error,) = _strict_json(answer)["detail"]
    assert error["loc"] == ["query", "n"]
    assert conn.still_open()


def test_values_at_the_edges_of_the_bounds_are_accepted_and_stay_finite(
    conn: Connection,
) -> None:
    """Every corner of the documented ranges: registered, leased, settled, signalled,
    clicked and explained, with every answer strict JSON (numeric warnings are errors
    here, so an overflow on the way is a 500)."""
    corners = itertools.product(
        [0.0, 1e-100, 1e-12, 1e6],
        [0.0, 1e-100, 1e-12, 1e6],
        [0.0, 1e-100, 1e-6, 1.0],
        [0.0, 1e-100, 1e6],
        [True, False],
    )
    # crawled at the earliest or exactly the minimum revisit interval (60 s) ago
    urls = [
        {"url": f"https://h{i}.example/p", "weight": w, "change_rate": d, "recall": r,
         "false_signal_rate": nu, "fixed": fixed, "crawl_delay_s": [5e-324, 86_400.0][i % 2],
         "last_crawled_at": [0.0, T0 - 60.0][i % 2]}
        for i, (w, d, r, nu, fixed) in enumerate(corners)
    ]  # fmt: skip
    status, answer = conn.call("POST", "/urls", json.dumps({"urls": urls}).encode())
    assert status == 200, answer
    status, answer = conn.call("GET", "/next?n=1000")
    assert status == 200
    leases = _strict_json(answer)["leases"]
    assert len(leases) == len(urls)  # crawl delays are per host: one URL per host
    results = [
        {"url": lease["url"], "lease_id": lease["lease_id"], "fetched_at": T0,
         "changed": k % 2 == 0, "status": [200, 503, 0][k % 3]}
        for k, lease in enumerate(leases)
    ]  # fmt: skip
    for path, key, items in [
        ("/crawl-result", "results", results),
        ("/signal", "signals", [{"url": u["url"], "time": T0} for u in urls]),
        ("/click", "clicks", [{"url": u["url"], "time": T0} for u in urls]),
    ]:
        status, answer = conn.call("POST", path, json.dumps({key: items}).encode())
        assert status == 200, answer
        assert key != "results" or _strict_json(answer)["accepted"] == len(urls)
    for u in urls:
        status, answer = conn.call("GET", f"/urls/{u['url']}")
        assert status == 200, (u, answer)
        _strict_json(answer)
    assert conn.call("GET", "/metrics")[0] == 200
