"""Crawl policies behind one interface (:class:`~scheduler_core.policies.base.Policy`).

The simulator (:mod:`scheduler_core.sim.simulator`) runs any of them against a
simulated world; :func:`make_policy` builds one by name (:data:`POLICY_NAMES`).
"""

from scheduler_core.policies.anchors import (
    FixedIntervalPolicy,
    NutchAdaptivePolicy,
    StormCrawlerAdaptivePolicy,
)
from scheduler_core.policies.base import (
    CrawlHistory,
    Policy,
    Problem,
    check_selection,
    top_k_within_room,
)
from scheduler_core.policies.catalog import GREEDY_NAMES, POLICY_NAMES, make_policy
from scheduler_core.policies.exp3 import Exp3Policy
from scheduler_core.policies.frontier import RefetchPolicy
from scheduler_core.policies.greedy import GreedyPolicy
from scheduler_core.policies.lambdacrawl import LambdaCrawlPolicy
from scheduler_core.policies.lds import LowDiscrepancyPolicy
from scheduler_core.policies.proportional import ProportionalPolicy, UniformPolicy
from scheduler_core.policies.registry import ANCHOR_NAMES, REFERENCE_POLICIES
from scheduler_core.policies.thompson import ThompsonPolicy

__all__ = [
    "ANCHOR_NAMES",
    "GREEDY_NAMES",
    "POLICY_NAMES",
    "REFERENCE_POLICIES",
    "CrawlHistory",
    "Exp3Policy",
    "FixedIntervalPolicy",
    "GreedyPolicy",
    "LambdaCrawlPolicy",
    "LowDiscrepancyPolicy",
    "NutchAdaptivePolicy",
    "Policy",
    "Problem",
    "ProportionalPolicy",
    "RefetchPolicy",
    "StormCrawlerAdaptivePolicy",
    "ThompsonPolicy",
    "UniformPolicy",
    "check_selection",
    "make_policy",
    "top_k_within_room",
]
