"""Every policy by name: the GREEDY family and the reference policies.

``greedy`` and ``greedy-<model>`` name :class:`~.greedy.GreedyPolicy` with that
value model (``greedy-cis``, ``greedy-ncis``, ``greedy-ncis-approx-2``,
``greedy-cis+``); a T_DELAY > 0 makes any of them discard signals that arrive
within it after a crawl (GREEDY-NCIS-D).  Every other name is looked up in
:data:`~.registry.REFERENCE_POLICIES`.
"""

from __future__ import annotations

from typing import Any

from scheduler_core.policies.base import Policy
from scheduler_core.policies.greedy import GreedyPolicy
from scheduler_core.policies.registry import REFERENCE_POLICIES, make_reference_policy

__all__ = ["GREEDY_NAMES", "POLICY_NAMES", "make_policy"]

#: The GREEDY family's names (``greedy-ncis-approx-J`` works for any J ≥ 1).
GREEDY_NAMES = (
    "greedy",
    "greedy-cis",
    "greedy-ncis",
    "greedy-ncis-approx-1",
    "greedy-ncis-approx-2",
    "greedy-cis+",
)
#: Every name :func:`make_policy` knows.
POLICY_NAMES = GREEDY_NAMES + tuple(sorted(REFERENCE_POLICIES))


def make_policy(
    name: str, *, seed: int = 0, signal_discard_s: float = 0.0, **options: Any
) -> Policy:
    """Build a policy by name.

    Parameters
    ----------
    name : str
        One of :data:`POLICY_NAMES`.
    seed : int
        Seed of the policy's random generator.
    signal_discard_s : float
        T_DELAY for the GREEDY family, s (ignored by policies that use no signals).
    **options
        Passed to a reference policy's constructor.

    Raises
    ------
    ParameterError
        On an unknown name (the message lists the known ones).

    Examples
    --------
    >>> make_policy("greedy-ncis", signal_discard_s=60.0).name
    'greedy-ncis-d'
    """
    if name == "greedy" or name.startswith("greedy-"):
        model = "greedy" if name == "greedy" else name.removeprefix("greedy-")
        return GreedyPolicy(model, signal_discard_s=signal_discard_s, seed=seed)
    return make_reference_policy(name, seed=seed, **options)
