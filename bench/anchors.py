"""crawlsched against the schedulers crawl engineers run today, on four worlds.

    python bench/anchors.py [--seeds 5] [--urls 200] [--days 200] [--workers 2] [--json FILE]
                            [--world NAME ...]

Every policy runs in process through the simulator, with the hosts' politeness
enforced and ``--crawls-per-step`` fetches a decision (5, as
``crawlsched simulate -p crawlsched-learned -p crawlsched-oracle --crawls-per-step 5``):

- ``crawlsched-learned`` / ``crawlsched-oracle``: the service's own code path,
  parameters learned online / the world's true ones registered as fixed;
- the anchors, as shipped and tuned (``scheduler_core.policies.anchors``):
  ``nutch-adaptive``, ``stormcrawler-adaptive``, ``fixed-interval`` and their
  ``-tuned`` variants (every URL starting at URLs ÷ budget);
- ``uniform`` (round robin);
- BASELINE and the optimum: the continuous optimum without and with signals,
  under the same host limits.

The worlds, each drawn ``--seeds`` times (seeds 0, 1, ...): the paper's default
world (recall and false signals per URL); the same with signal quality per host;
the ``web`` preset (``crawlsched world --preset web``) with signal quality per
URL and per host (``--world`` runs only the worlds named).  Each world is scaled
to ``--urls`` URLs with its hosts and budget in proportion (the default world: 20
URLs a host, 0.1 crawls a URL a day; the web preset: 10 URLs a host, the same
budget per URL).

Prints one table: per world, each policy's click-weighted freshness after the
warm-up (mean over seeds ± its standard error) and its ratio to BASELINE (paired
over seeds: the mean of the per-seed ratios), then per world crawlsched learned
÷ the best anchor variant, the optimum ÷ the same anchor (the most any policy
could beat it by) and learned ÷ oracle, paired over seeds (the two ratios to the
anchor also as medians over seeds: a seed on which every anchor collapses can
carry the mean), and the online λ₀ (its
geometric mean over the second half of the run) ÷ the solver's on the world's true
parameters and, for the learned run, ÷ the solver's on the parameters the service
held at the end of the run (what its own tracking aims at).  ``--json``
writes every per-seed figure too.  At the defaults (200 URLs, 5 seeds, 2
workers) it takes 10–25 minutes on two cores (25 when shared).
"""

from __future__ import annotations

import argparse
import json
import math
import time
from collections.abc import Sequence
from concurrent.futures import ProcessPoolExecutor, as_completed
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
from rich.console import Console
from rich.progress import MofNCompleteColumn, Progress, TimeElapsedColumn
from rich.table import Table

from scheduler_core.host_optimum import solve_host_optimum
from scheduler_core.policies import ANCHOR_NAMES
from scheduler_core.sim import World, WorldSpec
from scheduler_core.sim.simulator import problem_of, simulate
from service.loadgen.worldfile import preset_spec
from service.sim_runner import build_policy
from service.simulation import ServicePolicy

#: world name → (preset, signal quality)
WORLDS = {
    "default": ("default", "per_url"),
    "default per_host": ("default", "per_host"),
    "web per_url": ("web", "per_url"),
    "web per_host": ("web", "per_host"),
}
LEARNED, ORACLE = "crawlsched-learned", "crawlsched-oracle"
POLICIES = (LEARNED, ORACLE, *ANCHOR_NAMES, "uniform")
OPTIMUM = "optimum"  # the task that solves BASELINE and the optimum


def world_spec(world: str, urls: int, days: float, seed: int) -> WorldSpec:
    """The spec of ``world`` scaled to ``urls`` URLs (hosts and budget in proportion)."""
    preset, quality = WORLDS[world]
    spec = preset_spec(preset)
    scale = urls / spec.urls
    return spec.replace(
        urls=urls,
        hosts=max(1, min(urls, round(spec.hosts * scale))),
        budget_per_day=spec.budget_per_day * scale,
        duration_days=days,
        seed=seed,
        signal_quality=quality,
    )


@dataclass(frozen=True)
class Task:
    world: str
    seed: int
    policy: str  # a policy name, or OPTIMUM
    urls: int
    days: float
    crawls_per_step: int


def run(task: Task) -> dict[str, Any]:
    """One policy on one drawn world (or its optimum): the figures of the run."""
    world = World.generate(world_spec(task.world, task.urls, task.days, task.seed))
    started = time.perf_counter()
    if task.policy == OPTIMUM:
        problem = problem_of(world, host_limits=True)
        solved = {
            signals: solve_host_optimum(
                world.params,
                world.host_of,
                problem.host_limit_per_s,
                world.budget_per_s,
                signals=signals,
            )
            for signals in (False, True)
        }
        return {
            "baseline": solved[False].accuracy,
            "optimum": solved[True].accuracy,
            "lambda0": solved[True].lambda0,
            "binding_hosts": int(solved[True].binding.sum()),
            "wall_s": time.perf_counter() - started,
        }
    policy = build_policy(task.policy, seed=task.seed, signal_discard_s=0.0, rescore_every_s=0.0)
    res = simulate(world, policy, crawls_per_step=task.crawls_per_step, host_limits=True)
    out: dict[str, Any] = {
        "freshness": res.accuracy,
        "stderr": res.report.click_stderr,
        "crawls": res.report.crawls,
        "wall_s": res.wall_s,
    }
    if isinstance(policy, ServicePolicy):
        out["lambda0_online"] = policy.lambda0
        out["lambda0_settled"] = policy.lambda0_settled
        if policy.final_params is not None:  # the solver on the service's own parameters
            out["lambda0_solver_own"] = solve_host_optimum(
                policy.final_params,
                world.host_of,
                problem_of(world, host_limits=True).host_limit_per_s,
                world.budget_per_s,
            ).lambda0
    return out


def mean_se(values: Sequence[float]) -> tuple[float, float]:
    """Mean and its standard error (nan with one value)."""
    v = np.asarray(values, dtype=np.float64)
    se = float(v.std(ddof=1) / math.sqrt(v.size)) if v.size > 1 else math.nan
    return float(v.mean()), se


def summarise(
    results: dict[tuple[str, int, str], dict[str, Any]], seeds: int, worlds: Sequence[str]
) -> dict[str, Any]:
    """Means, standard errors and paired ratios per world (see the module docstring)."""
    out: dict[str, Any] = {}
    for world in worlds:
        per = {p: [results[(world, s, p)]["freshness"] for s in range(seeds)] for p in POLICIES}
        opt = [results[(world, s, OPTIMUM)] for s in range(seeds)]
        per["BASELINE"] = [o["baseline"] for o in opt]
        per["optimum"] = [o["optimum"] for o in opt]
        base = np.array(per["BASELINE"])
        rows = {
            p: {
                "freshness": mean_se(v),
                "per_baseline": mean_se(np.array(v) / base),
                "per_seed": v,
            }
            for p, v in per.items()
        }
        best = max(ANCHOR_NAMES, key=lambda p: rows[p]["freshness"][0])
        learned = np.array(per[LEARNED])
        lam = [
            results[(world, s, LEARNED)]["lambda0_settled"] / opt[s]["lambda0"]
            for s in range(seeds)
        ]
        lam_o = [
            results[(world, s, ORACLE)]["lambda0_settled"] / opt[s]["lambda0"] for s in range(seeds)
        ]
        lam_own = [
            results[(world, s, LEARNED)]["lambda0_settled"]
            / results[(world, s, LEARNED)]["lambda0_solver_own"]
            for s in range(seeds)
        ]
        out[world] = {
            "rows": rows,
            "best_anchor": best,
            "learned_per_best_anchor": mean_se(learned / np.array(per[best])),
            "learned_per_oracle": mean_se(learned / np.array(per[ORACLE])),
            "lambda0_learned_per_solver": mean_se(lam),
            "lambda0_oracle_per_solver": mean_se(lam_o),
            "lambda0_learned_per_solver_own": mean_se(lam_own),
            "optimum_per_best_anchor": mean_se(np.array(per["optimum"]) / np.array(per[best])),
            "learned_per_best_anchor_median": float(np.median(learned / np.array(per[best]))),
            "optimum_per_best_anchor_median": float(
                np.median(np.array(per["optimum"]) / np.array(per[best]))
            ),
            "binding_hosts": mean_se([o["binding_hosts"] for o in opt]),
        }
    return out


def _cell(pair: tuple[float, float], digits: int = 4) -> str:
    m, se = pair
    return f"{m:.{digits}f}" + ("" if math.isnan(se) else f" ± {se:.{digits}f}")


def table(summary: dict[str, Any], title: str) -> Table:
    """The one table: policies down, worlds across (freshness ± s.e., ÷ BASELINE)."""
    t = Table(title=title, title_justify="left")
    t.add_column("policy")
    for world in summary:
        t.add_column(world, justify="right")
        t.add_column("÷ B", justify="right")
    for p in ("BASELINE", "optimum", *POLICIES):
        cells = []
        for world in summary:
            row = summary[world]["rows"][p]
            cells += [_cell(row["freshness"]), f"{row['per_baseline'][0]:.3f}"]
        t.add_row(p, *cells)
    t.add_section()
    for label, key, digits in (
        ("learned ÷ best anchor", "learned_per_best_anchor", 3),
        ("learned ÷ oracle", "learned_per_oracle", 3),
        ("optimum ÷ best anchor", "optimum_per_best_anchor", 3),
        ("λ₀ online ÷ solver, learned", "lambda0_learned_per_solver", 3),
        ("λ₀ online ÷ solver on its own params, learned", "lambda0_learned_per_solver_own", 3),
        ("λ₀ online ÷ solver, oracle", "lambda0_oracle_per_solver", 3),
    ):
        cells = []
        for world in summary:
            cells += [_cell(summary[world][key], digits), ""]
        t.add_row(label, *cells)
    for label, key in (
        ("learned ÷ best anchor, median over seeds", "learned_per_best_anchor_median"),
        ("optimum ÷ best anchor, median over seeds", "optimum_per_best_anchor_median"),
    ):
        t.add_row(label, *[c for w in summary for c in (f"{summary[w][key]:.3f}", "")])
    t.add_row("best anchor", *[c for w in summary for c in (summary[w]["best_anchor"], "")])
    t.add_row(
        "binding hosts (optimum)",
        *[c for w in summary for c in (f"{summary[w]['binding_hosts'][0]:.1f}", "")],
    )
    return t


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--seeds", type=int, default=5, help="seeds 0..N-1 per world")
    ap.add_argument("--urls", type=int, default=200, help="URLs per world")
    ap.add_argument("--days", type=float, default=200.0, help="simulated days")
    ap.add_argument("--crawls-per-step", type=int, default=5)
    ap.add_argument("--workers", type=int, default=2, help="processes running the tasks")
    ap.add_argument("--json", type=Path, default=None, help="write every figure here")
    ap.add_argument(
        "--world", action="append", choices=list(WORLDS), default=None,
        help="run only this world (repeat for several; default: all four)",
    )  # fmt: skip
    args = ap.parse_args()
    worlds = args.world or list(WORLDS)
    if args.seeds < 2:
        ap.error("--seeds must be >= 2 (standard errors need two)")
    tasks = [
        Task(w, s, p, args.urls, args.days, args.crawls_per_step)
        for p in (LEARNED, ORACLE, *POLICIES[2:], OPTIMUM)  # the slowest first
        for w in worlds
        for s in range(args.seeds)
    ]
    console = Console(width=170)
    results: dict[tuple[str, int, str], dict[str, Any]] = {}
    started = time.perf_counter()
    columns = (*Progress.get_default_columns(), MofNCompleteColumn(), TimeElapsedColumn())
    with (
        Progress(*columns, console=console) as progress,
        ProcessPoolExecutor(max_workers=args.workers) as pool,
    ):
        bar = progress.add_task("runs", total=len(tasks))
        futures = {pool.submit(run, t): t for t in tasks}
        for done in as_completed(futures):
            t = futures[done]
            results[(t.world, t.seed, t.policy)] = done.result()
            progress.update(bar, advance=1, description=f"{t.policy} · {t.world} · seed {t.seed}")
    wall = time.perf_counter() - started
    summary = summarise(results, args.seeds, worlds)
    title = (
        f"{args.urls:,} URLs a world, {args.days:g} days, seeds 0–{args.seeds - 1}, "
        f"host limits on, {args.crawls_per_step} crawls a step; click-weighted freshness "
        f"(mean ± s.e. over seeds), ÷ B: ÷ BASELINE paired over seeds; {wall / 60:.1f} min"
    )
    console.print(table(summary, title))
    for world in worlds:
        m, se = summary[world]["learned_per_best_anchor"]
        console.print(
            f"{world}: crawlsched learned ÷ best anchor ({summary[world]['best_anchor']}) = "
            f"{m:.3f} ± {se:.3f}"
        )
    if args.json is not None:
        payload = {
            "args": {k: str(v) if isinstance(v, Path) else v for k, v in vars(args).items()},
            "wall_s": wall,
            "summary": summary,
            "runs": [
                {"world": w, "seed": s, "policy": p, **r}
                for (w, s, p), r in sorted(results.items())
            ],
        }
        args.json.write_text(json.dumps(payload, indent=2) + "\n")
        console.print(f"figures written to {args.json}")


if __name__ == "__main__":
    main()
