"""From histories and hierarchical priors to scheduler parameters (learn.py).

Cold start (a URL without history starts from its host's and label's estimates),
values given at registration, bounded windows, and the service's path end to end
on a simulated signal source: members → GroupStats → prior_chain → estimate.

Measured end to end (seed 30, one host of 100 URLs, 50 crawls each, 1,600–11,600
signals): host precision errors −0.006, −0.007, −0.020 and recall errors −0.004,
−0.006, −0.017 for (p, r) = (0.7, 0.6), (0.4, 0.9), (0.9, 0.3); over seeds 30–41 the
worst are 0.025 (precision) and 0.038 (recall, at (0.4, 0.9), mean −0.016, SD 0.011).
The file runs in ~1 s (plus ~2 s of imports).
"""

from __future__ import annotations

import math

import numpy as np
import pytest
from signal_sources import host_events

from scheduler_core.errors import ParameterError
from scheduler_core.estimate.hierarchy import QUANTITIES, GammaPrior, GroupStats, moments_of, shrink
from scheduler_core.estimate.learn import (
    POPULATION_MIN_SHAPE,
    URL_THETA_SHAPE,
    Estimates,
    History,
    Priors,
    estimate,
    given_priors,
    given_priors_many,
    prior_chain,
    to_params,
)
from scheduler_core.estimate.members import (
    MIN_OUTCOMES,
    MIN_POOLED_OUTCOMES,
    members,
    weak_alpha_prior,
)
from scheduler_core.params import MAX_RECALL_WITH_FALSE_SIGNALS, FloatArray

DAY = 86_400.0
DECAY_S = 30 * DAY
PSEUDO = 5.0


def root_priors() -> dict[str, GammaPrior]:
    """Weak root priors, as the service builds them from its defaults."""
    return {
        "weight": GammaPrior.from_mean(1.0 / DAY, 0.5),
        "signal_rate": GammaPrior.from_mean(0.5 / DAY, 0.5),
        "alpha": GammaPrior.from_mean(0.5 / DAY, 1.5),
        "theta": GammaPrior.from_mean(1.0, 1.5),
    }


def empty(m: int = 1) -> History:
    return History.create([0.0] * m, [0.0] * m, [0.0] * m, [()] * m)


def group(rng: np.random.Generator, n: int, means: dict[str, float], **pooled: float) -> GroupStats:
    """Group statistics of n members whose values spread ±20% around ``means``."""
    moms = [moments_of(means[q] * rng.uniform(0.8, 1.2, n)) for q in QUANTITIES]
    return GroupStats(tuple(moms), **pooled)  # type: ignore[arg-type]


def chain_by_hand(gl: GroupStats, label: GroupStats | None, host: GroupStats, q: str) -> GammaPrior:
    """The chain of :func:`shrink` calls, before α's and θ's modes are moved to the
    median of its spread."""
    min_shape = POPULATION_MIN_SHAPE if q in ("alpha", "theta") else 0.5
    prior = shrink(gl.of(q), root_priors()[q], PSEUDO, min_shape)
    if label is not None:
        prior = shrink(label.of(q), prior, PSEUDO, min_shape)
    return shrink(host.of(q), prior, PSEUDO, min_shape)


def median(prior: GammaPrior) -> float:
    """The median of the lognormal with ``prior``'s mean and variance."""
    return prior.mean / math.sqrt(1.0 + 1.0 / prior.shape)


HOST_MEANS = {"weight": 3.0 / DAY, "signal_rate": 2.0 / DAY, "alpha": 0.8 / DAY, "theta": 0.4}
LABEL_MEANS = {"weight": 0.5 / DAY, "signal_rate": 0.2 / DAY, "alpha": 0.1 / DAY, "theta": 2.0}
GLOBAL_MEANS = {"weight": 1.0 / DAY, "signal_rate": 1.0 / DAY, "alpha": 0.3 / DAY, "theta": 1.0}


# --- History, Priors, to_params ----------------------------------------------------------


def test_history_pads_windows_and_takes_rows() -> None:
    h = History.create(
        [1.0, 2.0, 3.0], [0.0, 1.0, 0.0], [10.0, 20.0, 30.0],
        [[(5.0, 1, True), (6.0, 0, False)], [], [(7.0, 2, False)]],
    )  # fmt: skip
    assert h.m == 3 and h.tau.shape == (3, 2)
    np.testing.assert_array_equal(h.mask, [[True, True], [False, False], [True, False]])
    np.testing.assert_array_equal(h.z, [[True, False], [False, False], [False, False]])
    np.testing.assert_array_equal(h.n[h.mask], [1.0, 0.0, 2.0])
    assert np.all(h.tau > 0)  # padding is a valid interval, masked out
    sub = h.take(np.array([2, 0]))
    np.testing.assert_array_equal(sub.clicks, [3.0, 1.0])
    np.testing.assert_array_equal(sub.tau[0, :1], [7.0])
    with pytest.raises(ParameterError, match="length"):
        History.create([1.0], [1.0, 2.0], [1.0], [[]])


def test_priors_stack() -> None:
    rows = [root_priors(), {q: GammaPrior.from_mean(2.0, 3.0) for q in QUANTITIES}]
    pri = Priors.stack(rows)
    for q in QUANTITIES:
        assert pri.shape[q].shape == (2,)
        np.testing.assert_allclose(pri.mean(q), [rows[0][q].mean, 2.0], rtol=1e-15)


def test_to_params_formulas() -> None:
    w, g = np.array([1.0, 2.0, 0.5]), np.array([4.0, 1.0, 0.0])
    a, th = np.array([1.0, 0.5, 0.0]), np.array([math.log(2.0), 3.0, 1.0])
    got = to_params(w, g, a, th)
    p = -np.expm1(-th)
    np.testing.assert_allclose(got.weight, w)
    np.testing.assert_allclose(got.change_rate, a + g * p, rtol=1e-15)
    np.testing.assert_allclose(got.false_signal_rate, g * (1 - p), rtol=1e-14)
    np.testing.assert_allclose(got.recall[:2], g[:2] * p[:2] / (a + g * p)[:2], rtol=1e-14)
    assert got.change_rate[0] == pytest.approx(3.0)  # α + γ/2
    assert got.recall[2] == 0.0  # Δ = 0
    # every change announced, some signals false: recall clipped below 1 (MATH.md trap 2)
    clipped = to_params(np.ones(1), np.ones(1), np.zeros(1), np.ones(1))
    assert clipped.recall[0] == MAX_RECALL_WITH_FALSE_SIGNALS


# --- estimate: windows of K = 64, cold start, registration values --------------------------


def test_estimate_with_windows_of_64() -> None:
    rng = np.random.default_rng(31)
    lengths = [64, 64, 10, 1, 0]
    outcomes = [
        [(float(rng.uniform(0.2, 2.0) * DAY), int(rng.poisson(0.5)), bool(rng.random() < 0.5))
         for _ in range(k)]
        for k in lengths
    ]  # fmt: skip
    m = len(lengths)
    h = History.create([3.0] * m, [2.0] * m, [5 * DAY] * m, outcomes)
    assert h.tau.shape == (m, 64)
    pri = Priors.stack([prior_chain(root_priors(), GroupStats(), None, GroupStats(), PSEUDO)] * m)
    est = estimate(h, pri)
    assert est.n_outcomes.tolist() == lengths
    for arr in (est.weight, est.signal_rate, est.alpha, est.theta, est.params.change_rate):
        assert arr.shape == (m,) and np.all(np.isfinite(arr)) and np.all(arr > 0)
    # W and γ are the Gamma–Poisson posterior means (a + C)/(b + E)
    expected_w = (pri.shape["weight"] + 3.0) / (pri.rate["weight"] + 5 * DAY)
    np.testing.assert_allclose(est.weight, expected_w, rtol=1e-15)
    assert est.alpha_info[-1] == 0.0 and np.all(est.alpha_info[:-1] > 0)


def test_a_url_without_history_starts_from_its_host_and_label() -> None:
    rng = np.random.default_rng(32)
    gl = group(rng, 200, GLOBAL_MEANS)
    label = group(rng, 40, LABEL_MEANS)
    host = group(rng, 10, HOST_MEANS, pooled_theta=0.4, pooled_outcomes=100.0)
    chain = prior_chain(root_priors(), gl, label, host, PSEUDO)
    est = estimate(empty(), Priors.stack([chain]))
    for q, got in (("weight", est.weight), ("signal_rate", est.signal_rate)):
        want = chain_by_hand(gl, label, host, q).mean
        assert got[0] == pytest.approx(want, rel=1e-12)
        assert got[0] == pytest.approx(chain[q].mean, rel=1e-12)
    # α: the MAP without outcomes is the prior's mode, which the chain put at the median
    # of its spread, below its mean
    assert est.alpha[0] == pytest.approx(median(chain_by_hand(gl, label, host, "alpha")), rel=1e-9)
    assert est.alpha[0] < chain_by_hand(gl, label, host, "alpha").mean
    # θ: likewise, the MAP is the prior's mode, at the chain's median
    assert est.theta[0] == pytest.approx(median(chain_by_hand(gl, label, host, "theta")), rel=1e-9)
    # the host's 10 members against 5 pseudo members: in between, nearer the host
    for q in QUANTITIES:
        lo, hi = sorted((LABEL_MEANS[q], HOST_MEANS[q]))
        mean = chain_by_hand(gl, label, host, q).mean
        assert lo < mean < hi
        assert abs(mean - HOST_MEANS[q]) < abs(mean - LABEL_MEANS[q])


def test_the_host_dominates_when_large_and_the_label_when_the_host_is_empty() -> None:
    rng = np.random.default_rng(33)
    gl = group(rng, 500, GLOBAL_MEANS)
    label = group(rng, 5000, LABEL_MEANS)
    big_host = group(rng, 5000, HOST_MEANS)
    chain = prior_chain(root_priors(), gl, label, big_host, PSEUDO)
    label_only = prior_chain(root_priors(), gl, label, GroupStats(), PSEUDO)
    est = estimate(empty(2), Priors.stack([chain, label_only]))
    # α's MAP without outcomes is at the median of the chain's spread; its mean is pooled
    # as W's and γ's are
    for i, (host_stats, label_stats) in enumerate(((big_host, label), (GroupStats(), label))):
        alpha_chain = chain_by_hand(gl, label_stats, host_stats, "alpha")
        assert est.alpha[i] == pytest.approx(median(alpha_chain), rel=1e-9)
    alpha_means = np.array([chain_by_hand(gl, label, h, "alpha").mean
                            for h in (big_host, GroupStats())])  # fmt: skip
    values = {"weight": est.weight, "signal_rate": est.signal_rate, "alpha": alpha_means}
    pull = PSEUDO / (5000 + PSEUDO)  # the parent's weight against 5000 members
    for q, got in values.items():
        host_mean = big_host.of(q).s1 / big_host.of(q).n
        label_prior = chain_by_hand(gl, label, GroupStats(), q).mean
        assert abs(got[0] - host_mean) <= pull * abs(label_prior - host_mean) * (1 + 1e-9)
        # no host members: the label's prior itself, near its members' mean
        assert got[1] == pytest.approx(label_prior, rel=1e-9)
        label_mean, global_prior = (
            label.of(q).s1 / label.of(q).n,
            chain_by_hand(gl, None, GroupStats(), q).mean,
        )
        assert abs(got[1] - label_mean) <= pull * abs(global_prior - label_mean) * (1 + 1e-9)
    # without a pooled θ_h on the host, θ comes from the label and global levels
    assert est.theta[1] == pytest.approx(
        median(chain_by_hand(gl, label, GroupStats(), "theta")), rel=2e-6
    )


def mode(prior: GammaPrior) -> float:
    return (prior.shape - 1.0) / prior.rate


def test_theta_prior_is_weak_with_its_mode_at_the_groups_median() -> None:
    """θ is partially pooled: its prior's mode is the typical member's θ (the median of
    the chain host ← label ← global), whatever the host's pooled θ_h, with the weak
    shape URL_THETA_SHAPE."""
    rng = np.random.default_rng(34)
    gl = group(rng, 100, GLOBAL_MEANS)
    host = group(rng, 10, HOST_MEANS, pooled_theta=9.0, pooled_outcomes=MIN_POOLED_OUTCOMES)
    used = prior_chain(root_priors(), gl, None, host, PSEUDO)["theta"]
    assert mode(used) == pytest.approx(median(chain_by_hand(gl, None, host, "theta")))
    assert used.shape == URL_THETA_SHAPE
    empty_host = prior_chain(root_priors(), gl, None, GroupStats(), PSEUDO)["theta"]
    assert mode(empty_host) == pytest.approx(median(chain_by_hand(gl, None, GroupStats(), "theta")))


def registration_case(
    recall: float, nu_per_day: float
) -> tuple[dict[str, float], dict[str, GammaPrior], Estimates]:
    """Priors and estimate of a URL without history registered with all four values."""
    chain = prior_chain(root_priors(), GroupStats(), None, GroupStats(), PSEUDO)
    given = {"weight": 2.0 / DAY, "change_rate": 0.7 / DAY, "recall": recall,
             "false_signal_rate": nu_per_day / DAY}  # fmt: skip
    pri = given_priors(chain, **given, strength=2.0)
    return given, pri, estimate(empty(), Priors.stack([pri]))


@pytest.mark.parametrize(("recall", "nu_per_day"), [(0.6, 0.2), (0.1, 0.05), (0.95, 1.0)])
def test_registration_values_are_the_estimate_without_history(
    recall: float, nu_per_day: float
) -> None:
    given, pri, est = registration_case(recall, nu_per_day)
    delta, nu = given["change_rate"], given["false_signal_rate"]
    gamma = recall * delta + nu
    assert est.weight[0] == pytest.approx(given["weight"], rel=1e-12)
    assert est.signal_rate[0] == pytest.approx(gamma, rel=1e-12)
    assert est.alpha[0] == pytest.approx((1 - recall) * delta, rel=1e-9)  # α's mode
    assert pri["weight"].shape == 2.0 and pri["signal_rate"].shape == 2.0
    # θ = −ln(ν/γ) is its prior's mode, so the MAP without outcomes: all exact
    theta = -math.log(nu / gamma)
    assert est.theta[0] == pytest.approx(theta, rel=1e-9)
    tol = 1e-9
    p = est.params
    assert p.weight[0] == pytest.approx(given["weight"], rel=1e-12)
    assert p.change_rate[0] == pytest.approx(delta, rel=tol)
    assert p.recall[0] == pytest.approx(recall, rel=tol)
    assert p.false_signal_rate[0] == pytest.approx(nu, rel=tol)


def test_partial_registration_values_take_the_rest_from_the_chain() -> None:
    rng = np.random.default_rng(35)
    host = group(rng, 50, HOST_MEANS, pooled_theta=0.4, pooled_outcomes=100.0)
    chain = prior_chain(root_priors(), host, None, host, PSEUDO)
    assert given_priors(chain, weight=None, change_rate=None, recall=None,
                        false_signal_rate=None, strength=2.0) == chain  # fmt: skip
    only_w = given_priors(chain, weight=5.0 / DAY, change_rate=None, recall=None,
                          false_signal_rate=None, strength=2.0)  # fmt: skip
    assert {q: only_w[q] for q in QUANTITIES if q != "weight"} == {
        q: chain[q] for q in QUANTITIES if q != "weight"
    }
    before = estimate(empty(), Priors.stack([chain])).params
    pri = given_priors(chain, weight=None, change_rate=2.0 / DAY, recall=None,
                       false_signal_rate=None, strength=2.0)  # fmt: skip
    after = estimate(empty(), Priors.stack([pri])).params
    tol = 2 * 0.4 / URL_THETA_SHAPE * 10
    assert after.change_rate[0] == pytest.approx(2.0 / DAY, rel=tol)
    assert after.recall[0] == pytest.approx(before.recall[0], rel=tol)
    assert after.false_signal_rate[0] == pytest.approx(before.false_signal_rate[0], rel=tol)
    # every change announced and no false signal: θ falls back to 20 (precision 1 − 2e-9)
    exact = given_priors(chain, weight=None, change_rate=1.0 / DAY, recall=1.0,
                         false_signal_rate=0.0, strength=2.0)  # fmt: skip
    assert mode(exact["theta"]) == pytest.approx(20.0) and exact["alpha"] == chain["alpha"]


# --- members and the service's path end to end --------------------------------------------


def test_members_count_only_urls_with_enough_history() -> None:
    rng = np.random.default_rng(36)
    ok = [(DAY, 0, bool(rng.random() < 0.5)) for _ in range(MIN_OUTCOMES)]
    h = History.create(
        [10.0, 10.0, 10.0], [0.0, 0.0, 0.0], [0.3 * DECAY_S, 0.1 * DECAY_S, 0.3 * DECAY_S],
        [ok, ok, ok[:-1]],
    )  # fmt: skip
    mem = members(h, GammaPrior.from_mean(1.0, 1.5), DECAY_S)
    np.testing.assert_array_equal(mem.valid["weight"], [True, False, True])  # exposure ≥ T/5
    np.testing.assert_array_equal(mem.valid["alpha"], [True, True, False])  # ≥ 8 outcomes
    assert mem.value["weight"][0] == pytest.approx(10.0 / (0.3 * DECAY_S))
    assert mem.sampling_var["weight"][0] == pytest.approx(11.0 / (0.3 * DECAY_S) ** 2)
    assert math.isnan(mem.pooled_theta) and mem.pooled_outcomes == 0.0  # no signals
    stats = mem.stats()
    assert stats.of("weight").n == 2 and stats.of("alpha").n == 2 and stats.of("theta").n == 0
    # a label's share of the host: the sums over the selected members
    sel = np.array([True, False, True])
    parts = mem.stats(sel) + mem.stats(~sel)
    assert parts.moments == stats.moments


def test_weak_alpha_prior_has_its_mode_at_the_mean_interval() -> None:
    h = History.create([0.0] * 2, [0.0] * 2, [0.0] * 2, [[(2.0, 0, True), (4.0, 0, False)], []])
    shape, rate = weak_alpha_prior(h)
    assert np.all(shape > 1.0)
    np.testing.assert_allclose((shape - 1) / rate, [1 / 3.0, 1.0], rtol=1e-12)  # 1/τ̄; 1/s if none


def signal_host_events(
    seed: int, precision: float, recall: float, m: int = 100, k: int = 50
) -> tuple[FloatArray, History]:
    """A host of m URLs of one signal source (:func:`signal_sources.host_events`)."""
    rng = np.random.default_rng(seed)
    return host_events(rng, np.full(m, precision), np.full(m, recall), k)


@pytest.mark.parametrize(("precision", "recall"), [(0.7, 0.6), (0.4, 0.9), (0.9, 0.3)])
def test_service_path_recovers_the_hosts_signal_quality(precision: float, recall: float) -> None:
    """members → GroupStats → prior_chain → estimate, as the learner runs it: the
    host's precision and recall within 0.05 (Done when, ≥ 500 signals)."""
    _, h = signal_host_events(30, precision, recall)
    assert h.n[h.mask].sum() >= 500
    root = root_priors()
    mem = members(h, GammaPrior.from_mean(root["theta"].mean, 1.5), DECAY_S)
    own = mem.stats()
    assert mem.pooled_outcomes >= MIN_POOLED_OUTCOMES
    chain = prior_chain(root, own, None, own, PSEUDO)
    est = estimate(h, Priors.stack([chain] * h.m))
    # the host's precision: its pooled θ_h (one signal source, paper 004 App. E)
    assert abs(-np.expm1(-mem.pooled_theta) - precision) <= 0.05
    prm = est.params
    host_recall = np.sum(prm.recall * prm.change_rate) / np.sum(prm.change_rate)
    assert abs(host_recall - recall) <= 0.05


def test_given_priors_many_rejects_infinite_values_and_keeps_the_chain_elsewhere() -> None:
    rng = np.random.default_rng(36)
    host = group(rng, 50, HOST_MEANS, pooled_theta=0.4, pooled_outcomes=100.0)
    chains = Priors.stack([prior_chain(root_priors(), host, None, host, PSEUDO)] * 3)
    nan = np.full(3, np.nan)
    with pytest.raises(ParameterError, match="finite"):
        given_priors_many(chains, np.array([np.nan, np.inf, 1.0]), nan, nan, nan, 2.0)
    with pytest.raises(ParameterError, match="strength"):
        given_priors_many(chains, nan, nan, nan, nan, 0.0)
    # recall given as 0 with ν = 0: γ = 0, so γ's and θ's priors stay the chain's
    out = given_priors_many(
        chains, nan, np.array([np.nan, 1e-5, 1e-5]), np.array([np.nan, 0.0, 1.0]),
        np.array([np.nan, 0.0, 0.0]), 2.0,
    )  # fmt: skip
    for q in ("weight", "signal_rate", "alpha", "theta"):
        assert out.row(0)[q] == chains.row(0)[q]  # nothing given
    assert out.row(1)["signal_rate"] == chains.row(1)["signal_rate"]
    assert out.row(1)["alpha"].shape == 2.0  # α = Δ: the given change rate
    assert out.row(1)["alpha"].rate == pytest.approx(1.0 / 1e-5)
    theta_shape = max(URL_THETA_SHAPE, 2.0)  # ν = 0: θ = 20 at the mode
    assert out.row(2)["theta"].rate == pytest.approx((theta_shape - 1.0) / 20.0)
