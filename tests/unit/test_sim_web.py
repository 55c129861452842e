"""World specs for a web-like world: heavy-tailed distributions, signal quality per
host and per source class, host outages, and the ``web`` preset (``docs/worlds.md``)."""

from __future__ import annotations

import math
import tomllib
from pathlib import Path

import numpy as np
import pytest

from scheduler_core.errors import ParameterError
from scheduler_core.host_optimum import solve_host_optimum
from scheduler_core.params import UrlParams
from scheduler_core.policies import UniformPolicy
from scheduler_core.policies.base import IntArray
from scheduler_core.sim import (
    CHANGE,
    DAY_S,
    SIGNAL,
    Dist,
    HostOutages,
    SignalSource,
    World,
    WorldSpec,
)
from scheduler_core.sim.simulator import problem_of, simulate
from service.cli import main
from service.loadgen.worldfile import PRESETS, load_spec, preset_spec, preset_toml
from service.schemas import MAX_CRAWL_DELAY_S

N = 40_000


def phi(x: float) -> float:
    return 0.5 * math.erfc(-x / math.sqrt(2.0))


def near(share: float, p: float, n: int = N) -> bool:
    """An observed share within 4 binomial standard errors of p."""
    return abs(share - p) <= 4 * math.sqrt(p * (1 - p) / n) + 1e-12


# --- distributions ----------------------------------------------------------------------


def test_pareto_has_its_survival_function() -> None:
    d = Dist.of("pareto", scale=0.5, shape=1.35)
    x = d.sample(np.random.default_rng(1), N)
    assert x.min() >= 0.5
    for at in (1.0, 5.0, 50.0):
        assert near(float((x > at).mean()), (0.5 / at) ** 1.35)
    assert d.mean == pytest.approx(1.35 * 0.5 / 0.35)
    assert Dist.of("pareto", scale=1.0, shape=0.9).mean == math.inf


@pytest.mark.parametrize(
    "dist",
    [
        Dist.of("pareto", scale=0.5, shape=1.35, cap=40.0),
        Dist.of("pareto", scale=0.5, shape=1.0, cap=40.0),
        Dist.of("lognormal", median=0.036, sigma=3.0, cap=24.0),
        Dist.of("lognormal", median=2.0, sigma=0.0, cap=1.0),
        Dist.mixture((0.3, Dist.of("const", value=1.0)), (0.7, Dist.of("uniform", low=5, high=6))),
    ],
)
def test_capped_and_mixed_draws_have_the_stated_mean(dist: Dist) -> None:
    x = dist.sample(np.random.default_rng(2), N)
    assert x.shape == (N,) and x.dtype == np.float64
    assert x.mean() == pytest.approx(dist.mean, abs=4 * x.std() / math.sqrt(N) + 1e-12)
    assert Dist.from_mapping(dist.to_mapping()) == dist


def test_a_cap_is_a_point_mass_at_the_cap() -> None:
    d = Dist.of("lognormal", median=0.036, sigma=3.0, cap=24.0)
    x = d.sample(np.random.default_rng(3), N)
    assert x.max() == 24.0
    assert near(float((x == 24.0).mean()), 1 - phi(math.log(24.0 / 0.036) / 3.0))
    assert near(float((x <= 0.036).mean()), 0.5)
    p = Dist.of("pareto", scale=1.0, shape=2.0, cap=3.0).sample(np.random.default_rng(4), N)
    assert near(float((p == 3.0).mean()), 1 / 9)


def test_an_uncapped_lognormal_draws_as_before() -> None:
    got = Dist.of("lognormal", median=2.0, sigma=0.5).sample(np.random.default_rng(0), 7)
    np.testing.assert_array_equal(got, 2.0 * np.exp(np.random.default_rng(0).normal(0, 0.5, 7)))
    assert "cap" not in Dist.of("lognormal", median=2.0, sigma=0.5).to_mapping()


def test_a_mixture_draws_its_parts_by_weight() -> None:
    d = Dist.from_mapping(
        {
            "kind": "mixture",
            "parts": [
                {"weight": 3, "kind": "const", "value": 1.0},
                {"weight": 1, "kind": "beta", "a": 2, "b": 2},
            ],
        }
    )
    x = d.sample(np.random.default_rng(5), N)
    assert near(float((x == 1.0).mean()), 0.75)
    assert d.mean == pytest.approx(0.75 + 0.25 * 0.5)


@pytest.mark.parametrize(
    ("data", "message"),
    [
        ({"kind": "mixture", "parts": []}, "parts"),
        ({"kind": "mixture"}, "parts"),
        ({"kind": "mixture", "parts": [{"kind": "const", "value": 1}]}, "weight"),
        ({"kind": "mixture", "parts": [{"weight": 0, "kind": "const", "value": 1}]}, "> 0"),
        ({"kind": "mixture", "parts": [{"weight": 1, "kind": "zipf", "s": 1}]}, "zipf"),
        ({"kind": "pareto", "scale": 2, "shape": 1, "cap": 1}, "cap >= scale"),
        ({"kind": "pareto", "scale": 0, "shape": 1}, "scale > 0"),
        ({"kind": "lognormal", "median": 1, "sigma": 1, "cap": float("inf")}, "finite"),
        ({"kind": "lognormal", "median": 1, "sigma": 1, "ceiling": 2}, "optionally"),
    ],
)
def test_bad_distributions_name_the_problem(data: dict[str, object], message: str) -> None:
    with pytest.raises(ParameterError, match=message):
        Dist.from_mapping(data)


# --- signal quality ---------------------------------------------------------------------


def test_per_host_signal_quality_is_shared_by_the_hosts_urls() -> None:
    spec = WorldSpec(urls=600, hosts=30, seed=4, signal_quality="per_host")
    w = World.generate(spec)
    p = w.params
    for h in range(30):
        on = w.host_of == h
        assert np.ptp(p.recall[on]) == 0.0
        assert np.ptp(p.precision[on & (p.change_rate > 0)]) < 1e-12
    # hosts differ; per URL, URLs of one host differ
    assert np.unique(p.recall).size == 30
    per_url = World.generate(spec.replace(signal_quality="per_url"))
    assert np.unique(per_url.params.recall[per_url.host_of == 0]).size > 1


def test_per_host_signals_announce_changes_at_the_hosts_recall() -> None:
    spec = WorldSpec(
        urls=400, hosts=4, seed=6, signal_quality="per_host", host_size=Dist.of("const", value=1)
    )
    w = World.generate(spec)
    log = w.events()
    changes, signals = log.kind == CHANGE, log.kind == SIGNAL
    for h in range(4):
        on = w.host_of[log.url] == h
        n = int((changes & on).sum())
        # no delay: every true signal shares its change's time
        announced = np.isin(log.time[changes & on], log.time[signals & on])
        r = float(w.params.recall[w.host_of == h][0])
        assert abs(announced.mean() - r) <= 4 * math.sqrt(r * (1 - r) / n) + 1e-9


def test_false_signals_keep_their_expected_volume_across_signal_quality() -> None:
    spec = WorldSpec(urls=4000, hosts=400, seed=8, duration_days=5, clicks=False)
    per_url = World.generate(spec).params.false_signal_rate.sum()
    per_host = World.generate(spec.replace(signal_quality="per_host")).params.false_signal_rate
    assert per_host.sum() == pytest.approx(per_url, rel=0.1)


def test_signal_source_classes_draw_recall_and_false_signals_together() -> None:
    good = SignalSource(0.2, Dist.of("const", value=0.9), Dist.of("const", value=0.0))
    poor = SignalSource(0.8, Dist.of("const", value=0.1), Dist.of("const", value=1.0))
    small = WorldSpec(urls=5000, hosts=50, duration_days=5, clicks=False)
    w = World.generate(small.replace(signal_sources=(poor, good), seed=9))
    p = w.params
    is_good = p.recall == 0.9
    assert near(float(is_good.mean()), 0.2, 5000)
    assert (p.false_signal_rate[is_good] == 0).all() and (p.false_signal_rate[~is_good] > 0).all()
    hosts = World.generate(small.replace(signal_sources=(poor, good), signal_quality="per_host"))
    for h in range(50):
        assert np.unique(hosts.params.recall[hosts.host_of == h]).size == 1


def test_signal_sources_round_trip_and_exclude_recall() -> None:
    data = {
        "signal_sources": [
            {"share": 1, "recall": {"kind": "beta", "a": 1, "b": 3}, "false_signal_rate": 0.5}
        ],
        "signal_quality": "per_host",
    }
    spec = WorldSpec.from_mapping(data)
    assert WorldSpec.from_mapping(spec.to_mapping()) == spec
    with pytest.raises(ParameterError, match="not both"):
        WorldSpec.from_mapping({**data, "recall": 0.5})
    with pytest.raises(ParameterError, match="signal_quality"):
        WorldSpec.from_mapping({"signal_quality": "per_page"})
    with pytest.raises(ParameterError, match="share"):
        WorldSpec.from_mapping({"signal_sources": [{"share": 1}]})


# --- host outages -----------------------------------------------------------------------


def test_outages_take_down_a_share_of_hosts_and_leave_the_events_alone() -> None:
    spec = WorldSpec(urls=500, hosts=50, duration_days=100, seed=10)
    down = spec.replace(outage_share=0.2, outage_days=Dist.of("const", value=3.0))
    w, plain = World.generate(down), World.generate(spec)
    assert w.outages is not None and plain.outages is None
    np.testing.assert_array_equal(w.events().time, plain.events().time)
    np.testing.assert_array_equal(w.events().url, plain.events().url)
    o = w.outages
    hit = np.isfinite(o.start_s)
    assert hit.sum() == 10 and o.hosts_down_ever == 10
    np.testing.assert_allclose(o.end_s[hit] - o.start_s[hit], 3 * DAY_S)
    assert (o.start_s[hit] < w.duration_s).all()
    h = int(np.flatnonzero(hit)[0])
    url = int(np.flatnonzero(w.host_of == h)[0])
    start, end = float(o.start_s[h]), float(o.end_s[h])
    assert w.host_down([url, url, url], start).tolist() == [True] * 3
    assert not w.host_down([url], end)[0] and not w.host_down([url], start - 1.0)[0]
    with pytest.raises(ParameterError, match="outage_share"):
        spec.replace(outage_share=1.5)


class RecordingUniform(UniformPolicy):
    """Round robin that keeps the failed crawls it hears of."""

    def __init__(self) -> None:
        super().__init__(seed=0)
        self.failed: list[IntArray] = []

    def observe_failed_crawls(self, url: IntArray, now: float) -> None:
        self.failed.append(url.copy())


def test_a_crawl_of_a_host_that_is_down_fails_and_refreshes_nothing() -> None:
    m, days = 4, 20.0
    params = UrlParams.create(np.full(m, 1 / DAY_S), np.full(m, 1 / DAY_S))
    w = World.from_arrays(
        [f"https://h{i % 2}.example/{i}" for i in range(m)],
        ["h0.example", "h1.example"],
        np.arange(m) % 2,
        params,
        [0.0, 0.0],
        budget_per_s=2 / DAY_S,
        duration_s=days * DAY_S,
        warmup_s=0.0,
        change_times_by_url=[[DAY_S / 2], [DAY_S / 2], [], []],
        outages=HostOutages.of([np.inf, 0.0], [np.inf, 10 * DAY_S]),
    )
    policy = RecordingUniform()
    res = simulate(w, policy)
    failed = np.concatenate(policy.failed)
    assert res.failed_crawls == failed.size > 0
    assert (w.host_of[failed] == 1).all()
    # host 1's URLs are fetched only once it is back (day 10 on)
    on_1 = w.host_of[res.crawl_url] == 1
    assert (res.crawl_time[on_1] >= 10 * DAY_S).all() and on_1.any()
    assert res.report.crawls + res.failed_crawls == res.steps


# --- the web preset ---------------------------------------------------------------------


def test_the_web_preset_loads_by_name_and_prints(capsys: pytest.CaptureFixture[str]) -> None:
    web = preset_spec("web")
    assert load_spec("web") == web == WorldSpec.from_mapping(tomllib.loads(preset_toml("web")))
    assert load_spec(Path("default")) == WorldSpec()
    assert set(PRESETS) == {"default", "web"}
    assert main(["world", "--preset", "web"]) == 0
    assert WorldSpec.from_mapping(tomllib.loads(capsys.readouterr().out)) == web
    assert main(["world", "--preset", "nowhere"]) == 2
    # every field of the spec is set (and so documented) in the preset's file, its
    # signal sources in place of one recall and false-signal rate
    assert set(tomllib.loads(preset_toml("web"))) == set(web.to_mapping())
    assert set(web.to_mapping()) == set(WorldSpec().to_mapping()) - {"recall", "false_signal_rate"}


def test_the_web_preset_is_heavy_tailed_as_docs_worlds_says() -> None:
    w = World.generate(preset_spec("web"))
    p, m = w.params, len(w.urls)
    day = p.change_rate * DAY_S
    # Cho & Garcia-Molina: ~20% of pages change within a day, ~40% within a week
    assert abs(np.mean(-np.expm1(-day)) - 0.2) < 0.04
    assert abs(np.mean(-np.expm1(-7 * day)) - 0.4) < 0.04
    assert day.max() / np.median(day) > 100  # decades apart
    # importance: the top 4% of URLs draw a third or more of the clicks
    top = np.sort(p.weight)[::-1][: m // 25].sum() / p.weight.sum()
    assert top > 0.3
    # 30% of the hosts are slow (a fetch a day, the API's longest crawl delay: the
    # preset runs over HTTP too), the rest fast
    slow = w.crawl_delay_s > 1.0
    assert 0.2 < slow.mean() < 0.4 and (w.crawl_delay_s[slow] == MAX_CRAWL_DELAY_S).all()
    assert MAX_CRAWL_DELAY_S == DAY_S
    # about a tenth of the hosts bind under the host-limited optimum
    problem = problem_of(w, host_limits=True)
    solved = solve_host_optimum(p, w.host_of, problem.host_limit_per_s, w.budget_per_s)
    assert 0.02 <= solved.binding.mean() <= 0.2
    # most URLs have poor signals (precision below 0.2), a few good ones
    good = (p.precision > 0.8) & (p.recall > 0.8)
    assert 0.01 < good.mean() < 0.1 and np.mean(p.precision < 0.2) > 0.8


def test_simulate_runs_the_anchors_from_the_command_line(tmp_path: Path) -> None:
    spec = tmp_path / "small.json"
    spec.write_text('{"urls": 60, "hosts": 6, "duration_days": 20, "budget_per_day": 6}')
    out = tmp_path / "report.json"
    args = ["simulate", "--world", str(spec), "--host-limits", "--json", str(out)]
    for name in ("nutch-adaptive", "stormcrawler-adaptive-tuned", "fixed-interval"):
        args += ["-p", name]
    assert main(args) == 0
    assert out.read_text().count('"policy"') == 3
