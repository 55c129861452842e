"""The service's own code path under the simulator, and ``crawlsched simulate``."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

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
