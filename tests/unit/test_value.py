"""Crawl value functions: closed forms, MATH.md limits, inverse, Monte-Carlo checks."""

from __future__ import annotations

import math

import numpy as np
import pytest
from scipy.special import gammainc

from scheduler_core.errors import ParameterError
from scheduler_core.params import UrlParams
from scheduler_core.threshold import threshold_for_value
from scheduler_core.value import (
    crawl_frequency,
    crawl_value,
    crawl_value_derivative,
    expected_fresh_time,
    expected_interval,
    freshness_at_threshold,
)

INF = math.inf


def one(weight: float, change_rate: float, recall: float = 0.0, nu: float = 0.0) -> UrlParams:
    return UrlParams.create(weight, change_rate, recall, nu)


def brute(
    weight: float, change_rate: float, recall: float, nu: float, iota: float, terms: int = 10**9
) -> tuple[float, float, float]:
    """ψ, w, V by the explicit MATH.md sums over every k (small K only)."""
    alpha, gamma, total = (1 - recall) * change_rate, recall * change_rate + nu, change_rate + nu
    beta = -math.log1p(-recall * change_rate / gamma) / alpha if nu > 0 else INF
    k_max = min(int(iota // beta) if math.isfinite(beta) else 0, terms - 1)
    left = [iota - k * beta if k else iota for k in range(k_max + 1)]
    psi = sum(gammainc(k + 1, gamma * x) for k, x in enumerate(left)) / gamma
    w = sum((nu / total) ** k / total * gammainc(k + 1, total * x) for k, x in enumerate(left))
    return psi, w, weight * (w - math.exp(-alpha * iota) * psi)


CASES = [
    (1.0, 1.0, 0.5, 0.25),
    (2.0, 0.3, 0.9, 0.05),
    (0.5, 0.8, 0.1, 0.6),
    (1.0, 1.0, 0.99, 0.5),
    (1.0, 0.2, 0.5, 0.0),  # GREEDY-CIS
]


@pytest.mark.parametrize(("weight", "change_rate", "recall", "nu"), CASES)
@pytest.mark.parametrize("iota", [0.05, 1.0, 7.0, 40.0])
def test_matches_explicit_sums(
    weight: float, change_rate: float, recall: float, nu: float, iota: float
) -> None:
    p = one(weight, change_rate, recall, nu)
    psi, w, v = brute(weight, change_rate, recall, nu, iota)
    assert expected_interval(p, iota)[0] == pytest.approx(psi, rel=1e-10)
    assert expected_fresh_time(p, iota)[0] == pytest.approx(w, rel=1e-10)
    assert crawl_value(p, iota)[0] == pytest.approx(v, rel=1e-9, abs=1e-14)


@pytest.mark.parametrize("terms", [1, 2, 3])
def test_approx_j_truncates_the_sums(terms: int) -> None:
    p = one(1.0, 1.0, 0.3, 0.4)
    for iota in (0.5, 5.0, 30.0):
        _, _, v = brute(1.0, 1.0, 0.3, 0.4, iota, terms=terms)
        assert crawl_value(p, iota, terms=terms)[0] == pytest.approx(v, rel=1e-9)


def test_greedy_closed_form() -> None:
    w, d = 3.0, 0.7
    tau = np.array([0.0, 0.1, 1.0, 10.0, 100.0])
    expected = (w / d) * (1 - np.exp(-d * tau)) - w * tau * np.exp(-d * tau)
    got = crawl_value(UrlParams.create(np.full(5, w), d), tau)
    np.testing.assert_allclose(got, expected, rtol=1e-12, atol=1e-15)
    assert crawl_value(one(w, d), INF)[0] == pytest.approx(w / d)


def test_no_signals_limit_is_greedy() -> None:
    """γ → 0, or signals carrying no information (rΔ → 0), gives GREEDY."""
    tau = np.geomspace(1e-3, 1e3, 25)
    greedy = crawl_value(UrlParams.create(np.ones(25), 0.5), tau)
    for recall, nu in ((0.0, 0.3), (1e-12, 0.3), (1e-15, 1e-15)):
        faint = crawl_value(UrlParams.create(np.ones(25), 0.5, recall, nu), tau)
        np.testing.assert_allclose(faint, greedy, rtol=1e-8, atol=1e-12)


def test_vanishing_false_signals_limit_is_cis() -> None:
    w, d, r = 1.5, 0.4, 0.6
    tau = np.geomspace(1e-2, 1e3, 20)
    a, g = (1 - r) * d, r * d
    cis = w * (-np.expm1(-d * tau) / d - (-np.expm1(-g * tau)) / (g * np.exp(a * tau)))
    np.testing.assert_allclose(crawl_value(UrlParams.create(np.full(20, w), d, r), tau), cis)
    near = crawl_value(UrlParams.create(np.full(20, w), d, r, 1e-13), tau)
    np.testing.assert_allclose(near, cis, rtol=1e-6, atol=1e-12)


def test_perfect_signals_page_is_fresh_until_a_signal() -> None:
    p = one(2.0, 0.5, 1.0, 0.0)  # α = 0, β = ∞
    assert crawl_value(p, [1e6])[0] == 0.0
    assert crawl_value(p, [INF])[0] == pytest.approx(4.0)
    assert threshold_for_value(p, 1.0)[0] == INF  # crawled only at a signal


@pytest.mark.parametrize(("weight", "change_rate"), [(0.0, 1.0), (1.0, 0.0), (0.0, 0.0)])
def test_inert_pages_have_zero_value(weight: float, change_rate: float) -> None:
    p = UrlParams.create(weight, change_rate, 0.5, 0.2)
    assert crawl_value(p.take([0, 0, 0]), [0.0, 5.0, INF]).tolist() == [0.0, 0.0, 0.0]
    assert threshold_for_value(p, 0.1)[0] == INF
    if change_rate == 0:
        assert freshness_at_threshold(p, 3.0)[0] == 1.0


RNG_PARAMS = np.random.default_rng(7)
M = 300
MIXED = UrlParams.create(
    weight=RNG_PARAMS.uniform(0.0, 2.0, M),
    change_rate=RNG_PARAMS.uniform(0.0, 1.0, M),
    recall=RNG_PARAMS.beta(0.25, 0.25, M),
    false_signal_rate=RNG_PARAMS.uniform(0.1, 0.6, M) * 0.5,
)


def test_value_is_increasing_and_bounded() -> None:
    taus = np.geomspace(1e-3, 1e4, 60)
    values = np.stack([crawl_value(MIXED, np.full(M, t)) for t in taus])
    assert (np.diff(values, axis=0) >= -1e-12).all()
    assert (values <= MIXED.max_value + 1e-12).all()
    assert (crawl_value(MIXED, np.zeros(M)) == 0).all()
    np.testing.assert_allclose(crawl_value(MIXED, np.full(M, INF)), MIXED.max_value)


def test_derivative_matches_finite_difference() -> None:
    tau = np.full(M, 2.5)
    h = 1e-5
    numeric = (crawl_value(MIXED, tau + h) - crawl_value(MIXED, tau - h)) / (2 * h)
    np.testing.assert_allclose(crawl_value_derivative(MIXED, tau), numeric, rtol=1e-5, atol=1e-9)


def test_inverse_round_trip() -> None:
    lam = MIXED.max_value * np.linspace(0.01, 0.99, M)
    iota = threshold_for_value(MIXED, lam)
    live = MIXED.max_value > 0
    assert np.isfinite(iota[live]).all()
    np.testing.assert_allclose(crawl_value(MIXED, iota)[live], lam[live], rtol=1e-9, atol=1e-13)


def test_inverse_edges() -> None:
    p = UrlParams.create([1.0, 1.0, 1.0], [0.5, 0.5, 0.5], [0.0, 0.5, 0.5], [0.0, 0.2, 0.0])
    assert threshold_for_value(p, 0.0).tolist() == [0.0, 0.0, 0.0]
    assert threshold_for_value(p, -1.0).tolist() == [0.0, 0.0, 0.0]
    assert (threshold_for_value(p, 2.0) == INF).all()  # Λ = W/Δ
    assert (threshold_for_value(p, 5.0) == INF).all()
    with pytest.raises(ParameterError, match="value"):
        threshold_for_value(p, INF)


def test_greedy_inverse_closed_form() -> None:
    p = one(1.0, 1e-5)
    iota = threshold_for_value(p, 0.5 / 1e-5)[0]
    assert crawl_value(p, iota)[0] == pytest.approx(0.5 / 1e-5, rel=1e-12)


def test_near_perfect_recall_is_crawled_at_scale_beta() -> None:
    """MATH.md trap 3: V reaches W/Δ only for ι ~ β ≈ 1e9 s; the inverse must find it."""
    p = one(1.0, 1e-5, 1.0, 1e-6)  # recall clipped to 1 − 1e-9
    beta = p.signal_time_equivalent[0]
    assert beta > 1e13
    iota = threshold_for_value(p, 0.5 / 1e-5)[0]
    assert math.isfinite(iota)
    assert crawl_value(p, iota)[0] == pytest.approx(0.5 / 1e-5, rel=1e-9)


def test_tiny_recall_sums_few_terms() -> None:
    """MATH.md trap 1: ⌊ι/β⌋ ~ 1e15 terms; the windowed sum must still be exact."""
    p = one(1.0, 0.5, 1e-12, 0.3)
    assert p.signal_time_equivalent[0] < 1e-10
    tau = np.array([0.5, 5.0, 50.0])
    greedy = crawl_value(UrlParams.create(np.ones(3), 0.5), tau)
    np.testing.assert_allclose(crawl_value(p.take([0, 0, 0]), tau), greedy, rtol=1e-8)


def test_wide_windows_are_summed_blockwise() -> None:
    """γι ~ 1e6 with uninformative signals: ψ ≈ ι and V ≈ GREEDY stay accurate."""
    p = one(1.0, 1e-3, 1e-4, 1.0)
    tau = 1e6
    assert expected_interval(p, tau)[0] == pytest.approx(tau, rel=1e-3)
    greedy = crawl_value(one(1.0, 1e-3), tau)[0]
    assert crawl_value(p, tau)[0] == pytest.approx(greedy, rel=1e-3)


def test_a_batch_gives_each_url_what_it_gives_alone() -> None:
    """Rows share summation grids (merged while small): a row's value must not depend
    on its batch-mates' window sizes, from a few points to blockwise windows, nor on
    its place in the batch, to the last bit."""
    rng = np.random.default_rng(7)
    m = 60
    p = UrlParams.create(
        weight=rng.uniform(0.1, 2.0, m),
        change_rate=np.exp(rng.uniform(-7.0, 0.0, m)),
        recall=np.concatenate([rng.uniform(0.0, 1.0, m - 10), np.full(10, 1e-4)]),
        false_signal_rate=np.exp(rng.uniform(-3.0, 0.5, m)),
    )
    tau = np.exp(rng.uniform(-1.0, 13.0, m))  # γι from ~0.01 to ~1e6: 1 to 512 points
    batch = crawl_value(p, tau)
    alone = np.array([crawl_value(p.take([i]), tau[i : i + 1])[0] for i in range(m)])
    assert batch.tolist() == alone.tolist()
    for order in (rng.permutation(m), np.arange(m)[::-1]):
        assert crawl_value(p.take(order), tau[order]).tolist() == batch[order].tolist()


def test_frequency_and_freshness_limits() -> None:
    p = one(1.0, 0.5, 0.5, 0.2)
    assert crawl_frequency(p, INF)[0] == 0.0
    assert freshness_at_threshold(p, INF)[0] == 0.0
    assert freshness_at_threshold(p, 0.0)[0] == 1.0
    assert expected_fresh_time(p, INF)[0] == pytest.approx(2.0)


def test_bad_arguments() -> None:
    p = one(1.0, 1.0)
    with pytest.raises(ParameterError, match="threshold"):
        crawl_value(p, -1.0)
    with pytest.raises(ParameterError, match="terms"):
        crawl_value(p, 1.0, terms=0)
    with pytest.raises(ParameterError, match="shape"):
        crawl_value(p, [1.0, 2.0])


def simulate_threshold_policy(
    params: UrlParams, iota: float, intervals: int, seed: int
) -> tuple[np.ndarray, np.ndarray]:
    """Per crawl interval: its length and the fresh time in it, under 'crawl when τeff ≥ ι'."""
    rng = np.random.default_rng(seed)
    d, r, nu = params.change_rate[0], params.recall[0], params.false_signal_rate[0]
    beta = params.signal_time_equivalent[0]
    rate = d + nu
    p_change = d / rate
    lengths, fresh = np.empty(intervals), np.empty(intervals)
    for j in range(intervals):
        t, signals, first_change = 0.0, 0, INF
        while True:
            gap = rng.exponential(1.0 / rate)
            # τeff = t + β·n reaches ι before the next event?
            if signals == 0:
                crawl_at = iota
            else:
                crawl_at = iota - beta * signals if math.isfinite(beta) else t
            if crawl_at <= t + gap:
                t = max(crawl_at, t)
                break
            t += gap
            if rng.random() < p_change:
                first_change = min(first_change, t)
                signals += rng.random() < r
            else:
                signals += 1
        lengths[j], fresh[j] = t, min(first_change, t)
    return lengths, fresh


@pytest.mark.parametrize(
    ("params", "iota", "seed"),
    [
        (one(1.0, 1.0, 0.6, 0.3), 1.5, 1),
        (one(1.0, 0.5, 0.9, 0.1), 3.0, 2),
        (one(1.0, 2.0, 0.3, 1.0), 0.8, 3),
        (one(1.0, 1.0, 0.7, 0.0), 2.0, 4),  # GREEDY-CIS
    ],
)
def test_monte_carlo_interval_and_freshness(params: UrlParams, iota: float, seed: int) -> None:
    """ψ and w/ψ agree with a seeded simulation within 4 standard errors."""
    n = 20_000
    lengths, fresh = simulate_threshold_policy(params, iota, n, seed)
    psi = expected_interval(params, iota)[0]
    assert abs(lengths.mean() - psi) < 4 * lengths.std(ddof=1) / math.sqrt(n)
    # Ratio estimator Σfresh/Σlength; delta-method standard error.
    ratio = fresh.sum() / lengths.sum()
    resid = fresh - ratio * lengths
    se = resid.std(ddof=1) / (math.sqrt(n) * lengths.mean())
    assert abs(ratio - freshness_at_threshold(params, iota)[0]) < 4 * se
