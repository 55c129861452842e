"""One rate given the other: the building block and the per-host pooled fit.

The log-link outcome model of :mod:`.change` (P(unchanged) = exp(−(ατ + θn)))
with one of its two rates known, and the fit of a host's one θ (its signal
source's quality) with every URL's own α (paper 004 App. E; MATH.md,
"Estimating parameters": "pool it per host").
"""

from __future__ import annotations

import numpy as np
from numpy.typing import ArrayLike

from scheduler_core.estimate.change import (
    _MAX_HALVINGS,
    _MAX_ITER,
    _check_prior,
    _damped_step,
    _derivatives,
    _log_lik,
)
from scheduler_core.params import FloatArray

__all__ = ["fit_pooled_theta", "fit_rate_with_offset"]


def fit_rate_with_offset(
    coef: ArrayLike,
    offset: ArrayLike,
    z: ArrayLike,
    mask: ArrayLike,
    prior: tuple[ArrayLike, ArrayLike],
) -> FloatArray:
    """MAP of one rate q ≥ 0 per row when η_k = q·coef_k + offset_k, vectorised.

    The building block of the pooled fit: with ``coef = τ`` and ``offset = θn`` it is
    α given θ; with ``coef = n`` and ``offset = ατ`` it is θ given α.

    Parameters
    ----------
    coef, offset : array_like, shape (m, K)
        Non-negative coefficients and offsets of η.
    z, mask : array_like of bool, shape (m, K)
        Changed flags and which slots hold an outcome.
    prior : (shape, rate), array_like of shape (m,)
        Gamma prior on q (shape ≥ 1).

    Returns
    -------
    ndarray, shape (m,)

    Raises
    ------
    ParameterError
        On a prior with shape < 1 or a non-positive rate.
    """
    c = np.atleast_2d(np.asarray(coef, dtype=np.float64))
    o = np.atleast_2d(np.asarray(offset, dtype=np.float64))
    chg = np.atleast_2d(np.asarray(z, dtype=bool))
    msk = np.atleast_2d(np.asarray(mask, dtype=bool))
    m = c.shape[0]
    a = np.broadcast_to(np.asarray(prior[0], dtype=np.float64), (m,))
    b = np.broadcast_to(np.asarray(prior[1], dtype=np.float64), (m,))
    _check_prior("rate", a, b)
    scale = np.maximum(a, 1.0) / b
    cs = np.where(msk, c, 0.0) * scale[:, None]
    o = np.where(msk, o, 0.0)
    chg = chg & msk
    bs = b * scale

    def objective(q: FloatArray) -> FloatArray:
        ll = _log_lik(q[:, None] * cs + o, chg)
        val: FloatArray = np.where(msk, ll, 0.0).sum(axis=1) + (a - 1.0) * np.log(q) - bs * q
        return val

    q = np.where(a > 1.0, (a - 1.0) / bs, 0.5)
    q = np.where(q > 0, q, 0.5)
    current = objective(q)
    active = np.ones(m, dtype=bool)
    for _ in range(_MAX_ITER):
        if not active.any():
            break
        g, h = _derivatives(q[:, None] * cs + o, chg)
        grad = (np.where(msk, g, 0.0) * cs).sum(axis=1) + (a - 1.0) / q - bs
        hess = (np.where(msk, h, 0.0) * cs * cs).sum(axis=1) - (a - 1.0) / q**2
        ok = hess < 0
        d = np.where(ok, -grad / np.where(ok, hess, 1.0), grad * q * q * 0.1)
        (q,), current, active = _damped_step((q,), (d,), objective, current, active)
    return q * scale


def fit_pooled_theta(
    tau: ArrayLike,
    n: ArrayLike,
    z: ArrayLike,
    mask: ArrayLike,
    alpha_prior: tuple[ArrayLike, ArrayLike],
    theta_prior: tuple[float, float],
) -> tuple[float, FloatArray]:
    """One θ shared by the URLs of a signal source (a host), with per-URL α.

    Signal quality belongs to the source (a host's sitemap, a CDN), so θ =
    −ln(1 − precision) is pooled over the host's URLs while each URL keeps its own
    α.  The joint log posterior is concave; Newton's method on (α_1..α_m, θ) solves
    its arrowhead Hessian in O(m) per step (the α block is diagonal), with a common
    step halved until the posterior improves.

    Parameters
    ----------
    tau, n, z, mask : array_like, shape (m, K)
        The host's outcome windows, as in :func:`fit_outcomes`.
    alpha_prior : (shape, rate), array_like of shape (m,)
        Gamma priors on each α (1/s), shapes ≥ 1.
    theta_prior : (shape, rate)
        Gamma prior on the pooled θ (shape ≥ 1).

    Returns
    -------
    theta : float
        The pooled θ; the host's precision is 1 − e^{−θ}.
    alpha : ndarray, shape (m,)
        Each URL's α at that θ, 1/s.

    Raises
    ------
    ParameterError
        As :func:`fit_outcomes`.

    References
    ----------
    Paper 004 App. E; MATH.md, "Estimating parameters" ("pool it per host").
    """
    t = np.atleast_2d(np.asarray(tau, dtype=np.float64))
    cnt = np.atleast_2d(np.asarray(n, dtype=np.float64))
    msk = np.atleast_2d(np.asarray(mask, dtype=bool))
    chg = np.atleast_2d(np.asarray(z, dtype=bool)) & msk
    m = t.shape[0]
    a_a = np.broadcast_to(np.asarray(alpha_prior[0], dtype=np.float64), (m,))
    b_a = np.broadcast_to(np.asarray(alpha_prior[1], dtype=np.float64), (m,))
    _check_prior("alpha", a_a, b_a)
    a0, b0 = float(theta_prior[0]), float(theta_prior[1])
    _check_prior("theta", np.array([a0]), np.array([b0]))
    scale = np.maximum(a_a, 1.0) / b_a  # α = scale·α′
    tt = np.where(msk, t, 0.0) * scale[:, None]
    cnt = np.where(msk, cnt, 0.0)
    b_s = b_a * scale

    def objective(al: FloatArray, th: float) -> float:
        ll = _log_lik(al[:, None] * tt + th * cnt, chg)
        val = np.where(msk, ll, 0.0).sum() + ((a_a - 1.0) * np.log(al) - b_s * al).sum()
        return float(val + (a0 - 1.0) * np.log(th) - b0 * th)

    alpha = np.full(m, 1.0)
    theta = max((a0 - 1.0) / b0, 0.5)
    current = objective(alpha, theta)
    for _ in range(_MAX_ITER):
        g, h = _derivatives(alpha[:, None] * tt + theta * cnt, chg)
        g = np.where(msk, g, 0.0)
        h = np.where(msk, h, 0.0)
        ga = (g * tt).sum(axis=1) + (a_a - 1.0) / alpha - b_s
        haa = (h * tt * tt).sum(axis=1) - (a_a - 1.0) / alpha**2
        hat = (h * tt * cnt).sum(axis=1)
        gt = float((g * cnt).sum() + (a0 - 1.0) / theta - b0)
        htt = float((h * cnt * cnt).sum() - (a0 - 1.0) / theta**2)
        haa = np.minimum(haa, -1e-12)  # flat directions: a tiny curvature
        schur = htt - float((hat * hat / haa).sum())
        if schur < 0:
            dt = (-gt + float((hat * ga / haa).sum())) / schur
        else:
            dt = gt * theta * theta * 0.1
        da = (-ga - hat * dt) / haa
        step = 1.0
        if dt < 0:
            step = min(step, -0.9 * theta / dt)
        neg = da < 0
        if neg.any():
            step = min(step, float((-0.9 * alpha[neg] / da[neg]).min()))
        for _ in range(_MAX_HALVINGS):
            cand_a, cand_t = alpha + step * da, theta + step * dt
            val = objective(cand_a, cand_t)
            if val >= current - 1e-12 * abs(current):
                break
            step /= 2.0
        else:
            break
        moved = max(abs(cand_t - theta) / theta, float((np.abs(cand_a - alpha) / alpha).max()))
        alpha, theta, current = cand_a, cand_t, val
        if moved < 1e-9:
            break
    return theta, alpha * scale
