"""Accuracy of the online estimators on simulated histories (issue 5's figures).

    python bench/estimators.py [--seed 0]

1. Change rate without signals: URLs with Δ ~ U(0.2, 1)/day, crawled at a rate
   ρΔ with ρ log-uniform in [1/4, 4] (fixed intervals, and exponential ones),
   50 outcomes each; the median of |Δ̂/Δ − 1| with the near-flat member prior and
   with the host prior the service builds (members → prior_chain → MAP).
2. Signal quality per host: hosts whose signal source has precision p and
   recall r (γ = rΔ/p, ν = γ(1 − p)), crawls every ~1/Δ̄, decayed signal counts
   over the run; the host's precision 1 − e^{−θ_h} and recall Σγ̂p̂/ΣΔ̂ through
   the service's path (members, prior_chain, estimate).
"""

from __future__ import annotations

import argparse
import time

import numpy as np
from rich.console import Console
from rich.table import Table

from scheduler_core.estimate.change import fit_outcomes
from scheduler_core.estimate.hierarchy import GammaPrior
from scheduler_core.estimate.learn import History, Priors, estimate, prior_chain
from scheduler_core.estimate.members import members, weak_alpha_prior
from scheduler_core.estimate.rates import add_event, decayed_count, decayed_exposure

DAY = 86_400.0
DECAY_S = 30 * DAY
ROOT = {
    "weight": GammaPrior.from_mean(1 / DAY, 0.5),
    "signal_rate": GammaPrior.from_mean(1 / (7 * DAY), 0.5),
    "alpha": GammaPrior.from_mean(1 / (7 * DAY), 1.5),
    "theta": GammaPrior.from_mean(1.0, 1.5),
}


def change_rate_errors(
    rng: np.random.Generator, m: int, k: int, exponential: bool
) -> tuple[float, float]:
    delta = rng.uniform(0.2, 1.0, m) / DAY
    rho = np.exp(rng.uniform(np.log(0.25), np.log(4.0), m))
    mean_tau = 1.0 / (rho * delta)
    tau = (
        rng.exponential(mean_tau[:, None], (m, k))
        if exponential
        else np.repeat(mean_tau[:, None], k, 1)
    )
    z = rng.random((m, k)) < -np.expm1(-delta[:, None] * tau)
    n = np.zeros((m, k))
    mask = np.ones((m, k), dtype=bool)
    weak = fit_outcomes(tau, n, z, mask, weak_alpha_prior(_history(tau, n, z)), None).alpha
    hist = _history(tau, n, z)
    own = members(hist, ROOT["theta"], DECAY_S).stats()
    chain = prior_chain(ROOT, own, None, own, 5.0)["alpha"]
    host = fit_outcomes(
        tau, n, z, mask, (np.full(m, chain.shape), np.full(m, chain.rate)), None
    ).alpha
    return float(np.median(np.abs(weak / delta - 1))), float(np.median(np.abs(host / delta - 1)))


def _history(tau: np.ndarray, n: np.ndarray, z: np.ndarray) -> History:
    m = tau.shape[0]
    zeros = np.zeros(m)
    mask = np.ones(tau.shape, dtype=bool)
    return History(zeros, zeros, np.full(m, DECAY_S), tau, n, z, mask)


def signal_host(
    rng: np.random.Generator, m: int, precision: float, recall: float, days: float
) -> tuple[float, float, int]:
    """One host simulated event by event; returns (p̂ − p, r̂ − r, signals)."""
    delta = rng.uniform(0.2, 1.0, m) / DAY
    gamma = recall * delta / precision
    nu = gamma * (1 - precision)
    horizon = days * DAY
    outcomes, s_mass, s_ref = [], np.zeros(m), np.full(m, np.nan)
    signals = 0
    for i in range(m):
        changes = np.sort(rng.uniform(0, horizon, rng.poisson(delta[i] * horizon)))
        announced = changes[rng.random(changes.size) < recall]
        false = rng.uniform(0, horizon, rng.poisson(nu[i] * horizon))
        sig = np.sort(np.concatenate([announced, false]))
        signals += sig.size
        mass, ref = 0.0, None
        for t in sig:
            mass, ref = add_event(mass, ref, float(t), DECAY_S)
        s_mass[i], s_ref[i] = mass, np.nan if ref is None else ref
        crawls = np.arange(1.0, horizon / DAY) * DAY  # a crawl a day
        crawls = crawls[-64:]
        prev = np.concatenate([[crawls[0] - DAY], crawls[:-1]])
        row = []
        for a, b in zip(prev, crawls, strict=True):
            row.append(
                (
                    b - a,
                    int(((sig > a) & (sig <= b)).sum()),
                    bool(((changes > a) & (changes <= b)).any()),
                )
            )
        outcomes.append(row)
    counts = decayed_count(s_mass, s_ref, horizon, DECAY_S)
    exposure = decayed_exposure(np.zeros(m), horizon, DECAY_S)
    hist = History.create([0.0] * m, counts.tolist(), exposure.tolist(), outcomes)
    mem = members(hist, ROOT["theta"], DECAY_S)
    own = mem.stats()
    est = estimate(hist, Priors.stack([prior_chain(ROOT, own, None, own, 5.0)] * m))
    p_hat = -np.expm1(-mem.pooled_theta)
    prm = est.params
    r_hat = float(np.sum(prm.recall * prm.change_rate) / np.sum(prm.change_rate))
    return p_hat - precision, r_hat - recall, signals


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--seed", type=int, default=0)
    args = ap.parse_args()
    rng = np.random.default_rng(args.seed)
    t0 = time.perf_counter()
    console = Console()
    table = Table(title="Δ̂ after 50 crawls at rates Δ/4 … 4Δ: median |Δ̂/Δ − 1| (2,000 URLs)")
    for col in ("intervals", "near-flat prior", "host prior (service)", "target"):
        table.add_column(col)
    for exp in (False, True):
        weak, host = change_rate_errors(rng, 2000, 50, exp)
        table.add_row("exponential" if exp else "fixed", f"{weak:.3f}", f"{host:.3f}", "≤ 0.15")
    console.print(table)
    table = Table(title="signal quality per host (100 URLs, 120 days, a crawl a day)")
    for col in ("precision p", "recall r", "signals", "p̂ − p", "r̂ − r", "target"):
        table.add_column(col)
    for p, r in ((0.7, 0.6), (0.4, 0.9), (0.9, 0.3)):
        dp, dr, n = signal_host(rng, 100, p, r, 120.0)
        table.add_row(
            f"{p}", f"{r}", f"{n:,}", f"{dp:+.3f}", f"{dr:+.3f}", "|·| ≤ 0.05, ≥ 500 signals"
        )
    console.print(table)
    console.print(f"{time.perf_counter() - t0:.1f} s (seed {args.seed})")


if __name__ == "__main__":
    main()
