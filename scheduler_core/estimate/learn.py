"""From a URL's history and its priors to the parameters the scheduler uses.

Per URL (MATH.md, "Estimating parameters"; paper 004 App. E; paper 003 §4.2):

- W and γ: Gamma–Poisson posterior means of the decayed click and signal
  counts (:mod:`.rates`);
- (α, θ): the MAP of the log-link outcome model (:mod:`.change`), θ's prior
  centred on the host's pooled signal quality;
- then precision p = 1 − e^{−θ}, ν = γ(1 − p), Δ = α + γp, recall = γp/Δ.

Priors come from :func:`prior_chain` (URL ← host ← label ← global) and, where
the operator gave values at registration, from :func:`given_priors`.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from itertools import chain

import numpy as np
from numpy.typing import NDArray

from scheduler_core.errors import ParameterError
from scheduler_core.estimate.change import fit_outcomes
from scheduler_core.estimate.hierarchy import (
    MAX_SHAPE,
    MIN_POOLED_OUTCOMES,
    QUANTITIES,
    GammaPrior,
    GroupStats,
    shrink,
)
from scheduler_core.estimate.rates import rate_posterior
from scheduler_core.params import MAX_RECALL_WITH_FALSE_SIGNALS, FloatArray, UrlParams

__all__ = [
    "Estimates",
    "History",
    "POPULATION_MIN_SHAPE",
    "Priors",
    "URL_ALPHA_SHAPE",
    "URL_THETA_SHAPE",
    "estimate",
    "given_priors",
    "given_priors_many",
    "prior_chain",
    "to_params",
    "windows_end_to_end",
]

Prior4 = dict[str, GammaPrior]

#: Shape of a URL's θ prior, its mode at its groups' typical θ (signal quality
#: belongs to the source, paper 004 App. E), weak: a URL whose own outcomes say
#: otherwise moves away from it (partial pooling).  On the default world, whose
#: URLs draw recall and false-signal rates independently, pinning every URL to
#: θ_h doubled the error of Δ (median |Δ̂/Δ − 1| 0.195 against 0.135).  A quarter
#: of a pseudo-change, as α's (:data:`URL_ALPHA_SHAPE`).
URL_THETA_SHAPE = 1.25
#: Least shape of a URL's α prior (its mode at the groups' median).  For a URL whose
#: outcomes show no change, the MAP gives α̂ = (a_α − 1)/(b_α + Στ) and, its signals
#: arriving at γ (n ≈ γτ), γθ̂ ≈ (a_θ − 1)/Στ: the two priors' pseudo-changes add up
#: in Δ̂ = α̂ + γp̂.  A quarter change each keeps the total at the half change a
#: shape-1.5 prior on Δ alone gives.  With 1.5 each, the `web` preset's pages that
#: change less than once in 100 days came out at 5× their rate and took twice the
#: oracle's crawls (`python bench/learning_gap.py --world "web per_url" --urls 200
#: --classes`).
URL_ALPHA_SHAPE = 1.25
#: Least shape of the groups' populations of α and θ along the chain: they keep their
#: spread (a Gamma of shape k has CV² = 1/k), which sets where their median lies
#: (:meth:`.hierarchy.GammaPrior.with_mode_at_median`); only a URL's own prior is
#: kept at shape > 1, for its MAP.
POPULATION_MIN_SHAPE = 1e-6
#: The prior of α/γ (dimensionless) where recall is the host's source's: with recall
#: shared by the source, α = (1 − r)Δ = γ·p(1 − r)/r runs in proportion to γ.
ALPHA_PER_SIGNAL = "alpha_per_signal"
#: The prior of α/γ from the host's source posterior (:mod:`.source`): its shape is
#: the posterior's certainty of α/γ alone, to which :meth:`Priors.alpha_given` adds
#: γ̂'s own uncertainty.
SOURCE_ALPHA_PER_SIGNAL = "source_alpha_per_signal"
#: The keys of :class:`Priors`: the learned quantities and the two of α per signal.
PRIOR_KEYS = (*QUANTITIES, ALPHA_PER_SIGNAL, SOURCE_ALPHA_PER_SIGNAL)
#: Shape of a URL's θ prior at its host's source posterior θ_h: the source's θ is
#: the URL's (a URL's own few outcomes would move it along the ridge of α and θ).
SOURCE_THETA_SHAPE = 1e4
#: Largest squared coefficient of variation of θ among a host's URLs (its upper
#: bound) at which signal quality is taken as the host's source's: the URLs agree
#: on θ to within a CV of 0.45, and their prior at θ_h has shape ≥ 5.
SOURCE_MAX_CV2 = 0.2


def windows_end_to_end(
    windows: Sequence[Sequence[tuple[float, int, bool]]],
) -> tuple[FloatArray, FloatArray, NDArray[np.bool_], NDArray[np.int64]]:
    """Outcome windows, (τ s, n, changed) per outcome and a sequence of them per URL,
    laid end to end as :meth:`History.from_windows` takes them: τ, n and changed, shape
    (N,) each, and each URL's count of outcomes, shape (m,)."""
    counts = np.fromiter((len(w) for w in windows), dtype=np.int64, count=len(windows))
    values = chain.from_iterable(chain.from_iterable(windows))
    flat = np.fromiter(values, dtype=np.float64, count=3 * int(counts.sum())).reshape(-1, 3)
    return flat[:, 0].copy(), flat[:, 1].copy(), flat[:, 2] != 0, counts


@dataclass(frozen=True, slots=True)
class History:
    """What m URLs have shown, as arrays.

    Attributes
    ----------
    clicks, signals : (m,) decayed counts at the time of estimation.
    exposure : (m,) decayed observation time, s.
    tau, n, z, mask : (m, K) outcome windows (see :func:`.change.fit_outcomes`).
    """

    clicks: FloatArray
    signals: FloatArray
    exposure: FloatArray
    tau: FloatArray
    n: FloatArray
    z: NDArray[np.bool_]
    mask: NDArray[np.bool_]

    @classmethod
    def create(
        cls,
        clicks: Sequence[float] | FloatArray,
        signals: Sequence[float] | FloatArray,
        exposure: Sequence[float] | FloatArray,
        outcomes: Sequence[Sequence[tuple[float, int, bool]]],
    ) -> History:
        """Arrays from per-URL lists of outcomes (τ s, n, changed), padded to the
        longest window.

        Raises
        ------
        ParameterError
            If the lengths differ.
        """
        return cls.from_windows(clicks, signals, exposure, *windows_end_to_end(outcomes))

    @classmethod
    def from_windows(
        cls,
        clicks: Sequence[float] | FloatArray,
        signals: Sequence[float] | FloatArray,
        exposure: Sequence[float] | FloatArray,
        tau: FloatArray,
        n: FloatArray,
        changed: NDArray[np.bool_],
        counts: NDArray[np.int64],
    ) -> History:
        """Arrays from the URLs' outcome windows laid end to end: ``tau`` (s), ``n`` and
        ``changed``, shape (N,) each, the first ``counts[0]`` rows the first URL's
        (oldest first), and so on; ``counts`` shape (m,), summing to N.  Padded to the
        longest window.

        Raises
        ------
        ParameterError
            If the lengths differ.
        """
        m = len(clicks)
        total = int(counts.sum()) if counts.size else 0
        if not (len(signals) == len(exposure) == counts.size == m):
            raise ParameterError("`clicks`, `signals`, `exposure`, `outcomes` differ in length")
        if not (tau.shape == n.shape == changed.shape == (total,)):
            raise ParameterError("`tau`, `n` and `changed` must have shape (counts.sum(),)")
        k = int(counts.max()) if m else 0
        row = np.repeat(np.arange(m), counts)
        col = np.arange(total) - np.repeat(np.cumsum(counts) - counts, counts)
        tau_w = np.ones((m, k))
        n_w = np.zeros((m, k))
        z = np.zeros((m, k), dtype=bool)
        mask = np.zeros((m, k), dtype=bool)
        tau_w[row, col], n_w[row, col], z[row, col], mask[row, col] = tau, n, changed, True
        return cls(
            np.asarray(clicks, dtype=np.float64),
            np.asarray(signals, dtype=np.float64),
            np.asarray(exposure, dtype=np.float64),
            tau_w, n_w, z, mask,
        )  # fmt: skip

    @property
    def m(self) -> int:
        return int(self.clicks.shape[0])

    def take(self, index: NDArray[np.bool_] | NDArray[np.int64]) -> History:
        """The URLs selected by ``index``."""
        return History(
            self.clicks[index], self.signals[index], self.exposure[index],
            self.tau[index], self.n[index], self.z[index], self.mask[index],
        )  # fmt: skip


@dataclass(frozen=True, slots=True)
class Priors:
    """Gamma priors of m URLs: ``shape[q]`` and ``rate[q]`` are (m,) arrays for each
    q in :data:`PRIOR_KEYS`; ``alpha_per_signal`` is NaN where a URL has none (its
    α prior is ``alpha``'s)."""

    shape: dict[str, FloatArray]
    rate: dict[str, FloatArray]

    @classmethod
    def stack(cls, rows: Sequence[Prior4]) -> Priors:
        """Arrays from one dict of priors per URL (NaN where a row lacks one)."""
        nan = GammaPrior(math.nan, math.nan)
        return cls(
            {q: np.array([r.get(q, nan).shape for r in rows], dtype=np.float64)
             for q in PRIOR_KEYS},
            {q: np.array([r.get(q, nan).rate for r in rows], dtype=np.float64)
             for q in PRIOR_KEYS},
        )  # fmt: skip

    def mean(self, quantity: str) -> FloatArray:
        return self.shape[quantity] / self.rate[quantity]

    def take(self, index: NDArray[np.int64]) -> Priors:
        """The URLs (rows) selected by ``index``."""
        return Priors(
            {q: v[index] for q, v in self.shape.items()},
            {q: v[index] for q, v in self.rate.items()},
        )

    def row(self, i: int) -> Prior4:
        """URL i's priors as :class:`GammaPrior` objects (those it has)."""
        return {
            q: GammaPrior(float(self.shape[q][i]), float(self.rate[q][i]))
            for q in PRIOR_KEYS
            if not math.isnan(self.shape[q][i])
        }

    def alpha_given(
        self, signal_rate: FloatArray, signals: FloatArray
    ) -> tuple[FloatArray, FloatArray]:
        """α's prior (shape, rate), (m,) arrays, for URLs whose signals arrive at
        ``signal_rate`` (1/s, (m,)), estimated from ``signals`` (m,) decayed counts.

        Where a URL has a prior on α/γ and signals, α follows γ̂: with the host's
        source posterior's (``source_alpha_per_signal``, shape k), α's mode is
        α/γ's times γ̂ and its shape holds both uncertainties, 1/(1/k + 1/(C + 2)),
        C + 2 for γ̂'s own (a Gamma of shape C + 1, plus one), at least
        :data:`URL_ALPHA_SHAPE`; with the host's typical α̂/γ̂'s
        (``alpha_per_signal``, whose shape is α̂'s spread, γ̂'s noise in it), α's
        rate is its rate over γ̂.  Elsewhere ``alpha``'s.  Source: docs/model.md,
        "Signal quality per source" (α = (1 − r)Δ = γ·p(1 − r)/r where the source's
        recall is shared)."""
        shape, rate = self.shape["alpha"], self.rate["alpha"]
        g = np.where(signal_rate > 0, signal_rate, 1.0)
        if ALPHA_PER_SIGNAL in self.shape:
            k = self.shape[ALPHA_PER_SIGNAL]
            use = ~np.isnan(k) & (signal_rate > 0)
            shape = np.where(use, k, shape)
            rate = np.where(use, self.rate[ALPHA_PER_SIGNAL] / g, rate)
        if SOURCE_ALPHA_PER_SIGNAL in self.shape:
            k = self.shape[SOURCE_ALPHA_PER_SIGNAL]
            use = ~np.isnan(k) & (signal_rate > 0)
            k = np.where(use, k, 2.0)
            mode = np.where(use, (k - 1.0) / self.rate[SOURCE_ALPHA_PER_SIGNAL] * g, 1.0)
            both = 1.0 / (1.0 / k + 1.0 / (np.maximum(signals, 0.0) + 2.0))
            both = np.maximum(both, URL_ALPHA_SHAPE)
            shape = np.where(use, both, shape)
            rate = np.where(use, (both - 1.0) / mode, rate)
        return shape, rate


@dataclass(frozen=True, slots=True)
class Estimates:
    """Estimates of m URLs.

    Attributes
    ----------
    weight, signal_rate, alpha : (m,) W, γ, α in 1/s.
    theta : (m,) −ln(1 − precision).
    params : the scheduler's parameters (W, Δ, recall, ν).
    alpha_info : (m,) Fisher information of α from the outcomes, s².
    n_outcomes : (m,) outcomes used.
    """

    weight: FloatArray
    signal_rate: FloatArray
    alpha: FloatArray
    theta: FloatArray
    params: UrlParams
    alpha_info: FloatArray
    n_outcomes: NDArray[np.int64]


def to_params(
    weight: FloatArray, signal_rate: FloatArray, alpha: FloatArray, theta: FloatArray
) -> UrlParams:
    """(W, γ, α, θ) → (W, Δ, recall, ν): p = 1 − e^{−θ}, ν = γ(1 − p), Δ = α + γp,
    recall = γp/Δ (MATH.md, "Estimating parameters")."""
    precision = -np.expm1(-theta)
    announced = signal_rate * precision
    change_rate = alpha + announced
    with np.errstate(invalid="ignore", divide="ignore"):
        recall = np.where(change_rate > 0, announced / change_rate, 0.0)
    nu = signal_rate - announced
    recall = np.where(nu > 0, np.minimum(recall, MAX_RECALL_WITH_FALSE_SIGNALS), recall)
    return UrlParams.create(
        weight=weight, change_rate=change_rate, recall=np.clip(recall, 0.0, 1.0),
        false_signal_rate=np.maximum(nu, 0.0),
    )  # fmt: skip


def estimate(
    history: History, priors: Priors, alpha_theta: tuple[FloatArray, FloatArray] | None = None
) -> Estimates:
    """Estimate every learned parameter of m URLs.

    Parameters
    ----------
    history : History
        Their observations.
    priors : Priors
        Their Gamma priors (α and θ shapes ≥ 1); where a URL has a prior on α/γ,
        its α prior is that one at its estimated γ (:meth:`Priors.alpha_given`).
    alpha_theta : ((m,), (m,)) arrays, optional
        Known α (1/s) and θ: skip the outcome fit (events that bring no crawl
        outcome, clicks and signals, only move W and γ).

    Returns
    -------
    Estimates

    Raises
    ------
    ParameterError
        On invalid priors or history.

    References
    ----------
    MATH.md, "Estimating parameters"; paper 004 App. E; paper 003 §4.2.
    """
    w, _ = rate_posterior(
        history.clicks, history.exposure, priors.shape["weight"], priors.rate["weight"]
    )
    g, _ = rate_posterior(
        history.signals, history.exposure, priors.shape["signal_rate"], priors.rate["signal_rate"]
    )
    if alpha_theta is not None:
        alpha, theta = alpha_theta
        info = np.full(history.m, np.nan)
        n_obs = history.mask.sum(axis=1).astype(np.int64)
    else:
        fit = fit_outcomes(
            history.tau, history.n, history.z, history.mask, priors.alpha_given(g, history.signals),
            (priors.shape["theta"], priors.rate["theta"]),
        )  # fmt: skip
        alpha, theta, info, n_obs = fit.alpha, fit.theta, fit.alpha_info, fit.n_obs
    return Estimates(
        weight=w, signal_rate=g, alpha=alpha, theta=theta,
        params=to_params(w, g, alpha, theta), alpha_info=info, n_outcomes=n_obs,
    )  # fmt: skip


def prior_chain(
    root: Prior4,
    global_stats: GroupStats,
    label_stats: GroupStats | None,
    host_stats: GroupStats,
    pseudo_members: float,
) -> Prior4:
    """A URL's priors: its host's statistics shrunk towards its label's, those towards
    the global ones, those towards the ``root`` priors (URL ← host ← label ← global;
    paper 003 §4.2).  α's and θ's priors (MAP estimates) have their modes at the
    groups' typical member, the median of the lognormal with the chain's mean and
    variance (:meth:`.hierarchy.GammaPrior.with_mode_at_median`), not at their mean,
    which a population spread over decades owes to its fastest members; θ's is weak
    (shape :data:`URL_THETA_SHAPE`).

    Where the hosts' own outcomes show that signal quality belongs to each host's
    source (paper 004 App. E; :func:`_source_shape`), θ's prior has its mode at the
    host's pooled θ_h instead, as strong as the hosts' URLs agree on it.  Where
    they show that α runs in proportion to γ among a host's URLs (a recall shared
    by the source: α = (1 − r)Δ = γ·p(1 − r)/r;
    :meth:`.hierarchy.GroupStats.alpha_follows_signals`), the chain also holds a
    prior on α/γ (:data:`ALPHA_PER_SIGNAL`), its mode at the host's typical α̂/γ̂
    (the geometric mean, shrunk towards the global one by ``pseudo_members``
    URLs), which :func:`estimate` turns into α's prior at the URL's own γ̂.

    Where the learner takes each host's URLs as sharing one source (the global
    group's ``sources_shared``, :func:`.source.sources_shared`) and the host has its
    source's posterior (``host_stats.source``,
    :class:`.source.SourcePosterior`), both follow it instead: θ's prior at its θ_h
    with shape :data:`SOURCE_THETA_SHAPE`, α/γ's at its c_h with shape 1/Var(ln c)
    of the posterior.
    """
    out: Prior4 = {}
    for q in QUANTITIES:
        min_shape = POPULATION_MIN_SHAPE if q in ("alpha", "theta") else 0.5
        prior = shrink(global_stats.of(q), root[q], pseudo_members, min_shape)
        if label_stats is not None:
            prior = shrink(label_stats.of(q), prior, pseudo_members, min_shape)
        prior = shrink(host_stats.of(q), prior, pseudo_members, min_shape)
        out[q] = prior
    # α and θ are estimated by MAP: a URL without outcomes starts at its prior's mode,
    # which sits at the groups' typical member (the median of their spread)
    shape = min(max(out["alpha"].shape, URL_ALPHA_SHAPE), MAX_SHAPE)
    out["alpha"] = out["alpha"].with_mode_at_median(shape)
    source_shape = _source_shape(host_stats, global_stats)
    if source_shape is None:
        # θ: a weak prior at the groups' typical θ (partial pooling)
        out["theta"] = out["theta"].with_mode_at_median(URL_THETA_SHAPE)
    else:
        # signal quality belongs to the host's source: θ at the host's pooled θ_h
        th = host_stats.pooled_theta
        out["theta"] = GammaPrior(source_shape, (source_shape - 1.0) / th)
    if global_stats.alpha_follows_signals():
        g, h = global_stats, host_stats
        mean = g.sum_ln_alpha_per_signal / g.alpha_signal_pairs
        per_signal = math.exp(
            (h.sum_ln_alpha_per_signal + pseudo_members * mean)
            / (h.alpha_signal_pairs + pseudo_members)
        )
        shape = out["alpha"].shape
        out[ALPHA_PER_SIGNAL] = GammaPrior(shape, (shape - 1.0) / per_signal)
    if global_stats.sources_shared > 0 and host_stats.source[0] > 0:
        # each host is one source, and this one's is known: θ at θ_h, α/γ at c_h
        c, th, sd_c, _ = host_stats.source
        out["theta"] = GammaPrior(SOURCE_THETA_SHAPE, (SOURCE_THETA_SHAPE - 1.0) / th)
        k = max(1.0 / max(sd_c * sd_c, 1e-12), URL_ALPHA_SHAPE)
        out[SOURCE_ALPHA_PER_SIGNAL] = GammaPrior(k, (k - 1.0) / c)
        out.pop(ALPHA_PER_SIGNAL, None)
    return out


def _source_shape(host: GroupStats, global_stats: GroupStats) -> float | None:
    """The shape of a URL's θ prior at its host's θ_h, where signal quality is the
    host's source's (None where it is not, or not yet known).

    Signal quality is taken as the source's when θ's squared coefficient of
    variation around each host's θ_h, pooled over all hosts (an upper bound at the
    level of two standard errors, Φ(−2), with the exact χ² quantile of Cochran's Q:
    :meth:`.hierarchy.GroupStats.theta_cv2`), is at most
    :data:`SOURCE_MAX_CV2`, and the host has its θ_h; the shape is then 1/cv²
    (at most MAX_SHAPE).
    """
    th = host.pooled_theta
    if not (host.pooled_outcomes >= MIN_POOLED_OUTCOMES and th > 0):
        return None
    cv2 = global_stats.theta_cv2(z=2.0)
    if not cv2 <= SOURCE_MAX_CV2:
        return None
    return min(1.0 / cv2, MAX_SHAPE) if cv2 > 0 else MAX_SHAPE


def given_priors(
    chain: Prior4,
    *,
    weight: float | None,
    change_rate: float | None,
    recall: float | None,
    false_signal_rate: float | None,
    strength: float,
) -> Prior4:
    """One URL's :func:`given_priors_many`: priors where the operator gave values at
    registration (None: not given), the rest from ``chain``.

    Raises
    ------
    ParameterError
        As :func:`given_priors_many`.
    """
    w, d, r, n = (
        np.array([math.nan if v is None else v], dtype=np.float64)
        for v in (weight, change_rate, recall, false_signal_rate)
    )
    return given_priors_many(Priors.stack([chain]), w, d, r, n, strength).row(0)


def given_priors_many(
    chains: Priors,
    weight: FloatArray,
    change_rate: FloatArray,
    recall: FloatArray,
    false_signal_rate: FloatArray,
    strength: float,
) -> Priors:
    """Priors of m URLs where the operator gave values at registration: each given
    value sets the mean of the quantities it bears on, with shape ``strength``; the
    rest comes from the URL's chain (:func:`prior_chain`).

    The missing ones of (Δ, recall, ν) are read off the chain's (MAP) values
    (Δ = α + γp, recall = γp/Δ, ν = γ(1 − p)); then γ = recall·Δ + ν,
    α = (1 − recall)Δ, θ = −ln(ν/γ) (20 where ν = 0); α's and θ's priors have
    their modes there (MAP estimates), W's and γ's their means.  A value that gives
    no positive W, α, γ or θ leaves that prior to the chain.

    Parameters
    ----------
    chains : Priors
        The URLs' chains, (m,) arrays.
    weight, change_rate, recall, false_signal_rate : (m,) arrays
        Given W (1/s), Δ (1/s), recall and ν (1/s); NaN where not given.
    strength : float
        Gamma shape of a given value's prior (> 0).

    Returns
    -------
    Priors

    Raises
    ------
    ParameterError
        On an infinite given value or ``strength`` not positive and finite.

    References
    ----------
    MATH.md, "Estimating parameters"; paper 003 §4.2.
    """
    if not 0 < strength < math.inf:
        raise ParameterError("`strength` must be positive and finite")
    given = np.stack([np.asarray(v, dtype=np.float64) for v in
                      (weight, change_rate, recall, false_signal_rate)])  # fmt: skip
    if np.isinf(given).any():
        raise ParameterError("given values must be finite")
    shape = {q: v.copy() for q, v in chains.shape.items()}
    rate = {q: v.copy() for q, v in chains.rate.items()}
    has = ~np.isnan(given)
    w, d, r, n = given
    sel = has[0] & (w > 0)
    shape["weight"][sel], rate["weight"][sel] = strength, strength / w[sel]
    gm = chains.mean("signal_rate")
    p = -np.expm1(-(chains.shape["theta"] - 1.0) / chains.rate["theta"])
    am = (chains.shape["alpha"] - 1.0) / chains.rate["alpha"]
    with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
        delta = np.where(has[1], d, am + gm * p)
        rec = np.where(has[2], r, gm * p / (am + gm * p))
        nu = np.where(has[3], n, gm * (1.0 - p))
        gamma = rec * delta + nu
        alpha = (1.0 - rec) * delta
        theta = np.where(nu > 0, -np.log(nu / gamma), 20.0)
    rows = has[1:].any(axis=0)
    for key in (ALPHA_PER_SIGNAL, SOURCE_ALPHA_PER_SIGNAL):
        if key in shape:  # a given Δ, recall or ν sets α's prior itself
            shape[key][rows] = rate[key][rows] = math.nan
    big = max(strength, 1.5)
    set_alpha = rows & (alpha > 0) & np.isfinite(alpha)
    shape["alpha"][set_alpha] = big
    rate["alpha"][set_alpha] = (big - 1.0) / alpha[set_alpha]
    set_gamma = rows & (gamma > 0) & np.isfinite(gamma)
    shape["signal_rate"][set_gamma] = strength
    rate["signal_rate"][set_gamma] = strength / gamma[set_gamma]
    set_theta = set_gamma & (theta > 0) & np.isfinite(theta)
    ts = max(URL_THETA_SHAPE, big)
    shape["theta"][set_theta] = ts
    rate["theta"][set_theta] = (ts - 1.0) / theta[set_theta]
    return Priors(shape, rate)
