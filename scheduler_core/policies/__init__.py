"""Crawl policies behind one interface (:class:`~scheduler_core.policies.base.Policy`).

The simulator (:mod:`scheduler_core.sim.simulator`) runs any of them against a
simulated world; :func:`make_policy` builds one by name (:data:`POLICY_NAMES`).
"""

from scheduler_core.policies.base import (
    CrawlHistory,
    Policy,
    Problem,
    check_selection,
    top_k_within_room,
)
from scheduler_core.policies.catalog import GREEDY_NAMES, POLICY_NAMES, make_policy
from scheduler_core.policies.greedy import GreedyPolicy

__all__ = [
    "GREEDY_NAMES",
    "POLICY_NAMES",
    "CrawlHistory",
    "GreedyPolicy",
    "Policy",
    "Problem",
    "check_selection",
    "make_policy",
    "top_k_within_room",
]
