"""Online vs offline Lagrange multipliers: what the service tracks vs the solver's optimum.

The service (``ServicePolicy``, the ``crawlsched`` code path) estimates λ₀ (the
crawl budget's multiplier) and λ_h (host h's politeness multiplier) online, from
the crawl values of the URLs it dispatches (``scheduler_core/multipliers.py``;
blog post 002; ``MATH.md``, "Estimating the multipliers online").
``solve_host_optimum`` computes them offline from the same world: the continuous
optimum under the budget R and the limits k_h = 1/crawl delay.

Like is compared with like: both report λ_h as the *additive* multiplier, a host's
URLs being recrawled at value Λ_h = λ₀ + λ_h (the service's λ_h is
``host_multiplier`` = max(0, exp(host log mean) − λ₀); the solver's is
``value_hi − λ₀`` on binding hosts), so the table gives λ₀, λ_h and Λ_h.  The
online values are sampled every simulated hour over the second half of the run
(steady state) and averaged; the last value is shown too.

Run from the repository root::

    python bench/paper/multipliers.py [--reps N] [--quick] [--workers 2]
"""

from __future__ import annotations

import json
import sys
import time
from concurrent.futures import ProcessPoolExecutor
from dataclasses import dataclass
from typing import Any

import numpy as np

from common import RESULTS, cli, fmt, markdown_table, mean_se, write_report
from scheduler_core.host_optimum import solve_host_optimum
from scheduler_core.policies.base import IntArray
from scheduler_core.sim.simulator import problem_of, simulate
from scheduler_core.sim.spec import Dist, WorldSpec
from scheduler_core.sim.world import DAY_S, World
from service.simulation import ServicePolicy

NAME = "multipliers"


@dataclass(frozen=True)
class Size:
    """A world's size: URLs, hosts (Zipf(1) sizes), R per day, days, delay in decision steps.

    Every host allows one fetch per ``delay_steps`` decision steps (less 10 ms: a whole
    number of steps, so that the simulator's discrete clock gives the service exactly
    the rate k_h = R/``delay_steps`` that the solver assumes); with Zipf host sizes
    this binds on the few largest hosts only.  The second half of the run is the
    steady state that is sampled.
    """

    urls: int
    hosts: int
    budget_per_day: float
    days: float
    delay_steps: int


#: Sizes by (signals, quick).  The service path costs ~1 ms a decision without signals
#: and ~10 ms with them (signal ingestion, NCIS values), hence the smaller signal world.
SIZES = {
    (False, False): Size(4_000, 40, 2_000.0, 40.0, 14),
    (True, False): Size(2_000, 20, 1_000.0, 30.0, 14),
    (False, True): Size(1_000, 10, 500.0, 24.0, 7),
    (True, True): Size(600, 10, 300.0, 24.0, 7),
}
#: Fetches per decision step: one, paper 004's Algorithm 1 (a batch of k would let the
#: service's politeness gates, which run on the simulated clock, bind on every host).
PER_STEP = 1
#: Simulated seconds between two rescoring passes of the service (continuous at the
#: scale of these change rates, ≤ 1 per day).
RESCORE_EVERY_S = 900.0
#: Online estimates are read every simulated hour.
SAMPLE_EVERY_S = 3_600.0
#: The worlds: without signals (GREEDY values) and with paper 004 §6.1's noisy signals.
WORLDS = ("no signals", "signals")
#: Target: online λ₀ within 5% of the solver's.
TARGET = 0.05


def crawl_delay_s(size: Size) -> float:
    """``size.delay_steps`` decision steps at R = ``size.budget_per_day``, less 10 ms."""
    return size.delay_steps * PER_STEP * DAY_S / size.budget_per_day - 0.01


def spec(seed: int, signals: bool, quick: bool) -> WorldSpec:
    """Paper 004 §6.1's parameters (W ~ U(0, 2), Δ ~ U(0, 1) per day) on Zipf hosts."""
    size = SIZES[(signals, quick)]
    return WorldSpec(
        urls=size.urls,
        hosts=size.hosts,
        host_size=Dist.of("zipf", s=1.0),
        crawl_delay_s=Dist.of("const", value=crawl_delay_s(size)),
        budget_per_day=size.budget_per_day,
        duration_days=size.days,
        warmup_fraction=0.5,
        seed=seed,
        signals=signals,
        clicks=False,
    )


class SampledServicePolicy(ServicePolicy):
    """The service's policy, reading its online λ₀ and λ_h every :data:`SAMPLE_EVERY_S`.

    Uses ``ServicePolicy._run`` (the event loop runner) and the store's public
    ``stats``: ServicePolicy only exposes the multipliers at the end of a run.
    """

    def __init__(self, *, sample_from_s: float, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.sample_from_s = sample_from_s
        self._next_sample = sample_from_s
        self.samples: list[tuple[float, float, dict[str, float]]] = []

    def select(self, now: float, k: int, host_room: IntArray) -> IntArray:
        chosen = super().select(now, k, host_room)
        if now >= self._next_sample:
            self._next_sample = now + SAMPLE_EVERY_S
            hosts = len(self.problem.hosts)
            stats = self._run(self.context.store.stats(now, hosts))
            lam_h = {h.host: h.lambda_h for h in stats.top_hosts}
            self.samples.append((now, stats.lambda0 or 0.0, lam_h))
        return chosen


@dataclass(frozen=True)
class Unit:
    """One run of the service on the world of ``seed`` (with or without signals)."""

    seed: int
    signals: bool
    quick: bool


def run_unit(unit: Unit) -> dict[str, Any]:
    """Solve the optimum and run the service on one world; plain numbers."""
    sp = spec(unit.seed, unit.signals, unit.quick)
    world = World.generate(sp)
    problem = problem_of(world, host_limits=True)
    t0 = time.perf_counter()
    opt = solve_host_optimum(
        world.params,
        world.host_of,
        problem.host_limit_per_s,
        world.budget_per_s,
        signals=unit.signals,
    )
    solve_s = time.perf_counter() - t0
    policy = SampledServicePolicy(
        sample_from_s=0.0, seed=unit.seed, rescore_every_s=RESCORE_EVERY_S
    )
    res = simulate(world, policy, crawls_per_step=PER_STEP, host_limits=True)
    names = list(world.hosts)
    index = {name: j for j, name in enumerate(names)}  # the store keys hosts by these names
    t = np.array([s[0] for s in policy.samples])
    lam0_all = np.array([s[1] for s in policy.samples])
    lam_h = np.zeros((len(policy.samples), len(names)))
    for i, (_, _, by_host) in enumerate(policy.samples):
        for host, value in by_host.items():
            if host in index:
                lam_h[i, index[host]] = value
    steady = t >= world.warmup_s
    lam0, lam_h = lam0_all[steady], lam_h[steady]
    reached = np.flatnonzero(np.abs(lam0_all / opt.lambda0 - 1.0) <= TARGET)
    span = (world.warmup_s, world.duration_s)
    online_rate = np.bincount(
        world.host_of, weights=res.crawl_rates(len(world.urls), span), minlength=len(names)
    )
    return {
        "seed": unit.seed,
        "signals": unit.signals,
        "solver_lambda0": float(opt.lambda0),
        "solver_lambda_h": opt.host_lambdas.tolist(),
        "binding": opt.binding.tolist(),
        "limit_per_day": (problem.host_limit_per_s * DAY_S).tolist(),
        "solver_rate_per_day": (opt.host_rates * DAY_S).tolist(),
        "online_rate_per_day": (online_rate * DAY_S).tolist(),
        "host_urls": np.bincount(world.host_of, minlength=len(names)).tolist(),
        "online_lambda0_mean": float(lam0.mean()),
        "online_lambda0_sd": float(lam0.std()),
        "online_lambda0_last": float(policy.lambda0 or 0.0),
        "online_lambda_h_mean": lam_h.mean(axis=0).tolist(),
        "online_lambda_h_last": policy.host_lambdas.tolist(),
        "samples": int(steady.sum()),
        "trace_days": (t / DAY_S).tolist(),
        "trace_ratio": (lam0_all / opt.lambda0 if opt.lambda0 > 0 else lam0_all).tolist(),
        "reach_days": float(t[reached[0]] / DAY_S) if reached.size else float("nan"),
        "warmup_days": world.warmup_s / DAY_S,
        "accuracy_online": float(res.report.time_weighted),
        "accuracy_solver": float(opt.accuracy),
        "solve_s": solve_s,
        "wall_s": float(res.wall_s),
    }


def run_units(units: list[Unit], workers: int) -> list[dict[str, Any]]:
    """Run ``units`` on ``workers`` processes; results in submission order."""
    started = time.perf_counter()

    def note(r: dict[str, Any]) -> None:
        ratio = r["online_lambda0_mean"] / max(r["solver_lambda0"], 1e-300)
        print(
            f"  [{time.perf_counter() - started:5.0f}s] seed={r['seed']} signals={r['signals']}:"
            f" λ₀ online/solver {ratio:.3f}, {sum(r['binding'])} binding hosts"
            f", accuracy {r['accuracy_online']:.4f} vs {r['accuracy_solver']:.4f}"
            f" ({r['wall_s']:.0f}s run, {r['solve_s']:.1f}s solve)",
            file=sys.stderr,
            flush=True,
        )

    if workers <= 1:
        out = [run_unit(u) for u in units]
        for r in out:
            note(r)
        return out
    with ProcessPoolExecutor(max_workers=workers) as pool:
        futures = [pool.submit(run_unit, u) for u in units]
        out = []
        for fut in futures:
            out.append(fut.result())
            note(out[-1])
    return out


def main() -> None:
    args = cli("Online (service) vs offline (solver) multipliers λ₀, λ_h", reps=2)
    started = time.perf_counter()
    reps = 1 if args.quick else args.reps
    units = [Unit(seed, signals, args.quick) for signals in (True, False) for seed in range(reps)]
    rows = run_units(units, args.workers)
    runtime = time.perf_counter() - started
    raw = RESULTS / f"{NAME}{'-quick' if args.quick else ''}.json"
    RESULTS.mkdir(parents=True, exist_ok=True)
    raw.write_text(json.dumps(rows, default=str) + "\n")

    header = ["world", "quantity", "solver", "online (mean over steady state)", "online/solver"]
    table = []
    host_rows = []
    panels = []
    for world_name, signals in zip(WORLDS, (False, True), strict=True):
        got = [r for r in rows if r["signals"] == signals]
        if not got:
            continue
        s0 = mean_se(r["solver_lambda0"] for r in got)
        o0 = mean_se(r["online_lambda0_mean"] for r in got)
        ratio0 = mean_se(r["online_lambda0_mean"] / r["solver_lambda0"] for r in got)
        last = mean_se(r["online_lambda0_last"] / r["solver_lambda0"] for r in got)
        cv = mean_se(r["online_lambda0_sd"] / r["online_lambda0_mean"] for r in got)
        verdict = "within" if abs(ratio0[0] - 1) <= TARGET else "outside"
        table.append(
            [
                world_name,
                "λ₀",
                fmt(*s0[:2], digits=5),
                fmt(*o0[:2], digits=5),
                f"{fmt(*ratio0[:2], digits=3)} ({verdict} ±5%)",
            ]
        )
        table.append([world_name, "λ₀, last value / solver", "", "", fmt(*last[:2], digits=3)])
        table.append(
            [world_name, "λ₀ sampled: s.d./mean within a run", "", "", fmt(*cv[:2], digits=3)]
        )
        reach = mean_se(r["reach_days"] for r in got)
        table.append(
            [
                world_name,
                "days until λ₀ first comes within ±5% of the solver's (cold start)",
                "",
                fmt(*reach[:2], digits=1),
                f"steady state sampled from day {got[0]['warmup_days']:g}",
            ]
        )
        # Binding hosts (per the solver), pooled over repetitions.
        ratios_h, ratios_big, free_rel = [], [], []
        for r in got:
            lam0_s, lam0_o = r["solver_lambda0"], r["online_lambda0_mean"]
            for j, bind in enumerate(r["binding"]):
                lh_s, lh_o = r["solver_lambda_h"][j], r["online_lambda_h_mean"][j]
                if bind:
                    ratios_h.append(lh_o / lh_s)
                    ratios_big.append((lam0_o + lh_o) / (lam0_s + lh_s))
                    host_rows.append(
                        [
                            world_name,
                            r["seed"],
                            j,
                            r["host_urls"][j],
                            f"{r['limit_per_day'][j]:.0f}",
                            f"{r['solver_rate_per_day'][j]:.1f}",
                            f"{r['online_rate_per_day'][j]:.1f}",
                            f"{lh_s:.5f}",
                            f"{lh_o:.5f}",
                            f"{lh_o / lh_s:.3f}",
                            f"{(lam0_o + lh_o) / (lam0_s + lh_s):.3f}",
                        ]
                    )
                else:
                    free_rel.append(lh_o / lam0_s)
        rh = mean_se(ratios_h)
        rb = mean_se(ratios_big)
        table.append(
            [
                world_name,
                f"λ_h, binding hosts ({len(ratios_h)} host-runs)",
                "",
                "",
                f"{fmt(*rh[:2], digits=3)} (min {min(ratios_h):.3f}, max {max(ratios_h):.3f})"
                if ratios_h
                else "—",
            ]
        )
        table.append(
            [
                world_name,
                "Λ_h = λ₀ + λ_h, binding hosts",
                "",
                "",
                f"{fmt(*rb[:2], digits=3)} (min {min(ratios_big):.3f}, max {max(ratios_big):.3f})"
                if ratios_big
                else "—",
            ]
        )
        fr = np.asarray(free_rel)
        table.append(
            [
                world_name,
                f"λ_h / solver λ₀, non-binding hosts ({fr.size} host-runs; solver: 0)",
                "0",
                f"mean {fr.mean():.3f}, max {fr.max():.3f}" if fr.size else "—",
                f"{np.mean(fr > 0):.0%} of them > 0" if fr.size else "—",
            ]
        )
        acc_o = mean_se(r["accuracy_online"] for r in got)
        acc_s = mean_se(r["accuracy_solver"] for r in got)
        table.append(
            [
                world_name,
                "accuracy (time-weighted freshness)",
                fmt(*acc_s[:2]),
                fmt(*acc_o[:2]),
                fmt(acc_o[0] / acc_s[0], digits=3),
            ]
        )
        panels.append(
            (
                f"{world_name}: online / solver",
                {
                    "λ₀": ratio0[:2],
                    "λ_h (binding)": rh[:2],
                    "Λ_h (binding)": rb[:2],
                },
                {"1 ± 5%": 1.0},
            )
        )

    timing = mean_se(r["wall_s"] for r in rows)
    solve = {
        name: mean_se(r["solve_s"] for r in rows if r["signals"] == sig)
        for name, sig in zip(WORLDS, (False, True), strict=True)
    }

    def describe(world_name: str, signals: bool) -> str:
        size = SIZES[(signals, args.quick)]
        delay = crawl_delay_s(size)
        return (
            f"**{world_name}**: {size.urls:,} URLs on {size.hosts} hosts (Zipf(1) sizes), "
            f"R = {size.budget_per_day:,.0f} crawls per day, every host allows one fetch per "
            f"{delay:.2f} s ({size.delay_steps} decision steps: k_h = {DAY_S / delay:.1f} per "
            f"day), {size.days:g} days"
        )

    settings = [
        "W ~ U(0, 2) and Δ ~ U(0, 1) per day (paper 004 §6.1); "
        + "; ".join(describe(w, sig) for w, sig in zip(WORLDS, (False, True), strict=True))
        + f".  {PER_STEP} crawl per decision step (Algorithm 1), politeness enforced by the "
        f"service itself, rescoring every {RESCORE_EVERY_S:.0f} simulated seconds.",
        "Worlds: without signals, and with paper 004 §6.1's noisy signals (recall ~ "
        "Beta(0.25, 0.25), ν ~ U(0.1, 0.6) per day); the solver uses the same information "
        "(`signals=True|False`).",
        f"Online values sampled every {SAMPLE_EVERY_S / 3600:g} h over the second half of each "
        f"run; {reps} repetition(s) per world, mean ± s.e. over repetitions.",
    ]
    notes = [
        "Like with like: both sides report the additive λ_h (URLs of host h recrawled at "
        "Λ_h = λ₀ + λ_h).  The service's λ_h is `host_multiplier` = max(0, exp(host log-mean "
        "of gated dispatch values) − λ₀); the solver's is Λ_h − λ₀ on the hosts where the "
        "limit binds (`HostOptimum.binding`), 0 elsewhere.  The service's λ₀ is the "
        "exponential of a running mean of log crawl values at dispatch (window 64), so the "
        "time-mean of its samples is compared.",
        f"Service run: {timing[0]:.0f} s on average; solver: "
        + ", ".join(f"{k} {v[0]:.1f} s" for k, v in solve.items())
        + ".",
    ]
    host_header = [
        "world",
        "seed",
        "host",
        "URLs",
        "k_h /day",
        "solver rate /day",
        "online rate /day",
        "solver λ_h",
        "online λ_h",
        "λ_h ratio",
        "Λ_h ratio",
    ]
    write_report(
        NAME,
        "Online (service) vs offline (solver) Lagrange multipliers",
        header,
        table,
        settings=settings,
        notes=notes,
        runtime_s=runtime,
        quick=args.quick,
    )
    extra = "\n".join(
        [
            "",
            "## Binding hosts",
            "",
            markdown_table(host_header, host_rows),
            "",
        ]
    )
    path = RESULTS / f"{NAME}{'-quick' if args.quick else ''}.md"
    path.write_text(path.read_text() + extra)
    print(extra)
    plot(rows, panels, quick=args.quick)


def plot(
    rows: list[dict[str, Any]],
    panels: list[tuple[str, dict[str, tuple[float, float]], dict[str, float]]],
    *,
    quick: bool,
) -> None:
    """λ₀ online/solver over time (left) and the steady-state ratios (right)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(1, 1 + len(panels), figsize=(4.2 + 3.0 * len(panels), 3.4))
    ax = axes[0]
    colors = {False: "tab:blue", True: "tab:orange"}
    for r in rows:
        label = f"{WORLDS[int(r['signals'])]}" if r["seed"] == 0 else None
        ax.plot(r["trace_days"], r["trace_ratio"], lw=0.8, color=colors[r["signals"]], label=label)
        ax.axvline(r["warmup_days"], ls=":", lw=0.8, color=colors[r["signals"]])
    ax.axhspan(1 - TARGET, 1 + TARGET, color="0.85", zorder=0)
    ax.set_ylim(0, 1.6)
    ax.set_xlabel("simulated days", fontsize=8)
    ax.set_ylabel("online λ₀ / solver λ₀", fontsize=8)
    ax.set_title("λ₀ tracked online (dotted: start of steady state)", fontsize=8)
    ax.legend(fontsize=7)
    ax.tick_params(labelsize=7)
    for ax, (title, series, _) in zip(axes[1:], panels, strict=True):
        for k, (_, (mean, se)) in enumerate(series.items()):
            ax.errorbar([k], [mean], yerr=[0 if np.isnan(se) else se], fmt="o", capsize=3)
        ax.axhspan(1 - TARGET, 1 + TARGET, color="0.85", zorder=0)
        ax.axhline(1.0, ls="--", lw=0.8, color="0.4")
        ax.set_xticks(range(len(series)), list(series), fontsize=7)
        ax.set_title(title, fontsize=8)
        ax.tick_params(labelsize=7)
    fig.tight_layout()
    RESULTS.mkdir(parents=True, exist_ok=True)
    fig.savefig(RESULTS / f"{NAME}{'-quick' if quick else ''}.png", dpi=120)
    plt.close(fig)


if __name__ == "__main__":
    main()
