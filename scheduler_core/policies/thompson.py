"""Thompson sampling of change rates from crawl outcomes.

Avrachenkov et al. (ICC 2021) §IV-A keep a Beta(1, 1) posterior per arm on
the probability that a crawl finds the page changed since its last visit,
draw a sample per arm at each step, crawl the arm with the largest sample and
earn the arm's importance when the page had changed.  That probability
depends on how long ago the page was crawled; here the posterior is over the
Poisson change rate Δ_i instead, so the elapsed time τ_i enters:

* **Posterior.**  Gamma(a_i, b_i) on Δ_i (1/s), prior shape a₀ and mean
  Δ̄ (by default the mean change rate of the URL's host in the problem's
  parameters: a host-level cold-start prior, ``MATH.md``, "Estimating
  parameters").  A crawl τ s after the previous one that finds no change has
  likelihood e^{−Δτ}, conjugate: b ← b + τ.  One that finds a change has
  likelihood 1 − e^{−Δτ}; the posterior is projected back onto a Gamma with
  the same mean and variance (assumed density filtering).  With
  r = (b/(b + τ))^a,

      E[Δ] = (a/b)(1 − r·b/(b+τ))/(1 − r),
      E[Δ²] = (a(a+1)/b²)(1 − r·(b/(b+τ))²)/(1 − r),

  a′ = E[Δ]²/Var Δ, b′ = E[Δ]/Var Δ.
* **Index.**  Each step draws Δ̃_i ~ Gamma(a_i, b_i) for every URL and crawls
  the ``k`` URLs of highest index within host room:
  ``index="value"`` (default): the crawl value with the sampled rate,
  V(τ) = (W/Δ̃)·P(2, Δ̃τ) (GREEDY, ``MATH.md``, "Crawl value"; paper 004
  §5.1); ``index="reward"``: W·(1 − e^{−Δ̃τ}), the expected reward of a
  crawl as the paper scores it (importance if the page changed), which
  ignores what waiting longer would gain.
  W is the problem's importance, taken as known.

References
----------
Avrachenkov et al. (ICC 2021) §IV-A; Thompson (1933); Minka (2001),
assumed density filtering; ``MATH.md``, "Crawl value" and "Estimating
parameters from the event streams".
"""

from __future__ import annotations

from typing import Literal

import numpy as np

from scheduler_core.errors import ParameterError
from scheduler_core.params import FloatArray
from scheduler_core.policies.base import BoolArray, IntArray, Policy, Problem
from scheduler_core.policies.lds import top_k_within_room_prefix

__all__ = ["ThompsonPolicy", "gamma_update"]

#: Below this x, P(2, x) is summed as a series.
_SERIES_BELOW = 1e-3


def _regularized_gamma_2(x: FloatArray) -> FloatArray:
    """P(2, x) = 1 − (1 + x)e^{−x} = R¹(x), shape (n,), to about 1e-12 relative.

    As −expm1(−x) − x·e^{−x}, where the two terms cancel only to a relative
    error of about 2ε/x, and by its series x²/2 − x³/3 + x⁴/8 − x⁵/30 below
    :data:`_SERIES_BELOW`; about four times faster than
    ``scipy.special.gammainc(2, x)``, which it matches (``MATH.md``, "Crawl
    value": never the explicit sum 1 − (1 + x)e^{−x}).
    """
    x = np.minimum(x, 1e3)  # P(2, x) = 1 to double precision beyond ~40; keeps ∞ out
    out = -np.expm1(-x) - x * np.exp(-x)
    small = np.flatnonzero(x < _SERIES_BELOW)
    if small.size:
        y = x[small]
        out[small] = y * y * (0.5 - y * (1.0 / 3.0 - y * (0.125 - y / 30.0)))
    return np.asarray(out, dtype=np.float64)


def gamma_update(
    shape: FloatArray, rate: FloatArray, elapsed: FloatArray, changed: BoolArray
) -> tuple[FloatArray, FloatArray]:
    """Update Gamma posteriors on change rates with crawl outcomes.

    Parameters
    ----------
    shape, rate : ndarray, shape (n,)
        a > 0 and b > 0 (1/rate in s) of each URL's Gamma posterior on Δ, 1/s.
    elapsed : ndarray, shape (n,)
        τ > 0, s between the crawl and the previous one.
    changed : ndarray of bool, shape (n,)
        Whether the crawl found the page changed.

    Returns
    -------
    shape, rate : ndarray, shape (n,)
        Exact for no change (b + τ); the moment-matched Gamma of the
        posterior for a change.

    References
    ----------
    Minka (2001), assumed density filtering; ``MATH.md``, "Estimating
    parameters from the event streams" (the likelihood).

    Examples
    --------
    >>> a, b = gamma_update(np.array([1.0, 1.0]), np.array([1.0, 1.0]),
    ...                     np.array([2.0, 2.0]), np.array([False, True]))
    >>> b[0].item()
    3.0
    >>> bool(a[1] / b[1] > 1.0)  # a change raises the mean
    True
    """
    a, b = shape.copy(), rate.copy()
    quiet = ~changed
    b[quiet] += elapsed[quiet]
    if changed.any():
        a1, b1, t = shape[changed], rate[changed], elapsed[changed]
        log_s = -np.log1p(t / b1)  # ln(b/(b+τ)) < 0
        miss = -np.expm1(a1 * log_s)  # 1 − r
        m1 = a1 / b1 * -np.expm1((a1 + 1.0) * log_s) / miss
        m2 = a1 * (a1 + 1.0) / b1**2 * -np.expm1((a1 + 2.0) * log_s) / miss
        var = np.maximum(m2 - m1 * m1, np.finfo(float).tiny)
        a[changed] = m1 * m1 / var
        b[changed] = m1 / var
    return a, b


class ThompsonPolicy(Policy):
    """Thompson sampling: crawl by the index of a change rate drawn from its posterior.

    Parameters
    ----------
    seed : int
        Seed of the posterior draws.
    index : {"value", "reward"}
        What ranks the URLs (see the module docstring).
    prior_shape : float
        a₀ > 0; the prior is worth about a₀ observed changes.
    prior_mean : {"host", "global", "url"}
        Δ̄ of the prior: the mean change rate of the URL's host, of all URLs,
        or the URL's own rate in the problem's parameters.  A mean of 0 is
        replaced by the global mean, then by 1/``duration_s``.

    Attributes
    ----------
    shape, rate : ndarray, shape (m,)
        The Gamma posterior of each URL's change rate; mean shape/rate, 1/s.

    Raises
    ------
    ParameterError
        If ``index`` or ``prior_mean`` is not one of the choices, or
        ``prior_shape`` is not positive and finite.

    References
    ----------
    Avrachenkov et al. (ICC 2021) §IV-A; paper 004 §5.1 (GREEDY).
    """

    name = "thompson"

    def __init__(
        self,
        *,
        seed: int = 0,
        index: Literal["value", "reward"] = "value",
        prior_shape: float = 1.0,
        prior_mean: Literal["host", "global", "url"] = "host",
    ) -> None:
        super().__init__(seed=seed)
        if index not in ("value", "reward"):
            raise ParameterError("`index` must be 'value' or 'reward'")
        if prior_mean not in ("host", "global", "url"):
            raise ParameterError("`prior_mean` must be 'host', 'global' or 'url'")
        if not 0 < prior_shape < np.inf:
            raise ParameterError("`prior_shape` must be finite and > 0")
        self.index = index
        self.prior_shape = float(prior_shape)
        self.prior_mean = prior_mean
        self.shape: FloatArray = np.empty(0)
        self.rate: FloatArray = np.empty(0)

    def start(self, problem: Problem) -> None:
        super().start(problem)
        d = problem.params.change_rate
        overall = float(d.mean()) if problem.m else 0.0
        if overall <= 0:
            overall = 1.0 / problem.duration_s
        if self.prior_mean == "url":
            mean = d.copy()
        elif self.prior_mean == "global":
            mean = np.full(problem.m, overall)
        else:
            h = problem.hosts_count
            total = np.bincount(problem.host_of, weights=d, minlength=h)
            count = np.bincount(problem.host_of, minlength=h)
            mean = (total / np.maximum(count, 1))[problem.host_of]
        mean = np.where(mean > 0, mean, overall)
        self.shape = np.full(problem.m, self.prior_shape)
        self.rate = self.shape / mean

    def sample_rates(self) -> FloatArray:
        """Δ̃ ~ Gamma(shape, rate) for every URL, 1/s, shape (m,)."""
        return np.asarray(self.rng.standard_gamma(self.shape) / self.rate, dtype=np.float64)

    def select(self, now: float, k: int, host_room: IntArray) -> IntArray:
        if k <= 0 or self.problem.m == 0:
            return np.empty(0, dtype=np.int64)
        d = np.maximum(self.sample_rates(), np.finfo(float).tiny)
        x = d * self.history.elapsed(now)
        w = self.problem.params.weight
        if self.index == "value":
            score = w / d * _regularized_gamma_2(x)
        else:
            score = w * -np.expm1(-x)
        return top_k_within_room_prefix(score, k, self.problem.host_of, host_room)

    def observe_crawls(self, url: IntArray, now: float, changed: BoolArray) -> None:
        tau = now - self.history.last_crawl[url]
        ok = tau > 0
        if ok.any():
            u = url[ok]
            self.shape[u], self.rate[u] = gamma_update(
                self.shape[u], self.rate[u], tau[ok], changed[ok]
            )
        super().observe_crawls(url, now, changed)
