"""Each host's signal source as one (α/γ, θ): its posterior from all its URLs' outcomes.

Where a host's sitemap or CDN is one signal source (paper 004 App. E), its URLs
share the source's precision p = 1 − e^{−θ} and recall r, so their unannounced
change rate runs in proportion to their signal rate: α = (1 − r)Δ = γ·p(1 − r)/r,
α/γ = c a constant of the host.  A host's outcomes then bear on one (c, θ), and
every outcome counts, also a URL's first: fitting each URL's own α beside the
host's θ (:func:`.pooled.fit_pooled_theta`) lets that α absorb a single outcome.

- :func:`host_log_likelihood`: ln P(the host's outcomes | c, θ) on a grid of
  (c, θ) (:data:`ATOMS`), at each URL's point γ̂, from sufficient statistics
  (outcomes that found no change through two sums, those that did through a
  histogram of (ln γ̂τ, n)), so its cost does not grow with the host's URLs;
- :class:`SourcePopulation`: the hosts' population of (ln c, ln θ) as a bivariate
  normal, fitted by EM to the hosts' likelihoods (empirical Bayes), and each host's
  posterior under it (:class:`SourcePosterior`);
- :func:`source_evidence`: the log Bayes factor of "each host is one source"
  against "each URL draws its own (c, θ)", each model with its own normal
  population fitted to the same outcomes; :func:`sources_shared` decides from it
  whether the estimator takes the hosts' posteriors as its URLs' priors
  (:mod:`.learn`).

Source: docs/model.md, "Signal quality per source"; paper 004 App. E (the
outcome model, signals from one source).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
from scipy.special import logsumexp

from scheduler_core.errors import ParameterError
from scheduler_core.estimate.change import _log_lik
from scheduler_core.estimate.learn import History
from scheduler_core.params import FloatArray

__all__ = [
    "ATOMS",
    "SOURCE_EVIDENCE",
    "SOURCE_EVIDENCE_OFF",
    "SourceCycle",
    "SourceFit",
    "SourcePopulation",
    "SourcePosterior",
    "host_log_likelihood",
    "point_signal_rate",
    "source_evidence",
    "sources_shared",
    "url_log_likelihood",
]

#: The grid of (c = α/γ, θ): c geometric over 1e-3 … 1e3 (31 points), θ over
#: 1e-3 … 10 (21 points, precision 0.001 … 0.99995); both dimensionless.
_C, _THETA = (a.ravel() for a in np.meshgrid(
    np.geomspace(1e-3, 1e3, 31), np.geomspace(1e-3, 10.0, 21), indexing="ij"
))  # fmt: skip
ATOMS: tuple[FloatArray, FloatArray] = (_C, _THETA)
_LN = np.stack([np.log(_C), np.log(_THETA)], axis=1)  # (atoms, 2)
_LN_SQUARES = np.stack([_LN[:, 0] ** 2, _LN[:, 0] * _LN[:, 1], _LN[:, 1] ** 2], axis=1)
#: Bins of ln x (x = γ̂τ, the signals expected in an interval) for the outcomes that
#: found a change: 48 over 1e-4 … 1e4 (x outside is put in the end bins); their n
#: exact below :data:`N_EXACT`, above it in bins a quarter of ln n wide.
_XBIN_LO, _XBIN_HI, _XBINS = math.log(1e-4), math.log(1e4), 48
N_EXACT, _NBIN_W = 8, 0.25
#: Least variance of each principal axis of the hosts' population in (ln c, ln θ):
#: a population of a few hosts cannot shrink onto one of them.
MIN_VAR = 0.25
#: The log Bayes factor (nats) of one source per host (:func:`source_evidence`) above
#: which the learner takes each host's URLs as sharing one source (20 to 1, "strong"
#: on Kass and Raftery's scale), and below which it stops again once it has (even
#: odds): evidence that hovers near the first keeps the decision it has
#: (:func:`sources_shared`).
SOURCE_EVIDENCE, SOURCE_EVIDENCE_OFF = math.log(20.0), 0.0
#: Most EM iterations of a population fit, and the step (in ln c and ln θ, and in
#: their covariance) below which it has converged.
EM_ITERS, EM_TOL = 100, 1e-6


def point_signal_rate(history: History) -> FloatArray:
    """Each URL's point γ̂ = (C + ½)/E (1/s, shape (m,)) for C decayed signals over a
    decayed exposure E (s); NaN where E = 0 (never observed)."""
    with np.errstate(divide="ignore", invalid="ignore"):
        return np.where(history.exposure > 0, (history.signals + 0.5) / history.exposure, np.nan)


def host_log_likelihood(history: History) -> FloatArray | None:
    """ln P(a host's outcomes | c, θ) at every atom of :data:`ATOMS`, shape (atoms,):
    the log-link model (paper 004 App. E) with α = c·γ̂, γ̂ each URL's point signal
    rate (:func:`point_signal_rate`).  None without an outcome of an observed URL.

    An outcome that found no change adds −(c·x + θ·n), x = γ̂τ, so those enter
    through Σx and Σn; one that found a change adds ln(1 − e^{−(c·x + θ·n)}), which
    is evaluated once per occupied bin of (ln x, n) at the bin's centre, times its
    count: the cost is the grid times the occupied bins, whatever the host's size.
    """
    g = point_signal_rate(history)
    ok = history.mask & (history.exposure > 0)[:, None]
    if not ok.any():
        return None
    x = (np.where(np.isnan(g), 0.0, g)[:, None] * history.tau)[ok]
    n = history.n[ok]
    z = history.z[ok]
    ll = -_C * float(x[~z].sum()) - _THETA * float(n[~z].sum())
    if z.any():
        width = (_XBIN_HI - _XBIN_LO) / _XBINS
        lx = np.clip(np.log(np.maximum(x[z], 1e-300)), _XBIN_LO, _XBIN_HI - 1e-9)
        xc = np.exp(_XBIN_LO + (np.floor((lx - _XBIN_LO) / width) + 0.5) * width)
        nz = n[z]
        nc = np.where(
            nz < N_EXACT, nz, np.exp(np.round(np.log(np.maximum(nz, 1.0)) / _NBIN_W) * _NBIN_W)
        )
        keys, counts = np.unique(np.stack([xc, nc], axis=1), axis=0, return_counts=True)
        eta = _C[:, None] * keys[None, :, 0] + _THETA[:, None] * keys[None, :, 1]
        ll = ll + (_log_lik(eta, np.ones_like(eta, dtype=bool)) * counts[None, :]).sum(axis=1)
    out: FloatArray = ll
    return out


def url_log_likelihood(history: History, limit: int) -> FloatArray:
    """ln P(a URL's outcomes | c, θ) at every atom, shape (k, atoms), exact at its
    point γ̂, for up to ``limit`` observed URLs with outcomes (those with the most
    outcomes first, then in order): what :func:`source_evidence` compares."""
    ok = history.mask & (history.exposure > 0)[:, None]
    counts = ok.sum(axis=1)
    rows = np.flatnonzero(counts > 0)
    rows = rows[np.argsort(-counts[rows], kind="stable")[:limit]]
    if rows.size == 0:
        return np.zeros((0, _C.size))
    x = point_signal_rate(history)[rows, None] * history.tau[rows]
    eta = _C[None, None, :] * x[:, :, None] + _THETA[None, None, :] * history.n[rows][:, :, None]
    ll = _log_lik(eta, np.broadcast_to(history.z[rows][:, :, None], eta.shape))
    out: FloatArray = np.where(ok[rows][:, :, None], ll, 0.0).sum(axis=1)
    return out


@dataclass(frozen=True, slots=True)
class SourcePosterior:
    """A host's source: the posterior geometric means of c = α/γ and θ, and the
    posterior standard deviations of ln c and ln θ."""

    alpha_per_signal: float
    theta: float
    sd_ln_alpha_per_signal: float
    sd_ln_theta: float

    def to_tuple(self) -> tuple[float, float, float, float]:
        """(c, θ, s.d. of ln c, s.d. of ln θ): :attr:`.hierarchy.GroupStats.source`."""
        return (self.alpha_per_signal, self.theta, self.sd_ln_alpha_per_signal,
                self.sd_ln_theta)  # fmt: skip

    @classmethod
    def from_tuple(cls, values: Sequence[float]) -> SourcePosterior | None:
        """Inverse of :meth:`to_tuple`; None where θ is not positive (NaN: no
        posterior)."""
        c, theta, sd_c, sd_theta = values
        return cls(c, theta, sd_c, sd_theta) if theta > 0 else None

    @property
    def precision(self) -> float:
        """The source's precision p = 1 − e^{−θ}."""
        return -math.expm1(-self.theta)

    @property
    def recall(self) -> float:
        """The source's recall r = p/(c + p), from α/γ = c = p(1 − r)/r (paper 004
        App. E; docs/model.md, "Signal quality per source")."""
        p = self.precision
        return p / (self.alpha_per_signal + p)


@dataclass(frozen=True, slots=True)
class SourcePopulation:
    """The hosts' sources as a bivariate normal in (ln c, ln θ): ``mean`` (2,) and
    ``cov`` (2, 2)."""

    mean: FloatArray
    cov: FloatArray

    def log_weights(self) -> FloatArray:
        """Its log weights over the atoms, shape (atoms,), normalised."""
        d = _LN - self.mean
        lw = -0.5 * np.einsum("ai,ij,aj->a", d, np.linalg.inv(self.cov), d)
        out: FloatArray = lw - logsumexp(lw)
        return out

    @classmethod
    def fit(cls, log_lik: FloatArray) -> SourcePopulation:
        """The population fitted by EM to members' log-likelihoods, shape (members,
        atoms), each principal variance at least :data:`MIN_VAR` (at most
        :data:`EM_ITERS` iterations, until a step moves nothing by :data:`EM_TOL`).

        Raises
        ------
        ParameterError
            Without members.
        """
        if log_lik.shape[0] == 0:
            raise ParameterError("`log_lik` has no member: a population needs one")
        pop = cls(_LN.mean(axis=0), np.diag([4.0, 4.0]))
        for _ in range(EM_ITERS):
            w = _weights(pop.log_weights(), log_lik)
            mean = (w @ _LN).mean(axis=0)
            m2 = (w @ _LN_SQUARES).mean(axis=0)  # E[x²], E[xy], E[y²]
            cov = np.array([[m2[0], m2[1]], [m2[1], m2[2]]]) - np.outer(mean, mean)
            var, axes = np.linalg.eigh(cov)
            cov = (axes * np.maximum(var, MIN_VAR)) @ axes.T
            done = pop
            pop = cls(mean, (cov + cov.T) / 2.0)
            step = max(np.abs(pop.mean - done.mean).max(), np.abs(pop.cov - done.cov).max())
            if step < EM_TOL:
                break
        return pop

    def log_marginal(self, log_lik: FloatArray) -> float:
        """Σ over members of ln ∫ population × likelihood, for log-likelihoods (members,
        atoms)."""
        return float(logsumexp(self.log_weights() + log_lik, axis=1).sum())

    def posterior(self, log_lik: FloatArray) -> SourcePosterior:
        """A host's posterior given its log-likelihood (atoms,)."""
        w = _weights(self.log_weights(), log_lik[None, :])[0]
        mean = w @ _LN
        var = np.maximum(w @ (_LN * _LN) - mean * mean, 0.0)
        sd = np.sqrt(var)
        return SourcePosterior(math.exp(mean[0]), math.exp(mean[1]), float(sd[0]), float(sd[1]))

    def to_tuple(self) -> tuple[float, float, float, float, float]:
        """(mean ln c, mean ln θ, var ln c, cov, var ln θ)."""
        c = self.cov
        return (float(self.mean[0]), float(self.mean[1]), float(c[0, 0]), float(c[0, 1]),
                float(c[1, 1]))  # fmt: skip

    @classmethod
    def from_tuple(cls, values: Sequence[float]) -> SourcePopulation | None:
        """Inverse of :meth:`to_tuple`; None where any is NaN (no population)."""
        if len(values) != 5 or any(math.isnan(v) for v in values):
            return None
        m0, m1, v0, c01, v1 = values
        return cls(np.array([m0, m1]), np.array([[v0, c01], [c01, v1]]))


def _weights(log_prior: FloatArray, log_lik: FloatArray) -> FloatArray:
    """Posterior weights over the atoms, shape (members, atoms)."""
    lp = log_prior + log_lik
    w = np.exp(lp - lp.max(axis=1, keepdims=True))
    out: FloatArray = w / w.sum(axis=1, keepdims=True)
    return out


def sources_shared(evidence: float, before: bool) -> bool:
    """Whether each host's URLs are taken as sharing one signal source, given the
    evidence (:func:`source_evidence`, nats; NaN: none) and whether they were
    (``before``): above :data:`SOURCE_EVIDENCE`, or, once taken, until it falls
    below :data:`SOURCE_EVIDENCE_OFF` (hysteresis, so that evidence hovering near
    the threshold does not switch every URL's priors from pass to pass).

    Source: Kass & Raftery, "Bayes factors", JASA 90 (1995), §3.2 (the scale)."""
    if before:
        return evidence > SOURCE_EVIDENCE_OFF
    return evidence > SOURCE_EVIDENCE


def source_evidence(by_host: Sequence[FloatArray]) -> float:
    """The log Bayes factor (nats) of "each host is one signal source" against "each
    URL draws its own (c, θ)", given each host's URLs' log-likelihoods (a sequence of
    (urls, atoms) arrays, :func:`url_log_likelihood`): each model's population a
    bivariate normal fitted by EM to the same outcomes (the hosts' summed
    likelihoods; the URLs' own), its marginal likelihood under it.  0 without
    outcomes.  Positive: the outcomes favour one source per host."""
    hosts = [ll for ll in by_host if ll.shape[0] > 0]
    if not hosts:
        return 0.0
    per_host = np.stack([ll.sum(axis=0) for ll in hosts])
    per_url = np.concatenate(hosts)
    one = SourcePopulation.fit(per_host).log_marginal(per_host)
    own = SourcePopulation.fit(per_url).log_marginal(per_url)
    return one - own


#: What one pass of the learner over the hosts keeps for :class:`SourceCycle`: the
#: likelihoods of this many hosts (the first it reads) for the population, and of
#: this many URLs, at most :data:`EVIDENCE_URLS_PER_HOST` a host, for the evidence
#: (5.2 kB each).
POPULATION_HOSTS, EVIDENCE_URLS, EVIDENCE_URLS_PER_HOST = 4096, 4096, 64


@dataclass(frozen=True, slots=True)
class SourceFit:
    """What a pass of the learner ends with: the hosts' population (None without any
    outcome), the evidence (NaN without one) and whether hosts are taken as sources
    (:func:`sources_shared`)."""

    population: SourcePopulation | None
    evidence: float
    shared: bool


class SourceCycle:
    """The sources over one pass of the learner across the hosts: each host's
    posterior under the population fitted on the pass before (``population``; None:
    none yet), what the next population and the evidence are fitted to, and whether
    the pass before took hosts as sources (``shared``)."""

    def __init__(self, population: SourcePopulation | None, shared: bool = False) -> None:
        self.population = population
        self.shared = shared
        self._hosts: list[FloatArray] = []
        self._urls: list[FloatArray] = []
        self._url_count = 0

    def add(self, history: History) -> SourcePosterior | None:
        """One host's URLs: its source's posterior (None without outcomes or
        population), its likelihoods kept within the bounds of
        :data:`POPULATION_HOSTS` and :data:`EVIDENCE_URLS`."""
        ll = host_log_likelihood(history)
        if ll is None:
            return None
        if len(self._hosts) < POPULATION_HOSTS:
            self._hosts.append(ll)
        room = min(EVIDENCE_URLS - self._url_count, EVIDENCE_URLS_PER_HOST)
        if room > 0:
            urls = url_log_likelihood(history, room)
            self._urls.append(urls)
            self._url_count += urls.shape[0]
        return None if self.population is None else self.population.posterior(ll)

    def finish(self) -> SourceFit:
        """The hosts' population fitted to the pass's hosts, the evidence
        (:func:`source_evidence`) and the decision (:func:`sources_shared`)."""
        if not self._hosts:
            return SourceFit(None, math.nan, sources_shared(math.nan, self.shared))
        evidence = source_evidence(self._urls)
        return SourceFit(
            SourcePopulation.fit(np.stack(self._hosts)), evidence,
            sources_shared(evidence, self.shared),
        )  # fmt: skip
