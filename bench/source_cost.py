"""What the learner's host-source posteriors cost (:mod:`scheduler_core.estimate.source`).

1. One host of ``--host-urls`` URLs with ``--outcomes`` crawl outcomes each: the
   binned log-likelihood the learner computes on the (α/γ, θ) grid, side by side
   with the exact one (every outcome at every atom), CPU s and their ratio.
2. The end of a learner pass at the caps: ``--hosts`` hosts (each its own source,
   drawn from a population; 100 URLs with ``--outcomes`` outcomes each) go through
   :class:`~scheduler_core.estimate.source.SourceCycle` (their likelihoods, and the
   URLs' kept for the evidence), then the population fit by EM and the evidence.

Each phase also gives the CPU the rest of the machine used meanwhile (share of one
core, ``/proc/stat``): the figures are CPU work, so repeat a run where that is large.

``python bench/source_cost.py [--hosts 4096] [--host-urls 10000] [--outcomes 16]``
(~1 min on 2 cores).
"""

from __future__ import annotations

import argparse

import numpy as np
from rich.console import Console
from rich.table import Table

from sampling import cpu_and_others
from scheduler_core.estimate.learn import History
from scheduler_core.estimate.source import (
    SourceCycle,
    host_log_likelihood,
    url_log_likelihood,
)

DAY_S = 86_400.0


def host(rng: np.random.Generator, m: int, k: int, c: float, theta: float) -> History:
    """m URLs of one source (α/γ = c, θ), γ log-normal around 1/day, k outcomes each at
    intervals ~ Exp(mean 1/γ), under the log-link model."""
    g = np.exp(rng.normal(0.0, 1.0, m)) / DAY_S
    tau = rng.exponential(1.0, (m, k)) / g[:, None]
    n = rng.poisson(g[:, None] * tau)
    z = rng.random((m, k)) < -np.expm1(-(c * g[:, None] * tau + theta * n))
    exposure = np.full(m, 200 * DAY_S)
    signals = rng.poisson(g * exposure).astype(np.float64)
    return History(
        np.zeros(m), signals, exposure, tau, n.astype(np.float64), z, np.ones((m, k), dtype=bool)
    )


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--hosts", type=int, default=4096)
    ap.add_argument("--host-urls", type=int, default=10_000)
    ap.add_argument("--outcomes", type=int, default=16)
    ap.add_argument("--seed", type=int, default=0)
    a = ap.parse_args()
    rng = np.random.default_rng(a.seed)
    table = Table(title="the learner's host-source posteriors: CPU")
    for col in ("phase", "CPU s", "per unit", "others' load (cores)"):
        table.add_column(col, justify="left" if col == "phase" else "right")

    big = host(rng, a.host_urls, a.outcomes, 0.3, 0.8)
    outcomes = a.host_urls * a.outcomes
    _, binned_s, load_b = cpu_and_others(lambda: host_log_likelihood(big))
    _, exact_s, load_e = cpu_and_others(lambda: url_log_likelihood(big, a.host_urls).sum(axis=0))
    table.add_row(
        f"one host, binned ({a.host_urls:,} URLs × {a.outcomes})",
        f"{binned_s:.3f}", f"{binned_s / outcomes * 1e9:.0f} ns an outcome", f"{load_b:.2f}",
    )  # fmt: skip
    table.add_row(
        "the same, exact (every outcome at every atom)",
        f"{exact_s:.3f}", f"{exact_s / outcomes * 1e9:.0f} ns an outcome", f"{load_e:.2f}",
    )  # fmt: skip

    sources = np.exp(rng.multivariate_normal([np.log(0.3), 0.0], np.diag([1.0, 0.5]), a.hosts))
    hosts = [host(rng, 100, a.outcomes, c, t) for c, t in sources]
    cycle = SourceCycle(None)
    _, add_s, load_a = cpu_and_others(lambda: [cycle.add(h) for h in hosts])
    table.add_row(
        f"a pass: {a.hosts:,} hosts of 100 URLs through the cycle",
        f"{add_s:.2f}", f"{add_s / a.hosts * 1e3:.2f} ms a host", f"{load_a:.2f}",
    )  # fmt: skip
    fit, fit_s, load_f = cpu_and_others(cycle.finish)
    pop, evidence = fit.population, fit.evidence
    table.add_row(
        "its end: the population by EM, the evidence",
        f"{fit_s:.2f}", "", f"{load_f:.2f}",
    )  # fmt: skip
    console = Console(width=140)
    console.print(table)
    console.print(f"binned ÷ exact CPU, one host: {binned_s / exact_s:.4f}")
    assert pop is not None
    console.print(
        f"population: mean ln(α/γ), ln θ = {pop.mean[0]:.2f}, {pop.mean[1]:.2f} (drawn around "
        f"{np.log(0.3):.2f}, 0.00); evidence {evidence:.0f} nats"
    )


if __name__ == "__main__":
    main()
