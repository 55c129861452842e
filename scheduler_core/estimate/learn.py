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

import numpy as np
from numpy.typing import NDArray

from scheduler_core.errors import ParameterError
from scheduler_core.estimate.change import fit_outcomes
from scheduler_core.estimate.hierarchy import (
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
    "Priors",
    "estimate",
    "given_priors",
    "prior_chain",
    "to_params",
]

Prior4 = dict[str, GammaPrior]

#: Shape of a URL's θ prior, its mode at the host's pooled θ_h (signal quality
#: belongs to the source, paper 004 App. E), weak: a URL whose own outcomes say
#: otherwise moves away from it (partial pooling).  On the default world, whose
#: URLs draw recall and false-signal rates independently, pinning every URL to
#: θ_h doubled the error of Δ (median |Δ̂/Δ − 1| 0.195 against 0.135).
URL_THETA_SHAPE = 1.5


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
        clicks: Sequence[float],
        signals: Sequence[float],
        exposure: Sequence[float],
        outcomes: Sequence[Sequence[tuple[float, int, bool]]],
    ) -> History:
        """Arrays from per-URL lists of outcomes (τ s, n, changed), padded to the
        longest window.

        Raises
        ------
        ParameterError
            If the lengths differ.
        """
        m = len(clicks)
        if not (len(signals) == len(exposure) == len(outcomes) == m):
            raise ParameterError("`clicks`, `signals`, `exposure`, `outcomes` differ in length")
        k = max((len(o) for o in outcomes), default=0)
        tau = np.ones((m, k))
        n = np.zeros((m, k))
        z = np.zeros((m, k), dtype=bool)
        mask = np.zeros((m, k), dtype=bool)
        for i, rows in enumerate(outcomes):
            if rows:
                arr = np.asarray(rows, dtype=np.float64)
                j = len(rows)
                tau[i, :j], n[i, :j], z[i, :j] = arr[:, 0], arr[:, 1], arr[:, 2] != 0
                mask[i, :j] = True
        return cls(
            np.asarray(clicks, dtype=np.float64),
            np.asarray(signals, dtype=np.float64),
            np.asarray(exposure, dtype=np.float64),
            tau, n, z, mask,
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
    q in :data:`.hierarchy.QUANTITIES`."""

    shape: dict[str, FloatArray]
    rate: dict[str, FloatArray]

    @classmethod
    def stack(cls, rows: Sequence[Prior4]) -> Priors:
        """Arrays from one dict of priors per URL."""
        return cls(
            {q: np.array([r[q].shape for r in rows], dtype=np.float64) for q in QUANTITIES},
            {q: np.array([r[q].rate for r in rows], dtype=np.float64) for q in QUANTITIES},
        )

    def mean(self, quantity: str) -> FloatArray:
        return self.shape[quantity] / self.rate[quantity]


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
        Their Gamma priors (α and θ shapes ≥ 1).
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
            history.tau, history.n, history.z, history.mask,
            (priors.shape["alpha"], priors.rate["alpha"]),
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
    groups' means; θ's is weak (shape :data:`URL_THETA_SHAPE`).
    """
    out: Prior4 = {}
    for q in QUANTITIES:
        min_shape = {"alpha": 1.5, "theta": 1.0}.get(q, 0.5)
        prior = shrink(global_stats.of(q), root[q], pseudo_members, min_shape)
        if label_stats is not None:
            prior = shrink(label_stats.of(q), prior, pseudo_members, min_shape)
        prior = shrink(host_stats.of(q), prior, pseudo_members, min_shape)
        out[q] = prior
    # α is estimated by MAP: a URL without outcomes starts at the prior's mode, so the
    # mode sits at the groups' mean
    out["alpha"] = out["alpha"].with_mode_at_mean()
    # θ: the groups' mean as the mode of a weak prior (partial pooling)
    out["theta"] = GammaPrior.from_mean(out["theta"].mean, URL_THETA_SHAPE).with_mode_at_mean()
    return out


def given_priors(
    chain: Prior4,
    *,
    weight: float | None,
    change_rate: float | None,
    recall: float | None,
    false_signal_rate: float | None,
    strength: float,
) -> Prior4:
    """Priors where the operator gave values at registration: each given value sets
    the mean of the quantities it bears on, with shape ``strength``; the rest comes
    from ``chain``.

    The missing ones of (Δ, recall, ν) are read off the chain's means (Δ = α + γp,
    recall = γp/Δ, ν = γ(1 − p)); then γ = recall·Δ + ν, α = (1 − recall)Δ,
    θ = −ln(ν/γ).
    """
    if weight is None and change_rate is None and recall is None and false_signal_rate is None:
        return chain
    out = dict(chain)
    if weight is not None and weight > 0:
        out["weight"] = GammaPrior.from_mean(weight, strength)
    if change_rate is None and recall is None and false_signal_rate is None:
        return out
    gm = chain["signal_rate"].mean
    tm = (chain["theta"].shape - 1.0) / chain["theta"].rate  # θ and α: MAP, at the mode
    # α's estimate without data is its prior's mode (prior_chain put it at the groups'
    # mean; the prior's own mean lies a factor shape/(shape − 1) above)
    am = (chain["alpha"].shape - 1.0) / chain["alpha"].rate
    p = -math.expm1(-tm)
    delta = am + gm * p if change_rate is None else change_rate
    r = (gm * p / (am + gm * p)) if recall is None else recall
    nu = gm * (1 - p) if false_signal_rate is None else false_signal_rate
    gamma = r * delta + nu
    alpha = (1 - r) * delta
    shape = max(strength, 1.5)
    if alpha > 0:
        out["alpha"] = GammaPrior.from_mean(alpha, shape).with_mode_at_mean()
    if gamma > 0:
        out["signal_rate"] = GammaPrior.from_mean(gamma, strength)
        theta = -math.log(nu / gamma) if nu > 0 else 20.0
        if theta > 0:
            out["theta"] = GammaPrior.from_mean(
                theta, max(URL_THETA_SHAPE, shape)
            ).with_mode_at_mean()
    return out
