"""The exact GREEDY policies in the simulator: GREEDY-NCIS against GREEDY, side by side.

    nice -n 10 python bench/greedy.py [--urls 1000] [--steps 100000] [--seed 0]
                                      [-p greedy -p greedy-ncis ...] [--crawls-per-step 1]

The default world (paper 004 §6.1: W ~ U(0, 2)/day, Δ ~ U(0, 1)/day, recall ~
Beta(¼, ¼), ν ~ U(0.1, 0.6) × mean Δ, R = 100/day) made long enough for ``--steps``
decision steps, and each policy run on it in turn, in this process, through the
simulator ``crawlsched simulate`` uses.  Prints, per policy, wall and CPU seconds,
exact evaluations of V per step and batches of them, the freshness reached, and
the CPU the rest of the machine used meanwhile (``/proc``, in cores); then each
policy's time ÷ the first one's.  The target: GREEDY-NCIS within 6 × GREEDY.
"""

from __future__ import annotations

import argparse
import os
import time
from dataclasses import dataclass

from rich.console import Console
from rich.table import Table

from sampling import machine_busy_seconds
from scheduler_core.policies import GreedyPolicy, make_policy
from scheduler_core.sim import World, WorldSpec
from scheduler_core.sim.simulator import simulate


@dataclass(frozen=True)
class Run:
    """One policy's run and what the machine did meanwhile."""

    policy: str
    steps: int
    wall_s: float
    cpu_s: float
    others_cores: float  # CPU of every other process, in cores, averaged over the run
    evaluated: float  # exact evaluations of V per step
    batches: float  # batches of them per step
    freshness: float
    load: tuple[float, float]  # 1-minute load average before and after


def run(world: World, name: str, crawls_per_step: int) -> Run:
    """Run policy ``name`` on ``world`` and meter it."""
    policy = make_policy(name)
    load0 = os.getloadavg()[0]
    busy0, cpu0, wall0 = machine_busy_seconds(), time.process_time(), time.perf_counter()
    result = simulate(world, policy, crawls_per_step=crawls_per_step)
    wall = time.perf_counter() - wall0
    cpu = time.process_time() - cpu0
    others = (machine_busy_seconds() - busy0 - cpu) / wall
    greedy = policy if isinstance(policy, GreedyPolicy) else None
    steps = max(result.steps, 1)
    return Run(
        policy=result.policy,
        steps=result.steps,
        wall_s=wall,
        cpu_s=cpu,
        others_cores=max(others, 0.0),
        evaluated=greedy.evaluated / steps if greedy else float("nan"),
        batches=greedy.batches / steps if greedy else float("nan"),
        freshness=result.accuracy,
        load=(load0, os.getloadavg()[0]),
    )


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--urls", type=int, default=1000)
    ap.add_argument("--steps", type=int, default=100_000)
    ap.add_argument("--budget-per-day", type=float, default=100.0)
    ap.add_argument("--crawls-per-step", type=int, default=1)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("-p", "--policy", action="append", dest="policies")
    args = ap.parse_args()
    names = args.policies or ["greedy", "greedy-ncis"]
    k = args.crawls_per_step
    # R·D = (steps + 1)·k crawls: exactly `steps` steps before the world's end
    days = (args.steps + 1) * k / args.budget_per_day
    spec = WorldSpec(
        urls=args.urls, budget_per_day=args.budget_per_day, duration_days=days, seed=args.seed
    )
    console = Console(width=150)
    console.print(f"drawing {args.urls:,} URLs over {days:,.0f} days (seed {args.seed}) ...")
    world = World.generate(spec)
    runs = []
    for name in names:
        console.print(f"running {name} ...")
        runs.append(run(world, name, k))
    table = Table(
        title=f"exact GREEDY policies, {args.urls:,} URLs, {runs[0].steps:,} steps of "
        f"{k} crawl(s), default world, seed {args.seed}"
    )
    cols = ("policy", "wall s", "CPU s", "÷ first, wall", "÷ first, CPU", "V per step",
            "batches per step", "freshness", "others, cores", "load 1 min")  # fmt: skip
    for col in cols:
        table.add_column(col, justify="left" if col == "policy" else "right")
    first = runs[0]
    for r in runs:
        table.add_row(
            r.policy, f"{r.wall_s:.1f}", f"{r.cpu_s:.1f}", f"{r.wall_s / first.wall_s:.2f}",
            f"{r.cpu_s / first.cpu_s:.2f}", f"{r.evaluated:.2f}", f"{r.batches:.3f}",
            f"{r.freshness:.4f}", f"{r.others_cores:.2f}", f"{r.load[0]:.1f}→{r.load[1]:.1f}",
        )  # fmt: skip
    console.print(table)
    console.print(
        f"machine: {os.cpu_count()} CPUs; 'others' is the CPU every other process used "
        "during the run (/proc/stat), in cores; 'load 1 min' the load average before → after"
    )


if __name__ == "__main__":
    main()
