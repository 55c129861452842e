"""What the load generator scores the service against: BASELINE and the optimum with
signals, under the same politeness the service enforces.

The service holds every host to its crawl delay (k_h = 1 / crawl delay), so the
yardstick is the continuous optimum under those limits
(:func:`~scheduler_core.host_optimum.solve_host_optimum`).  When no host's limit
binds it equals the optimum without host limits; when some bind it is lower, and
the report says so.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from scheduler_core.host_optimum import HostOptimum, solve_host_optimum
from scheduler_core.sim import World
from scheduler_core.sim.simulator import problem_of

__all__ = ["Yardstick", "yardstick"]


@dataclass(frozen=True)
class Yardstick:
    """BASELINE and the optimum with signals under the world's crawl delays.

    Attributes
    ----------
    baseline : float
        Click-weighted freshness of the continuous optimum without signals.
    baseline_lambda0 : float
        Its λ₀ (W·s).
    optimum : float or None
        ... and with signals (None when not asked for or the world has none).
    binding_hosts : int
        Hosts whose crawl delay binds in either optimum; 0 when the limits change
        nothing (the figures are then those without host limits).
    baseline_solution, optimum_solution : HostOptimum or None
        The solved optima themselves (their rates, per URL, for the report's plots).
    """

    baseline: float
    baseline_lambda0: float
    optimum: float | None
    binding_hosts: int
    baseline_solution: HostOptimum | None = None
    optimum_solution: HostOptimum | None = None

    @property
    def host_limited(self) -> bool:
        """Some host's crawl delay binds: the figures are the host-limited optimum's."""
        return self.binding_hosts > 0


def yardstick(world: World, *, signal_optimum: bool = True) -> Yardstick:
    """BASELINE (and, if ``signal_optimum``, the optimum with signals) of ``world`` under
    k_h = 1 / crawl delay of each host, as the service enforces it.

    References
    ----------
    ``MATH.md``, "The continuous optimum (BASELINE)" (Σ_{i∈h} ξ_i ≤ k_h).
    """
    limits = problem_of(world, host_limits=True).host_limit_per_s
    base = solve_host_optimum(
        world.params, world.host_of, limits, world.budget_per_s, signals=False
    )
    binding = base.binding
    best = None
    if signal_optimum and bool(np.any(world.params.signal_rate > 0)):
        best = solve_host_optimum(world.params, world.host_of, limits, world.budget_per_s)
        binding = binding | best.binding
    return Yardstick(
        baseline=base.accuracy,
        baseline_lambda0=base.lambda0,
        optimum=None if best is None else best.accuracy,
        binding_hosts=int(binding.sum()),
        baseline_solution=base,
        optimum_solution=best,
    )
