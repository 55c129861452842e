"""The reference policies by name.

:data:`REFERENCE_POLICIES` maps each name to a factory ``(seed=..., **options)
-> Policy``; :func:`make_reference_policy` builds one and names the choices
when a name is unknown.

==================  =========================================================
name                policy
==================  =========================================================
``lds``             :class:`~.lds.LowDiscrepancyPolicy` (Azar et al. Alg. 3)
``uniform``         :class:`~.proportional.UniformPolicy` (round robin)
``change-weighted`` :class:`~.proportional.ProportionalPolicy` ``by="change"``
``click-weighted``  :class:`~.proportional.ProportionalPolicy` ``by="click"``
``lambdacrawl``     :class:`~.lambdacrawl.LambdaCrawlPolicy` (Han et al. Table 2)
``exp3``            :class:`~.exp3.Exp3Policy` (Han et al. Algorithm 1)
``thompson``        :class:`~.thompson.ThompsonPolicy` (Avrachenkov et al. §IV-A)
``nutch-adaptive``  :class:`~.anchors.NutchAdaptivePolicy` (Nutch 1.x
                    ``AdaptiveFetchSchedule``, its defaults)
``stormcrawler-     :class:`~.anchors.StormCrawlerAdaptivePolicy`
adaptive``          (StormCrawler ``AdaptiveScheduler``, its defaults)
``fixed-interval``  :class:`~.anchors.FixedIntervalPolicy` (StormCrawler
                    ``DefaultScheduler``, a day)
==================  =========================================================

Each of the last three also runs as ``<name>-tuned``: every URL starts at URLs
÷ budget, the best single fixed interval.
"""

from __future__ import annotations

from collections.abc import Callable
from functools import partial
from typing import Any

from scheduler_core.errors import ParameterError
from scheduler_core.policies.anchors import (
    FixedIntervalPolicy,
    NutchAdaptivePolicy,
    StormCrawlerAdaptivePolicy,
)
from scheduler_core.policies.base import Policy
from scheduler_core.policies.exp3 import Exp3Policy
from scheduler_core.policies.lambdacrawl import LambdaCrawlPolicy
from scheduler_core.policies.lds import LowDiscrepancyPolicy
from scheduler_core.policies.proportional import ProportionalPolicy, UniformPolicy
from scheduler_core.policies.thompson import ThompsonPolicy

__all__ = ["ANCHOR_NAMES", "REFERENCE_POLICIES", "make_reference_policy"]

#: name → factory(seed=..., **options).  The GREEDY family (``greedy.py``) joins here.
REFERENCE_POLICIES: dict[str, Callable[..., Policy]] = {
    "lds": LowDiscrepancyPolicy,
    "uniform": UniformPolicy,
    "change-weighted": partial(ProportionalPolicy, by="change"),
    "click-weighted": partial(ProportionalPolicy, by="click"),
    "lambdacrawl": LambdaCrawlPolicy,
    "exp3": Exp3Policy,
    "thompson": ThompsonPolicy,
    "nutch-adaptive": NutchAdaptivePolicy,
    "nutch-adaptive-tuned": partial(NutchAdaptivePolicy, tuned=True),
    "stormcrawler-adaptive": StormCrawlerAdaptivePolicy,
    "stormcrawler-adaptive-tuned": partial(StormCrawlerAdaptivePolicy, tuned=True),
    "fixed-interval": FixedIntervalPolicy,
    "fixed-interval-tuned": partial(FixedIntervalPolicy, tuned=True),
}

#: The schedulers of open-source crawlers (:mod:`~.anchors`), as shipped and tuned.
ANCHOR_NAMES = tuple(
    f"{name}{variant}"
    for name in ("nutch-adaptive", "stormcrawler-adaptive", "fixed-interval")
    for variant in ("", "-tuned")
)


def make_reference_policy(name: str, *, seed: int = 0, **options: Any) -> Policy:
    """Build the policy registered as ``name`` with ``seed`` and its ``options``.

    Raises
    ------
    ParameterError
        If no policy has that name.

    Examples
    --------
    >>> make_reference_policy("click-weighted", seed=1).name
    'click-weighted'
    """
    try:
        factory = REFERENCE_POLICIES[name]
    except KeyError:
        known = ", ".join(sorted(REFERENCE_POLICIES))
        raise ParameterError(f"unknown policy {name!r}; known: {known}") from None
    return factory(seed=seed, **options)
