"""How each simulated host behaves beyond its pages: whether it enforces its crawl delay
with ``429 Too Many Requests``, and when it is down (``503 Service Unavailable``)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

import numpy as np

from scheduler_core.errors import ParameterError
from scheduler_core.params import FloatArray
from scheduler_core.sim import World

__all__ = ["FarmOptions", "HostPlan", "Outage", "plan_hosts"]

HOUR_S = 3600.0


@dataclass(frozen=True)
class FarmOptions:
    """What the farm adds to a world: strict and flaky hosts, links, jitter tolerance.

    Attributes
    ----------
    strict_share : float
        Share of hosts (drawn) that answer ``429`` with ``Retry-After`` to a page
        request that comes sooner than their crawl delay after the previous one.
    down_share : float
        Share of hosts (drawn) that go down now and then: every page request
        gets ``503`` with ``Retry-After`` (robots.txt and the sitemap stay up).
    down_fraction : float
        Share of the world's time such a host is down, in [0, 1).
    down_mean_s : float
        Mean length of one outage, clock s (exponential).
    links_per_page : int
        Links on each page to other pages (half on its own host, half anywhere).
    tolerance_wall_s : float
        Politeness slack, wall s: a request that comes this much (× the clock
        rate) too early still counts as on time, for the 429s and the audit
        (timestamps carry the server's own scheduling latency).
    seed : int or None
        Seed of these draws; None: the world's seed.

    Raises
    ------
    ParameterError
        If a share lies outside [0, 1], ``down_fraction`` outside [0, 1),
        ``down_mean_s`` is not positive, or a count or tolerance is negative.
    """

    strict_share: float = 0.3
    down_share: float = 0.2
    down_fraction: float = 0.05
    down_mean_s: float = 6 * HOUR_S
    links_per_page: int = 4
    tolerance_wall_s: float = 0.02
    seed: int | None = None

    def __post_init__(self) -> None:
        for name in ("strict_share", "down_share"):
            if not 0.0 <= getattr(self, name) <= 1.0:
                raise ParameterError(f"`{name}` must lie in [0, 1]")
        if not 0.0 <= self.down_fraction < 1.0:
            raise ParameterError("`down_fraction` must lie in [0, 1)")
        if not (np.isfinite(self.down_mean_s) and self.down_mean_s > 0):
            raise ParameterError("`down_mean_s` must be finite and > 0")
        if self.links_per_page < 0 or not self.tolerance_wall_s >= 0:
            raise ParameterError("`links_per_page` and `tolerance_wall_s` must be >= 0")


@dataclass(frozen=True)
class Outage:
    """One host down over [start_s, end_s), world s."""

    start_s: float
    end_s: float


@dataclass(frozen=True, eq=False)
class HostPlan:
    """Per host (H of them): does it enforce its crawl delay, and its outages.

    Attributes
    ----------
    strict : ndarray of bool, shape (H,)
    outages : tuple of tuple of Outage, length H
        Each host's outages, sorted, disjoint.
    """

    strict: np.ndarray
    outages: tuple[tuple[Outage, ...], ...]
    _starts: tuple[FloatArray, ...] = field(init=False, repr=False)

    def __post_init__(self) -> None:
        if self.strict.ndim != 1 or len(self.outages) != self.strict.size:
            raise ParameterError("`strict` and `outages` must have one entry per host")
        starts = tuple(np.array([o.start_s for o in host]) for host in self.outages)
        for host in self.outages:
            if any(o.end_s <= o.start_s for o in host) or any(
                b.start_s < a.end_s for a, b in zip(host, host[1:], strict=False)
            ):
                raise ParameterError("each host's outages must be sorted, disjoint, non-empty")
        object.__setattr__(self, "_starts", starts)

    @classmethod
    def explicit(
        cls,
        hosts: Sequence[str],
        strict: Sequence[str] = (),
        outages: Mapping[str, Sequence[tuple[float, float]]] | None = None,
    ) -> HostPlan:
        """A plan naming its strict hosts and their outages (world s).

        Raises
        ------
        ParameterError
            If a named host is not one of ``hosts``, or outages overlap.
        """
        unknown = (set(strict) | set(outages or {})) - set(hosts)
        if unknown:
            raise ParameterError(f"unknown host(s) {sorted(unknown)}")
        windows = outages or {}
        return cls(
            strict=np.array([h in set(strict) for h in hosts], dtype=bool),
            outages=tuple(
                tuple(Outage(float(a), float(b)) for a, b in windows.get(h, ())) for h in hosts
            ),
        )

    def down_until(self, host: int, t: float) -> float | None:
        """End of the outage host ``host`` is in at world time ``t`` (s), or None."""
        starts = self._starts[host]
        k = int(np.searchsorted(starts, t, side="right")) - 1
        if k >= 0 and t < self.outages[host][k].end_s:
            return self.outages[host][k].end_s
        return None


def plan_hosts(world: World, options: FarmOptions) -> HostPlan:
    """Draw the strict and flaky hosts and the outages of a world.

    Flaky hosts alternate up and down periods, both exponential: down with mean
    ``down_mean_s``, up with mean ``down_mean_s (1 − f)/f`` so that a share f =
    ``down_fraction`` of the time is down; each starts up.
    """
    seed = world.seed if options.seed is None else options.seed
    rng = np.random.default_rng([seed, 0x7A3F])
    h = len(world.hosts)
    strict = rng.random(h) < options.strict_share
    flaky = rng.random(h) < options.down_share
    f, mean_down = options.down_fraction, options.down_mean_s
    outages: list[tuple[Outage, ...]] = []
    for j in range(h):
        windows: list[Outage] = []
        if flaky[j] and f > 0:
            t = float(rng.exponential(mean_down * (1 - f) / f))
            while t < world.duration_s:
                length = float(rng.exponential(mean_down))
                if length > 0:
                    windows.append(Outage(t, t + length))
                t += length + float(rng.exponential(mean_down * (1 - f) / f))
        outages.append(tuple(windows))
    return HostPlan(strict=strict, outages=tuple(outages))
