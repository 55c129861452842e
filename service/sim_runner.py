"""``crawlsched simulate``: run policies on one world, side by side with the optimum.

Every policy runs on the same world (same events) through
:func:`scheduler_core.sim.simulator.simulate`; ``crawlsched`` is the service's
own code path (:class:`service.simulation.ServicePolicy`), every other name a
reference policy of :mod:`scheduler_core.policies`.  The report puts each
policy's freshness next to BASELINE (the continuous optimum without signals)
and the continuous optimum with signals, both with the same per-host limits
as the run, and, for ``crawlsched``, the λ₀ and λ_h it tracked online next to
the solver's.
"""

from __future__ import annotations

import json
import math
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
from rich.console import Console
from rich.table import Table

from scheduler_core.errors import ParameterError
from scheduler_core.host_optimum import HostOptimum, solve_host_optimum
from scheduler_core.policies import Policy, make_policy
from scheduler_core.sim import DAY_S, FreshnessReport, World, round_robin_freshness
from scheduler_core.sim.bandwidth import Bandwidth
from scheduler_core.sim.simulator import SimResult, problem_of, simulate
from service.simulation import PARAM_MODES, ServicePolicy

__all__ = ["PolicyRow", "SimulationRecord", "SimulationReport", "build_policy", "run_simulation"]

#: The service's own code path.
SERVICE = "crawlsched"


@dataclass(frozen=True)
class PolicyRow:
    """One policy's run."""

    policy: str
    accuracy: float  # click-weighted freshness (time-weighted without clicks)
    stderr: float  # binomial standard error of the click-weighted figure (nan without clicks)
    time_weighted: float
    crawls: int
    wall_s: float
    lambda0_online: float | None = None  # the service's λ₀ at the end of the run
    lambda0_settled: float | None = None  # ... its geometric mean over the second half


@dataclass
class SimulationReport:
    """Policies on one world, with the optimum for reference."""

    world: dict[str, Any]
    baseline: float  # accuracy of the continuous optimum without signals
    optimum: float | None  # ... with signals (None for a world without signals)
    lambda0: float  # the solver's λ₀ (of the optimum the service's values aim at)
    binding_hosts: int
    rows: list[PolicyRow] = field(default_factory=list)
    host_lambdas: dict[str, dict[str, float]] = field(default_factory=dict)
    solve_s: float = 0.0
    round_robin: float = math.nan  # freshness of crawling in turn at the same budget

    def sentences(self) -> list[str]:
        """What the table means, in words (one sentence per policy)."""
        best = self.optimum if self.optimum is not None else self.baseline
        return [
            f"{r.accuracy:.2f} of clicks found a fresh copy with {r.policy}; the best "
            f"possible with this budget is {best:.2f}; crawling in turn gives "
            f"{self.round_robin:.2f}."
            for r in self.rows
        ]

    def print(self, console: Console) -> None:
        """A rich table: each policy's freshness and its ratio to BASELINE."""
        w = self.world
        table = Table(
            title=(
                f"{w['urls']:,} URLs on {w['hosts']} hosts, {w['duration_days']:g} days, "
                f"R = {w['budget_per_day']:g}/day, signals {'on' if w['signals'] else 'off'}"
            )
        )
        for col in ("policy", "freshness", "± s.e.", "÷ BASELINE", "crawls", "wall s"):
            table.add_column(col, justify="left" if col == "policy" else "right")
        table.add_row("BASELINE (continuous, no signals)", f"{self.baseline:.4f}", "", "1.000")
        if self.optimum is not None:
            ratio = self.optimum / self.baseline
            table.add_row("optimum with signals", f"{self.optimum:.4f}", "", f"{ratio:.3f}")
        for r in self.rows:
            table.add_row(
                r.policy,
                f"{r.accuracy:.4f}",
                "" if math.isnan(r.stderr) else f"{r.stderr:.4f}",
                f"{r.accuracy / self.baseline:.3f}",
                f"{r.crawls:,}",
                f"{r.wall_s:.1f}",
            )
        console.print(table)
        for sentence in self.sentences():
            console.print(sentence)
        for r in self.rows:
            if r.lambda0_online is not None:
                settled = r.lambda0_settled or r.lambda0_online
                console.print(
                    f"λ₀: {r.policy} tracked {r.lambda0_online:.4g} online at the end, "
                    f"{settled:.4g} over the second half; the solver's is {self.lambda0:.4g} "
                    f"(ratio {settled / self.lambda0:.3f}); "
                    f"{self.binding_hosts} host limit(s) bind"
                )

    def write_json(self, path: Path) -> None:
        """The report as JSON."""
        path.write_text(json.dumps(asdict(self), indent=2, default=_jsonable) + "\n")


@dataclass
class SimulationRecord:
    """What a simulation leaves for the HTML report: each policy's run, the optima, and
    λ₀ over time of the service's policies ((simulated s, λ₀) pairs)."""

    results: dict[str, SimResult] = field(default_factory=dict)
    baseline: HostOptimum | None = None
    optimum: HostOptimum | None = None
    lambda0: dict[str, list[tuple[float, float]]] = field(default_factory=dict)


def _jsonable(x: object) -> object:
    if isinstance(x, np.generic):
        return x.item()
    raise TypeError(f"not JSON serialisable: {type(x).__name__}")


def build_policy(
    name: str,
    *,
    seed: int,
    signal_discard_s: float,
    rescore_every_s: float,
    params: str = "learned",
) -> Policy:
    """A policy by name: ``crawlsched`` (the service, its parameters per ``params``),
    ``crawlsched-learned`` / ``crawlsched-oracle`` (either way, whatever ``params``
    says), or a reference policy (which knows the world's parameters).

    Raises
    ------
    ParameterError
        On an unknown name or ``params`` mode.
    """
    modes = {SERVICE: params, **{f"{SERVICE}-{m}": m for m in PARAM_MODES}}
    if name in modes:
        if modes[name] not in PARAM_MODES:
            raise ParameterError(f"`params` must be one of {', '.join(PARAM_MODES)}")
        policy = ServicePolicy(
            seed=seed,
            rescore_every_s=rescore_every_s,
            settings={"signal_discard_s": signal_discard_s},
            params=modes[name],
        )
        policy.name = name
        return policy
    return make_policy(name, seed=seed, signal_discard_s=signal_discard_s)


def _observer(
    policy: Policy,
    world: World,
    progress: Callable[[str, float], None] | None,
    record: SimulationRecord | None,
) -> Callable[[float], None] | None:
    """What :func:`simulate` calls now and then: report progress, and sample the service's
    λ₀ for the record."""
    samples: list[tuple[float, float]] | None = None
    if record is not None and isinstance(policy, ServicePolicy):
        samples = record.lambda0.setdefault(policy.name, [])
    if progress is None and samples is None:
        return None

    def observe(share: float) -> None:
        if progress is not None:
            progress(policy.name, share)
        if samples is not None and isinstance(policy, ServicePolicy) and share < 1.0:
            t, lambda0 = policy.current_lambda0()
            if lambda0 is not None:
                samples.append((t, lambda0))

    return observe


def _accuracy(report: FreshnessReport) -> float:
    """Click-weighted freshness, or the time-weighted one for a world without clicks."""
    cw = report.click_weighted
    return report.time_weighted if math.isnan(cw) else cw


def _optimum(world: World, host_limits: bool, signals: bool) -> HostOptimum:
    problem = problem_of(world, host_limits=host_limits)
    return solve_host_optimum(
        world.params, world.host_of, problem.host_limit_per_s, world.budget_per_s, signals=signals
    )


def run_simulation(
    world: World,
    policies: list[str],
    *,
    seed: int = 0,
    crawls_per_step: int = 1,
    host_limits: bool = False,
    bandwidth: Bandwidth | None = None,
    signal_discard_s: float = 0.0,
    rescore_every_s: float = 0.0,
    params: str = "learned",
    log: Any = None,
    progress: Callable[[str, float], None] | None = None,
    record: SimulationRecord | None = None,
) -> SimulationReport:
    """Run ``policies`` (names) on ``world`` and compare them with the optimum.

    ``progress``, if given, is called now and then with a policy's name and the share
    of its run done; ``record``, if given, is filled for the HTML report.

    Raises
    ------
    ParameterError
        On an unknown policy name or a bad simulation setting.
    """
    built = [
        build_policy(
            name,
            seed=seed,
            signal_discard_s=signal_discard_s,
            rescore_every_s=rescore_every_s,
            params=params,
        )
        for name in policies
    ]
    started = time.perf_counter()
    base = _optimum(world, host_limits, signals=False)
    has_signals = bool((world.params.signal_rate > 0).any())
    best = _optimum(world, host_limits, signals=True) if has_signals else base
    spec = world.spec
    report = SimulationReport(
        world={
            "urls": len(world.urls),
            "hosts": len(world.hosts),
            "duration_days": world.duration_s / DAY_S,
            "budget_per_day": world.budget_per_s * DAY_S,
            "signals": has_signals,
            "seed": world.seed,
            "crawls_per_step": crawls_per_step,
            "host_limits": host_limits,
            "spec": None if spec is None else spec.to_mapping(),
        },
        baseline=base.accuracy,
        optimum=best.accuracy if has_signals else None,
        lambda0=best.lambda0,
        binding_hosts=int(best.binding.sum()),
        solve_s=time.perf_counter() - started,
        round_robin=_accuracy(round_robin_freshness(world)),
    )
    if record is not None:
        record.baseline, record.optimum = base, best
    for policy in built:
        if log is not None and progress is None:
            log(f"running {policy.name} ...")
        res = simulate(
            world,
            policy,
            crawls_per_step=crawls_per_step,
            bandwidth=bandwidth,
            host_limits=host_limits,
            progress=_observer(policy, world, progress, record),
        )
        if record is not None:
            record.results[res.policy] = res
        online = policy.lambda0 if isinstance(policy, ServicePolicy) else None
        settled = policy.lambda0_settled if isinstance(policy, ServicePolicy) else None
        report.rows.append(
            PolicyRow(
                policy=res.policy,
                accuracy=res.accuracy,
                stderr=res.report.click_stderr,
                time_weighted=res.report.time_weighted,
                crawls=res.report.crawls,
                wall_s=res.wall_s,
                lambda0_online=online,
                lambda0_settled=settled,
            )
        )
        if isinstance(policy, ServicePolicy):
            bound = np.flatnonzero(best.binding)
            report.host_lambdas = {
                world.hosts[h]: {
                    "online": float(policy.host_lambdas[h]),
                    "solver": float(best.host_lambdas[h]),
                }
                for h in bound.tolist()
            }
    return report
