"""Change rate and signal quality from crawl outcomes (incomplete observation).

A crawl only tells whether the page changed since the previous crawl.  Over an
interval of τ seconds in which n change-indicating signals (with news) arrived,
the page stayed unchanged with probability exp(−(ατ + θn)), where α = (1 − r)Δ
is the rate of unannounced changes and θ = αβ = −ln(1 − precision) (MATH.md,
"Estimating parameters"; paper 004 eq. 1 and App. E, the log-link model
z ~ Ber(1 − exp(−⟨(α, αβ), (τ, n)⟩))).  Without signals (n ≡ 0) α is Δ and the
model is Cho & Garcia-Molina's (2003).

The maximum-likelihood estimate is 0 when no change was seen and ∞ when every
crawl saw one; Gamma priors on α and θ keep both finite: :func:`fit_outcomes`
returns the maximum a posteriori (MAP) estimate.  The log posterior is concave
for prior shapes ≥ 1 (ln(1 − e^{−η}) is concave in η, η linear in (α, θ)), so
a damped Newton ascent finds the unique maximum.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import numpy as np
from numpy.typing import ArrayLike, NDArray

from scheduler_core.errors import ParameterError
from scheduler_core.params import FloatArray

__all__ = ["OutcomeFit", "fit_outcomes", "outcome_information", "outcome_log_likelihood"]

BoolArray = NDArray[np.bool_]

#: Newton iterations at most; each at most this many step halvings.
_MAX_ITER, _MAX_HALVINGS = 60, 40
_TOL = 1e-10


@dataclass(frozen=True, slots=True)
class OutcomeFit:
    """MAP estimates of m URLs (arrays of shape (m,)).

    Attributes
    ----------
    alpha : unannounced change rate α, 1/s.
    theta : −ln(1 − precision) = αβ, the staleness one signal carries.
    alpha_info : expected Fisher information of α from the outcomes alone (s²);
        1/alpha_info approximates the variance of the estimate without prior.
    theta_info : expected Fisher information of θ from the outcomes alone, α
        unknown (the Schur complement I_θθ − I_αθ²/I_αα); 0 without signals or
        when θ is fixed at 0.
    n_obs : outcomes used.
    """

    alpha: FloatArray
    theta: FloatArray
    alpha_info: FloatArray
    theta_info: FloatArray
    n_obs: NDArray[np.int64]


def _log_lik(eta: FloatArray, z: BoolArray) -> FloatArray:
    """Per-outcome log-likelihood z ln(1 − e^{−η}) − (1 − z)η."""
    eta = np.maximum(eta, 1e-150)  # η = 0 only in empty slots
    ll: FloatArray = np.where(z, np.log(-np.expm1(-eta)), -eta)
    return ll


def _derivatives(eta: FloatArray, z: BoolArray) -> tuple[FloatArray, FloatArray]:
    """First and second derivative in η of :func:`_log_lik`, per outcome."""
    eta = np.maximum(eta, 1e-150)  # η = 0 only in empty slots; keeps 1/sinh² finite
    em1 = np.expm1(np.minimum(eta, 700.0))  # no overflow; 1/em1 < 1e-304 is 0 anyway
    g = np.where(z, 1.0 / em1, -1.0)
    # e^η/(e^η − 1)² = 1/(4 sinh²(η/2)); 0 for large η
    with np.errstate(over="ignore", divide="ignore"):
        h = np.where(z, -1.0 / (4.0 * np.sinh(np.minimum(eta, 700.0) / 2.0) ** 2), 0.0)
    return g, h


def outcome_log_likelihood(
    alpha: ArrayLike, theta: ArrayLike, tau: ArrayLike, n: ArrayLike, z: ArrayLike, mask: ArrayLike
) -> FloatArray:
    """Log-likelihood Σ_k [z ln(1 − e^{−η}) − (1 − z) η], η = ατ + θn, per URL.

    Parameters
    ----------
    alpha, theta : array_like, shape (m,)
        α (1/s) and θ (dimensionless), ≥ 0.
    tau, n, z, mask : array_like, shape (m, K)
        Intervals (s), signals counted in them, changed flags, and which of the K
        slots hold an outcome.

    Returns
    -------
    ndarray, shape (m,)
    """
    a = np.asarray(alpha, dtype=np.float64)[:, None]
    t = np.asarray(theta, dtype=np.float64)[:, None]
    eta = a * np.asarray(tau, dtype=np.float64) + t * np.asarray(n, dtype=np.float64)
    ll = _log_lik(eta, np.asarray(z, dtype=bool))
    out: FloatArray = np.where(np.asarray(mask, dtype=bool), ll, 0.0).sum(axis=1)
    return out


def _check_prior(name: str, shape: FloatArray, rate: FloatArray) -> None:
    if not (np.all(shape >= 1.0) and np.all(rate > 0) and np.all(np.isfinite(rate))):
        raise ParameterError(f"`{name}` prior needs shape >= 1 and a finite rate > 0")


def _damped_step(
    points: tuple[FloatArray, ...],
    directions: tuple[FloatArray, ...],
    objective: Callable[..., FloatArray],
    current: FloatArray,
    active: BoolArray,
) -> tuple[tuple[FloatArray, ...], FloatArray, BoolArray]:
    """One damped ascent step per row of m concave problems in positive variables.

    Each row moves along its direction, at most 90% of the way to zero for any
    variable, halving the step until the objective does not fall; rows that could
    not improve, or moved by less than ``_TOL`` relative, leave ``active``.

    Returns the new points, their objective values and the rows still active.
    """
    m = current.shape[0]
    ds = tuple(np.where(active, d, 0.0) for d in directions)
    step = np.ones(m)
    with np.errstate(divide="ignore", invalid="ignore", over="ignore"):  # inf: no cap
        for x, d in zip(points, ds, strict=True):
            step = np.minimum(step, np.where(d < 0, -0.9 * x / d, 1.0))
    new = tuple(x.copy() for x in points)
    new_val, todo = current.copy(), active.copy()
    improved = np.zeros(m, dtype=bool)
    for _ in range(_MAX_HALVINGS):
        cand = tuple(np.where(todo, x + step * d, x) for x, d in zip(points, ds, strict=True))
        val = objective(*cand)
        better = todo & (val >= current - 1e-12 * np.abs(current))
        new = tuple(np.where(better, c, n) for c, n in zip(cand, new, strict=True))
        new_val = np.where(better, val, new_val)
        improved |= better
        todo &= ~better
        if not todo.any():
            break
        step = np.where(todo, step / 2.0, step)
    rel = np.zeros(m)
    for x, n in zip(points, new, strict=True):
        rel = np.maximum(rel, np.abs(n - x) / np.maximum(x, 1e-300))
    return new, new_val, active & improved & (rel > _TOL)


def outcome_information(
    alpha: ArrayLike, theta: ArrayLike, tau: ArrayLike, n: ArrayLike, mask: ArrayLike
) -> tuple[FloatArray, FloatArray]:
    """Expected Fisher information of α and of θ (α unknown) from crawl outcomes.

    Each outcome is a Bernoulli with P(change) = 1 − e^{−η}, η = ατ + θn, whose
    information on (α, θ) is (τ, n)ᵀ(τ, n)/(e^η − 1); the expected one is steadier
    than the observed one for short windows.

    Parameters
    ----------
    alpha, theta : array_like, shape (m,)
        α (1/s) and θ, ≥ 0.
    tau, n, mask : array_like, shape (m, K)
        Intervals (s), signals counted in them, and which slots hold an outcome.

    Returns
    -------
    alpha_info : ndarray, shape (m,)
        I_αα, s².
    theta_info : ndarray, shape (m,)
        I_θθ − I_αθ²/I_αα (the Schur complement: θ's information when α is
        estimated too); I_θθ where I_αα = 0.

    References
    ----------
    Paper 004 App. E (the log-link outcome model).
    """
    t = np.atleast_2d(np.asarray(tau, dtype=np.float64))
    cnt = np.atleast_2d(np.asarray(n, dtype=np.float64))
    msk = np.atleast_2d(np.asarray(mask, dtype=bool))
    a = np.asarray(alpha, dtype=np.float64)[:, None]
    th = np.asarray(theta, dtype=np.float64)[:, None]
    eta = np.maximum(a * t + th * cnt, 1e-150)
    with np.errstate(over="ignore"):
        weight = np.where(msk, 1.0 / np.expm1(np.minimum(eta, 700.0)), 0.0)
    t = np.where(msk, t, 0.0)
    cnt = np.where(msk, cnt, 0.0)
    i_aa = (weight * t * t).sum(axis=1)
    i_tt = (weight * cnt * cnt).sum(axis=1)
    i_at = (weight * t * cnt).sum(axis=1)
    with np.errstate(divide="ignore", invalid="ignore"):
        i_t = np.where(i_aa > 0, i_tt - i_at * i_at / i_aa, i_tt)
    return i_aa, np.maximum(i_t, 0.0)


@dataclass(frozen=True, slots=True)
class _MapProblem:
    """The MAP problems of :func:`fit_outcomes` for some URLs (rows), in the units where
    α's prior has scale 1: intervals ``tt`` (m, K), signals ``cnt``, changed flags
    ``chg``, occupied slots ``msk``; Gamma priors (``a_a``, ``b_a``) on α and
    (``a_t``, ``b_t``) on θ, (m,) each; θ fixed at 0 without ``with_theta``."""

    tt: FloatArray
    cnt: FloatArray
    chg: BoolArray
    msk: BoolArray
    a_a: FloatArray
    b_a: FloatArray
    a_t: FloatArray
    b_t: FloatArray
    with_theta: bool

    def take(self, rows: slice | NDArray[np.intp]) -> _MapProblem:
        """The problems of ``rows`` (``slice(None)``: all, as views)."""
        return _MapProblem(
            self.tt[rows], self.cnt[rows], self.chg[rows], self.msk[rows], self.a_a[rows],
            self.b_a[rows], self.a_t[rows], self.b_t[rows], self.with_theta,
        )  # fmt: skip

    def objective(self, al: FloatArray, th: FloatArray) -> FloatArray:
        """Log-posterior (up to a constant) at (α, θ), (m,)."""
        ll = _log_lik(al[:, None] * self.tt + th[:, None] * self.cnt, self.chg)
        val: FloatArray = (
            np.where(self.msk, ll, 0.0).sum(axis=1) + (self.a_a - 1.0) * np.log(al) - self.b_a * al
        )
        if self.with_theta:
            val += (self.a_t - 1.0) * np.log(th) - self.b_t * th
        return val

    def newton(self, al: FloatArray, th: FloatArray) -> tuple[FloatArray, FloatArray]:
        """The Newton direction −H⁻¹g at (α, θ); where H is not negative definite (flat
        prior, no data) a gradient step scaled by the current values."""
        tt, cnt, msk = self.tt, self.cnt, self.msk
        g, h = _derivatives(al[:, None] * tt + th[:, None] * cnt, self.chg)
        g = np.where(msk, g, 0.0)
        h = np.where(msk, h, 0.0)
        ga = (g * tt).sum(axis=1) + (self.a_a - 1.0) / al - self.b_a
        haa = (h * tt * tt).sum(axis=1) - (self.a_a - 1.0) / al**2
        if not self.with_theta:
            ok = haa < 0
            da = np.where(ok, -ga / np.where(ok, haa, 1.0), ga * al**2 * 0.1)
            return da, np.zeros(al.shape[0])
        gt = (g * cnt).sum(axis=1) + (self.a_t - 1.0) / th - self.b_t
        htt = (h * cnt * cnt).sum(axis=1) - (self.a_t - 1.0) / th**2
        hat = (h * tt * cnt).sum(axis=1)
        det = haa * htt - hat * hat
        ok = (haa < 0) & (det > 0)
        safe = np.where(ok, det, 1.0)
        da = np.where(ok, -(htt * ga - hat * gt) / safe, ga * al**2 * 0.1)
        dt = np.where(ok, -(haa * gt - hat * ga) / safe, gt * th**2 * 0.1)
        return da, dt


def fit_outcomes(
    tau: ArrayLike,
    n: ArrayLike,
    z: ArrayLike,
    mask: ArrayLike,
    alpha_prior: tuple[ArrayLike, ArrayLike],
    theta_prior: tuple[ArrayLike, ArrayLike] | None = None,
) -> OutcomeFit:
    """MAP estimates of (α, θ) per URL from its crawl outcomes, vectorised.

    Maximises Σ_k [z_k ln(1 − e^{−η_k}) − (1 − z_k)η_k] + (a_α − 1) ln α − b_α α
    + (a_θ − 1) ln θ − b_θ θ with η_k = ατ_k + θn_k, by damped Newton ascent
    (2 × 2 per URL) that keeps both parameters positive.

    Parameters
    ----------
    tau : array_like, shape (m, K)
        Time between consecutive crawls, s (> 0 where ``mask``).
    n : array_like, shape (m, K)
        Change-indicating signals (with news) received in each interval.
    z : array_like of bool, shape (m, K)
        True where the crawl found the page changed.
    mask : array_like of bool, shape (m, K)
        Which slots hold an outcome (windows of different lengths).
    alpha_prior : (shape, rate), each array_like of shape (m,)
        Gamma prior on α (1/s): shape ≥ 1, rate in s.
    theta_prior : (shape, rate), optional
        Gamma prior on θ; None fixes θ = 0 (no signals: α is then Δ, the
        GREEDY model of Cho & Garcia-Molina).

    Returns
    -------
    OutcomeFit

    Raises
    ------
    ParameterError
        On mismatched shapes, a non-positive interval, or a prior with shape < 1.

    References
    ----------
    Paper 004 App. E; MATH.md, "Estimating parameters".
    """
    t = np.atleast_2d(np.asarray(tau, dtype=np.float64))
    cnt = np.atleast_2d(np.asarray(n, dtype=np.float64))
    chg = np.atleast_2d(np.asarray(z, dtype=bool))
    msk = np.atleast_2d(np.asarray(mask, dtype=bool))
    if not (t.shape == cnt.shape == chg.shape == msk.shape):
        raise ParameterError("`tau`, `n`, `z` and `mask` must share one (m, K) shape")
    m = t.shape[0]
    if np.any(msk & ~(t > 0)) or np.any(msk & ~(cnt >= 0)):
        raise ParameterError("`tau` must be positive and `n` non-negative where `mask`")
    t = np.where(msk, t, 0.0)
    cnt = np.where(msk, cnt, 0.0)
    chg = chg & msk
    a_a = np.broadcast_to(np.asarray(alpha_prior[0], dtype=np.float64), (m,))
    b_a = np.broadcast_to(np.asarray(alpha_prior[1], dtype=np.float64), (m,))
    _check_prior("alpha", a_a, b_a)
    with_theta = theta_prior is not None
    if theta_prior is not None:
        a_t = np.broadcast_to(np.asarray(theta_prior[0], dtype=np.float64), (m,))
        b_t = np.broadcast_to(np.asarray(theta_prior[1], dtype=np.float64), (m,))
        _check_prior("theta", a_t, b_t)
    else:
        a_t, b_t = np.ones(m), np.ones(m)

    # Work in units where the prior's scale is 1: α' = α/s_α, τ' = τ·s_α.
    s_a = np.maximum(a_a, 1.0) / b_a
    tt = t * s_a[:, None]
    b_as = b_a * s_a
    alpha = np.maximum((a_a - 1.0) / b_as, 0.0)
    theta = np.maximum((a_t - 1.0) / b_t, 0.0) if with_theta else np.zeros(m)
    # start strictly inside: the mode of the prior, or a small positive value
    alpha = np.where(alpha > 0, alpha, 0.5)
    theta = np.where(theta > 0, theta, 0.5) if with_theta else theta

    problem = _MapProblem(tt, cnt, chg, msk, a_a, b_as, a_t, b_t, with_theta)
    current = problem.objective(alpha, theta)
    active = np.ones(m, dtype=bool)
    for _ in range(_MAX_ITER):
        # only the URLs still moving: a converged row never changes again, so each
        # iteration computes on the active rows alone (row by row the same arithmetic)
        idx = np.flatnonzero(active)
        if idx.size == 0:
            break
        rows: slice | NDArray[np.intp] = slice(None) if idx.size == m else idx
        sub = problem.take(rows)
        al, th = alpha[rows], theta[rows]
        (al, th), cur, still = _damped_step(
            (al, th), sub.newton(al, th), sub.objective, current[rows], np.ones(idx.size, bool)
        )
        alpha[rows], theta[rows], current[rows], active[rows] = al, th, cur, still

    info, theta_info = outcome_information(alpha, theta, tt, cnt, msk)
    return OutcomeFit(
        alpha=alpha * s_a,
        theta=theta,
        alpha_info=info / s_a**2,  # in original units: α = s_α α′
        theta_info=theta_info if with_theta else np.zeros(m),
        n_obs=msk.sum(axis=1).astype(np.int64),
    )
