"""A host's URLs as members of the prior hierarchy: their own estimates.

What group statistics (:class:`~scheduler_core.estimate.hierarchy.GroupStats`)
sum: each URL's W, γ, α and θ from its own data under near-flat priors, and the
host's pooled signal quality θ_h (paper 004 App. E: a host's sitemap or CDN is
one signal source; MATH.md, "Estimating parameters").
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from numpy.typing import NDArray

from scheduler_core.estimate.change import fit_outcomes
from scheduler_core.estimate.hierarchy import QUANTITIES, GammaPrior, GroupStats, moments_of
from scheduler_core.estimate.learn import URL_THETA_SHAPE, History
from scheduler_core.estimate.pooled import fit_pooled_theta
from scheduler_core.params import FloatArray

__all__ = ["MIN_OUTCOMES", "MIN_POOLED_OUTCOMES", "Members", "members", "weak_alpha_prior"]

#: Members counted in group statistics need this much history.
MIN_OUTCOMES = 8
MIN_EXPOSURE_SHARE = 0.2  # of the decay time constant
MIN_POOLED_OUTCOMES = 20  # signal-bearing outcomes before a host's θ_h is reported
MIN_BEARING = 3  # signal-bearing outcomes before a URL's θ counts in its groups


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
    signal_rate, alpha; ``pooled_theta`` and ``pooled_outcomes`` are the host's.
    """

    value: dict[str, FloatArray]
    sampling_var: dict[str, FloatArray]
    valid: dict[str, NDArray[np.bool_]]
    pooled_theta: float
    pooled_outcomes: float

    def stats(self, index: NDArray[np.bool_] | None = None) -> GroupStats:
        """Group statistics of the selected members (all by default), with the
        host's pooled θ_h."""
        moms = []
        for q in QUANTITIES:
            ok = self.valid[q] if index is None else self.valid[q] & index
            moms.append(moments_of(self.value[q][ok], self.sampling_var[q][ok]))
        return GroupStats(
            (moms[0], moms[1], moms[2], moms[3]), self.pooled_theta, self.pooled_outcomes
        )


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
    pooled = float("nan")
    if n_pooled > 0:
        rows: NDArray[np.bool_] = np.asarray(bearing.any(axis=1), dtype=bool)
        sub = history.take(rows)
        pooled, _ = fit_pooled_theta(
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
    valid["alpha"] = history.mask.sum(axis=1) >= MIN_OUTCOMES
    valid["theta"] = valid["alpha"] & (bearing.sum(axis=1) >= MIN_BEARING)
    if valid["alpha"].any() and history.mask.shape[1] > 0:
        fit = fit_outcomes(
            history.tau, history.n, history.z, history.mask, alpha_priors, weak_theta
        )
        info = np.maximum(fit.alpha_info, 1e-300)
        value["alpha"] = fit.alpha
        var["alpha"] = np.minimum(1.0 / info, 4.0 * fit.alpha**2)
        value["theta"] = fit.theta
    return Members(value, var, valid, pooled, n_pooled)
