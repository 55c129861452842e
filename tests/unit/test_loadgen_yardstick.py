"""The load generator's yardstick: BASELINE and the optimum under the crawl delays the
service enforces, whenever one binds, and the report saying which is shown."""

from __future__ import annotations

import io
from dataclasses import replace

import pytest
from rich.console import Console

from scheduler_core.host_optimum import solve_host_optimum
from scheduler_core.optimal import baseline, solve_optimum
from scheduler_core.sim import Dist, World, WorldSpec
from scheduler_core.sim.simulator import problem_of
from service.loadgen.report import LoadgenReport
from service.loadgen.yardstick import yardstick


def world(delay_s: float) -> World:
    spec = WorldSpec(
        urls=150, hosts=6, duration_days=10, budget_per_day=40.0, seed=4,
        crawl_delay_s=Dist.of("const", value=delay_s),
    )  # fmt: skip
    return World.generate(spec)


def test_politeness_bound_hosts_lower_the_yardstick() -> None:
    w = world(2 * 3600.0)  # 12 fetches a day per host; the largest host wants more
    y = yardstick(w)
    limits = problem_of(w, host_limits=True).host_limit_per_s
    host_base = solve_host_optimum(w.params, w.host_of, limits, w.budget_per_s, signals=False)
    assert y.host_limited and y.binding_hosts >= int(host_base.binding.sum()) >= 1
    assert y.baseline == host_base.accuracy and y.baseline_lambda0 == host_base.lambda0
    assert y.optimum is not None
    free = baseline(w.params, w.budget_per_s).accuracy
    assert y.baseline < free - 1e-3  # what the demo printed before: the unreachable figure
    assert y.optimum < solve_optimum(w.params, w.budget_per_s).accuracy - 1e-3


def test_without_a_binding_host_the_yardstick_has_no_host_limits() -> None:
    w = world(60.0)
    y = yardstick(w, signal_optimum=False)
    assert not y.host_limited and y.optimum is None
    assert y.baseline == pytest.approx(baseline(w.params, w.budget_per_s).accuracy, rel=1e-12)


REPORT = LoadgenReport(
    freshness=0.48, freshness_stderr=0.01, clicks=1000, freshness_time_weighted=0.47,
    baseline_accuracy=0.4953, round_robin_freshness=0.3, signal_optimum_accuracy=0.5477,
    dispatch_per_s=100.0, events_per_s=1000.0, urls=300, hosts=10, simulated_seconds=86_400.0,
    wall_seconds=5.0, crawls=100, budget_per_s=0.001, crawl_rate_per_s=0.001,
    lambda0_online=1.0, lambda0_baseline=1.09, signals=True, seed=4,
)  # fmt: skip


@pytest.mark.parametrize("limited", [True, False])
def test_the_report_says_which_yardstick_it_shows(limited: bool) -> None:
    report = replace(REPORT, host_limited=limited, binding_hosts=1 if limited else 0)
    out = io.StringIO()
    report.print(Console(file=out, width=150))
    text = out.getvalue()
    assert ("BASELINE (continuous optimum, no signals, host-limited)" in text) == limited
    assert ("are host-limited: 1 host(s) bind" in text) == limited
    assert ("have no host limits" in text) == (not limited)
    assert report.to_json()["host_limited"] is limited
