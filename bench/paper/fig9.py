"""Paper 004, Figure 9 (App. D): the total crawl rate changes, 100 → 150 → 100.

GREEDY and crawlsched (the service's code path) on the paper's worlds without
signals, m = 1000, t ≤ 400 days; R = 100 per day, 150 from day 133⅓ and 100
again from day 266⅔ (App. D gives no switch times and the OCR kept no numbers
of Figure 9: we split the run in thirds).  Accuracy per time step as in the
paper, "computed on the last 1000 crawl events": every day, the click-weighted
freshness of the clicks since the 1000th-last crawl.  Reference lines: the
BASELINE accuracy at R = 100 and at R = 150.

    python bench/paper/fig9.py [--reps N] [--quick]
"""

from __future__ import annotations

import math

import numpy as np

from common import (
    RESULTS,
    Job,
    cell,
    cli,
    fmt,
    group,
    load_note,
    mean_se,
    paper_spec,
    run_or_load,
    runtime_note,
    write_report,
)
from scheduler_core.optimal import baseline
from scheduler_core.sim.world import DAY_S, World

NAME = "fig9"
M, DAYS = 1000, 400.0
POLICIES = ("greedy", "crawlsched")
LABEL = {"greedy": "GREEDY", "crawlsched": "crawlsched"}
REPS_CAP = {"crawlsched": 2}
TRAILING = 1000  # crawls per accuracy window


def schedule(days: float) -> tuple[tuple[float, float], ...]:
    """(start day, R per day): 100, 150 from a third of the run, 100 from two thirds."""
    return ((0.0, 100.0), (days / 3, 150.0), (2 * days / 3, 100.0))


def main() -> None:
    args = cli(__doc__.split("\n")[0], reps=4)
    m, days = (200, 30.0) if args.quick else (M, DAYS)
    band = schedule(days)
    switch = [band[1][0], band[2][0]]
    jobs: list[Job] = []
    for rep in range(args.reps):
        spec = paper_spec(m, seed=rep, signals="none", days=days, warmup_fraction=0.0)
        for policy in POLICIES:
            if rep < REPS_CAP.get(policy, args.reps):
                jobs.append(Job(spec, policy, bandwidth=band, trailing=(1.0, TRAILING)))
    results, runtime = run_or_load(NAME, jobs, args)
    by = group(jobs, results)
    levels = {100: [], 150: []}
    for rep in range(args.reps):
        params = World.generate(paper_spec(m, seed=rep, signals="none", days=1.0)).params
        for r in levels:
            levels[r].append(baseline(params, r / DAY_S).accuracy)
    base = {r: mean_se(v) for r, v in levels.items()}

    # Mean trailing accuracy per phase, skipping the first 5% of the run in each (burn-in).
    skip = days / 20
    phases = [(skip, switch[0]), (switch[0] + skip, switch[1]), (switch[1] + skip, days)]
    curves = {}
    header = [
        "policy",
        "n",
        *[
            f"days {a:.0f}–{b:.0f} (R = {r:g})"
            for (a, b), r in zip(phases, (100, 150, 100), strict=True)
        ],
        "burn-in to ±1% of BASELINE(150), days",
    ]
    rows = []
    for p in POLICIES:
        runs = by[(p, m)]
        t = np.array([w[0] for w in runs[0]["windows"]])
        acc = np.array([[w[1] for w in r["windows"]] for r in runs])
        curves[p] = (t, acc)
        row = [LABEL[p], len(runs)]
        for a, b in phases:
            sel = (t >= a) & (t < b)
            row.append(fmt(*mean_se(acc[:, sel].mean(axis=1))[:2]))
        mean_curve = acc.mean(axis=0)
        after = (t >= switch[0]) & (t < switch[1])
        hit = np.flatnonzero(after & (mean_curve >= 0.99 * base[150][0]))
        row.append(f"{t[hit[0]] - switch[0]:.0f}" if hit.size else "not reached")
        rows.append(row)
    rows.append(
        ["BASELINE", args.reps, fmt(*base[100][:2]), fmt(*base[150][:2]), fmt(*base[100][:2]), "—"]
    )
    whole = [f"{LABEL[p]} over the whole run: {cell(by[(p, m)])}" for p in POLICIES]
    write_report(
        NAME,
        "Figure 9: changing bandwidth R = 100 → 150 → 100",
        header,
        rows,
        settings=[
            f"m = {m}, t ≤ {days:g} days, R = 100/day, 150/day from day {switch[0]:.1f},"
            f" 100/day from day {switch[1]:.1f}; no signals; μ_i, Δ_i ~ U(0, 1)/day;"
            " crawls_per_step = 1 (k = 1) for both policies",
            f"accuracy at each day = click-weighted freshness of the clicks since the"
            f" {TRAILING}th-last crawl (≈ {TRAILING / 100:.0f} days at R = 100, ≈"
            f" {TRAILING / 150:.1f} at 150); table: mean over each phase without its first"
            f" {days / 20:g} days, ± s.e. over repetitions (n); BASELINE for R = 100 and 150"
            " on the same worlds",
            "paper (App. D, Figure 9; no numbers in the OCR): 'the accuracy automatically"
            " rises to the new optimal level when the bandwidth increases, and automatically"
            " falls back to the original optimal level when the bandwidth decreases back'",
        ],
        notes=[*whole, runtime_note(jobs, results), load_note()],
        runtime_s=runtime,
        quick=args.quick,
    )
    plot(curves, base, switch, quick=args.quick)


def plot(curves: dict, base: dict, switch: list[float], *, quick: bool) -> None:
    """Accuracy per day (mean over repetitions, ±1 s.e. band) and the BASELINE levels."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(7, 3.6))
    for p, (t, acc) in curves.items():
        mean = acc.mean(axis=0)
        se = acc.std(axis=0, ddof=1) / math.sqrt(len(acc)) if len(acc) > 1 else 0 * mean
        ax.plot(t, mean, lw=1, label=f"{LABEL[p]} (n={len(acc)})")
        ax.fill_between(t, mean - se, mean + se, alpha=0.25)
    for r, ls in ((100, "--"), (150, ":")):
        ax.axhline(base[r][0], color="red", ls=ls, lw=1, label=f"BASELINE R={r}")
    for s in switch:
        ax.axvline(s, color="grey", lw=0.5)
    ax.set_xlabel("t (days)")
    ax.set_ylabel("accuracy, last 1000 crawls")
    ax.legend(fontsize=7)
    fig.tight_layout()
    RESULTS.mkdir(parents=True, exist_ok=True)
    fig.savefig(RESULTS / f"{NAME}{'-quick' if quick else ''}.png", dpi=120)
    plt.close(fig)


if __name__ == "__main__":
    main()
