"""A host's URLs as members of the prior hierarchy: their own estimates.

What group statistics (:class:`~scheduler_core.estimate.hierarchy.GroupStats`)
sum: each URL's W, γ, α and θ from its own data under near-flat priors, and the
host's pooled signal quality θ_h (paper 004 App. E: a host's sitemap or CDN is
one signal source; MATH.md, "Estimating parameters").
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace

import numpy as np
from numpy.typing import NDArray

from scheduler_core.estimate.change import (
    fit_outcomes,
    outcome_information,
    outcome_log_likelihood,
)
from scheduler_core.estimate.hierarchy import (
    MIN_POOLED_OUTCOMES,
    QUANTITIES,
    GammaPrior,
    GroupStats,
    moments_of,
)
from scheduler_core.estimate.learn import URL_THETA_SHAPE, History
from scheduler_core.estimate.pooled import fit_pooled_theta
from scheduler_core.params import FloatArray

__all__ = [
    "MIN_OUTCOMES",
    "MIN_POOLED_OUTCOMES",
    "Members",
    "alpha_and_signals",
    "members",
    "theta_heterogeneity",
    "weak_alpha_prior",
]

#: Members counted in group statistics need this much history.
MIN_OUTCOMES = 8
MIN_EXPOSURE_SHARE = 0.2  # of the decay time constant
MIN_BEARING = 3  # signal-bearing outcomes before a URL's θ counts in its groups
MIN_RELATIVE_INFO = 4.0  # θ_h²·I: θ's standard error at most half of θ_h
#: Outcomes a URL needs to count in :func:`alpha_and_signals`.  Fewer than
#: :data:`MIN_OUTCOMES` will do there: it compares two spreads of the same α̂, whose
#: noise adds to both; with 4 rather than 8 the evidence that a host's URLs share
#: recall comes in sooner (`python bench/anchors.py`, signal quality per host:
#: learned ÷ oracle 0.963 against 0.953), and on worlds whose URLs draw their own
#: it still never passes.
MIN_PAIR_OUTCOMES = 4


def weak_alpha_prior(history: History) -> tuple[FloatArray, FloatArray]:
    """Near-flat priors on α for the members' own estimates: a twentieth of a change
    in a twentieth of a typical interval (mode 1/τ̄), enough to keep an all-changed
    or never-changed window finite without pulling towards any group.  (Shape 1.5,
    half a change, pulled a high-recall source's small α up towards 1/τ̄ and its
    pooled precision and recall down: recall 0.9 came out 0.81.)"""
    count = np.maximum(history.mask.sum(axis=1), 1)
    mean_tau = np.where(history.mask, history.tau, 0.0).sum(axis=1) / count
    mean_tau = np.where(mean_tau > 0, mean_tau, 1.0)
    return np.full(history.m, 1.05), 0.05 * mean_tau


@dataclass(frozen=True, slots=True)
class Members:
    """Each URL's own estimates that group statistics sum (shape (m,) arrays).

    ``value[q]``, ``sampling_var[q]`` and ``valid[q]`` for q in weight,
    signal_rate, alpha, theta; ``host`` holds what belongs to the host as a whole
    (its pooled θ_h and the sums of :func:`theta_heterogeneity` and
    :func:`alpha_and_signals`), its moments empty.
    """

    value: dict[str, FloatArray]
    sampling_var: dict[str, FloatArray]
    valid: dict[str, NDArray[np.bool_]]
    host: GroupStats

    @property
    def pooled_theta(self) -> float:
        return self.host.pooled_theta

    @property
    def pooled_outcomes(self) -> float:
        return self.host.pooled_outcomes

    def stats(self, index: NDArray[np.bool_] | None = None) -> GroupStats:
        """Group statistics of the selected members (all by default), with the
        host's own figures."""
        moms = []
        for q in QUANTITIES:
            ok = self.valid[q] if index is None else self.valid[q] & index
            moms.append(moments_of(self.value[q][ok], self.sampling_var[q][ok]))
        return replace(self.host, moments=(moms[0], moms[1], moms[2], moms[3]))


def members(history: History, theta_prior: GammaPrior, decay_s: float) -> Members:
    """The URLs of one host as members of the hierarchy, from their own data.

    W and γ: each URL's decayed rate C/E (URLs observed for at least a fifth of
    the decay time), sampling variance (C + 1)/E².  θ: the host's pooled MAP
    (:func:`.change.fit_pooled_theta`; paper 004 App. E) and the number of
    signal-bearing outcomes behind it.  α: each URL's MAP under a near-flat prior
    (:func:`weak_alpha_prior`) given θ_h, for URLs with ≥ 8 outcomes, sampling
    variance 1/information.

    Parameters
    ----------
    history : History
        The host's URLs.
    theta_prior : GammaPrior
        Prior on the pooled θ (its label's or the global one).
    decay_s : float
        Time constant of the decayed counts, s.
    """
    alpha_priors = weak_alpha_prior(history)
    seen = history.exposure >= MIN_EXPOSURE_SHARE * decay_s
    e = np.where(seen, history.exposure, 1.0)
    value: dict[str, FloatArray] = {}
    var: dict[str, FloatArray] = {}
    valid: dict[str, NDArray[np.bool_]] = {}
    for q, count in (("weight", history.clicks), ("signal_rate", history.signals)):
        value[q], var[q], valid[q] = count / e, (count + 1.0) / (e * e), seen
    bearing = history.mask & (history.n > 0)
    n_pooled = float(bearing.sum())
    pooled = math.nan
    excess = scale = dof = 0.0
    at_pooled = np.full(history.m, math.nan)
    if n_pooled > 0:
        rows: NDArray[np.bool_] = np.asarray(bearing.any(axis=1), dtype=bool)
        sub = history.take(rows)
        pooled, at_pooled[rows] = fit_pooled_theta(
            sub.tau, sub.n, sub.z, sub.mask,
            (alpha_priors[0][rows], alpha_priors[1][rows]),
            (max(theta_prior.shape, 1.0), theta_prior.rate),
        )  # fmt: skip
    # α and θ of each URL under weak priors (θ's mode at ``theta_prior``'s mean, the
    # label's or global one): pinning θ_h would push the differences between URLs'
    # signal quality into their α
    m = history.m
    t_mode = theta_prior.mean
    weak_theta = (np.full(m, URL_THETA_SHAPE), np.full(m, (URL_THETA_SHAPE - 1.0) / t_mode))
    for q in ("alpha", "theta"):
        value[q], var[q] = np.zeros(m), np.zeros(m)
    n_outcomes = history.mask.sum(axis=1)
    valid["alpha"] = n_outcomes >= MIN_OUTCOMES
    valid["theta"] = valid["alpha"] & (bearing.sum(axis=1) >= MIN_BEARING)
    paired = n_outcomes >= MIN_PAIR_OUTCOMES
    if paired.any() and history.mask.shape[1] > 0:
        fit = fit_outcomes(
            history.tau, history.n, history.z, history.mask, alpha_priors, weak_theta
        )
        info = np.maximum(fit.alpha_info, 1e-300)
        value["alpha"] = fit.alpha
        var["alpha"] = np.minimum(1.0 / info, 4.0 * fit.alpha**2)
        value["theta"] = fit.theta
        if n_pooled >= MIN_POOLED_OUTCOMES:
            ok = valid["theta"]
            excess, scale, dof = theta_heterogeneity(
                history.take(ok), pooled, at_pooled[ok], fit.alpha[ok], fit.theta[ok]
            )
    host = replace(
        alpha_and_signals(value["alpha"], value["signal_rate"], paired & valid["signal_rate"]),
        pooled_theta=pooled, pooled_outcomes=n_pooled,
        theta_excess=excess, theta_scale=scale, theta_dof=dof,
    )  # fmt: skip
    return Members(value, var, valid, host)


def alpha_and_signals(
    alpha: FloatArray, signal_rate: FloatArray, use: NDArray[np.bool_]
) -> GroupStats:
    """How α goes with γ among a host's URLs, in the :class:`.hierarchy.GroupStats`
    fields that sum it over hosts (the rest empty).

    Over the URLs selected by ``use`` with both estimates positive: the sums of
    squares of ln α̂ and of ln(α̂/γ̂) around their means, their degrees of freedom
    (count − 1; zeros with fewer than two URLs), Σ ln(α̂/γ̂) and the count
    (:meth:`.hierarchy.GroupStats.alpha_follows_signals`; the typical α/γ of
    :func:`.learn.prior_chain`).

    Parameters
    ----------
    alpha, signal_rate : (m,) arrays
        Each URL's own α̂ and γ̂, 1/s.
    use : (m,) bool array
        The URLs to count.
    """
    a, g = alpha, signal_rate
    ok = use & (a > 0) & (g > 0)
    k = int(ok.sum())
    la = np.log(a[ok])
    lr = la - np.log(g[ok])
    sums = GroupStats(sum_ln_alpha_per_signal=float(lr.sum()), alpha_signal_pairs=float(k))
    if k < 2:
        return sums
    return replace(
        sums,
        ss_ln_alpha=float(((la - la.mean()) ** 2).sum()),
        ss_ln_alpha_per_signal=float(((lr - lr.mean()) ** 2).sum()),
        alpha_signal_dof=k - 1.0,
    )


def theta_heterogeneity(
    history: History,
    pooled_theta: float,
    pooled_alpha: FloatArray,
    alpha: FloatArray,
    theta: FloatArray,
) -> tuple[float, float, float]:
    """How far a host's URLs' outcomes stray from one signal quality θ_h: the
    terms of a method-of-moments estimate (DerSimonian & Laird 1986) of the
    squared coefficient of variation c² of θ among a host's URLs.

    Each URL's likelihood-ratio statistic between its own (α̂, θ̂) and the host's
    pooled fit (θ_h, and its α there) sums to Cochran's Q.  With θ_i = θ_h(1 + ε_i),
    Var ε = c², E[Q] ≈ (k − 1) + c²θ_h²D with D = ΣI − ΣI²/ΣI and I each URL's
    information on θ at θ_h, α unknown (:func:`.change.outcome_information`).  A
    host returns Q − (k − 1) and θ_h²D; summed over hosts, their ratio estimates c²
    (:meth:`.hierarchy.GroupStats.theta_cv2`), with the power of all hosts'
    outcomes: 0 when signal quality belongs to each host's source, large when each
    URL is its own source.

    Parameters
    ----------
    history : History
        The host's URLs that bear on θ (m of them).
    pooled_theta : float
        θ_h.
    pooled_alpha : (m,) array
        Each URL's α in the pooled fit (:func:`.pooled.fit_pooled_theta`), 1/s.
    alpha, theta : (m,) arrays
        Each URL's own MAP α (1/s) and θ under weak priors.

    Returns
    -------
    (excess, scale, dof) : (float, float, float)
        Q − (k − 1), θ_h²D and k − 1; zeros with fewer than two URLs or no
        information.

    References
    ----------
    DerSimonian & Laird, "Meta-analysis in clinical trials", Controlled Clinical
    Trials 7 (1986); paper 004 App. E (signal quality per source).
    """
    k = history.m
    if k < 2 or not (math.isfinite(pooled_theta) and pooled_theta > 0):
        return 0.0, 0.0, 0.0
    t = np.full(k, pooled_theta)
    _, info = outcome_information(pooled_alpha, t, history.tau, history.n, history.mask)
    # URLs whose outcomes pin θ to within half of θ_h: where the asymptotics of the
    # likelihood ratio hold (a URL with little information, its θ̂ held at its prior,
    # would add a degree of freedom and no statistic)
    sel = info * pooled_theta * pooled_theta >= MIN_RELATIVE_INFO
    k = int(sel.sum())
    if k < 2:
        return 0.0, 0.0, 0.0
    h = history.take(sel)
    info = info[sel]
    own = outcome_log_likelihood(alpha[sel], theta[sel], h.tau, h.n, h.z, h.mask)
    held = outcome_log_likelihood(pooled_alpha[sel], t[sel], h.tau, h.n, h.z, h.mask)
    q = float(np.maximum(2.0 * (own - held), 0.0).sum())
    total = float(info.sum())
    d = total - float((info * info).sum()) / total if total > 0 else 0.0
    if not d > 0:
        return 0.0, 0.0, 0.0
    return q - (k - 1), pooled_theta * pooled_theta * d, float(k - 1)
