"""Signal quality of a source: whether the outcomes show that a host's URLs share
their signal quality (θ) and recall (α in proportion to γ), and the priors that
follow (``members.theta_heterogeneity``, ``members.alpha_and_signals``,
``GroupStats.theta_cv2`` / ``alpha_follows_signals``, ``prior_chain``,
``Priors.alpha_given``; paper 004 App. E)."""

from __future__ import annotations

import math
from dataclasses import replace

import numpy as np
import pytest
from scipy.stats import chi2, norm
from signal_sources import DECAY_S, host_events

from scheduler_core.estimate.change import fit_outcomes, outcome_information
from scheduler_core.estimate.hierarchy import MAX_SHAPE, GammaPrior, GroupStats
from scheduler_core.estimate.learn import (
    ALPHA_PER_SIGNAL,
    SOURCE_MAX_CV2,
    URL_THETA_SHAPE,
    Priors,
    estimate,
    given_priors_many,
    prior_chain,
)
from scheduler_core.estimate.members import members
from scheduler_core.params import FloatArray

DAY = 86_400.0
PSEUDO = 5.0
ROOT = {
    "weight": GammaPrior.from_mean(1.0 / DAY, 0.5),
    "signal_rate": GammaPrior.from_mean(0.5 / DAY, 0.5),
    "alpha": GammaPrior.from_mean(0.5 / DAY, 1.5),
    "theta": GammaPrior.from_mean(1.0, 1.5),
}


def web(seed: int, per_host: bool, k: int = 40, hosts: int = 6, m: int = 40) -> list:
    """Hosts whose signal quality is drawn per host (one source each) or per URL."""
    rng = np.random.default_rng(seed)
    out = []
    for _ in range(hosts):
        n = 1 if per_host else m
        p = np.broadcast_to(rng.uniform(0.3, 0.9, n), (m,)).copy()
        r = np.broadcast_to(rng.uniform(0.2, 0.95, n), (m,)).copy()
        delta, h = host_events(rng, p, r, k, slowest=0.05)
        out.append(((1 - r) * delta, h))
    return out


def stats_of(hosts: list) -> tuple[list[GroupStats], GroupStats]:
    theta = GammaPrior.from_mean(ROOT["theta"].mean, 1.5)
    own = [members(h, theta, DECAY_S).stats() for _, h in hosts]
    total = GroupStats()
    for s in own:
        total = total + s
    return own, total


def test_theta_information_predicts_the_spread_of_its_estimate() -> None:
    """1/I_θ (α unknown, the Schur complement) is θ̂'s variance: 2,000 URLs with one
    (α, θ) and 400 outcomes each; the spread of θ̂ within 5% of √(mean 1/I_θ), three
    of its standard errors (1.6%): measured 0.98, and 1.08 with I_θθ alone (α taken
    as known)."""
    rng = np.random.default_rng(5)
    m, k, alpha, theta = 2000, 400, 0.3, 0.7
    tau = np.ones((m, k))
    n = rng.poisson(1.0, (m, k)).astype(float)
    z = rng.random((m, k)) < -np.expm1(-(alpha * tau + theta * n))
    mask = np.ones((m, k), dtype=bool)
    weak = (np.full(m, 1.001), np.full(m, 0.001))
    fit = fit_outcomes(tau, n, z, mask, weak, weak)
    sd_info = math.sqrt(np.mean(1.0 / fit.theta_info))
    assert fit.theta.std(ddof=1) / sd_info == pytest.approx(1.0, abs=0.05)
    i_aa, i_t = outcome_information(fit.alpha, fit.theta, tau, n, mask)
    np.testing.assert_allclose(i_aa, fit.alpha_info, rtol=1e-12)
    np.testing.assert_allclose(i_t, fit.theta_info, rtol=1e-12)


@pytest.mark.parametrize("seed", [1, 2])
def test_the_outcomes_tell_one_source_per_host_from_one_per_url(seed: int) -> None:
    _, one = stats_of(web(seed, per_host=True))
    _, many = stats_of(web(seed, per_host=False))
    # θ: the squared coefficient of variation within hosts, pooled over them
    assert one.theta_cv2(z=2.0) <= SOURCE_MAX_CV2 < many.theta_cv2()
    # recall shared by a host's URLs: α runs in proportion to γ
    assert one.alpha_follows_signals() and not many.alpha_follows_signals()


def test_the_source_regime_sets_theta_at_the_host_and_alpha_per_signal() -> None:
    host = GroupStats(
        pooled_theta=0.5, pooled_outcomes=100.0, sum_ln_alpha_per_signal=-20.0,
        alpha_signal_pairs=10.0,
    )  # fmt: skip
    evidence = GroupStats(
        theta_excess=2.0, theta_scale=400.0, theta_dof=50.0,
        ss_ln_alpha=100.0, ss_ln_alpha_per_signal=40.0, alpha_signal_dof=99.0,
        sum_ln_alpha_per_signal=-100.0, alpha_signal_pairs=100.0,
    )  # fmt: skip
    chain = prior_chain(ROOT, evidence, None, host, PSEUDO)
    cv2 = evidence.theta_cv2(z=2.0)  # Q = 52 less χ²(50)'s lower Φ(−2) quantile
    assert cv2 == pytest.approx((52.0 - chi2.ppf(norm.sf(2.0), 50.0)) / 400.0)
    shape = 1.0 / cv2
    assert chain["theta"].shape == pytest.approx(shape)
    assert (chain["theta"].shape - 1.0) / chain["theta"].rate == pytest.approx(0.5)  # θ_h
    per = chain[ALPHA_PER_SIGNAL]
    # the host's geometric mean of α̂/γ̂, shrunk towards the global one by 5 URLs
    typical = math.exp((-20.0 + PSEUDO * -1.0) / (10.0 + PSEUDO))
    assert (per.shape - 1.0) / per.rate == pytest.approx(typical)
    assert per.shape == chain["alpha"].shape
    # without θ_h, or where URLs of a host differ: θ's weak prior, no α per signal
    for h, g in (
        (replace(host, pooled_outcomes=0.0), replace(evidence, ss_ln_alpha=40.0)),
        (host, replace(evidence, theta_excess=200.0, ss_ln_alpha_per_signal=100.0)),
    ):
        weak = prior_chain(ROOT, g, None, h, PSEUDO)
        assert weak["theta"].shape == URL_THETA_SHAPE and ALPHA_PER_SIGNAL not in weak
    # a spread near 0 gives the strongest prior there is
    none = replace(evidence, theta_excess=-5.0, theta_scale=1e4)
    assert prior_chain(ROOT, none, None, host, PSEUDO)["theta"].shape == MAX_SHAPE


def test_alpha_prior_follows_the_urls_signals_unless_given() -> None:
    chain = prior_chain(
        ROOT,
        GroupStats(ss_ln_alpha=100.0, ss_ln_alpha_per_signal=10.0, alpha_signal_dof=50.0,
                   sum_ln_alpha_per_signal=-50.0, alpha_signal_pairs=51.0),
        None, GroupStats(), PSEUDO,
    )  # fmt: skip
    priors = Priors.stack([chain] * 3)
    g = np.array([2.0, 0.0, 4.0]) / DAY
    counts = np.array([58.0, 0.0, 3.0])  # the host's typical α/γ's shape holds γ̂'s noise
    shape, rate = priors.alpha_given(g, counts)
    per = chain[ALPHA_PER_SIGNAL]
    np.testing.assert_allclose(shape, [per.shape, chain["alpha"].shape, per.shape])
    np.testing.assert_allclose(rate, [per.rate / g[0], chain["alpha"].rate, per.rate / g[2]])
    # a given Δ sets α's prior itself: its row loses the α/γ prior
    nan = np.full(3, math.nan)
    given = given_priors_many(priors, nan, np.array([math.nan, math.nan, 0.5 / DAY]), nan, nan, 2.0)
    shape, rate = given.alpha_given(g, counts)
    assert shape[0] == per.shape and rate[2] == given.rate["alpha"][2]
    assert math.isnan(given.shape[ALPHA_PER_SIGNAL][2])
    assert given.row(2).keys() == {"weight", "signal_rate", "alpha", "theta"}
    # priors stacked from chains without it behave as before
    bare = Priors.stack([{q: v for q, v in chain.items() if q != ALPHA_PER_SIGNAL}] * 3)
    np.testing.assert_array_equal(bare.alpha_given(g, counts)[1], np.full(3, chain["alpha"].rate))


def test_a_shared_source_makes_alpha_of_short_histories_closer_to_the_truth() -> None:
    """Eight webs of 10 hosts of one source each, 20 outcomes a URL: α estimated
    with the source's priors (θ at θ_h, α in proportion to γ̂) against the same with
    that evidence removed (the weak θ prior, α at the host's typical α).  Median
    |ln α̂/α| over the URLs of the webs where the evidence is in (6 of 8): measured
    0.366 against 0.393.  A snapshot gains little; the gain is in the crawls that
    follow (docs/freshness.md: learned ÷ oracle 0.963 against 0.943)."""
    err: dict[str, list[FloatArray]] = {"source": [], "plain": []}
    for seed in range(3, 11):
        hosts = web(seed, per_host=True, k=20, hosts=10)
        own, total = stats_of(hosts)
        if not total.alpha_follows_signals():
            continue
        plain = GroupStats(total.moments)  # the moments alone: no evidence of a source
        for name, glob in (("source", total), ("plain", plain)):
            for (alpha, h), s in zip(hosts, own, strict=True):
                chain = prior_chain(ROOT, glob, None, s, PSEUDO)
                assert (ALPHA_PER_SIGNAL in chain) == (name == "source")
                est = estimate(h, Priors.stack([chain] * h.m))
                err[name].append(np.abs(np.log(est.alpha / alpha)))
    assert len(err["source"]) == 60
    source, plain_err = (float(np.median(np.concatenate(err[k]))) for k in ("source", "plain"))
    assert source < 0.97 * plain_err
