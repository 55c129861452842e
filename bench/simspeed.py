"""In process: the time ``crawlsched simulate`` spends on the crawlsched policy, ÷ GREEDY's.

Runs what ``crawlsched simulate --world W -p greedy -p crawlsched --params oracle
--crawls-per-step 100`` runs (the same world, policies and simulator calls,
:func:`service.sim_runner.build_policy` → :func:`scheduler_core.sim.simulator.simulate`),
on W = 100,000 URLs on 5,000 hosts, 10,000 crawls a day, 2 days (``--urls``,
``--hosts``, ``--budget``, ``--days`` change it), and prints one row per policy:

- ``run s``: the simulator's wall time of the policy (the ``wall s`` column of
  ``crawlsched simulate``: every step, the freshness of the schedule; not the policy's
  ``start``, which the ``setup s`` column gives: the crawlsched policy registers the
  world's URLs there);
- ``run CPU s``: the CPU this process used meanwhile (all its threads; the figure to
  compare when the machine is busy), and the same two of ``start``;
- ``other processes``: what the rest of the machine used meanwhile (share of one core,
  from ``/proc``); a run with a large figure there is not comparable, repeat it;
- ``rescored``: the URL thresholds crawlsched's rescoring passes recomputed (one
  pass before every step, as ``crawlsched simulate`` runs it);
- the ratios to GREEDY of the run time and CPU, against the target (at most 5×);
- where crawlsched's time goes, by tenth of the run: its online λ₀ at the end of
  each, and the thresholds recomputed and the CPU of its steps (``select``: the
  rescoring pass and the step's leases) in each.

``python bench/simspeed.py [--json out.json]`` (~1 min on 2 quiet cores).
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import numpy as np
from rich.console import Console
from rich.table import Table

from sampling import machine_busy_seconds
from scheduler_core.policies import Policy
from scheduler_core.sim import World, WorldSpec
from scheduler_core.sim.simulator import simulate
from service.sim_runner import build_policy
from service.simulation import ServicePolicy

#: crawlsched's run time at most this many times GREEDY's.
TARGET = 5.0


@dataclass
class Row:
    """One policy's run."""

    policy: str
    run_s: float  # the simulator's wall s (steps and freshness, not start)
    run_cpu_s: float  # this process's CPU meanwhile (all threads)
    setup_s: float  # the policy's start (crawlsched: registering the URLs), wall s
    setup_cpu_s: float  # ... and its CPU
    others: float  # CPU of the rest of the machine over setup and run, share of one core
    accuracy: float
    rescored: float  # crawlsched: URL thresholds its rescoring passes recomputed (else 0)


@dataclass
class Stretch:
    """crawlsched's steps over one tenth of the run."""

    first_day: float  # simulated day of the stretch's first step
    lambda0: float  # online λ₀ at the stretch's end, W·s
    rescored: float  # thresholds its rescoring passes recomputed
    cpu_s: float  # CPU of its steps' select (the rescoring pass and the leases)


#: Stretches the run is split into for the step trace.
STRETCHES = 10


class StepTrace:
    """λ₀, thresholds recomputed and CPU of every step of a :class:`ServicePolicy`
    (its ``select`` wrapped, as :func:`run_policy` wraps ``start``)."""

    def __init__(self, policy: ServicePolicy) -> None:
        self.time_s: list[float] = []
        self.lambda0: list[float] = []
        self.rescored: list[float] = []
        self.cpu_s: list[float] = []
        select = policy.select

        def traced(now: float, k: int, host_room: Any) -> Any:
            registry = policy.context.metrics.registry
            before = registry.get_sample_value("crawlsched_rescored_urls_total") or 0.0
            cpu0 = time.process_time()
            out = select(now, k, host_room)
            self.cpu_s.append(time.process_time() - cpu0)
            after = registry.get_sample_value("crawlsched_rescored_urls_total") or 0.0
            self.rescored.append(after - before)
            self.time_s.append(now)
            self.lambda0.append(policy.current_lambda0()[1] or float("nan"))
            return out

        policy.select = traced  # type: ignore[method-assign]

    def stretches(self) -> list[Stretch]:
        """The steps in :data:`STRETCHES` stretches of (nearly) equal counts."""
        out = []
        for part in np.array_split(np.arange(len(self.time_s)), STRETCHES):
            if part.size:
                out.append(Stretch(
                    self.time_s[part[0]] / 86_400.0, self.lambda0[part[-1]],
                    float(sum(self.rescored[i] for i in part)),
                    float(sum(self.cpu_s[i] for i in part)),
                ))  # fmt: skip
        return out


def run_policy(world: World, policy: Policy, crawls_per_step: int) -> Row:
    """Run ``policy`` on ``world`` and measure it."""
    started: list[float] = []
    start = policy.start

    def timed_start(problem: Any) -> None:
        t0, cpu0 = time.perf_counter(), time.process_time()
        start(problem)
        started[:] = [time.perf_counter() - t0, time.process_time() - cpu0]

    policy.start = timed_start  # type: ignore[method-assign]
    t0, cpu0, all0 = time.perf_counter(), time.process_time(), machine_busy_seconds()
    res = simulate(world, policy, crawls_per_step=crawls_per_step)
    wall = time.perf_counter() - t0
    cpu = time.process_time() - cpu0
    others = (machine_busy_seconds() - all0 - cpu) / wall
    setup_s, setup_cpu = started
    rescored = 0.0
    if isinstance(policy, ServicePolicy):
        registry = policy.context.metrics.registry
        rescored = registry.get_sample_value("crawlsched_rescored_urls_total") or 0.0
    return Row(
        res.policy, res.wall_s, cpu - setup_cpu, setup_s, setup_cpu, max(0.0, others),
        res.accuracy, rescored,
    )  # fmt: skip


def main(argv: Sequence[str] | None = None) -> int:
    """Run GREEDY and crawlsched on the world, print the table, write the JSON."""
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--urls", type=int, default=100_000)
    p.add_argument("--hosts", type=int, default=5_000)
    p.add_argument("--budget", type=float, default=10_000.0, help="crawls per day")
    p.add_argument("--days", type=float, default=2.0)
    p.add_argument("--crawls-per-step", type=int, default=100)
    p.add_argument("--params", choices=("oracle", "learned"), default="oracle")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--json", type=Path, default=None, help="write the figures here")
    a = p.parse_args(argv)
    spec = WorldSpec().replace(
        urls=a.urls, hosts=a.hosts, budget_per_day=a.budget, duration_days=a.days, seed=a.seed
    )
    world = World.generate(spec)
    rows = []
    trace: StepTrace | None = None
    for name in ("greedy", "crawlsched"):
        policy = build_policy(
            name, seed=a.seed, signal_discard_s=0.0, rescore_every_s=0.0, params=a.params
        )
        if isinstance(policy, ServicePolicy):
            trace = StepTrace(policy)
        rows.append(run_policy(world, policy, a.crawls_per_step))
    greedy, ours = rows
    run_ratio, cpu_ratio = ours.run_s / greedy.run_s, ours.run_cpu_s / greedy.run_cpu_s
    table = Table(
        title=f"crawlsched simulate in process: {a.urls:,} URLs on {a.hosts:,} hosts, "
        f"R = {a.budget:g}/day, {a.days:g} days, {a.crawls_per_step} crawls a step, "
        f"--params {a.params}, {os.cpu_count()} cores"
    )
    cols = (
        "policy",
        "freshness",
        "run s",
        "run CPU s",
        "setup s",
        "setup CPU s",
        "other processes",
        "thresholds recomputed",
    )
    for col in cols:
        table.add_column(col, justify="left" if col == "policy" else "right")
    for r in rows:
        table.add_row(
            r.policy, f"{r.accuracy:.4f}", f"{r.run_s:.2f}", f"{r.run_cpu_s:.2f}",
            f"{r.setup_s:.2f}", f"{r.setup_cpu_s:.2f}", f"{r.others:.0%}", f"{r.rescored:,.0f}",
        )  # fmt: skip
    console = Console(width=max(150, Console().width))
    console.print(table)
    verdict = "[green]PASS[/]" if run_ratio <= TARGET else "[red]MISS[/]"
    console.print(
        f"crawlsched ÷ GREEDY: run time {run_ratio:.1f}× (target ≤ {TARGET:g}×: {verdict}), "
        f"run CPU {cpu_ratio:.1f}×"
    )
    stretches = trace.stretches() if trace is not None else []
    if stretches:
        steps = Table(title="crawlsched's steps, by tenth of the run")
        for col in ("from day", "λ₀ at its end", "thresholds recomputed", "CPU s"):
            steps.add_column(col, justify="right")
        for st in stretches:
            steps.add_row(
                f"{st.first_day:.2f}", f"{st.lambda0:.3g}", f"{st.rescored:,.0f}", f"{st.cpu_s:.2f}"
            )
        console.print(steps)
    if a.json is not None:
        out = {
            "world": {k: getattr(spec, k) for k in ("urls", "hosts", "budget_per_day",
                                                   "duration_days", "seed")},
            "crawls_per_step": a.crawls_per_step, "params": a.params,
            "rows": [asdict(r) for r in rows], "run_ratio": run_ratio, "cpu_ratio": cpu_ratio,
            "target": TARGET, "stretches": [asdict(st) for st in stretches],
        }  # fmt: skip
        a.json.write_text(json.dumps(out, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
