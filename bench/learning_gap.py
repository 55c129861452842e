"""Where learned parameters lose freshness against the oracle, in process.

    python bench/learning_gap.py [--urls 1000] [--days 200] [--seed 0] [--variant NAME ...]

(a smaller world keeps the default world's budget per URL, 0.1 crawls a day)

Runs the service's own code path (:class:`service.simulation.ServicePolicy`, the
path of ``crawlsched simulate -p crawlsched-learned``, 5 crawls a step) on the
default world (paper 004 §6.1: per-URL recall ~ Beta(0.25, 0.25), false signals
~ U(0.1, 0.6) × mean Δ), once per variant:

- ``oracle``: the world's true parameters registered as fixed (``--params oracle``);
- ``learned``: URLs registered bare, everything learned (``--params learned``);
- ``true-w-gamma``: learned, but after every estimate W and γ are replaced by the
  truth (α and θ learned);
- ``true-alpha-theta``: learned, α and θ replaced by the truth (W and γ learned);
- ``exact-prior``: learned W and γ; α and θ from the posterior mean of (α,
  precision) on a 24 × 15 grid whose prior is the world's own true population of
  (α, precision) (a histogram of the truth): the best any population prior can
  give, learned or configured, to a scheduler that plugs in a point estimate;
- ``em-prior``: the same posterior mean, the population learned instead: once a
  simulated day, the grid weights are refitted by EM to every URL's outcomes (the
  grid's nonparametric maximum likelihood, α up to 3/day).

The swaps wrap ``service.scheduler.learning.learn`` (the one function every
estimate of the service goes through: the relearn queue and the background
learner); nothing else changes.  Prints freshness (click-weighted, after the
warm-up) ± s.e. and the ratio to the oracle.  On the default world (2 cores):
~4 min per learned variant, ~8 for exact-prior, ~15 for em-prior.
"""

from __future__ import annotations

import argparse
import dataclasses
import time
from collections.abc import Awaitable, Callable, Sequence
from typing import Any

import numpy as np
from rich.console import Console
from rich.table import Table

import service.scheduler.learning as learning
from scheduler_core.estimate.learn import Estimates, to_params
from scheduler_core.params import FloatArray
from scheduler_core.sim import DAY_S, World, WorldSpec
from scheduler_core.sim.simulator import simulate
from service.scheduler.context import Context
from service.simulation import ServicePolicy
from service.store.base import UrlState

VARIANTS = ("oracle", "learned", "true-w-gamma", "true-alpha-theta", "exact-prior", "em-prior")
#: Grid of the grid-prior variants: α bins (one below 1e-3/day, the rest geometric up
#: to the top) and precision bins (uniform on [0, 1]).
ALPHA_BINS, PRECISION_BINS = 24, 15
#: Top of the α grid when the truth is not known (em-prior), 1/s.
ALPHA_TOP = 3.0 / DAY_S
#: em-prior: simulated seconds between two fits of the population, and EM iterations.
EM_EVERY_S, EM_ITERS = DAY_S, 200


class GridPrior:
    """A population of (α, precision) on a grid: atoms, prior weights, posterior means."""

    def __init__(self, top: float) -> None:
        a_edges = np.concatenate([[0.0], np.geomspace(1e-3 / DAY_S, top, ALPHA_BINS)])
        p_edges = np.linspace(0.0, 1.0, PRECISION_BINS + 1)
        self.edges = (a_edges, p_edges)
        a_mid = np.concatenate([[a_edges[1] / 2], np.sqrt(a_edges[1:-1] * a_edges[2:])])
        p_mid = (p_edges[:-1] + p_edges[1:]) / 2
        aa, pp = np.meshgrid(a_mid, p_mid, indexing="ij")
        self.alpha, self.precision = aa.ravel(), pp.ravel()
        self.theta = -np.log1p(-self.precision)
        self.log_prior = np.full(self.alpha.size, -np.log(self.alpha.size))

    @classmethod
    def of_truth(cls, alpha: FloatArray, precision: FloatArray) -> GridPrior:
        """The world's true population as the prior (a half count in every cell)."""
        grid = cls(max(float(alpha.max()), 2e-3 / DAY_S) * (1 + 1e-9))
        counts, _, _ = np.histogram2d(alpha, precision, bins=grid.edges)
        weights = counts.ravel() + 0.5
        grid.log_prior = np.log(weights / weights.sum())
        return grid

    def log_likelihood(
        self, tau: FloatArray, n: FloatArray, z: np.ndarray, mask: np.ndarray
    ) -> FloatArray:
        """ln P(outcomes | atom), shape (m, atoms), log-link model (004 App. E)."""
        m = tau.shape[0]
        out = np.empty((m, self.alpha.size))
        for lo in range(0, m, 64):
            sl = slice(lo, lo + 64)
            x = (
                self.alpha[None, :, None] * tau[sl, None, :]
                + self.theta[None, :, None] * n[sl, None, :]
            )
            changed = np.log(-np.expm1(-np.maximum(x, 1e-300)))
            ll = np.where(z[sl, None, :], changed, -x)
            out[sl] = np.where(mask[sl, None, :], ll, 0.0).sum(axis=2)
        return out

    def _posterior(self, loglik: FloatArray) -> FloatArray:
        log_post = self.log_prior + loglik
        w = np.exp(log_post - log_post.max(axis=1, keepdims=True))
        return np.asarray(w / w.sum(axis=1, keepdims=True))

    def fit(self, loglik: FloatArray, iters: int) -> None:
        """The prior weights by EM (the grid NPMLE of the population) from URLs'
        log-likelihoods (m, atoms), starting from the current weights."""
        for _ in range(iters):
            post = self._posterior(loglik)
            self.log_prior = np.log(np.maximum(post.mean(axis=0), 1e-300))

    def posterior_mean(
        self, tau: FloatArray, n: FloatArray, z: np.ndarray, mask: np.ndarray
    ) -> tuple[FloatArray, FloatArray]:
        """E[α] and E[precision] given outcome windows (m, K)."""
        post = self._posterior(self.log_likelihood(tau, n, z, mask))
        return post @ self.alpha, post @ self.precision


Swap = Callable[[Context, Sequence[UrlState], Estimates], Estimates]
Refresh = Callable[[Context], Awaitable[None]]


def _swap(world: World, variant: str) -> tuple[Swap | None, Refresh | None]:
    """The post-processing of every estimate for ``variant`` (None: none), and what
    to run before it (em-prior: refit the population once a simulated day)."""
    if variant in ("oracle", "learned"):
        return None, None
    index = {u: i for i, u in enumerate(world.urls)}
    p = world.params
    true_theta = -np.log1p(-np.minimum(p.precision, 1 - 1e-12))
    prior = (
        GridPrior(ALPHA_TOP)
        if variant == "em-prior"
        else GridPrior.of_truth(p.unsignalled_change_rate, p.precision)
    )

    def swap(ctx: Context, states: Sequence[UrlState], est: Estimates) -> Estimates:
        idx = np.array([index[s.url] for s in states], dtype=np.int64)
        w, g, a, t = est.weight, est.signal_rate, est.alpha, est.theta
        if variant == "true-w-gamma":
            w, g = p.weight[idx], p.signal_rate[idx]
        elif variant == "true-alpha-theta":
            a, t = p.unsignalled_change_rate[idx], true_theta[idx]
        else:  # exact-prior, em-prior
            s = ctx.settings
            h = learning.history_of(states, ctx.clock.now(), s.estimate_decay_s)
            a, prec = prior.posterior_mean(h.tau, h.n, h.z, h.mask)
            t = -np.log1p(-prec)
        return dataclasses.replace(
            est, weight=w, signal_rate=g, alpha=a, theta=t, params=to_params(w, g, a, t)
        )

    fitted_at = [-np.inf]

    async def refresh(ctx: Context) -> None:
        now = ctx.clock.now()
        if now - fitted_at[0] < EM_EVERY_S:
            return
        fitted_at[0] = now
        states = [u for h in world.hosts for u in await ctx.store.host_urls(h)]
        h = learning.history_of(states, now, ctx.settings.estimate_decay_s)
        prior.fit(prior.log_likelihood(h.tau, h.n, h.z, h.mask), EM_ITERS)

    return swap, refresh if variant == "em-prior" else None


def run(world: World, variant: str) -> tuple[float, float, float]:
    """(freshness, s.e., wall s) of one variant."""
    swap, refresh = _swap(world, variant)
    real = learning.learn

    async def learn(ctx: Context, states: Sequence[UrlState], outcomes: bool = True) -> Any:
        got = await real(ctx, states, outcomes)
        if swap is None or not got.states:
            return got
        if refresh is not None:
            await refresh(ctx)
        return dataclasses.replace(got, estimates=swap(ctx, got.states, got.estimates))

    policy = ServicePolicy(params="oracle" if variant == "oracle" else "learned")
    learning.learn = learn
    try:
        t0 = time.perf_counter()
        res = simulate(world, policy, crawls_per_step=5)
        return res.accuracy, res.report.click_stderr, time.perf_counter() - t0
    finally:
        learning.learn = real


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--urls", type=int, default=1000)
    ap.add_argument("--days", type=float, default=200.0)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--variant", action="append", choices=VARIANTS, default=None)
    args = ap.parse_args()
    variants = args.variant or list(VARIANTS)
    if "oracle" not in variants:
        variants.insert(0, "oracle")
    # the default world's budget per URL: 100 crawls a day for 1,000 URLs
    spec = WorldSpec(
        urls=args.urls, hosts=min(50, args.urls), budget_per_day=args.urls / 10.0,
        duration_days=args.days, seed=args.seed,
    )  # fmt: skip
    world = World.generate(spec)
    console = Console(width=110)
    rows = []
    for v in variants:
        console.log(f"running {v} ...")
        rows.append((v, *run(world, v)))
    oracle = rows[variants.index("oracle")][1]
    table = Table(
        title=f"{args.urls:,} URLs, {args.days:g} days, {spec.budget_per_day:g} crawls a day, "
        f"seed {args.seed}: the service in process, 5 crawls a step"
    )
    for col in ("variant", "freshness", "± s.e.", "÷ oracle", "wall s"):
        table.add_column(col, justify="left" if col == "variant" else "right")
    for v, acc, se, wall in rows:
        table.add_row(v, f"{acc:.4f}", f"{se:.4f}", f"{acc / oracle:.3f}", f"{wall:.0f}")
    console.print(table)


if __name__ == "__main__":
    main()
