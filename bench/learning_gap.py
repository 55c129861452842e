"""Where learned parameters lose freshness against the oracle, in process.

    python bench/learning_gap.py [--world NAME] [--urls 1000] [--days 200] [--seed 0]
                                 [--variant NAME ...] [--truth-from-day D] [--classes] [--hosts]
                                 [--starved] [--host-trace DAY ...] [--probe-days D]
                                 [--probe-urls K] [--evidence-trace]

(a smaller world keeps its budget per URL; ``--world`` is one of ``bench/anchors.py``'s
worlds: ``default`` (the default), ``default per_host``, ``web per_url``, ``web per_host``)

Runs the service's own code path (:class:`service.simulation.ServicePolicy`, the
path of ``crawlsched simulate -p crawlsched-learned``, 5 crawls a step) on the
default world (paper 004 §6.1: per-URL recall ~ Beta(0.25, 0.25), false signals
~ U(0.1, 0.6) × mean Δ), once per variant:

- ``oracle``: the world's true parameters registered as fixed (``--params oracle``);
- ``learned``: URLs registered bare, everything learned (``--params learned``);
- ``true-w-gamma``: learned, but after every estimate W and γ are replaced by the
  truth (α and θ learned);
- ``true-alpha-theta``: learned, α and θ replaced by the truth (W and γ learned);
- ``true-w``, ``true-gamma``, ``true-alpha``, ``true-theta``: learned, that one
  parameter replaced by the truth;
- ``true-alpha-theta-bound-hosts`` and ``true-alpha-theta-other-hosts``: α and θ
  replaced by the truth only on the URLs of hosts whose crawl delay allows fewer
  fetches than the budget (politeness-bound, as the `web` preset's one-a-day hosts
  are), or only on the others: which hosts' URLs hold what the outcomes do not tell;
- ``true-source``: learned, but the signal source's quality true: θ, and α/γ (α =
  γ·p(1 − r)/r, a host's own constant where recall and precision are the host's,
  ``signal_quality: per_host``), with α at the learned γ: what pooling a host's
  outcomes into its source's quality could give at best;
- ``exact-prior``: learned W and γ; α and θ from the posterior mean of (α,
  precision) on a grid geometric in α and in θ (32 bins each over the truth's range,
  one more from 0) whose prior is the world's own true population (a histogram of
  the truth): what the exact population prior gives a scheduler that plugs in
  posterior means;
- ``exact-prior-ce``: the same, α the certainty equivalent over URLs ÷ budget (t):
  −ln E[e^{−αt}]/t, the rate that leaves a page fresh t after a crawl as often as
  the posterior does, which a population spread over decades puts far below E[α];
- ``exact-prior-ce-own``: the same over each URL's own median crawl interval (URLs ÷
  budget until it has one);
- ``em-prior``: the same posterior mean, the population learned instead: once a
  simulated day, the weights of a 24 × 15 grid (α geometric from 1e-3/day up to
  3/day, precision uniform) are refitted by EM to every URL's outcomes (the grid's
  nonparametric maximum likelihood);
- ``ems-prior`` and ``ems-prior-ce-own``: posterior means, and α's certainty
  equivalent over each URL's own interval, under a population learned by smoothed EM
  (each step's weights averaged with their neighbours') once a simulated day, on a
  grid geometric in α (10⁻⁴ … 10³ × budget ÷ URLs) and in θ (10⁻⁴ … 20);
- ``host-posterior``: learned, but each host's signal source taken as one (α/γ, θ):
  once a simulated day, each host's posterior on a 31 × 21 grid (α/γ geometric over
  1e-3 … 1e3, θ over 1e-3 … 10) given all its URLs' outcomes, each URL's γ integrated
  over the Gamma posterior of its signal counts (8 quantiles), under the hosts'
  population (the grid's NPMLE over the hosts, by EM); α = (α/γ)_h·γ̂ and θ = θ_h,
  the posterior's geometric means, replace the learned ones;
- ``host-posterior-normal``: the same with the hosts' population a bivariate normal
  in (ln α/γ, ln θ) fitted by EM (each principal variance at least 0.25) instead of
  the NPMLE, which with few hosts sits on a few atoms;
- ``source-posterior``: the same, only while the outcomes say that signal quality is
  each host's source's: the log Bayes factor of that model against each URL drawing
  its own (α/γ, θ) from a population of URLs (their own NPMLE), on the same
  outcomes, above ln 20 (the day it first passes is printed);
- ``source-prior``: while that evidence passes, each URL's own MAP of (α, θ) under
  strong priors (shape MAX_SHAPE) at its host's posterior instead: the estimator
  with the host posteriors as priors;
- ``true-source-prior``: the source's true θ and α/γ as in ``true-source``, but each
  URL's α its own MAP given θ under a prior at α/γ·γ̂ as certain as γ̂ (shape C + 2
  for C decayed signals): what an estimator that ties α to γ by the source's α/γ and
  still lets a URL's outcomes move it could give at best;
- ``host-normal-prior``: the same with ``host-posterior-normal``'s posteriors in
  place of the truth, θ = θ_h and α/γ's certainty 1/Var(ln α/γ) of the host's
  posterior added to γ̂'s;
- ``learned-probe`` and ``host-normal-prior-probe``: ``learned`` and
  ``host-normal-prior`` with exploration by optimism: during the first
  ``--probe-days`` (20) simulated days, while a host's ``host-posterior-normal``
  posterior is uncertain (standard deviation of ln θ above 0.3 or of ln α/γ above
  0.5), its ``--probe-urls`` (1) heaviest URLs with signals are handed to the
  scheduler as if their signals announced every change (precision ≈ 0.999, α ≈ 0),
  so that it crawls them after each signal: intervals of one signal tell a source's
  precision apart from its unannounced changes, which passive outcomes with several
  signals an interval do not;
- ``host-normal-prior-binned``: ``host-normal-prior`` with each host's likelihood
  from per-host sufficient statistics, the form a service could keep: at each
  URL's point γ̂, unchanged outcomes through the sums of γ̂τ and n, changed ones
  through a histogram of (ln γ̂τ, n) (48 bins of ln γ̂τ over 1e-4 … 1e4; n exact
  below 8, in bins of a quarter of ln n above), instead of every URL's outcomes
  on the grid at 8 quantiles of γ (its evidence, unused, is not the Bayes
  factor).

With ``--truth-from-day D`` the ``true-*`` swaps start on simulated day D (the
estimates before it stay learned): how much of a variant's gain lies in the first D
days, while the service knows little of each URL.  The swaps wrap
``service.scheduler.learning.learn`` (the one function every
estimate of the service goes through: the relearn queue and the background
learner); nothing else changes.  Prints freshness (click-weighted, after the
warm-up) ± s.e. and the ratio to the oracle, the online λ₀ against the offline
solver's on the world's true parameters and on the parameters the service held at
the end of the run (the learned ones), and the share of dispatches that went out
before their URL was due (capacity the due URLs left); with ``--classes``, per
class of pages (by true W, Δ, precision and signal rate, and the pages of
politeness-bound hosts by Δ): their click share, freshness and crawls per variant,
the median error of the learned W, Δ, γ (log ratio), precision and recall, and the
clicks the learned run loses against the oracle; with
``--hosts``, per host: its true precision and recall, freshness and crawls per
variant, the learned run's median precision and recall, and the clicks it loses
against the oracle; with ``--starved``, the URLs a run stopped crawling (its last
crawl before the run's midpoint) that the oracle crawled at least 4 times after the
warm-up, the clicks lost on them, and the learned run's such URLs one by one; with
``--evidence-trace``, the service's evidence of one signal source per host (the log
Bayes factor, :func:`scheduler_core.estimate.source.source_evidence`) at the end of
each learner cycle, day by day.  On the default world (2 cores): ~4 min per learned
variant, ~17 for exact-prior, ~15 for em-prior; at ``--urls 200`` about 1–2 min per
learned variant, 2.5–4 for exact-prior.
"""

from __future__ import annotations

import argparse
import dataclasses
import math
import time
from collections.abc import Awaitable, Callable, Sequence
from typing import Any

import numpy as np
from rich.console import Console
from rich.table import Table
from scipy.ndimage import convolve1d
from scipy.special import logsumexp
from scipy.stats import gamma as gamma_dist

import service.scheduler.learning as learning
from anchors import WORLDS, world_spec
from scheduler_core.estimate.change import fit_outcomes
from scheduler_core.estimate.hierarchy import MAX_SHAPE
from scheduler_core.estimate.learn import URL_ALPHA_SHAPE, Estimates, History, to_params
from scheduler_core.estimate.pooled import fit_rate_with_offset
from scheduler_core.estimate.source import ATOMS, host_log_likelihood
from scheduler_core.host_optimum import solve_host_optimum
from scheduler_core.params import FloatArray, UrlParams
from scheduler_core.sim import DAY_S, World
from scheduler_core.sim.evaluate import fresh_clicks_by_url, subset_freshness
from scheduler_core.sim.simulator import problem_of, simulate
from scheduler_core.value import crawl_value
from service.metrics import Metrics
from service.scheduler.context import Context
from service.settings import Settings
from service.simulation import ServicePolicy
from service.store.estimate_columns import EstimateColumns, estimate_table

VARIANTS = (
    "oracle", "learned", "true-w-gamma", "true-alpha-theta", "true-w", "true-gamma",
    "true-alpha", "true-theta", "true-source", "exact-prior", "exact-prior-ce",
    "exact-prior-ce-own", "em-prior", "ems-prior", "ems-prior-ce-own", "host-posterior",
    "host-posterior-normal", "source-posterior", "source-prior", "true-source-prior",
    "host-normal-prior", "learned-probe", "host-normal-prior-probe", "host-normal-prior-binned",
    "true-alpha-theta-bound-hosts", "true-alpha-theta-other-hosts", "learned-quick-recrawl",
    "exact-prior-ce-own-quick-recrawl",
)  # fmt: skip
#: learned-quick-recrawl: a URL comes due one host gap after its last crawl, once,
#: while all its outcomes found a change over intervals longer than this many gaps.
QUICK_RECRAWL_GAPS = 3.0
#: Grid of the grid-prior variants: α bins (one below 1e-3/day, the rest geometric up
#: to the top) and precision bins (uniform on [0, 1]).
ALPHA_BINS, PRECISION_BINS = 24, 15
#: exact-prior: bins of α and of θ above 0 (geometric over the truth's range).
TRUTH_BINS = 32
#: Top of the α grid when the truth is not known (em-prior), 1/s.
ALPHA_TOP = 3.0 / DAY_S
#: em-prior: simulated seconds between two fits of the population, and EM iterations.
EM_EVERY_S, EM_ITERS = DAY_S, 200
#: host-posterior: quantiles of each URL's γ posterior averaged over (the grid of
#: (α/γ, θ) is the service's, :data:`scheduler_core.estimate.source.ATOMS`).
GAMMA_POINTS = 8
#: source-posterior: the evidence (log Bayes factor, nats) above which it takes the
#: hosts' posteriors: 20 to 1.
SOURCE_EVIDENCE = float(np.log(20.0))
#: The variants that fit each host's signal source (:class:`HostGrid`).
HOST_VARIANTS = (
    "host-posterior", "host-posterior-normal", "source-posterior", "source-prior",
    "host-normal-prior", "learned-probe", "host-normal-prior-probe", "host-normal-prior-binned",
)  # fmt: skip
#: The host variants whose hosts' population is a bivariate normal.
NORMAL_VARIANTS = (
    "host-posterior-normal", "host-normal-prior", "learned-probe", "host-normal-prior-probe",
    "host-normal-prior-binned",
)  # fmt: skip
#: host-posterior-normal: least variance of each principal axis of the hosts' normal
#: population in (ln α/γ, ln θ), and its EM iterations.
NORMAL_MIN_VAR, NORMAL_ITERS = 0.25, 100
#: host-posterior: least weight of an atom in the populations' EM (no atom dies).
HOST_EM_FLOOR = 1e-12
#: The probe variants: a host's source counts as uncertain while its posterior's
#: standard deviation of ln θ or of ln(α/γ) is above these.
PROBE_SD_THETA, PROBE_SD_C = 0.3, 0.5
#: The probe variants: a probing URL's θ (precision 1 − e^{−7} ≈ 0.999) and α/γ.
PROBE_THETA, PROBE_ALPHA_PER_SIGNAL = 7.0, 1e-3


@dataclasses.dataclass(frozen=True)
class Probe:
    """The probe variants' exploration: for the first ``days`` simulated days, the
    ``urls`` heaviest URLs (by Ŵ) with signals of each host whose source is uncertain."""

    days: float = 20.0
    urls: int = 1


def probe_estimates(
    probe: Probe,
    now_s: float,
    hosts: Sequence[str],
    sd: tuple[FloatArray, FloatArray],
    w: FloatArray,
    g: FloatArray,
    a: FloatArray,
    t: FloatArray,
) -> tuple[FloatArray, FloatArray]:
    """Exploration by optimism: (α, θ), shape (m,) each, with the probing URLs' set
    to signals that announce every change (θ = :data:`PROBE_THETA`, α =
    :data:`PROBE_ALPHA_PER_SIGNAL`·γ̂), so that the scheduler crawls them after each
    signal, in intervals of one signal, which tell the host's precision apart from
    its unannounced changes.  ``sd``: each URL's host posterior's standard deviations
    of ln(α/γ) and ln θ (NaN: no posterior yet, uncertain); ``w``, ``g``: Ŵ and γ̂
    (1/s); ``a``, ``t``: the estimates the others keep.  Source: docs/freshness.md,
    "Exploration"."""
    if now_s > probe.days * DAY_S or probe.urls < 1:
        return a, t
    sd_c, sd_t = sd
    unsure = ~((sd_c <= PROBE_SD_C) & (sd_t <= PROBE_SD_THETA))  # NaN compares False
    names = np.asarray(hosts)
    chosen = np.zeros(len(names), dtype=bool)
    for host in sorted(set(names[unsure].tolist())):
        rows = np.flatnonzero((names == host) & (g > 0))
        chosen[rows[np.argsort(-w[rows], kind="stable")[: probe.urls]]] = True
    return np.where(chosen, PROBE_ALPHA_PER_SIGNAL * g, a), np.where(chosen, PROBE_THETA, t)


def politeness_bound(world: World) -> np.ndarray:
    """Which hosts' crawl delay allows fewer fetches than the budget, shape (H,)."""
    return np.asarray(world.crawl_delay_s * world.budget_per_s > 1.0)


def _outcome_log_likelihood(x: FloatArray, z: np.ndarray) -> FloatArray:
    """ln P(each outcome) of the log-link model (paper 004 App. E), η = ``x``: ln(1 −
    e^{−η}) where changed (``z``), −η where not; same shape as ``x``."""
    changed = np.log(-np.expm1(-np.maximum(x, 1e-300)))
    return np.asarray(np.where(z, changed, -x))


def _posterior(log_prior: FloatArray, log_lik: FloatArray) -> FloatArray:
    """Posterior weights over the atoms, (members, atoms)."""
    log_post = log_prior + log_lik
    w = np.exp(log_post - log_post.max(axis=1, keepdims=True))
    return np.asarray(w / w.sum(axis=1, keepdims=True))


def _geometric_edges(lo: float, hi: float) -> FloatArray:
    """Bin edges: 0, then :data:`TRUTH_BINS` geometric from ``lo`` to ``hi``."""
    return np.concatenate([[0.0], np.geomspace(lo, hi, TRUTH_BINS)])


def _median_interval(tau: FloatArray, mask: np.ndarray, default_s: float) -> FloatArray:
    """Each URL's median interval between crawls (s), shape (m,), from its outcome
    windows (m, K); ``default_s`` where it has none."""
    out = np.full(tau.shape[0], default_s)
    rows = mask.any(axis=1)
    out[rows] = np.nanmedian(np.where(mask[rows], tau[rows], np.nan), axis=1)
    return out


def _em(
    log_lik: FloatArray, iters: int, log_prior: FloatArray | None = None, floor: float = 1e-300
) -> FloatArray:
    """The grid NPMLE of a population: log prior weights over the atoms fitted by EM
    to members' log-likelihoods (members, atoms), from ``log_prior`` (uniform), each
    weight kept at ``floor`` or more."""
    if log_prior is None:
        log_prior = np.full(log_lik.shape[1], -np.log(log_lik.shape[1]))
    for _ in range(iters):
        log_prior = np.log(np.maximum(_posterior(log_prior, log_lik).mean(axis=0), floor))
    return log_prior


class GridPrior:
    """A population of (α, precision) on a grid: atoms, prior weights, posterior means."""

    def __init__(self, a_edges: FloatArray, p_edges: FloatArray, smoothed: bool = False) -> None:
        """Atoms at the geometric middle of each α bin (half the first bin's top for a
        bin from 0) and at the middle of each precision bin; uniform weights;
        ``smoothed``: :meth:`fit` smooths each EM step (EMS) rather than plain EM."""
        self.edges = (a_edges, p_edges)
        a_mid = np.concatenate([[a_edges[1] / 2], np.sqrt(a_edges[1:-1] * a_edges[2:])])
        p_mid = (p_edges[:-1] + p_edges[1:]) / 2
        aa, pp = np.meshgrid(a_mid, p_mid, indexing="ij")
        self.alpha, self.precision = aa.ravel(), pp.ravel()
        self.theta = -np.log1p(-self.precision)
        self.log_prior = np.full(self.alpha.size, -np.log(self.alpha.size))
        self.smoothed = smoothed

    @classmethod
    def coarse(cls, top: float) -> GridPrior:
        """α bins one below 1e-3/day and the rest geometric up to ``top`` (1/s);
        precision bins uniform on [0, 1] (:data:`ALPHA_BINS` × :data:`PRECISION_BINS`)."""
        a_edges = np.concatenate([[0.0], np.geomspace(1e-3 / DAY_S, top, ALPHA_BINS)])
        return cls(a_edges, np.linspace(0.0, 1.0, PRECISION_BINS + 1))

    @classmethod
    def geometric(
        cls, alpha: tuple[float, float], theta: tuple[float, float], smoothed: bool = False
    ) -> GridPrior:
        """:data:`TRUTH_BINS` bins geometric in α (1/s) and in θ over the given ranges,
        one more of each from 0; uniform weights; ``smoothed``: fitted by EMS."""
        return cls(_geometric_edges(*alpha), -np.expm1(-_geometric_edges(*theta)), smoothed)

    @classmethod
    def of_truth(cls, alpha: FloatArray, precision: FloatArray) -> GridPrior:
        """The world's true population as the prior (a half count in every cell), on a
        grid geometric in α and in θ = −ln(1 − precision) over the truth's range
        (:data:`TRUTH_BINS` bins each, one more from 0), so that rates and signal
        qualities spread over decades (the `web` preset) keep their spread."""
        theta = -np.log1p(-np.minimum(precision, 1 - 1e-12))

        def span(x: FloatArray) -> tuple[float, float]:
            pos = x[x > 0]
            lo, hi = float(pos.min()), float(pos.max()) * (1 + 1e-9)
            return lo, max(hi, 2 * lo)

        a_span, t_span = span(alpha), span(theta)
        grid = cls.geometric(a_span, t_span)
        bins = (grid.edges[0], _geometric_edges(*t_span))
        counts, _, _ = np.histogram2d(alpha, theta, bins=bins)
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
            ll = _outcome_log_likelihood(x, z[sl, None, :])
            out[sl] = np.where(mask[sl, None, :], ll, 0.0).sum(axis=2)
        return out

    def fit(self, loglik: FloatArray, iters: int) -> None:
        """The prior weights by EM (the grid NPMLE of the population) from URLs'
        log-likelihoods (m, atoms), starting from the current weights; on a
        :meth:`geometric` grid smoothed EM (EMS: each step's weights averaged with
        their neighbours', a binomial kernel of one bin in each direction)."""
        if not self.smoothed:
            self.log_prior = _em(loglik, iters, self.log_prior)
            return
        shape = (self.edges[0].size - 1, self.edges[1].size - 1)
        log_prior = self.log_prior
        for _ in range(iters):
            w = _posterior(log_prior, loglik).mean(axis=0).reshape(shape)
            for axis in (0, 1):
                w = convolve1d(w, [0.25, 0.5, 0.25], axis=axis, mode="nearest")
            log_prior = np.log(np.maximum(w.ravel() / w.sum(), 1e-300))
        self.log_prior = log_prior

    def posterior_point(
        self,
        tau: FloatArray,
        n: FloatArray,
        z: np.ndarray,
        mask: np.ndarray,
        horizon_s: float | FloatArray | None = None,
    ) -> tuple[FloatArray, FloatArray]:
        """E[α] and E[precision] given outcome windows (m, K); with ``horizon_s`` (t,
        s), α's certainty equivalent over t instead of its mean: −ln E[e^{−αt}]/t, the
        rate that leaves a page fresh t after a crawl as often as the posterior does
        (θ = −ln(1 − E[precision]) is the same for one signal)."""
        post = _posterior(self.log_prior, self.log_likelihood(tau, n, z, mask))
        if horizon_s is None:
            return post @ self.alpha, post @ self.precision
        t = np.broadcast_to(np.asarray(horizon_s, dtype=np.float64), (post.shape[0],))
        fresh = (post * np.exp(-self.alpha[None, :] * t[:, None])).sum(axis=1)
        return -np.log(np.maximum(fresh, 1e-300)) / t, post @ self.precision


class HostGrid:
    """Signal quality as a host's source's: its (α/γ, θ) on a grid, each host's posterior
    given all of its URLs' outcomes (each URL's γ integrated over its signal counts'
    Gamma posterior), the hosts' population its grid NPMLE; and the evidence for it,
    the log Bayes factor of that model against each URL drawing its own (α/γ, θ) from
    a population of URLs (its own NPMLE), both on the same outcomes."""

    def __init__(self, normal: bool = False) -> None:
        self.normal = normal
        self.c, self.theta = ATOMS  # the service's grid (31 × 21)
        self.fit_c: dict[str, float] = {}
        self.fit_theta: dict[str, float] = {}
        #: each host's posterior standard deviation of ln(α/γ) and of ln θ
        self.sd_c: dict[str, float] = {}
        self.sd_theta: dict[str, float] = {}
        self.evidence = 0.0

    def of_hosts(self, hosts: list[str]) -> tuple[FloatArray, FloatArray]:
        """The fitted α/γ and θ of each of ``hosts``, shape (m,) each (NaN: no fit)."""
        c = np.array([self.fit_c.get(h, np.nan) for h in hosts])
        return c, np.array([self.fit_theta.get(h, np.nan) for h in hosts])

    def sd_of_hosts(self, hosts: list[str]) -> tuple[FloatArray, FloatArray]:
        """The posterior standard deviations of ln(α/γ) and ln θ of each of ``hosts``,
        shape (m,) each (NaN: no fit)."""
        sd_c = np.array([self.sd_c.get(h, np.nan) for h in hosts])
        return sd_c, np.array([self.sd_theta.get(h, np.nan) for h in hosts])

    def url_log_likelihood(self, h: History) -> FloatArray:
        """ln P(outcomes | atom) of a host's URLs with outcomes, shape (urls, atoms): the
        log of the mean over :data:`GAMMA_POINTS` quantiles of each URL's γ posterior."""
        q = (np.arange(GAMMA_POINTS) + 0.5) / GAMMA_POINTS
        rows = []
        for i in range(h.m):
            k = h.mask[i]
            if not k.any() or not h.exposure[i] > 0:
                continue
            g = gamma_dist.ppf(q, h.signals[i] + 0.5, scale=1.0 / h.exposure[i])  # (Q,)
            tau, n, z = h.tau[i][k], h.n[i][k], h.z[i][k]
            x = (
                self.c[None, :, None] * g[:, None, None] * tau[None, None, :]
                + self.theta[None, :, None] * n[None, None, :]
            )  # (Q, atoms, K)
            ll = _outcome_log_likelihood(x, z[None, None, :]).sum(axis=2)  # (Q, atoms)
            rows.append(logsumexp(ll, axis=0) - np.log(GAMMA_POINTS))
        return np.array(rows).reshape(-1, self.c.size)

    def binned_log_likelihood(self, h: History) -> FloatArray:
        """The host's ln P(outcomes | atom), shape (1, atoms) (or (0, atoms) without
        outcomes), from per-host sufficient statistics, as the service's learner
        computes it (:func:`scheduler_core.estimate.source.host_log_likelihood`, whose
        grid is this one)."""
        ll = host_log_likelihood(h)
        return np.zeros((0, self.c.size)) if ll is None else ll[None, :]

    def refit(self, by_host: dict[str, FloatArray]) -> None:
        """The hosts' posteriors (geometric means of α/γ and θ) under the hosts'
        population, and the evidence, from each host's URLs' log-likelihoods."""
        hosts = [name for name, ll in by_host.items() if len(ll)]
        if not hosts:
            return
        per_host = np.array([by_host[name].sum(axis=0) for name in hosts])
        per_url = np.concatenate([by_host[name] for name in hosts])
        lp = _em(per_host, EM_ITERS, floor=HOST_EM_FLOOR) + per_host
        lp_url = _em(per_url, EM_ITERS, floor=HOST_EM_FLOOR) + per_url
        self.evidence = float(logsumexp(lp, axis=1).sum() - logsumexp(lp_url, axis=1).sum())
        if self.normal:
            lp = self._normal_population(per_host) + per_host
        w = _posterior(np.zeros(self.c.size), lp)
        for j, name in enumerate(hosts):
            for atoms, fit, sd in ((self.c, self.fit_c, self.sd_c),
                                   (self.theta, self.fit_theta, self.sd_theta)):  # fmt: skip
                mean = float(w[j] @ np.log(atoms))
                fit[name] = float(np.exp(mean))
                sd[name] = float(np.sqrt(max(w[j] @ np.log(atoms) ** 2 - mean**2, 0.0)))

    def _normal_population(self, per_host: FloatArray) -> FloatArray:
        """Log weights over the atoms of the hosts' population as a bivariate normal in
        (ln α/γ, ln θ), its mean and covariance fitted by EM to the hosts'
        log-likelihoods (hosts, atoms); each principal variance at least
        :data:`NORMAL_MIN_VAR`, so that no host is put on another's atom."""
        x = np.stack([np.log(self.c), np.log(self.theta)], axis=1)  # (atoms, 2)
        mu, cov = x.mean(axis=0), np.diag([4.0, 4.0])
        log_pop = np.zeros(self.c.size)
        for _ in range(NORMAL_ITERS):
            d = x - mu
            log_pop = -0.5 * np.einsum("ai,ij,aj->a", d, np.linalg.inv(cov), d)
            log_pop -= logsumexp(log_pop)
            w = _posterior(log_pop, per_host)
            mu = (w @ x).mean(axis=0)
            cov = np.einsum("ha,ai,aj->ij", w, x, x) / len(w) - np.outer(mu, mu)
            var, axes = np.linalg.eigh(cov)
            cov = (axes * np.maximum(var, NORMAL_MIN_VAR)) @ axes.T
        return log_pop


def _tied_alpha(
    ctx: Context,
    cols: EstimateColumns,
    signal_rate: FloatArray,
    per_signal: FloatArray,
    theta: FloatArray,
    per_signal_shape: FloatArray | float,
) -> FloatArray:
    """Each URL's α (1/s, shape (m,)) where its source's α/γ (``per_signal``) and θ are
    given: its MAP given θ (:func:`.pooled.fit_rate_with_offset`) under a Gamma prior
    whose mode is α/γ·γ̂ and whose shape holds both uncertainties, 1/(1/k_c + 1/k_γ):
    k_c = ``per_signal_shape`` (∞ where α/γ is known), k_γ = C + 2 for C decayed
    signals (γ̂'s own certainty, a Gamma of shape C + 1, plus one); at least
    :data:`URL_ALPHA_SHAPE`.  A URL without outcomes, signals or α/γ > 0 gets α/γ·γ̂."""
    h = learning.history_of(cols, ctx.clock.now(), ctx.settings.estimate_decay_s)
    plain = per_signal * signal_rate
    ok = (plain > 0) & h.mask.any(axis=1)
    shape = np.maximum(1.0 / (1.0 / per_signal_shape + 1.0 / (h.signals + 2.0)), URL_ALPHA_SHAPE)
    rate = (shape - 1.0) / np.where(ok, plain, 1.0)
    fit = fit_rate_with_offset(h.tau, theta[:, None] * h.n, h.z, h.mask, (shape, rate))
    return np.where(ok, fit, plain)


Swap = Callable[[Context, EstimateColumns, Estimates], Estimates]
Refresh = Callable[[Context], Awaitable[None]]


@dataclasses.dataclass(frozen=True)
class HostFit:
    """How well the hosts' posteriors knew their sources on one simulated day: over
    the URLs, the share with outcomes, and the medians of |p̂ − p| and |r̂ − r| (the
    precision p = 1 − e^{−θ} and the recall r = p/(c + p), c = α/γ: the host's,
    bounded, and what the decisions turn on) and of the posterior's standard
    deviations of ln c and ln θ, over URLs whose host has a posterior; and the host
    whose recall is furthest off: that error and the host's share of the clicks."""

    day: float
    with_outcomes: float
    err_precision: float
    err_recall: float
    sd_c: float
    sd_theta: float
    worst_recall: float
    worst_share: float


def _host_fit(world: World, grid: HostGrid, day: float, with_outcomes: int) -> HostFit:
    """:class:`HostFit` of ``grid``'s posteriors against ``world``'s truth."""
    p = world.params
    hosts = [world.hosts[j] for j in world.host_of]
    c, th = grid.of_hosts(hosts)
    known = ~np.isnan(c)
    prec = -np.expm1(-th)
    err_p = np.abs(prec - p.precision)[known]
    sd_c, sd_t = (sd[known] for sd in grid.sd_of_hosts(hosts))
    with np.errstate(invalid="ignore"):
        r_off = np.abs(prec / (c + prec) - p.recall)
    err_r = r_off[known]

    by_host = [
        (float(r_off[sel].max()), float(p.weight[sel].sum() / p.weight.sum()))
        for j in range(len(world.hosts))
        if (sel := (world.host_of == j) & known).any()
    ]
    worst = max(by_host, default=(float("nan"), float("nan")))

    def med(x: FloatArray) -> float:
        return float(np.median(x)) if len(x) else float("nan")

    return HostFit(
        day, with_outcomes / len(hosts), med(err_p), med(err_r), med(sd_c), med(sd_t), *worst
    )


def _swap(
    world: World, variant: str, truth_from_s: float = 0.0, probe: Probe = Probe()
) -> tuple[Swap | None, Refresh | None, list[HostFit]]:
    """The post-processing of every estimate for ``variant`` (None: none), what to
    run before it (em-prior: refit the population once a simulated day), and the
    host variants' daily :class:`HostFit` (filled as the run goes); the ``true-*``
    swaps from simulated time ``truth_from_s`` (s) on."""
    trace: list[HostFit] = []
    if variant in ("oracle", "learned"):
        return None, None, trace
    index = {u: i for i, u in enumerate(world.urls)}
    p = world.params
    true_theta = -np.log1p(-np.minimum(p.precision, 1 - 1e-12))
    with np.errstate(invalid="ignore", divide="ignore"):
        alpha_per_signal = np.where(
            p.signal_rate > 0, p.unsignalled_change_rate / p.signal_rate, 0.0
        )
    interval = len(world.urls) / world.budget_per_s  # URLs ÷ budget, s
    bound_host = politeness_bound(world)
    if variant == "em-prior":
        prior = GridPrior.coarse(ALPHA_TOP)
    elif variant.startswith("ems-prior"):
        prior = GridPrior.geometric((1e-4 / interval, 1e3 / interval), (1e-4, 20.0), True)
    else:
        prior = GridPrior.of_truth(p.unsignalled_change_rate, p.precision)

    def swap(ctx: Context, cols: EstimateColumns, est: Estimates) -> Estimates:
        idx = np.array([index[u] for u in cols.urls], dtype=np.int64)
        w, g, a, t = est.weight, est.signal_rate, est.alpha, est.theta
        if variant.startswith("true-") and ctx.clock.now() < truth_from_s:
            return est
        if variant == "true-w-gamma":
            w, g = p.weight[idx], p.signal_rate[idx]
        elif variant == "true-alpha-theta":
            a, t = p.unsignalled_change_rate[idx], true_theta[idx]
        elif variant.startswith("true-alpha-theta-"):
            on = bound_host[world.host_of[idx]] == variant.endswith("bound-hosts")
            a = np.where(on, p.unsignalled_change_rate[idx], a)
            t = np.where(on, true_theta[idx], t)
        elif variant == "true-source":
            a, t = alpha_per_signal[idx] * g, true_theta[idx]
        elif variant == "true-source-prior":
            t = true_theta[idx]
            a = _tied_alpha(ctx, cols, g, alpha_per_signal[idx], t, np.inf)
        elif variant.startswith("host-normal-prior"):
            c, th = grid.of_hosts(cols.hosts)
            known = ~np.isnan(c)
            sd, _ = grid.sd_of_hosts(cols.hosts)
            c, t = np.where(known, c, 0.0), np.where(known, th, t)
            shape = 1.0 / np.maximum(np.where(known, sd, 1.0) ** 2, 1e-12)
            a = np.where(known, _tied_alpha(ctx, cols, g, c, t, shape), a)
        elif variant in ("true-w", "true-gamma", "true-alpha", "true-theta"):
            truth = {
                "true-w": p.weight, "true-gamma": p.signal_rate,
                "true-alpha": p.unsignalled_change_rate, "true-theta": true_theta,
            }[variant][idx]  # fmt: skip
            w = truth if variant == "true-w" else w
            g = truth if variant == "true-gamma" else g
            a = truth if variant == "true-alpha" else a
            t = truth if variant == "true-theta" else t
        elif variant in ("host-posterior", "host-posterior-normal", "source-posterior"):
            if variant != "source-posterior" or grid.evidence > SOURCE_EVIDENCE:
                c, th = grid.of_hosts(cols.hosts)
                known = ~np.isnan(c)
                a = np.where(known, np.nan_to_num(c) * g, a)
                t = np.where(known, np.nan_to_num(th), t)
        elif variant == "source-prior":
            if grid.evidence > SOURCE_EVIDENCE:
                a, t = source_prior_fit(ctx, cols, g, a, t)
        elif variant == "learned-quick-recrawl":
            w = quick_recrawl(cols, w, g, a, t)
        elif variant != "learned-probe":  # exact-prior*, em-prior, ems-prior*
            s = ctx.settings
            h = learning.history_of(cols, ctx.clock.now(), s.estimate_decay_s)
            horizon: float | FloatArray | None = None
            if variant.endswith("-ce"):
                horizon = interval
            elif "-ce-own" in variant:
                horizon = _median_interval(h.tau, h.mask, interval)
            a, prec = prior.posterior_point(h.tau, h.n, h.z, h.mask, horizon)
            t = -np.log1p(-prec)
            if variant.endswith("-quick-recrawl"):
                w = quick_recrawl(cols, w, g, a, t)
        if variant.endswith("-probe"):
            host_sd = grid.sd_of_hosts(cols.hosts)
            a, t = probe_estimates(probe, ctx.clock.now(), cols.hosts, host_sd, w, g, a, t)
        return dataclasses.replace(
            est, weight=w, signal_rate=g, alpha=a, theta=t, params=to_params(w, g, a, t)
        )

    host_index = {h: j for j, h in enumerate(world.hosts)}
    flagged: dict[str, int] = {}  # learned-quick-recrawl: URL → its outcomes when flagged

    def quick_recrawl(
        cols: EstimateColumns, w: FloatArray, g: FloatArray, a: FloatArray, t: FloatArray
    ) -> FloatArray:
        """W raised so that the crawl value one host gap (its crawl delay) after the
        last crawl reaches the URL's Λ, for the URLs of politeness-bound hosts in the
        schedule (ι finite) whose every outcome, two or more, found a change over
        intervals all longer than QUICK_RECRAWL_GAPS gaps, once a URL (until its next
        outcome, wherever the host's gate puts it): such outcomes bound Δ from below
        only, and one crawl a gap after the last tells a page that changes every few
        days from one that changes hourly."""
        m = len(cols.urls)
        host = np.array([host_index[h] for h in cols.hosts], dtype=np.int64)
        gap = world.crawl_delay_s[host]
        counts = cols.outcome_counts
        owner = np.repeat(np.arange(m), counts)
        changed = np.bincount(owner, weights=cols.outcome_changed, minlength=m)
        shortest = np.full(m, np.inf)
        np.minimum.at(shortest, owner, cols.outcome_tau)
        lam, iota = cols.params[:, 6], cols.params[:, 4]
        probe = (
            bound_host[host] & (counts >= 2) & (changed == counts)
            & (shortest > QUICK_RECRAWL_GAPS * gap) & np.isfinite(iota) & (lam > 0)
        )  # fmt: skip
        # one quick recrawl a URL: flagged at its outcome count, until the next outcome
        for j in np.flatnonzero(probe):
            flagged.setdefault(cols.urls[j], int(counts[j]))
        probe &= np.array(
            [flagged.get(u, -1) == k for u, k in zip(cols.urls, counts.tolist(), strict=True)]
        )
        if not probe.any():
            return w
        i = np.flatnonzero(probe)
        v = crawl_value(to_params(w[i], g[i], a[i], t[i]), gap[i])
        out = w.copy()
        with np.errstate(divide="ignore", invalid="ignore"):
            raise_by = np.where(v > 0, 1.05 * lam[i] / v, 1.0)
        out[i] = w[i] * np.maximum(raise_by, 1.0)
        return out

    def source_prior_fit(
        ctx: Context, cols: EstimateColumns, g: FloatArray, a: FloatArray, t: FloatArray
    ) -> tuple[FloatArray, FloatArray]:
        """Each URL's MAP (α, θ) under priors at its host's posterior: θ's mode at θ_h,
        α's at (α/γ)_h·γ̂, both of shape MAX_SHAPE (with shapes 1/Var(ln ·) of the
        host's posterior, 1.25 … MAX_SHAPE, seed 0 of `default per_host` gave 0.953
        of the oracle against 0.964); URLs of hosts without one keep their estimates."""
        c, th = grid.of_hosts(cols.hosts)
        known = ~np.isnan(c) & (g > 0)
        if not known.any():
            return a, t
        th = np.where(known, th, 1.0)
        sc = st = np.full(len(cols.hosts), MAX_SHAPE)
        h = learning.history_of(cols, ctx.clock.now(), ctx.settings.estimate_decay_s)
        alpha_mode = np.where(known, np.nan_to_num(c) * g, 1.0)
        fit = fit_outcomes(
            h.tau, h.n, h.z, h.mask, (sc, (sc - 1.0) / alpha_mode), (st, (st - 1.0) / th)
        )
        return np.where(known, fit.alpha, a), np.where(known, fit.theta, t)

    fitted_at = [-np.inf]
    grid = HostGrid(normal=variant in NORMAL_VARIANTS)
    passed: list[float] = []

    async def refresh(ctx: Context) -> None:
        now = ctx.clock.now()
        if now - fitted_at[0] < EM_EVERY_S:
            return
        fitted_at[0] = now
        if variant in HOST_VARIANTS:
            by_host = {}
            with_outcomes = 0
            for host in world.hosts:
                states = await ctx.store.host_urls(host)
                cols = estimate_table(states)
                h = learning.history_of(cols, now, ctx.settings.estimate_decay_s)
                if variant == "host-normal-prior-binned":
                    by_host[host] = grid.binned_log_likelihood(h)
                else:
                    by_host[host] = grid.url_log_likelihood(h)
                with_outcomes += int((h.mask.any(axis=1) & (h.exposure > 0)).sum())
            grid.refit(by_host)
            trace.append(_host_fit(world, grid, now / DAY_S, with_outcomes))
            if grid.evidence > SOURCE_EVIDENCE and not passed:
                passed.append(now / DAY_S)
                print(f"{variant}: the evidence passed on day {passed[0]:.0f}", flush=True)
            return
        states = [u for h in world.hosts for u in await ctx.store.host_urls(h)]
        h = learning.history_of(estimate_table(states), now, ctx.settings.estimate_decay_s)
        prior.fit(prior.log_likelihood(h.tau, h.n, h.z, h.mask), EM_ITERS)

    learns_population = variant == "em-prior" or variant.startswith("ems-prior")
    return swap, refresh if learns_population or variant in HOST_VARIANTS else None, trace


@dataclasses.dataclass(frozen=True)
class Run:
    """One variant's run: its freshness, λ₀ and the parameters it ended with."""

    freshness: float
    stderr: float
    wall_s: float
    crawl_url: np.ndarray
    crawl_time: np.ndarray
    lambda0: float
    #: the share of its dispatches that went out before their URL was due
    ahead: float
    final: UrlParams
    #: the host variants' daily fit of the hosts' sources (empty for the others)
    host_trace: list[HostFit]
    #: the service's evidence of one signal source per host at the end of each
    #: learner cycle: (simulated day, log Bayes factor in nats)
    evidence: list[tuple[float, float]]


def run(world: World, variant: str, truth_from_s: float = 0.0, probe: Probe = Probe()) -> Run:
    """One variant on ``world`` (host limits on, 5 crawls a step); the ``true-*``
    swaps from simulated time ``truth_from_s`` (s) on; the probe variants explore as
    ``probe`` says."""
    swap, refresh, trace = _swap(world, variant, truth_from_s, probe)
    real = learning.learn

    async def learn(ctx: Context, cols: EstimateColumns, outcomes: bool = True) -> Any:
        got = await real(ctx, cols, outcomes)
        if swap is None or not len(got.columns):
            return got
        if refresh is not None:
            await refresh(ctx)
        return dataclasses.replace(got, estimates=swap(ctx, got.columns, got.estimates))

    policy = ServicePolicy(
        params="oracle" if variant == "oracle" else "learned", settings={"signal_discard_s": 0.0}
    )
    learning.learn = learn
    evidence: list[tuple[float, float]] = []
    cycle_done = Metrics.learner_cycle_done

    def record(m: Metrics, *args: Any) -> None:
        cycle_done(m, *args)
        source = m.learner.source_evidence
        evidence.append((policy.context.clock.now() / DAY_S, np.nan if source is None else source))

    Metrics.learner_cycle_done = record  # type: ignore[method-assign,assignment]
    try:
        t0 = time.perf_counter()
        res = simulate(world, policy, crawls_per_step=5, host_limits=True)
        assert policy.final_params is not None and policy.lambda0_settled is not None
        registry = policy.context.metrics.registry
        ahead = registry.get_sample_value("crawlsched_dispatched_ahead_total") or 0.0
        dispatched = registry.get_sample_value("crawlsched_dispatched_total") or math.nan
        return Run(
            res.accuracy, res.report.click_stderr, time.perf_counter() - t0,
            res.crawl_url, res.crawl_time, policy.lambda0_settled, ahead / dispatched,
            policy.final_params, trace, evidence,
        )  # fmt: skip
    finally:
        learning.learn = real
        Metrics.learner_cycle_done = cycle_done  # type: ignore[method-assign]


def classes(world: World) -> dict[str, np.ndarray]:
    """Classes of pages by their true W (quantiles), Δ (decades a day), precision,
    signal rate γ (below one signal in the decay of the service's counts, or not) and
    host (politeness-bound: its crawl delay allows fewer fetches than the budget; its
    pages by Δ)."""
    p = world.params
    w, d, prec = p.weight, p.change_rate * DAY_S, p.precision
    window = Settings().estimate_decay_s  # s: the decay of the service's signal counts
    g, days = p.signal_rate * window, window / DAY_S
    q50, q80, q95 = np.quantile(w, [0.5, 0.8, 0.95])
    bound = politeness_bound(world)[world.host_of]
    return {
        "W < median": w < q50,
        "W median–q80": (w >= q50) & (w < q80),
        "W q80–q95": (w >= q80) & (w < q95),
        "W ≥ q95": w >= q95,
        "Δ < 0.01/day": d < 0.01,
        "Δ 0.01–0.1/day": (d >= 0.01) & (d < 0.1),
        "Δ 0.1–1/day": (d >= 0.1) & (d < 1.0),
        "Δ ≥ 1/day": d >= 1.0,
        "precision ≤ 0.3": prec <= 0.3,
        "precision 0.3–0.8": (prec > 0.3) & (prec <= 0.8),
        "precision > 0.8": prec > 0.8,
        f"γ < 1 in {days:.0f} days": g < 1.0,
        f"γ ≥ 1 in {days:.0f} days": g >= 1.0,
        "politeness-bound hosts": bound,
        "  their Δ < 0.01/day": bound & (d < 0.01),
        "  their Δ 0.01–1/day": bound & (d >= 0.01) & (d < 1.0),
        "  their Δ ≥ 1/day": bound & (d >= 1.0),
        "other hosts": ~bound,
    }


def _mask_cells(world: World, runs: dict[str, Run], mask: np.ndarray) -> tuple[list[str], str]:
    """Each variant's freshness on the pages of ``mask`` and their crawls, as table
    cells, and the clicks the learned run loses there against the oracle (the pages'
    click share × the freshness it lacks; main() always runs the oracle), as a cell
    ("" without a learned run)."""
    p = world.params
    members = np.flatnonzero(mask)
    cells: list[str] = []
    fresh: dict[str, float] = {}
    for v, r in runs.items():
        fresh[v], _, _ = subset_freshness(world, r.crawl_url, r.crawl_time, mask)
        cells += [f"{fresh[v]:.4f}", str(int(np.isin(r.crawl_url, members).sum()))]
    if "learned" not in fresh:
        return cells, ""
    share = p.weight[mask].sum() / p.weight.sum()
    return cells, f"{share * (fresh['oracle'] - fresh['learned']):+.4f}"


def class_table(world: World, runs: dict[str, Run]) -> Table:
    """Per class: click share, freshness and crawls per variant, the learned run's
    median errors (log ratio for W, Δ and γ, difference for precision, recall) and
    the clicks it loses against the oracle (the class's click share × the freshness
    it lacks)."""
    p = world.params
    t = Table(title="where the clicks are lost, by class of page (true parameters)")
    for col in ("class", "URLs", "W share"):
        t.add_column(col, justify="left" if col == "class" else "right")
    for v in runs:
        t.add_column(f"{v} fresh", justify="right")
        t.add_column("crawls", justify="right")
    learned = runs.get("learned")
    if learned is not None:
        for col in ("ln Ŵ/W", "ln Δ̂/Δ", "ln γ̂/γ", "p̂ − p", "r̂ − r", "clicks lost"):
            t.add_column(col, justify="right")
    for name, mask in classes(world).items():
        if not mask.any():
            continue
        share = p.weight[mask].sum() / p.weight.sum()
        by_variant, lost = _mask_cells(world, runs, mask)
        cells = [name, str(int(mask.sum())), f"{share:.3f}", *by_variant]
        if learned is not None:
            q = learned.final
            with np.errstate(divide="ignore"):
                lw = np.log(q.weight[mask] / p.weight[mask])
                ld = np.log(q.change_rate[mask] / p.change_rate[mask])
                lg = np.log(q.signal_rate[mask] / p.signal_rate[mask])
            cells += [
                f"{np.median(lw):+.2f}", f"{np.median(ld):+.2f}", f"{np.median(lg):+.2f}",
                f"{np.median(q.precision[mask] - p.precision[mask]):+.2f}",
                f"{np.median(q.recall[mask] - p.recall[mask]):+.2f}",
                lost,
            ]  # fmt: skip
        t.add_row(*cells)
    return t


#: --starved: a URL counts as starved in a run that last crawled it before the run's
#: midpoint, where the oracle crawled it at least this many times after the warm-up.
STARVED_ORACLE_CRAWLS = 4
#: --starved: rows of the per-URL table (the learned run's starved URLs, most clicks
#: lost first).
STARVED_ROWS = 12


def starved_tables(world: World, runs: dict[str, Run]) -> list[Table]:
    """The URLs each run stopped crawling (:data:`STARVED_ORACLE_CRAWLS`): per variant,
    how many, their click share, the clicks it loses on them against the oracle
    beside all it loses, and the crawls after the warm-up both runs gave them; then
    the learned run's starved URLs one by one (true and learned Δ, precision and
    recall, the day of its last crawl)."""
    m = len(world.urls)
    oracle = runs["oracle"]

    def after_warmup(r: Run) -> np.ndarray:
        return np.bincount(r.crawl_url[r.crawl_time >= world.warmup_s], minlength=m)

    def last_crawl(r: Run) -> np.ndarray:
        last = np.zeros(m)  # every URL counts as fetched at 0
        np.maximum.at(last, r.crawl_url, r.crawl_time)
        return last

    o_fresh, clicks = fresh_clicks_by_url(world, oracle.crawl_url, oracle.crawl_time)
    o_crawls = after_warmup(oracle)
    total = max(int(clicks.sum()), 1)
    summary = Table(
        title=f"URLs a run stopped crawling: its last crawl before day "
        f"{world.duration_s / 2 / DAY_S:g}, where the oracle crawled them "
        f"{STARVED_ORACLE_CRAWLS} times or more after the warm-up"
    )
    cols = ("variant", "URLs", "click share", "clicks lost on them", "clicks lost in all",
            "oracle's crawls on them", "the run's")  # fmt: skip
    for col in cols:
        summary.add_column(col, justify="left" if col == "variant" else "right")
    tables = [summary]
    for v, r in runs.items():
        if v == "oracle":
            continue
        fresh, _ = fresh_clicks_by_url(world, r.crawl_url, r.crawl_time)
        lost = (o_fresh - fresh) / total
        crawls, last = after_warmup(r), last_crawl(r)
        starved = (last < world.duration_s / 2) & (o_crawls >= STARVED_ORACLE_CRAWLS)
        summary.add_row(
            v, str(int(starved.sum())), f"{clicks[starved].sum() / total:.3f}",
            f"{lost[starved].sum():+.4f}", f"{lost.sum():+.4f}",
            str(int(o_crawls[starved].sum())), str(int(crawls[starved].sum())),
        )  # fmt: skip
        if v != "learned" or not starved.any():
            continue
        p, q = world.params, r.final
        rows = Table(title="the learned run's starved URLs, most clicks lost first")
        for col in ("URL #", "host #", "click share", "last crawl, day", "crawls oracle / learned",
                    "Δ a day", "Δ̂", "precision", "p̂", "recall", "r̂", "clicks lost"):  # fmt: skip
            rows.add_column(col, justify="right")
        for i in sorted(np.flatnonzero(starved), key=lambda j: -lost[j])[:STARVED_ROWS]:
            rows.add_row(
                str(i), str(world.host_of[i]), f"{clicks[i] / total:.4f}",
                f"{last[i] / DAY_S:.0f}", f"{o_crawls[i]} / {crawls[i]}",
                f"{p.change_rate[i] * DAY_S:.3f}", f"{q.change_rate[i] * DAY_S:.3f}",
                f"{p.precision[i]:.2f}", f"{q.precision[i]:.2f}", f"{p.recall[i]:.2f}",
                f"{q.recall[i]:.2f}", f"{lost[i]:+.4f}",
            )  # fmt: skip
        tables.append(rows)
    return tables


def host_table(world: World, runs: dict[str, Run]) -> Table:
    """Per host: its URLs, click share and true source (median precision and recall
    over its URLs), freshness and crawls per variant, the learned run's median
    precision and recall at its end, and the clicks it loses against the oracle (its
    click share × the freshness it lacks)."""
    p = world.params
    t = Table(title="where the clicks are lost, by host (true parameters)")
    for col in ("host", "URLs", "W share", "p", "r"):
        t.add_column(col, justify="right")
    for v in runs:
        t.add_column(f"{v} fresh", justify="right")
        t.add_column("crawls", justify="right")
    learned = runs.get("learned")
    if learned is not None:
        for col in ("p̂", "r̂", "clicks lost"):
            t.add_column(col, justify="right")
    for h in range(int(world.host_of.max()) + 1):
        mask = world.host_of == h
        if not mask.any():
            continue
        share = p.weight[mask].sum() / p.weight.sum()
        by_variant, lost = _mask_cells(world, runs, mask)
        cells = [
            str(h), str(int(mask.sum())), f"{share:.3f}",
            f"{np.median(p.precision[mask]):.2f}", f"{np.median(p.recall[mask]):.2f}",
            *by_variant,
        ]  # fmt: skip
        if learned is not None:
            q = learned.final
            cells += [f"{np.median(q.precision[mask]):.2f}", f"{np.median(q.recall[mask]):.2f}",
                      lost]  # fmt: skip
        t.add_row(*cells)
    return t


def host_trace_table(runs: dict[str, Run], days: list[float]) -> Table:
    """Per host variant and requested day, its :class:`HostFit` on the first refit
    on or after that day."""
    t = Table(title="the hosts' posteriors against their true sources (c = α/γ)")
    cols = ("variant", "day", "URLs with outcomes", "median |p̂ − p|", "median |r̂ − r|",
            "posterior s.d. ln c", "posterior s.d. ln θ", "worst host: |r̂ − r|",
            "its clicks")  # fmt: skip
    for col in cols:
        t.add_column(col, justify="left" if col == "variant" else "right")
    for v, r in runs.items():
        for d in days:
            f = next((f for f in r.host_trace if f.day >= d), None)
            if f is not None:
                t.add_row(
                    v, f"{f.day:.0f}", f"{f.with_outcomes:.2f}", f"{f.err_precision:.2f}",
                    f"{f.err_recall:.2f}", f"{f.sd_c:.2f}", f"{f.sd_theta:.2f}",
                    f"{f.worst_recall:.2f}", f"{f.worst_share:.2f}",
                )  # fmt: skip
    return t


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--world", choices=tuple(WORLDS), default="default")
    ap.add_argument("--urls", type=int, default=1000)
    ap.add_argument("--days", type=float, default=200.0)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--variant", action="append", choices=VARIANTS, default=None)
    ap.add_argument(
        "--truth-from-day", type=float, default=0.0,
        help="the true-* variants' swaps start on this simulated day",
    )  # fmt: skip
    ap.add_argument("--classes", action="store_true", help="print the per-class table")
    ap.add_argument("--hosts", action="store_true", help="print the per-host table")
    ap.add_argument(
        "--starved", action="store_true",
        help="print the URLs each run stopped crawling that the oracle kept crawling",
    )  # fmt: skip
    ap.add_argument(
        "--probe-days", type=float, default=Probe.days,
        help="the probe variants explore during the first D simulated days",
    )  # fmt: skip
    ap.add_argument(
        "--probe-urls", type=int, default=Probe.urls,
        help="the probe variants' probing URLs per uncertain host",
    )  # fmt: skip
    ap.add_argument(
        "--evidence-trace", action="store_true",
        help="print the service's evidence of one signal source per host, each learner cycle",
    )  # fmt: skip
    ap.add_argument(
        "--host-trace", type=float, nargs="+", metavar="DAY", default=None,
        help="print the host variants' fit of the hosts' sources on these days",
    )  # fmt: skip
    args = ap.parse_args()
    variants = args.variant or list(VARIANTS)
    if "oracle" not in variants:
        variants.insert(0, "oracle")
    spec = world_spec(args.world, args.urls, args.days, args.seed)
    world = World.generate(spec)
    problem = problem_of(world, host_limits=True)

    def solver_lambda0(params: UrlParams) -> float:
        return solve_host_optimum(
            params, world.host_of, problem.host_limit_per_s, world.budget_per_s
        ).lambda0

    truth = solver_lambda0(world.params)
    console = Console(width=150)
    runs: dict[str, Run] = {}
    probe = Probe(args.probe_days, args.probe_urls)
    for v in variants:
        console.log(f"running {v} ...")
        runs[v] = run(world, v, args.truth_from_day * DAY_S, probe)
    oracle = runs["oracle"].freshness
    table = Table(
        title=f"{args.world}: {args.urls:,} URLs, {args.days:g} days, "
        f"{spec.budget_per_day:g} crawls a day, seed {args.seed}: the service in process, "
        "host limits on, 5 crawls a step"
        + (f"; truth from day {args.truth_from_day:g}" if args.truth_from_day else "")
    )
    cols = (
        "variant", "freshness", "± s.e.", "÷ oracle", "λ₀ ÷ solver's", "λ₀ ÷ solver's, own",
        "ahead", "wall s",
    )  # fmt: skip
    for col in cols:
        table.add_column(col, justify="left" if col == "variant" else "right")
    for v, r in runs.items():
        own = solver_lambda0(r.final)
        table.add_row(
            v, f"{r.freshness:.4f}", f"{r.stderr:.4f}", f"{r.freshness / oracle:.3f}",
            f"{r.lambda0 / truth:.3f}", f"{r.lambda0 / own:.3f}", f"{r.ahead:.2f}",
            f"{r.wall_s:.0f}",
        )  # fmt: skip
    console.print(table)
    console.print(
        "λ₀ ÷ solver's: the online λ₀ (geometric mean over the second half) ÷ the offline "
        "solver's on the true parameters; own: ÷ the solver's on the parameters the "
        "service held at the end; ahead: the share of dispatches that went out before "
        "their URL was due (crawlsched_dispatched_ahead_total)"
    )
    if args.classes:
        console.print(class_table(world, runs))
    if args.hosts:
        console.print(host_table(world, runs))
    if args.starved:
        for t in starved_tables(world, runs):
            console.print(t)
    if args.host_trace:
        console.print(host_trace_table(runs, args.host_trace))
    if args.evidence_trace:
        for v, r in runs.items():
            if v != "oracle":
                trace = " ".join(f"{d:.0f}:{e:.1f}" for d, e in r.evidence)
                console.print(f"{v}: the evidence of one source per host, day:nats: {trace}")


if __name__ == "__main__":
    main()
