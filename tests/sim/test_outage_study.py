"""Host outages under the service: the back-off holds a down host, and the freshness of
the hosts that stay up is measured with and without outages (``crawlsched simulate
--outage-share``)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from scheduler_core.errors import ParameterError
from scheduler_core.sim import Dist, World, WorldSpec
from scheduler_core.sim.evaluate import (
    round_robin_schedule,
    schedule_freshness,
    subset_freshness,
)
from scheduler_core.sim.simulator import problem_of, simulate
from service.cli import main
from service.outage_study import outage_study, with_outages
from service.scheduler.hosts import host_out
from service.simulation import ServicePolicy


def world(**changes: object) -> World:
    spec = WorldSpec(urls=120, hosts=6, duration_days=40, budget_per_day=40.0, seed=7)
    return World.generate(spec.replace(**changes))


def test_subset_freshness_splits_the_clicks() -> None:
    w = world()
    url, time = round_robin_schedule(w)
    whole = schedule_freshness(w, url, time)
    half = np.arange(len(w.urls)) % 3 == 0
    (pa, na, _), (pb, nb, _) = (subset_freshness(w, url, time, m) for m in (half, ~half))
    assert na + nb == whole.clicks
    assert (pa * na + pb * nb) / whole.clicks == pytest.approx(whole.click_weighted, rel=1e-12)
    with pytest.raises(ParameterError, match="url_mask"):
        subset_freshness(w, url, time, half[:-1])


def test_with_outages_keeps_the_events() -> None:
    w = world()
    down = with_outages(w, 0.5, 4.0)
    assert down.outages is not None and down.outages.hosts_down_ever == 3
    assert np.array_equal(down.events().time, w.events().time)
    with pytest.raises(ParameterError, match="outage"):
        outage_study(w)


def test_the_service_backs_a_down_host_off() -> None:
    """A host down for 10 of 40 days: the back-off (60 s doubling to a day) spaces its
    failed fetches out; with a back-off of a millisecond the service keeps fetching it
    at the retry delay, and the budget those fetches cost is lost to the other hosts."""
    w = world(outage_share=1 / 6, outage_days=Dist.of("const", value=10.0))
    runs = [
        simulate(w, ServicePolicy(params="oracle", settings=s), crawls_per_step=2)
        for s in ({}, {"backoff_base_s": 1e-3, "max_block_s": 1e-3})
    ]
    backed_off, barely = runs
    assert 0 < backed_off.failed_crawls < barely.failed_crawls / 3  # measured: 18 and 90
    assert backed_off.accuracy > barely.accuracy


@pytest.mark.slow
def test_outage_study_and_the_command(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    w = world(outage_share=1 / 6, outage_days=Dist.of("const", value=10.0))
    study = outage_study(
        w, seed=7, crawls_per_step=2, signal_discard_s=0.0, rescore_every_s=0.0,
        params="oracle",
    )  # fmt: skip
    assert study.hosts_down == 1 and study.clicks > 0 and study.failed_crawls > 0
    # the hosts that stay up lose little: within 3 standard errors of 1%
    tolerance = 0.01 * study.without_outages + 3 * max(study.stderr_with, study.stderr_without)
    assert study.with_outages >= study.without_outages - tolerance
    # the outage study's world file, scaled down to keep the command's run short
    spec = Path("bench/worlds/outages.toml").read_text()
    for line, scaled in (("urls = 300", "urls = 60"), ("hosts = 30", "hosts = 6"),
                         ("duration_days = 60.0", "duration_days = 20.0"),
                         ("budget_per_day = 60.0", "budget_per_day = 20.0")):  # fmt: skip
        assert line in spec
        spec = spec.replace(line, scaled)
    small = tmp_path / "outages.toml"
    small.write_text(spec)
    main(["simulate", "-p", "crawlsched", "--no-progress", "--world", str(small),
          "--outage-share", "0.2", "--outage-days", "2", "--crawls-per-step", "5"])  # fmt: skip
    assert "Outages: on the hosts that stay up" in capsys.readouterr().out


def test_host_rate_limit_is_the_optimums_per_host_limit() -> None:
    """The rate limit a host shows (1 / crawl delay) is the k_h that the host-constrained
    optimum (scheduler_core.host_optimum) is solved with, for every host of the world,
    less the simulated service's 1 s of slack a crawl delay (``step_delays``), and it
    may have any number of leases out (a step's fetches take no time)."""
    w = world(crawl_delay_s=Dist.of("uniform", low=3_600.0, high=86_400.0))
    problem = problem_of(w, host_limits=True)
    assert (problem.host_limit_per_s < problem.budget_per_s).all()  # every host can bind
    policy = ServicePolicy(params="oracle")
    policy.start(problem)
    ctx = policy.context
    for h, name in enumerate(problem.hosts):
        state = policy._run(ctx.store.get_host(name, 0.0))
        assert state is not None
        view = host_out(state, 0.0)
        delay = 1.0 / problem.host_limit_per_s[h]
        assert 1.0 / view.rate_limit_per_s == pytest.approx(delay - 1.0, rel=1e-12)
        assert view.max_in_flight == 65_535
    policy.finish()
