"""The learner finds each host's signal source through the service's own code path
(:class:`service.simulation.ServicePolicy`, the memory store, the learner's passes):
the evidence that each host is one source, and each host's precision and recall
(``scheduler_core.estimate.source``; docs/model.md, "Learning the parameters")."""

from __future__ import annotations

import math

import numpy as np
import pytest

from scheduler_core.estimate.hierarchy import GroupStats
from scheduler_core.estimate.source import SOURCE_EVIDENCE
from scheduler_core.sim import World, WorldSpec
from scheduler_core.sim.simulator import simulate
from service.scheduler.learning import GLOBAL_KEY, host_key
from service.simulation import ServicePolicy


class Watching(ServicePolicy):
    """The service, keeping its global and host statistics as the run ends."""

    groups: list[GroupStats]

    def finish(self) -> None:
        keys = [GLOBAL_KEY, *(host_key(h) for h in self.problem.hosts)]
        got = self._run(self.context.store.get_groups(keys))
        self.groups = [GroupStats.from_tuple(v) for v in got]
        super().finish()


def learned(quality: str) -> tuple[World, list[GroupStats]]:
    """120 URLs on 6 hosts, 40 days at 40 crawls a day, learned, host limits on."""
    spec = WorldSpec(
        urls=120, hosts=6, duration_days=40, budget_per_day=40.0, seed=7, signal_quality=quality
    )
    world = World.generate(spec)
    policy = Watching()
    simulate(world, policy, crawls_per_step=2, host_limits=True)
    return world, policy.groups


@pytest.mark.slow
def test_the_learner_finds_each_hosts_source_where_hosts_are_sources() -> None:
    """Quality per host: the evidence passes ln 20, and every host's source posterior
    gives its precision and recall to within 0.15 (measured: at most 0.10 and 0.09)."""
    world, groups = learned("per_host")
    assert groups[0].evidence > SOURCE_EVIDENCE and groups[0].sources_shared == 1.0
    p = world.params
    for j, stats in enumerate(groups[1:]):
        c, theta, sd_c, sd_theta = stats.source
        assert theta > 0 and sd_c >= 0 and sd_theta >= 0
        precision = -math.expm1(-theta)
        recall = precision / (c + precision)
        sel = world.host_of == j
        # quality per host: the host's URLs share it
        assert np.ptp(p.precision[sel]) < 1e-12
        assert abs(precision - p.precision[sel][0]) < 0.15, (j, precision)
        assert abs(recall - p.recall[sel][0]) < 0.15, (j, recall)


@pytest.mark.slow
def test_the_evidence_stays_out_where_each_url_has_its_own_quality() -> None:
    """Quality per URL (the paper's world): the evidence is far below ln 20, so no
    URL's priors follow its host's source (measured: −148)."""
    _, groups = learned("per_url")
    assert groups[0].evidence < -SOURCE_EVIDENCE and groups[0].sources_shared == 0.0
