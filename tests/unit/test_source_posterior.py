"""Each host's signal source as one (α/γ, θ): the binned likelihood, the hosts'
population, each host's posterior, the evidence of one source per host, and what
the learner's pass keeps (``scheduler_core.estimate.source``; paper 004 App. E)."""

from __future__ import annotations

import math

import numpy as np
import pytest
from test_estimate_source import PSEUDO, ROOT

from scheduler_core.estimate.change import outcome_log_likelihood
from scheduler_core.estimate.hierarchy import GroupStats
from scheduler_core.estimate.learn import (
    ALPHA_PER_SIGNAL,
    SOURCE_ALPHA_PER_SIGNAL,
    SOURCE_THETA_SHAPE,
    URL_ALPHA_SHAPE,
    History,
    Priors,
    given_priors_many,
    prior_chain,
)
from scheduler_core.estimate.source import (
    ATOMS,
    MIN_VAR,
    SOURCE_EVIDENCE,
    SOURCE_EVIDENCE_OFF,
    SourceCycle,
    SourcePopulation,
    host_log_likelihood,
    point_signal_rate,
    source_evidence,
    sources_shared,
    url_log_likelihood,
)

DAY = 86_400.0


def host(
    rng: np.random.Generator, c: float, theta: float, m: int = 30, k: int = 6, spread: float = 0.0
) -> History:
    """m URLs of one host, γ log-normal around 1/day, each crawled k times at
    intervals ~ Exp(mean 1/γ): a change in an interval with probability 1 −
    e^{−(cγτ + θn)} for n signals (the log-link model).  ``spread`` > 0: each URL
    draws its own ln c and ln θ around the host's with that standard deviation."""
    g = np.exp(rng.normal(0.0, 1.0, m)) / DAY
    windows = []
    for i in range(m):
        ci, ti = c * math.exp(rng.normal(0, spread)), theta * math.exp(rng.normal(0, spread))
        tau = rng.exponential(1.0 / g[i], k)
        n = rng.poisson(g[i] * tau)
        changed = rng.random(k) < -np.expm1(-(ci * g[i] * tau + ti * n))
        windows.append(list(zip(tau.tolist(), n.tolist(), changed.tolist(), strict=True)))
    exposure = np.full(m, 200 * DAY)
    signals = rng.poisson(g * exposure).astype(float)
    return History.create(np.zeros(m), signals, exposure, windows)


def web(seed: int, spread: float = 0.0, hosts: int = 12) -> tuple[list[History], np.ndarray]:
    """Hosts whose (ln c, ln θ) are drawn from N((ln 0.3, 0), diag(1, 0.5))."""
    rng = np.random.default_rng(seed)
    truth = np.stack([rng.normal(math.log(0.3), 1.0, hosts), rng.normal(0.0, 0.7, hosts)], axis=1)
    out = [host(rng, math.exp(lc), math.exp(lt), spread=spread) for lc, lt in truth]
    return out, truth


def test_binned_likelihood_matches_the_exact_one_within_the_bins() -> None:
    """The histogram of changed outcomes puts each at its bin's centre: against the
    exact log-likelihood at every atom (each URL's α = c·γ̂), the two agree to the
    bins' width, and exactly where no outcome found a change."""
    rng = np.random.default_rng(1)
    h = host(rng, 0.3, 1.0)
    binned = host_log_likelihood(h)
    assert binned is not None and binned.shape == ATOMS[0].shape
    exact = url_log_likelihood(h, h.m).sum(axis=0)
    g = point_signal_rate(h)
    c, th = ATOMS
    j = 300
    direct = outcome_log_likelihood(c[j] * g, np.full(h.m, th[j]), h.tau, h.n, h.z, h.mask).sum()
    assert exact[j] == pytest.approx(direct, rel=1e-12)
    # changed outcomes ≈ 90 here; each off by at most its bin's half width in ln x
    assert np.max(np.abs(binned - exact) / np.abs(exact)) < 0.02
    unchanged = History(h.clicks, h.signals, h.exposure, h.tau, h.n, np.zeros_like(h.z), h.mask)
    got = host_log_likelihood(unchanged)
    assert got is not None
    np.testing.assert_allclose(got, url_log_likelihood(unchanged, h.m).sum(axis=0), rtol=1e-12)


def test_no_outcome_gives_no_likelihood() -> None:
    h = History.create(
        [0.0] * 3, [1.0] * 3, [0.0, 5.0, 0.0], [[(1.0, 0, True)], [], [(1.0, 1, False)]]
    )
    assert host_log_likelihood(h) is None  # the one observed URL has no outcome
    assert url_log_likelihood(h, 10).shape == (0, ATOMS[0].size)
    assert SourceCycle(None).add(h) is None


def test_posteriors_find_each_hosts_source() -> None:
    """Twelve hosts of 30 URLs with 6 outcomes each: the population fitted by EM
    sits near the hosts' draw, and each host's posterior geometric means lie within
    three of its posterior standard deviations of its truth (ln c and ln θ)."""
    hosts, truth = web(2)
    lik = np.stack([ll for h in hosts if (ll := host_log_likelihood(h)) is not None])
    pop = SourcePopulation.fit(lik)
    assert np.all(np.linalg.eigvalsh(pop.cov) >= MIN_VAR - 1e-12)
    assert abs(pop.mean[0] - truth[:, 0].mean()) < 0.6
    assert abs(pop.mean[1] - truth[:, 1].mean()) < 0.4
    z = []
    for ll, (lc, lt) in zip(lik, truth, strict=True):
        post = pop.posterior(ll)
        assert 0 < post.sd_ln_alpha_per_signal < 1.5 and 0 < post.sd_ln_theta < 1.0
        z += [(math.log(post.alpha_per_signal) - lc) / post.sd_ln_alpha_per_signal,
              (math.log(post.theta) - lt) / post.sd_ln_theta]  # fmt: skip
    assert np.max(np.abs(z)) < 3.5 and np.mean(np.square(z)) < 2.5
    again = SourcePopulation.from_tuple(pop.to_tuple())
    assert again is not None
    np.testing.assert_array_equal(again.mean, pop.mean)
    np.testing.assert_array_equal(again.cov, pop.cov)
    assert SourcePopulation.from_tuple((math.nan,) * 5) is None


def test_evidence_tells_one_source_per_host_from_one_per_url() -> None:
    """The same webs with each URL drawing its own (c, θ) around its host's (s.d. 1.5
    in their logarithms): the evidence is far above ln 20 with one source per host
    and far below it with one per URL, on each of three seeds."""
    for seed in (3, 4, 5):
        shared, _ = web(seed)
        own, _ = web(seed, spread=1.5)
        one = source_evidence([url_log_likelihood(h, 64) for h in shared])
        many = source_evidence([url_log_likelihood(h, 64) for h in own])
        assert one > 3 * SOURCE_EVIDENCE and many < -3 * SOURCE_EVIDENCE, (seed, one, many)
    assert source_evidence([]) == 0.0


def test_a_pass_keeps_bounded_likelihoods_and_refits() -> None:
    """The first pass has no population: no posteriors; its end fits one, and the
    next pass's posteriors come from it."""
    hosts, _ = web(6)
    first = SourceCycle(None)
    assert all(first.add(h) is None for h in hosts)
    fit = first.finish()
    pop = fit.population
    assert pop is not None and fit.evidence > SOURCE_EVIDENCE and fit.shared
    second = SourceCycle(pop)
    posts = [second.add(h) for h in hosts]
    assert all(p is not None for p in posts)
    empty = SourceCycle(None, shared=True).finish()
    assert empty.population is None and math.isnan(empty.evidence) and not empty.shared


def test_hosts_are_taken_as_sources_above_ln_20_until_the_odds_are_even() -> None:
    """Hysteresis: evidence between even odds and 20 to 1 keeps the decision it has."""
    assert SOURCE_EVIDENCE == pytest.approx(math.log(20.0)) and SOURCE_EVIDENCE_OFF == 0.0
    between = 0.5 * (SOURCE_EVIDENCE + SOURCE_EVIDENCE_OFF)
    assert not sources_shared(between, before=False)
    assert sources_shared(between, before=True)
    assert sources_shared(SOURCE_EVIDENCE + 0.1, before=False)
    assert not sources_shared(SOURCE_EVIDENCE_OFF - 0.1, before=True)
    assert not sources_shared(math.nan, before=True)


def test_prior_chain_follows_the_source_only_while_the_evidence_holds() -> None:
    """While hosts are taken as sources, with a host posterior, θ's prior sits at θ_h
    with shape SOURCE_THETA_SHAPE and α/γ's at c_h with shape 1/Var(ln c); otherwise,
    or without a posterior, the chain is the one without them."""
    host_stats = GroupStats(source=(0.2, 1.5, 0.5, 0.1))
    for shared, follows in ((1.0, True), (0.0, False)):
        glob = GroupStats(evidence=1.0, sources_shared=shared)
        chain = prior_chain(ROOT, glob, None, host_stats, PSEUDO)
        assert ALPHA_PER_SIGNAL not in chain
        if follows:
            th, per = chain["theta"], chain[SOURCE_ALPHA_PER_SIGNAL]
            assert th.shape == SOURCE_THETA_SHAPE
            assert (th.shape - 1.0) / th.rate == pytest.approx(1.5)
            assert per.shape == pytest.approx(4.0)
            assert (per.shape - 1.0) / per.rate == pytest.approx(0.2)
        else:
            assert chain == prior_chain(ROOT, GroupStats(), None, GroupStats(), PSEUDO)
    bare = prior_chain(ROOT, GroupStats(sources_shared=1.0), None, GroupStats(), PSEUDO)
    assert SOURCE_ALPHA_PER_SIGNAL not in bare


def test_alpha_from_the_source_holds_the_uncertainty_of_alpha_per_signal_and_of_gamma() -> None:
    """α's prior from the host's source sits at c_h·γ̂, with shape 1/(1/k + 1/(C + 2))
    (k the source's certainty of c, C the decayed signals behind γ̂), at least
    URL_ALPHA_SHAPE; a URL without signals keeps α's own prior, and a given value
    replaces it."""
    chain = prior_chain(
        ROOT, GroupStats(sources_shared=1.0), None, GroupStats(source=(0.2, 1.5, 0.25, 0.1)), PSEUDO
    )
    priors = Priors.stack([chain] * 4)
    g = np.array([2.0, 0.0, 4.0, 4.0]) / DAY
    counts = np.array([14.0, 0.0, 1e12, 0.0])
    shape, rate = priors.alpha_given(g, counts)
    k = 16.0  # 1/0.25²
    np.testing.assert_allclose(
        shape, [1 / (1 / k + 1 / 16), chain["alpha"].shape, k, 1 / (1 / k + 1 / 2)], rtol=1e-9
    )
    modes = (shape - 1.0) / rate
    np.testing.assert_allclose(modes[[0, 2, 3]], 0.2 * g[[0, 2, 3]], rtol=1e-9)
    assert rate[1] == chain["alpha"].rate
    assert np.all(shape >= URL_ALPHA_SHAPE)
    nan = np.full(4, math.nan)
    given = given_priors_many(priors, nan, np.array([math.nan] * 3 + [0.5 / DAY]), nan, nan, 2.0)
    assert given.alpha_given(g, counts)[1][3] == given.rate["alpha"][3]


def test_group_stats_keep_the_source_fields() -> None:
    stats = GroupStats(
        pooled_theta=0.5, source=(0.2, 1.5, 0.5, 0.1), population=(-1.0, 0.0, 1.0, 0.1, 0.5),
        evidence=7.0, sources_shared=1.0,
    )  # fmt: skip
    again = GroupStats.from_tuple(stats.to_tuple())
    assert again.source == stats.source and again.population == stats.population
    assert again.evidence == 7.0 and again.sources_shared == 1.0
    # sums of groups carry none of them
    total = stats + stats
    assert all(math.isnan(v) for v in (*total.source, *total.population, total.evidence))
    assert total.sources_shared == 0.0
