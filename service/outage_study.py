"""Blocked time is not budget lost: crawlsched's freshness on the hosts that stay up, in
a world where some hosts go down for a while (they answer no fetch; the service backs
them off) and in the same world without outages (docs/operations.md, "Frontier
controls"; docs/worlds.md, "Host outages")."""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import numpy as np

from scheduler_core.errors import ParameterError
from scheduler_core.sim import World
from scheduler_core.sim.dist import Dist
from scheduler_core.sim.evaluate import subset_freshness
from scheduler_core.sim.simulator import simulate
from service.sim_runner import build_policy

__all__ = ["OutageStudy", "outage_study", "with_outages"]


def with_outages(world: World, share: float | None, days: float | None) -> World:
    """``world`` drawn again from its spec with ``share`` of its hosts down for ``days``
    (None: as the spec says); the events are the same (outages are drawn after them).

    Raises
    ------
    ParameterError
        If ``world`` was not drawn from a spec (a recorded trace).
    """
    if world.spec is None:
        raise ParameterError("outages need a world drawn from a spec, not a trace")
    changes: dict[str, Any] = {}
    if share is not None:
        changes["outage_share"] = share
    if days is not None:
        changes["outage_days"] = Dist.of("const", value=days)
    return World.generate(world.spec.replace(**changes))


@dataclass(frozen=True, slots=True)
class OutageStudy:
    """crawlsched's click-weighted freshness on the URLs of the hosts that stay up.

    Attributes
    ----------
    hosts_down : int
        Hosts with an outage.
    with_outages, without_outages : float
        Freshness of those URLs' clicks in the world with outages and without.
    stderr_with, stderr_without : float
        Their binomial standard errors.
    clicks : int
        Clicks on those URLs after the warm-up (the same in both worlds).
    failed_crawls : int
        Fetches that found their host down (with outages).
    """

    hosts_down: int
    with_outages: float
    without_outages: float
    stderr_with: float
    stderr_without: float
    clicks: int
    failed_crawls: int

    @property
    def change(self) -> float:
        """Relative change of the freshness on the hosts that stay up (−0.01: 1% lower)."""
        return self.with_outages / self.without_outages - 1.0

    def sentence(self) -> str:
        return (
            f"on the hosts that stay up, crawlsched kept {self.with_outages:.4f} of clicks "
            f"fresh with {self.hosts_down} hosts down for a while and {self.without_outages:.4f} "
            f"without outages ({100 * self.change:+.2f}%; standard errors "
            f"{self.stderr_with:.4f}, {self.stderr_without:.4f}; {self.failed_crawls} fetches "
            "found their host down)"
        )


def outage_study(world: World, **options: Any) -> OutageStudy:
    """Run crawlsched on ``world`` (which has outages) and on the same world without
    them (the same events: outages are drawn after them), and compare the freshness of
    the clicks on the URLs of the hosts that never go down.  ``options`` go to
    :func:`~scheduler_core.sim.simulator.simulate` (``crawls_per_step``,
    ``host_limits``, ``bandwidth``) and to the policy (``params``, ``seed``, ...).

    Raises
    ------
    ParameterError
        If ``world`` was not drawn from a spec or has no outage.
    """
    spec = world.spec
    if spec is None or world.outages is None or world.outages.hosts_down_ever == 0:
        raise ParameterError("the outage study needs a world drawn with `outage_share` > 0")
    calm = World.generate(spec.replace(outage_share=0.0))
    down = world.outages.end_s > world.outages.start_s
    up_urls = ~down[world.host_of]
    sim_keys = {"crawls_per_step", "host_limits", "bandwidth"}
    sim_opts = {k: v for k, v in options.items() if k in sim_keys}
    pol_opts = {k: v for k, v in options.items() if k not in sim_keys}
    out = []
    failed = 0
    for w in (world, calm):
        res = simulate(w, build_policy("crawlsched", **pol_opts), **sim_opts)
        out.append(subset_freshness(w, res.crawl_url, res.crawl_time, up_urls))
        failed = failed or res.failed_crawls
    (p1, n1, e1), (p0, _, e0) = out
    if math.isnan(p0):
        raise ParameterError("no click on the hosts that stay up after the warm-up")
    return OutageStudy(int(np.count_nonzero(down)), p1, p0, e1, e0, n1, failed)
