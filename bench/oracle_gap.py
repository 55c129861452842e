"""Where crawlsched stands against the optimum, per seed, with the true parameters or learned ones.

    python bench/oracle_gap.py [--world "web per_url"] [--urls 200] [--seeds 0 1 2 3 4]
                               [--params oracle|learned] [--fixed]

Runs ``crawlsched-oracle`` (the service's own code path, the world's true parameters
registered as fixed; 5 crawls a step, host limits on), or with ``--params learned``
``crawlsched-learned`` (everything learned), on one of ``anchors.py``'s worlds,
scaled as there, and solves the host-limited optimum with signals
(``scheduler_core.host_optimum``).  Prints per seed: the optimum's and the run's
click-weighted freshness and their ratio; the online λ₀ (geometric mean over the
second half) ÷ the solver's, and ÷ the solver's on the parameters the service held
at the end of the run (the learned ones; the truth for the oracle); crawls after the
warm-up of the hosts that bind under the optimum against the optimum's (rate ×
span), and the freshness of their clicks against the optimum's freshness of their
URLs; and the crawls of the page with the most clicks against the optimum's.  One
run takes ~10 s at 200 URLs, ~1–2 min at 1,000 (learned: ~1 min at 200 URLs).

``--fixed``: the same with the solver's multipliers (on the true parameters) fixed in
the service (every host's threshold λ₀ + λ_h is the solver's instead of the online
estimate: the memory store's ``_lambda_of`` is wrapped, as ``learning_gap.py`` wraps
the learner), what the run would give if the online tracking hit the solver's
multipliers exactly; the λ₀ columns are then the online estimate run beside, unused.
With ``--params learned`` it asks whether the true-parameter multipliers serve a
service whose values are its learned ones better than its own tracking does.
"""

from __future__ import annotations

import argparse
import math
from collections.abc import Callable
from typing import Any

import numpy as np
from rich.console import Console
from rich.table import Table

from anchors import WORLDS, world_spec
from scheduler_core.host_optimum import solve_host_optimum
from scheduler_core.sim import World
from scheduler_core.sim.evaluate import subset_freshness
from scheduler_core.sim.simulator import problem_of, simulate
from service.sim_runner import build_policy
from service.simulation import ServicePolicy
from service.store import memory_base


def fixed_multipliers(lambdas: dict[str, float]) -> Callable[[Any, Any], float]:
    """A stand-in for the memory store's ``_lambda_of``: host name → λ₀ + λ_h."""

    def lambda_of(store: Any, host: Any) -> float:
        return lambdas[host.name]

    return lambda_of


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--world", default="web per_url", choices=list(WORLDS))
    ap.add_argument("--urls", type=int, default=200)
    ap.add_argument("--days", type=float, default=200.0)
    ap.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2, 3, 4])
    ap.add_argument(
        "--params", choices=("oracle", "learned"), default="oracle",
        help="the world's true parameters, fixed, or everything learned",
    )  # fmt: skip
    ap.add_argument("--fixed", action="store_true", help="the solver's multipliers, fixed")
    args = ap.parse_args()
    how = "the solver's multipliers fixed" if args.fixed else "multipliers tracked online"
    name = f"crawlsched-{args.params}"
    t = Table(title=f"{name} against the optimum: {args.world}, {args.urls:,} URLs, {how}")
    for col in (
        "seed", "optimum", args.params, "÷ optimum", "λ₀ ÷ solver's", "λ₀ ÷ solver's, own",
        "binding hosts",
        "their crawls (optimum)", "their freshness (optimum)", "top page: clicks, crawls (optimum)",
    ):  # fmt: skip
        t.add_column(col, justify="right")
    ratios = []
    for seed in args.seeds:
        world = World.generate(world_spec(args.world, args.urls, args.days, seed))
        limits = problem_of(world, host_limits=True).host_limit_per_s
        opt = solve_host_optimum(
            world.params, world.host_of, limits, world.budget_per_s, signals=True
        )
        policy = build_policy(name, seed=seed, signal_discard_s=0.0, rescore_every_s=0.0)
        assert isinstance(policy, ServicePolicy)
        tracked = memory_base.MemoryBase._lambda_of
        if args.fixed:
            lambdas = {h: opt.lambda0 + opt.host_lambdas[j] for j, h in enumerate(world.hosts)}
            memory_base.MemoryBase._lambda_of = fixed_multipliers(lambdas)  # type: ignore[method-assign]
        try:
            res = simulate(world, policy, crawls_per_step=5, host_limits=True)
        finally:
            memory_base.MemoryBase._lambda_of = tracked  # type: ignore[method-assign]
        warm = world.spec.warmup_fraction * world.duration_s
        span = world.duration_s - warm
        counts = np.bincount(res.crawl_url[res.crawl_time >= warm], minlength=len(world.urls))
        bound = opt.binding[world.host_of]
        share = world.params.weight / world.params.weight.sum()
        top = int(np.argmax(share))
        if bound.any():
            fresh = subset_freshness(world, res.crawl_url, res.crawl_time, bound)[0]
            opt_fresh = float((share * opt.freshness)[bound].sum() / share[bound].sum())
            crawls = f"{counts[bound].sum():,} ({opt.rates[bound].sum() * span:,.0f})"
            freshness = f"{fresh:.4f} ({opt_fresh:.4f})"
        else:
            crawls = freshness = "—"
        settled = policy.lambda0_settled or float("nan")
        own = opt.lambda0  # the oracle holds the truth, which the solver just saw
        if args.params == "learned":  # the solver on the parameters it held at the end
            held = policy.final_params
            own = math.nan
            if held is not None:
                own = solve_host_optimum(
                    held, world.host_of, limits, world.budget_per_s, signals=True
                ).lambda0
        ratios.append(res.accuracy / opt.accuracy)
        t.add_row(
            str(seed),
            f"{opt.accuracy:.4f}",
            f"{res.accuracy:.4f}",
            f"{ratios[-1]:.3f}",
            f"{settled / opt.lambda0:.3f}",
            f"{settled / own:.3f}",
            str(int(opt.binding.sum())),
            crawls,
            freshness,
            f"{share[top]:.3f}, {counts[top]:,} ({opt.rates[top] * span:,.0f})",
        )
    console = Console(width=170)
    console.print(t)
    console.print(f"{args.params} ÷ optimum, mean over seeds: {np.mean(ratios):.4f}")


if __name__ == "__main__":
    main()
