"""Hierarchical Gamma priors: moment sums, shrinkage towards the parent (paper 003 §4.2)."""

from __future__ import annotations

import math
from dataclasses import replace

import numpy as np
import pytest
from scipy.stats import chi2, norm

from scheduler_core.errors import ParameterError
from scheduler_core.estimate.hierarchy import (
    MAX_SHAPE,
    MIN_EVIDENCE_DOF,
    MIN_THETA_DOF,
    QUANTITIES,
    TUPLE_LENGTH,
    GammaPrior,
    GroupStats,
    Moments,
    moments_of,
    shrink,
)


def test_gamma_prior_mean_mode_and_errors() -> None:
    prior = GammaPrior.from_mean(2.0, 3.0)
    assert (prior.shape, prior.rate, prior.mean) == (3.0, 1.5, 2.0)
    moved = prior.with_mode_at_mean()
    assert moved.shape == 3.0
    assert (moved.shape - 1) / moved.rate == pytest.approx(2.0, rel=1e-15)  # mode
    with pytest.raises(ParameterError, match="mode"):
        GammaPrior(1.0, 1.0).with_mode_at_mean()
    for mean, shape in [(0.0, 1.0), (-1.0, 1.0), (math.inf, 1.0), (1.0, 0.0), (1.0, math.nan)]:
        with pytest.raises(ParameterError, match="mean and shape"):
            GammaPrior.from_mean(mean, shape)


def test_mode_at_median_is_the_lognormal_median_in_any_unit() -> None:
    """The mode goes to mean/√(1 + CV²), the median of the lognormal with the prior's
    mean and variance: far below the mean for a population spread over decades,
    at it for a narrow one, and the same in any time unit."""
    day = 86_400.0
    sigma = 3.0  # the web preset's spread of Δ: the mean is e^{σ²/2} × the median
    mean = 0.036 * math.exp(sigma**2 / 2)
    wide = GammaPrior.from_mean(mean / day, 1.0 / math.expm1(sigma**2))  # CV² = e^{σ²} − 1
    got = wide.with_mode_at_median(1.25)
    assert got.shape == 1.25
    assert (got.shape - 1.0) / got.rate * day == pytest.approx(0.036, rel=1e-12)
    per_hour = GammaPrior.from_mean(mean / 24.0, wide.shape).with_mode_at_median(1.25)
    assert (per_hour.shape - 1.0) / per_hour.rate * 24.0 == pytest.approx(0.036, rel=1e-12)
    narrow = GammaPrior.from_mean(2.0, 1e6).with_mode_at_median(3.0)
    assert (narrow.shape - 1.0) / narrow.rate == pytest.approx(2.0, rel=1e-6)
    with pytest.raises(ParameterError, match="shape > 1"):
        wide.with_mode_at_median(1.0)


def test_moments_add_and_give_mean_and_spread_net_of_noise() -> None:
    a = moments_of([1.0, 2.0, 3.0], [0.1, 0.1, 0.1])
    b = moments_of([5.0], [0.3])
    assert (a.n, a.s1, a.s2) == (3.0, 6.0, 14.0) and a.sv == pytest.approx(0.3)
    total = a + b
    assert (total.n, total.s1, total.s2) == (4.0, 11.0, 39.0)
    mean, var = total.mean_var() or (0.0, 0.0)
    x = np.array([1.0, 2.0, 3.0, 5.0])
    assert mean == pytest.approx(x.mean(), rel=1e-15)
    assert var == pytest.approx(x.var() - 0.6 / 4, rel=1e-12)  # minus the mean sampling var


def test_moments_without_a_positive_mean_give_nothing_and_spread_has_a_floor() -> None:
    assert Moments().mean_var() is None
    assert moments_of([0.0, 0.0]).mean_var() == (0.0, 0.0)  # members that never clicked
    assert moments_of([-1.0, 0.5]).mean_var() is None
    # sampling noise larger than the spread: the spread is floored at (5% of mean)²
    assert moments_of([2.0, 2.2], [5.0, 5.0]).mean_var() == pytest.approx((2.1, 0.105**2))


def test_group_stats_round_trip_and_sums() -> None:
    stats = GroupStats(
        tuple(moments_of(np.arange(1.0, 4.0) * (k + 1), [0.01] * 3) for k in range(4)),  # type: ignore[arg-type]
        0.7, 42.0, 3.0, 12.0, 50.0, 20.0, 8.0, 49.0, -30.0, 50.0,
        source=(0.2, 1.5, 0.5, 0.1), population=(-1.0, 0.0, 1.0, 0.1, 0.5), evidence=7.0,
        sources_shared=1.0,
    )  # fmt: skip
    values = stats.to_tuple()
    assert len(values) == TUPLE_LENGTH == 37
    assert GroupStats.from_tuple(values) == stats
    assert GroupStats.from_tuple(None) == GroupStats()
    assert GroupStats.from_tuple(values[:18]) == GroupStats()  # an earlier layout
    assert GroupStats.from_tuple(values[:26]) == GroupStats()
    assert stats.of("theta") == stats.moments[QUANTITIES.index("theta")]
    summed = stats + stats
    assert summed.of("alpha").n == 6.0 and summed.of("alpha").s1 == 2 * stats.of("alpha").s1
    # a sum of groups is no signal source: it carries no pooled θ; the evidence on
    # how θ and α vary within hosts adds up
    assert math.isnan(summed.pooled_theta) and summed.pooled_outcomes == 0.0
    assert summed.to_tuple()[18:26] == tuple(2 * v for v in values[18:26])
    assert summed.theta_cv2() == stats.theta_cv2() == 3.0 / 12.0
    # an upper bound at Φ(−2): Q = 53 less the lower 2.3 % quantile of χ²(50), 32.06,
    # above the normal approximation's 50 − 2√100 = 30
    low = float(chi2.ppf(norm.sf(2.0), 50.0))
    assert 32.0 < low < 32.1
    assert stats.theta_cv2(z=2.0) == pytest.approx((53.0 - low) / 12.0, rel=1e-12)
    assert math.isnan(GroupStats().theta_cv2())
    # too few URLs beyond one a host to tell
    assert math.isnan(replace(stats, theta_dof=MIN_THETA_DOF - 1.0).theta_cv2())
    # α's spread in proportion to γ (8 over 49 dof) against alone (20): by more than
    # two standard errors of a log variance, ln(20/8) = 0.92 > 2√(2/49) = 0.40
    assert stats.alpha_follows_signals()
    assert not replace(stats, ss_ln_alpha=8.0 * math.exp(0.39)).alpha_follows_signals()
    assert not replace(stats, alpha_signal_dof=MIN_EVIDENCE_DOF - 1.0).alpha_follows_signals()


@pytest.mark.parametrize("dof", [MIN_THETA_DOF, 8.0, 50.0])
def test_theta_bound_has_its_level_with_few_urls(dof: float) -> None:
    """Under one source per host (c² = 0) Q is χ²(dof): it falls below the quantile
    the bound subtracts, and the bound is 0, with probability Φ(−2) = 0.023 however
    few the degrees of freedom (the normal approximation's dof − 2√(2 dof) is below
    0 at 5, where the bound would never be 0).  20,000 draws: within 4 standard
    errors of Φ(−2)."""
    rng = np.random.default_rng(11)
    n = 20_000
    q = rng.chisquare(dof, n)
    zero = [
        GroupStats(theta_excess=x - dof, theta_scale=1.0, theta_dof=dof).theta_cv2(z=2.0) == 0
        for x in q
    ]
    p = float(norm.sf(2.0))
    assert abs(float(np.mean(zero)) - p) < 4 * math.sqrt(p * (1 - p) / n)


def test_shrink_without_members_is_the_parent() -> None:
    parent = GammaPrior.from_mean(3.0, 4.0)
    got = shrink(Moments(), parent, 5.0)
    assert got.mean == pytest.approx(3.0, rel=1e-15)
    assert got.shape == pytest.approx(4.0, rel=1e-12)
    # members whose rates are all 0 pull the mean down by their share: 2 of 2 + 5
    assert shrink(moments_of([0.0, 0.0]), parent, 5.0).mean == pytest.approx(3.0 * 5 / 7)
    # the shape is clipped to [min_shape, MAX_SHAPE], the mean kept
    low = shrink(Moments(), GammaPrior.from_mean(3.0, 0.5), 5.0, min_shape=1.5)
    assert low.shape == 1.5 and low.mean == pytest.approx(3.0, rel=1e-15)
    high = shrink(Moments(), GammaPrior.from_mean(3.0, 1e6), 5.0)
    assert high.shape == MAX_SHAPE and high.mean == pytest.approx(3.0, rel=1e-15)


def test_shrink_pools_members_with_pseudo_members() -> None:
    """Moment matching of the mixture: k members' (mean m, variance v) with c pseudo
    members from the parent (mean μ, variance μ²/a)."""
    x = np.array([1.0, 1.5, 2.5, 3.0])
    own = moments_of(x, [0.04] * 4)
    parent = GammaPrior.from_mean(4.0, 2.0)
    got = shrink(own, parent, 2.0)
    w = 4 / 6
    m, v = x.mean(), x.var() - 0.04
    mean = w * m + (1 - w) * 4.0
    var = w * (v + m * m) + (1 - w) * (8.0 + 16.0) - mean * mean
    assert got.mean == pytest.approx(mean, rel=1e-12)
    assert got.shape == pytest.approx(mean * mean / var, rel=1e-12)


def test_shrink_caps_the_shape_of_identical_members() -> None:
    got = shrink(moments_of([2.0] * 1000), GammaPrior.from_mean(2.0, 1.0), 1.0)
    assert got.shape == MAX_SHAPE and got.mean == pytest.approx(2.0, rel=1e-12)


def test_shrink_converges_to_the_members_moments_net_of_sampling_noise() -> None:
    """20,000 members whose true values are Gamma(4) with mean 2 (variance 1), each
    estimated with noise of its own variance s_i² (mean ≈ 1.08, as large as the
    spread itself).  The prior converges to the true (mean 2, shape 4), pulled by
    the 5 pseudo members exactly as much as :func:`shrink` says; the naive shape
    that ignored the noise (≈ 1.9) would be far outside the tolerance."""
    rng = np.random.default_rng(21)
    n = 20_000
    true = rng.gamma(4.0, 0.5, n)
    noise_var = rng.uniform(0.5, 1.5, n) ** 2
    est = true + rng.normal(0.0, np.sqrt(noise_var))
    parent = GammaPrior.from_mean(10.0, 2.0)
    got = shrink(moments_of(est, noise_var), parent, 5.0)

    # the limit: shrink applied to the population's moments (mean 2, variance 1)
    w = n / (n + 5.0)
    lim_mean = w * 2.0 + (1 - w) * 10.0
    lim_var = w * (1.0 + 4.0) + (1 - w) * (50.0 + 100.0) - lim_mean**2
    lim_shape = lim_mean**2 / lim_var
    # standard errors from the sample: the mean of est, and the mean of
    # u = (est − m̂)² − s² that estimates the variance; shape = m²/v by the delta
    # method, bounded by adding the two relative errors (covariance ignored)
    se_mean = est.std(ddof=1) / math.sqrt(n)
    u = (est - est.mean()) ** 2 - noise_var
    se_var = u.std(ddof=1) / math.sqrt(n)
    se_shape = lim_shape * (2 * se_mean / 2.0 + se_var / 1.0)
    assert abs(got.mean - lim_mean) < 4 * se_mean
    assert abs(got.shape - lim_shape) < 4 * se_shape
    naive = est.mean() ** 2 / est.var()
    assert abs(naive - lim_shape) > 10 * se_shape
