"""The farm over real HTTP (uvicorn in a thread, a manual clock): validators and 304,
robots.txt and sitemaps, 429 and 503, proxy requests, the score and the audit."""

from __future__ import annotations

import re
import xml.etree.ElementTree as ET
from collections.abc import Iterator
from datetime import datetime

import httpx
import numpy as np
import pytest

from scheduler_core.params import UrlParams
from scheduler_core.sim import CHANGE, CLICK, SIGNAL, EventLog, World, schedule_freshness
from service.clock import ManualClock
from service.webfarm import Farm, FarmOptions, HostPlan, farm_app
from service.webfarm.pages import http_date
from service.webfarm.server import ThreadedServer

T0 = 1_700_000_000.0
NS = "{http://www.sitemaps.org/schemas/sitemap/0.9}"


def small_world() -> World:
    """a.example (crawl delay 60 s): /p/0, /p/1; b.example (10 s): /x?id=2."""
    events = EventLog.merge(
        [
            ([100.0, 300.0, 500.0], CHANGE, [0, 0, 1]),
            ([100.0, 200.0], SIGNAL, [0, 0]),
            ([150.0, 250.0, 350.0, 450.0, 550.0, 650.0], CLICK, [0, 0, 0, 1, 1, 2]),
        ]
    )
    return World.from_arrays(
        ["https://a.example/p/0", "https://a.example/p/1", "https://b.example/x?id=2"],
        ["a.example", "b.example"],
        [0, 0, 1],
        UrlParams.create([1e-3, 1e-3, 1e-3], [1e-3, 1e-3, 1e-3], 0.5, 1e-4),
        [60.0, 10.0],
        budget_per_s=0.01,
        duration_s=1000.0,
        warmup_s=0.0,
        events=events,
    )


class Served:
    def __init__(self, farm: Farm, server: ThreadedServer) -> None:
        self.farm, self.url = farm, server.url
        self.clock = farm.clock
        assert isinstance(self.clock, ManualClock)
        self.http = httpx.Client(base_url=server.url, timeout=10.0)

    def at(self, t: float) -> None:
        """Move the clock to world time t."""
        assert isinstance(self.clock, ManualClock)
        self.clock.set(T0 + t)

    def get(self, host: str, path: str, **headers: str) -> httpx.Response:
        return self.http.get(path, headers={"Host": host, **headers})


@pytest.fixture
def served() -> Iterator[Served]:
    world = small_world()
    plan = HostPlan.explicit(world.hosts, strict=["a.example"], outages={"b.example": [(400, 600)]})
    farm = Farm(world, ManualClock(T0), options=FarmOptions(tolerance_wall_s=0.0), plan=plan)
    with ThreadedServer(farm_app(farm)) as server:
        s = Served(farm, server)
        yield s
        s.http.close()


def test_pages_carry_validators_and_answer_304_while_unchanged(served: Served) -> None:
    served.at(50)
    first = served.get("a.example", "/p/0")
    assert first.status_code == 200 and first.headers["etag"] == '"p0v0"'
    assert first.headers["last-modified"] == http_date(T0)
    assert "version 0" in first.text

    served.at(120)  # changed at 100
    second = served.get("a.example", "/p/0", **{"If-None-Match": '"p0v0"'})
    assert second.status_code == 200 and second.headers["etag"] == '"p0v1"'
    assert second.headers["last-modified"] == http_date(T0 + 100)
    assert second.text != first.text

    served.at(250)
    same = served.get("a.example", "/p/0", **{"If-None-Match": 'W/"p0v1", "zzz"'})
    assert same.status_code == 304 and same.content == b""
    assert same.headers["etag"] == '"p0v1"'

    served.at(310)  # changed at 300: If-Modified-Since of the copy of 120 no longer holds
    since = {"If-Modified-Since": second.headers["last-modified"]}
    assert served.get("a.example", "/p/0", **since).status_code == 200
    served.at(380)
    now_since = {"If-Modified-Since": http_date(T0 + 300)}
    assert served.get("a.example", "/p/0", **now_since).status_code == 304
    # If-None-Match decides when both are sent
    both = {**now_since, "If-None-Match": '"p0v1"'}
    served.at(450)
    assert served.get("a.example", "/p/0", **both).status_code == 200


def test_the_farm_works_as_an_http_proxy(served: Served) -> None:
    served.at(10)
    with httpx.Client(proxy=served.url, trust_env=False) as http:
        page = http.get("http://b.example/x?id=2")
        assert page.status_code == 200 and "b.example page 2" in page.text
        index = http.get("http://a.example/")
        assert re.findall(r'href="([^"]+)"', index.text) == ["/p/0", "/p/1"]
        assert http.get("http://c.example/").status_code == 404
    assert served.get("b.example:8080", "/nope").status_code == 404  # port ignored
    assert served.http.post("/p/0", headers={"Host": "a.example"}).status_code == 405


def _lastmods(served: Served, host: str) -> dict[str, float | None]:
    root = ET.fromstring(served.get(host, "/sitemap.xml").content)
    out: dict[str, float | None] = {}
    for entry in root.iter(f"{NS}url"):
        lastmod = entry.findtext(f"{NS}lastmod")
        stamp = None if lastmod is None else datetime.fromisoformat(lastmod).timestamp()
        out[str(entry.findtext(f"{NS}loc"))] = stamp
    return out


def test_robots_give_the_crawl_delay_and_sitemaps_the_signals(served: Served) -> None:
    served.at(150)
    robots = served.get("a.example", "/robots.txt").text.splitlines()
    assert "Crawl-delay: 60" in robots and "Sitemap: http://a.example/sitemap.xml" in robots
    lastmods = _lastmods(served, "a.example")
    assert set(lastmods) == {"http://a.example/p/0", "http://a.example/p/1"}
    assert lastmods["http://a.example/p/0"] == pytest.approx(T0 + 100)  # a true signal
    assert lastmods["http://a.example/p/1"] is None  # never signalled
    served.at(250)
    assert _lastmods(served, "a.example")["http://a.example/p/0"] == pytest.approx(T0 + 200)
    # robots.txt and the sitemap stay up while the host is down
    served.at(450)
    assert served.get("b.example", "/robots.txt").status_code == 200
    assert served.get("b.example", "/sitemap.xml").status_code == 200
    assert served.get("b.example", "/x?id=2").status_code == 503


def test_strict_host_answers_429_with_retry_after(served: Served) -> None:
    served.at(10)
    assert served.get("a.example", "/p/0").status_code == 200
    served.at(30)
    too_soon = served.get("a.example", "/p/1")
    assert too_soon.status_code == 429 and too_soon.headers["retry-after"] == "40"
    served.at(95)  # 65 s after the refused request: allowed again
    assert served.get("a.example", "/p/1").status_code == 200
    served.at(96)  # the lenient host lets a request through, the audit counts it
    assert served.get("b.example", "/x?id=2").status_code == 200
    served.at(100)
    assert served.get("b.example", "/x?id=2").status_code == 200
    score = served.farm.score()
    audit = {a.host: a for a in score.hosts}
    assert (audit["a.example"].throttled, audit["a.example"].violations) == (1, 1)
    assert (audit["b.example"].throttled, audit["b.example"].violations) == (0, 1)
    assert audit["a.example"].min_interval_s == pytest.approx(20.0)
    assert score.violations == 2 and score.requests == {"200": 4, "429": 1}


def test_down_host_answers_503_until_it_is_back(served: Served) -> None:
    served.at(450)
    down = served.get("b.example", "/x?id=2")
    assert down.status_code == 503 and down.headers["retry-after"] == "150"
    served.at(600)
    assert served.get("b.example", "/x?id=2").status_code == 200
    assert {a.host: a.unavailable for a in served.farm.score().hosts}["b.example"] == 1


def test_score_is_the_simulators_freshness_of_the_fetches(served: Served) -> None:
    fetched: list[tuple[int, float]] = []
    for t, host, path, i in [
        (120.0, "a.example", "/p/0", 0),
        (240.0, "a.example", "/p/1", 1),
        (330.0, "a.example", "/p/0", 0),
        (640.0, "b.example", "/x?id=2", 2),
    ]:
        served.at(t)
        assert served.get(host, path).status_code == 200
        fetched.append((i, t))
    served.at(700)
    assert served.http.head("/p/0", headers={"Host": "a.example"}).content == b""  # not a fetch
    served.at(1200)  # after the world's end: not scored
    assert served.get("a.example", "/p/1").status_code == 200
    urls, times = (np.array(x) for x in zip(*fetched, strict=True))
    expected = schedule_freshness(served.farm.world, urls, times)
    score = served.http.get("/_farm/score").json()
    assert score["crawls"] == 4 and score["clicks"] == 6
    assert score["freshness"] == pytest.approx(expected.click_weighted)
    # p0's clicks at 150, 250 and 350 are fresh (fetched at 120 after its change at
    # 100, and at 330 after the one at 300); p1's at 450 is fresh, at 550 stale (changed
    # at 500 after its fetch at 240); x's at 650 fresh: 5 of 6
    assert score["freshness"] == pytest.approx(5 / 6)
    assert score["done"] and score["violations"] == 0


def test_world_and_hosts_endpoints(served: Served) -> None:
    served.at(25)
    world = served.http.get("/_farm/world").json()
    assert world["origin"] == T0 and world["world_time_s"] == 25.0
    assert (world["budget_per_s"], world["duration_s"], world["urls"]) == (0.01, 1000.0, 3)
    hosts = {h["host"]: h for h in served.http.get("/_farm/hosts").json()}
    assert hosts["a.example"]["strict"] and not hosts["b.example"]["strict"]
    assert hosts["b.example"]["outages"] == [[T0 + 400, T0 + 600]]
    assert hosts["a.example"]["index"] == "http://a.example/"


def test_world_can_start_at_the_first_page_request() -> None:
    world = small_world()
    clock = ManualClock(T0)
    farm = Farm(world, clock, plan=HostPlan.explicit(world.hosts), start_on_request=True)
    with ThreadedServer(farm_app(farm)) as server, httpx.Client(base_url=server.url) as http:
        clock.advance(500.0)
        assert http.get("/robots.txt", headers={"Host": "a.example"}).status_code == 200
        before = http.get("/_farm/world").json()
        assert not before["started"] and before["world_time_s"] == 0.0
        page = http.get("/p/1", headers={"Host": "a.example"})
        assert page.headers["etag"] == '"p1v0"'  # world time 0, not 500: no change yet
        clock.advance(520.0)
        after = http.get("/_farm/world").json()
        assert after["started"] and after["origin"] == T0 + 500 and after["world_time_s"] == 520
        assert http.get("/p/1", headers={"Host": "a.example"}).headers["etag"] == '"p1v1"'
