"""The service's own code path under the simulator, and ``crawlsched simulate``."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from scheduler_core.errors import ParameterError
from scheduler_core.host_optimum import solve_host_optimum
from scheduler_core.sim import Dist, World, WorldSpec, round_robin_freshness
from scheduler_core.sim.simulator import problem_of, simulate
from service.cli import main
from service.simulation import ServicePolicy


def world(**changes: object) -> World:
    spec = WorldSpec(urls=120, hosts=6, duration_days=40, budget_per_day=40.0, seed=7)
    return World.generate(spec.replace(**changes))


def test_the_service_crawls_at_the_budget_and_beats_round_robin() -> None:
    w = world(signals=False)
    policy = ServicePolicy(params="oracle")
    result = simulate(w, policy, crawls_per_step=2)
    assert result.report.crawls == 2 * result.steps  # dispatch-ahead: never short
    rr = round_robin_freshness(w)
    assert result.accuracy > rr.click_weighted + 3 * rr.click_stderr
    assert policy.lambda0 is not None and policy.lambda0 > 0
    # the parameters it held at the end: the registered truth, in the world's order
    assert policy.final_params is not None
    np.testing.assert_allclose(policy.final_params.weight, w.params.weight, rtol=1e-12)
    np.testing.assert_allclose(policy.final_params.change_rate, w.params.change_rate, rtol=1e-12)


def test_a_world_stricter_than_the_api_is_refused_naming_the_field() -> None:
    """The service in process takes what its API takes: a host allowing fewer fetches
    than one a day (the longest crawl delay accepted) is refused, as over HTTP."""
    w = world(crawl_delay_s=Dist.of("const", value=2 * 86_400.0), duration_days=5)
    with pytest.raises(ParameterError, match="crawl_delay_s"):
        simulate(w, ServicePolicy(), host_limits=True)
    # at the longest delay accepted, it runs
    w = world(crawl_delay_s=Dist.of("const", value=86_400.0), duration_days=5)
    assert simulate(w, ServicePolicy(), host_limits=True).report.crawls > 0


def test_hosts_without_a_limit_are_never_taken_as_held_back_by_politeness() -> None:
    """Steps of more crawls than hosts lease several URLs of a host in one step; without
    host limits none of them was held back by politeness, so no λ_h rises."""
    w = world(signals=False, duration_days=10)
    policy = ServicePolicy(params="oracle")
    simulate(w, policy, crawls_per_step=12)
    assert policy.lambda0 is not None and policy.lambda0 > 0
    assert policy.host_lambdas.tolist() == [0.0] * len(w.hosts)


def test_hosts_whose_limit_cannot_bind_a_step_are_scheduled_as_without_one() -> None:
    """A host allowing a fetch a second, under a budget of 60 a day, earns more than a
    step's crawls between two steps: the simulator's token bucket never holds it back,
    so the service's decisions are those without host limits, several URLs of a host
    in one step included (one lease per call, any number in flight)."""
    w = world(crawl_delay_s=Dist.of("const", value=1.0), budget_per_day=60.0, duration_days=10)
    limited = simulate(w, ServicePolicy(params="oracle"), crawls_per_step=12, host_limits=True)
    free = simulate(w, ServicePolicy(params="oracle"), crawls_per_step=12)
    np.testing.assert_array_equal(limited.crawl_url, free.crawl_url)
    np.testing.assert_array_equal(limited.crawl_time, free.crawl_time)
    step = limited.crawl_time == limited.crawl_time[-1]
    hosts = w.host_of[limited.crawl_url[step]]
    assert np.bincount(hosts).max() > 1  # a host gave several URLs in one step


def test_a_host_at_its_limit_is_crawled_once_per_crawl_delay_exactly() -> None:
    """Half the hosts allow a fetch a day, the others one a second, under a budget of 40
    a day in steps of 5 crawls (an eighth of a day): the one-a-day hosts have a URL due
    whenever their gate opens, and each is crawled at the step one crawl delay after its
    last, although its lease of a step may go out after other hosts' (the simulator's
    token bucket gives the same)."""
    delay = 86_400.0
    mix = {"kind": "mixture", "parts": [
        {"weight": 0.5, "kind": "const", "value": 1.0},
        {"weight": 0.5, "kind": "const", "value": delay},
    ]}  # fmt: skip
    w = world(
        urls=40, hosts=4, crawl_delay_s=Dist.from_mapping(mix), budget_per_day=40.0,
        duration_days=20, signals=False, seed=9,
    )  # fmt: skip
    result = simulate(w, ServicePolicy(params="oracle"), crawls_per_step=5, host_limits=True)
    hosts = w.host_of[result.crawl_url]
    daily = np.flatnonzero(w.crawl_delay_s == delay)
    assert daily.size
    for h in daily:
        gaps = np.diff(result.crawl_time[hosts == h])
        assert gaps.size == 19
        np.testing.assert_allclose(gaps, delay, rtol=0, atol=1e-6)


@pytest.mark.slow
@pytest.mark.parametrize(("quality", "seed"), [("per_url", 1), ("per_host", 0)])
def test_the_online_lambda0_settles_within_ten_percent_of_the_solvers(
    quality: str, seed: int
) -> None:
    """Over the second half of a run, the geometric mean of the online λ₀ lies within
    10% of the offline solver's (the service's acceptance figure), on the default world
    as ``bench/anchors.py`` scales it (200 URLs on 10 hosts, 20 crawls a day, 200 days,
    5 crawls a step, host limits on), with the true parameters.  The run is
    deterministic (seeded world, deterministic service); the 10% covers the estimate's
    own wobble, an exponential window of 64 dispatches whose log values spread by about
    one log unit: over the second half's 2,000 dispatches (~30 windows) its standard
    error is ≈ 1 / sqrt(2·64·30) ≈ 2%."""
    spec = WorldSpec(
        urls=200, hosts=10, budget_per_day=20.0, duration_days=200, seed=seed,
        signal_quality=quality,
    )  # fmt: skip
    w = World.generate(spec)
    policy = ServicePolicy(params="oracle")
    simulate(w, policy, crawls_per_step=5, host_limits=True)
    opt = solve_host_optimum(
        w.params, w.host_of, problem_of(w, host_limits=True).host_limit_per_s, w.budget_per_s
    )
    assert policy.lambda0_settled is not None
    assert policy.lambda0_settled == pytest.approx(opt.lambda0, rel=0.10)


@pytest.mark.slow
def test_learned_parameters_crawl_at_the_budget_and_learn_from_the_world() -> None:
    """Registered bare, the service estimates W from clicks and Δ from outcomes."""
    w = world(signals=False)
    policy = ServicePolicy(params="learned")
    captured = {}
    finish = policy.finish

    def capture() -> None:
        captured["states"] = policy._run(policy.context.store.get_urls(policy._names))
        finish()

    policy.finish = capture  # type: ignore[method-assign]
    result = simulate(w, policy, crawls_per_step=2)
    assert result.report.crawls == 2 * result.steps
    states = captured["states"]
    est_w = np.array([s.weight for s in states])
    # W is learned from ~40 days of clicks: across URLs it tracks the truth
    assert np.corrcoef(est_w, w.params.weight)[0, 1] > 0.8
    outcomes = np.array([len(s.observations.outcomes) for s in states])
    assert outcomes.sum() > 0.9 * result.report.crawls - len(states)


@pytest.mark.slow
def test_the_services_politeness_holds_under_the_simulator() -> None:
    delay = 6 * 3600.0
    w = world(crawl_delay_s=Dist.of("const", value=delay), budget_per_day=60.0, signals=False)
    policy = ServicePolicy()
    result = simulate(w, policy, host_limits=True, crawls_per_step=3)
    hosts = w.host_of[result.crawl_url]
    for h in range(len(w.hosts)):
        gaps = np.diff(result.crawl_time[hosts == h])
        # one crawl per delay; crawls of one step share its time stamp, so allow
        # at most one crawl per host and step.
        assert (gaps > 0).all()
        assert gaps.min() >= delay - 1e-6 or gaps.size == 0
    opt = solve_host_optimum(
        w.params, w.host_of, problem_of(w, host_limits=True).host_limit_per_s, w.budget_per_s
    )
    assert opt.binding.any()
    bound = np.flatnonzero(opt.binding)
    assert (policy.host_lambdas[bound] > 0).all()  # the service saw those hosts bind too


@pytest.mark.slow
def test_signals_reach_the_service() -> None:
    w = world()
    policy = ServicePolicy(settings={"signal_discard_s": 60.0})
    simulate(w, policy, crawls_per_step=4)
    assert policy.context.settings.signal_discard_s == 60.0
    accepted = policy.context.metrics.events.labels("signal", "accepted")._value.get()
    assert accepted > 0


@pytest.mark.slow
def test_simulate_command_writes_its_report(tmp_path: Path) -> None:
    spec = tmp_path / "world.json"
    spec.write_text(
        json.dumps({"urls": 80, "hosts": 4, "duration_days": 20, "budget_per_day": 30.0})
    )
    out = tmp_path / "report.json"
    code = main(
        [
            "simulate", "--world", str(spec), "--seed", "3", "-p", "crawlsched", "-p", "greedy",
            "-p", "uniform", "--crawls-per-step", "2", "--json", str(out),
        ]
    )  # fmt: skip
    assert code == 0
    report = json.loads(out.read_text())
    assert [r["policy"] for r in report["rows"]] == ["crawlsched", "greedy", "uniform"]
    assert report["world"]["seed"] == 3 and report["world"]["urls"] == 80
    assert 0 < report["baseline"] < 1 and 0 < report["optimum"] < 1
    rows = {r["policy"]: r for r in report["rows"]}
    assert rows["crawlsched"]["lambda0_online"] > 0
    assert rows["greedy"]["accuracy"] > rows["uniform"]["accuracy"]


def test_simulate_replays_a_recorded_trace_as_the_world_it_came_from(tmp_path: Path) -> None:
    """``--trace-out`` records the drawn world; ``--trace-in`` replays it: every figure
    of deterministic policies (and of the optimum) is the same."""
    spec = tmp_path / "world.json"
    spec.write_text(json.dumps({"urls": 70, "hosts": 5, "duration_days": 15, "budget_per_day": 25}))
    trace, drawn, replayed = tmp_path / "t.jsonl", tmp_path / "a.json", tmp_path / "b.json"
    policies = ["-p", "greedy", "-p", "greedy-ncis", "-p", "uniform", "--host-limits"]
    code = main(["simulate", "--world", str(spec), "--seed", "5", *policies,
                 "--trace-out", str(trace), "--json", str(drawn)])  # fmt: skip
    assert code == 0 and trace.stat().st_size > 0
    assert main(["simulate", "--trace-in", str(trace), *policies, "--json", str(replayed)]) == 0
    a, b = json.loads(drawn.read_text()), json.loads(replayed.read_text())
    assert b["world"]["spec"] is None and a["world"]["spec"] is not None
    for key in ("urls", "hosts", "duration_days", "budget_per_day", "signals", "seed"):
        assert a["world"][key] == b["world"][key]
    for key in ("baseline", "optimum", "lambda0", "binding_hosts"):
        assert a[key] == b[key]
    strip = ("wall_s",)
    rows_a = [{k: v for k, v in r.items() if k not in strip} for r in a["rows"]]
    rows_b = [{k: v for k, v in r.items() if k not in strip} for r in b["rows"]]
    assert rows_a == rows_b
    assert [r["policy"] for r in rows_a] == ["greedy", "greedy-ncis", "uniform"]


def test_simulate_runs_every_policy_on_a_trace(tmp_path: Path) -> None:
    from scheduler_core.policies import POLICY_NAMES
    from service.loadgen.worldfile import write_trace

    trace = tmp_path / "t.jsonl"
    write_trace(world(urls=40, hosts=3, duration_days=8, budget_per_day=10.0), trace)
    out = tmp_path / "r.json"
    names = ["crawlsched", *POLICY_NAMES]
    args = [x for name in names for x in ("-p", name)]
    assert main(["simulate", "--trace-in", str(trace), *args, "--json", str(out)]) == 0
    rows = json.loads(out.read_text())["rows"]
    assert [r["policy"] for r in rows] == names
    assert all(r["crawls"] > 0 for r in rows)


def test_a_trace_excludes_the_options_that_draw_a_world(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    trace = tmp_path / "t.jsonl"
    from service.loadgen.worldfile import write_trace

    write_trace(world(urls=10, hosts=2, duration_days=2), trace)
    code = main(["simulate", "--trace-in", str(trace), "--seed", "1", "-p", "greedy"])
    assert code == 2
    assert "--trace-in" in capsys.readouterr().err


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["-p", "nope"], "unknown policy"),
        (["--bandwidth", "1:100"], "bandwidth"),
        (["--crawls-per-step", "0"], "crawls-per-step"),
    ],
)
def test_simulate_command_rejects_bad_options(
    args: list[str], message: str, capsys: pytest.CaptureFixture[str]
) -> None:
    code = main(["simulate", *args])
    assert code == 2
    assert message in capsys.readouterr().err


def test_bandwidth_option_is_days_and_crawls_per_day(tmp_path: Path) -> None:
    out = tmp_path / "r.json"
    spec = tmp_path / "w.json"
    spec.write_text(json.dumps({"urls": 50, "hosts": 2, "duration_days": 10}))
    code = main(
        [
            "simulate",
            "--world",
            str(spec),
            "-p",
            "greedy",
            "--bandwidth",
            "0:20,5:40",
            "--json",
            str(out),
        ]
    )
    assert code == 0
    crawls = json.loads(out.read_text())["rows"][0]["crawls"]
    assert crawls == pytest.approx(5 * 20 + 5 * 40, abs=2)


def test_the_service_settles_failed_crawls_of_hosts_that_are_down() -> None:
    """Crawls of a host that is down fail; the service gets them as network errors
    (status 0), keeps its old copy and goes on crawling at the budget."""
    w = world(signals=False, outage_share=0.5, outage_days=Dist.of("const", value=10.0))
    policy = ServicePolicy(params="oracle")
    result = simulate(w, policy, crawls_per_step=2)
    assert result.failed_crawls > 0
    assert result.report.crawls + result.failed_crawls == 2 * result.steps
    assert w.outages is not None
    down = w.outages.down(w.host_of[result.crawl_url], result.crawl_time)
    assert not down.any()  # no crawl in the schedule came from a host that was down
