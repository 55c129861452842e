"""The continuous optimum: budget, KKT conditions, closed forms, and beating simple rules."""

from __future__ import annotations

import dataclasses
import math

import numpy as np
import pytest
from scipy.special import gammainc, gammaincinv

from scheduler_core.errors import ParameterError
from scheduler_core.optimal import Optimum, baseline, no_signal_freshness, solve_optimum
from scheduler_core.params import UrlParams
from scheduler_core.value import crawl_frequency, crawl_value, freshness_at_threshold

DAY = 86_400.0


def world(m: int, seed: int, signals: bool = False) -> UrlParams:
    """The default loadgen world: W ~ U(0, 2)/day, Δ ~ U(0, 1)/day, recall ~ Beta(¼, ¼)."""
    rng = np.random.default_rng(seed)
    return UrlParams.create(
        weight=rng.uniform(0, 2, m) / DAY,
        change_rate=rng.uniform(0, 1, m) / DAY,
        recall=rng.beta(0.25, 0.25, m) if signals else 0.0,
        false_signal_rate=rng.uniform(0.1, 0.6, m) * 0.5 / DAY if signals else 0.0,
    )


def spread_world(m: int, seed: int) -> UrlParams:
    """W/Δ over 14 decades: many URLs sit near their jump of Σξ (MATH.md trap 4)."""
    rng = np.random.default_rng(seed)
    return UrlParams.create(
        weight=10 ** rng.uniform(-6, 2, m), change_rate=10 ** rng.uniform(-6, 0, m)
    )


def accuracy_of(params: UrlParams, rates: np.ndarray) -> float:
    """Σ G_i(ξ_i)/Σ W_i with G(ξ) = (W/Δ)ξ(1 − e^{−Δ/ξ}), written out independently."""
    w, d = params.weight, params.change_rate
    gain = w / d * rates * -np.expm1(-d / rates)
    return float(gain.sum() / w.sum())


def greedy_total_rate(params: UrlParams, lam: float) -> float:
    """Σ_i 1/ι_i(Λ) of the no-signal model, from the closed form."""
    y = lam * params.change_rate / params.weight
    iota = np.where(y < 1, gammaincinv(2.0, np.minimum(y, 1.0)) / params.change_rate, np.inf)
    return float((1.0 / iota).sum())


def check_kkt(params: UrlParams, opt: Optimum, rtol: float, terms: int | None = None) -> None:
    """V_i(ι_i) = λ₀ where ι_i is finite; V_i(∞) (= W_i/Δ_i) ≤ λ₀ for URLs never crawled."""
    crawled = np.isfinite(opt.thresholds)
    assert (opt.rates[crawled] > 0).all()
    values = crawl_value(params.take(crawled), opt.thresholds[crawled], terms=terms)
    np.testing.assert_allclose(values, opt.lambda0, rtol=rtol)
    idle = (opt.rates == 0) & (params.change_rate > 0)
    limit = crawl_value(params.take(idle), np.full(int(idle.sum()), np.inf), terms=terms)
    assert (limit <= opt.lambda0 * (1 + 1e-12)).all()


@pytest.mark.parametrize(("m", "budget_per_day"), [(100, 10.0), (1000, 100.0), (500, 2000.0)])
def test_budget_is_spent_and_kkt_holds(m: int, budget_per_day: float) -> None:
    p = world(m, seed=m)
    opt = baseline(p, budget_per_day / DAY)
    assert opt.rates.sum() == pytest.approx(budget_per_day / DAY, rel=1e-12)
    check_kkt(p, opt, rtol=1e-12)
    crawled = opt.rates > 0
    np.testing.assert_array_equal(opt.thresholds[crawled], 1.0 / opt.rates[crawled])
    assert np.isinf(opt.thresholds[~crawled]).all()
    assert opt.lambda0 > 0


@pytest.mark.parametrize("budget", [1e-6, 1e-3, 1.0])
def test_lambda0_is_located_to_float_resolution(budget: float) -> None:
    p = spread_world(300, seed=2)
    opt = baseline(p, budget)
    assert greedy_total_rate(p, opt.lambda0) < budget
    assert greedy_total_rate(p, float(np.nextafter(opt.lambda0, 0.0))) >= budget


def test_beats_uniform_and_change_proportional() -> None:
    p = world(1000, seed=3)
    budget = 100.0 / DAY
    opt = baseline(p, budget)
    uniform = accuracy_of(p, np.full(p.m, budget / p.m))
    proportional = accuracy_of(p, budget * p.change_rate / p.change_rate.sum())
    assert opt.accuracy > uniform + 0.01
    assert opt.accuracy > proportional + 0.01
    crawled = opt.rates > 0
    expected = accuracy_of(p.take(crawled), opt.rates[crawled]) * p.weight[crawled].sum()
    assert opt.accuracy == pytest.approx(expected / p.weight.sum(), rel=1e-12)
    np.testing.assert_allclose(opt.freshness, no_signal_freshness(p, opt.rates), rtol=1e-15)


def test_single_url_matches_the_closed_form() -> None:
    w, d, budget = 2.0, 0.5, 0.25
    opt = baseline(UrlParams.create(weight=w, change_rate=d), budget)
    assert opt.rates[0] == pytest.approx(budget, rel=1e-15)
    assert opt.thresholds[0] == pytest.approx(1 / budget, rel=1e-15)
    assert opt.freshness[0] == pytest.approx((budget / d) * (1 - math.exp(-d / budget)), rel=1e-12)
    assert opt.accuracy == opt.freshness[0]
    assert opt.lambda0 == pytest.approx(w / d * gammainc(2.0, d / budget), rel=1e-12)


def test_tiny_budget_crawls_only_the_best_url() -> None:
    """The budget lies inside the jump of the URL with the largest W/Δ: λ₀ = that W/Δ."""
    p = UrlParams.create(weight=[1.0, 5.0, 6.0, 3.0], change_rate=[1.0, 2.0, 2.0, 2.0])
    opt = baseline(p, 1e-9)
    assert np.flatnonzero(opt.rates).tolist() == [2]
    assert opt.rates[2] == pytest.approx(1e-9, rel=1e-15)
    assert opt.lambda0 == pytest.approx(3.0, rel=1e-15)
    assert opt.freshness[2] == pytest.approx(1e-9 / 2.0, rel=1e-12)
    check_kkt(p, opt, rtol=1e-15)


def test_huge_budget_keeps_everything_fresh() -> None:
    p = world(200, seed=5)
    opt = baseline(p, 1e6 / DAY * 200)
    assert opt.accuracy > 0.999
    assert (opt.rates > 0).all()
    assert opt.rates.sum() == pytest.approx(1e6 / DAY * 200, rel=1e-12)


@pytest.mark.parametrize("budget", [1e-5, 1e-4, 1e-3, 1e-2, 0.1, 1.0, 10.0])
def test_widely_spread_values_still_spend_the_budget(budget: float) -> None:
    """MATH.md trap 4: Σξ(Λ) jumps where Λ crosses W/Δ; the budget must still be met."""
    p = spread_world(400, seed=11)
    opt = baseline(p, budget)
    assert opt.rates.sum() == pytest.approx(budget, rel=1e-12)
    check_kkt(p, opt, rtol=1e-12)


def test_budget_inside_a_jump_goes_to_the_marginal_url() -> None:
    """Σξ jumps from 0 to ≈ Δ/40.5 at Λ = W/Δ; a budget inside the jump is still spent."""
    p = UrlParams.create(weight=[5.0, 1.0], change_rate=[1.0, 1.0])
    below = greedy_total_rate(p, float(np.nextafter(5.0, 0.0)))
    assert 0.02 < below < 0.03 and greedy_total_rate(p, 5.0) == 0.0
    opt = baseline(p, 0.5 * below)
    assert opt.rates.tolist() == [pytest.approx(0.5 * below, rel=1e-15), 0.0]
    assert opt.lambda0 == pytest.approx(5.0, rel=1e-15)
    check_kkt(p, opt, rtol=1e-15)


def test_inert_urls_get_no_crawls() -> None:
    p = UrlParams.create(weight=[0.0, 1.0, 1.0, 0.0], change_rate=[1.0, 0.0, 1.0, 0.0])
    for opt in (baseline(p, 0.5), solve_optimum(p, 0.5)):
        assert opt.rates.tolist() == [0.0, 0.0, 0.5, 0.0]
        assert opt.freshness[1] == 1.0 and opt.freshness[0] == 0.0
        assert opt.accuracy == pytest.approx((1.0 + 0.5 * -math.expm1(-2.0)) / 2.0)
    idle = UrlParams.create(weight=[0.0, 1.0], change_rate=[1.0, 0.0], recall=0.5)
    for opt in (baseline(idle, 1.0), solve_optimum(idle, 1.0)):
        assert opt.lambda0 == 0.0 and opt.rates.tolist() == [0.0, 0.0]
        assert np.isinf(opt.thresholds).all() and opt.accuracy == 1.0


def test_bad_arguments() -> None:
    p = world(10, seed=1, signals=True)
    for budget in (0.0, -1.0, math.inf, math.nan):
        with pytest.raises(ParameterError, match="budget_per_s"):
            baseline(p, budget)
        with pytest.raises(ParameterError, match="budget_per_s"):
            solve_optimum(p, budget)
    with pytest.raises(ParameterError, match="terms"):
        solve_optimum(p, 1.0, terms=0)


def test_optimum_is_frozen() -> None:
    opt = baseline(world(5, seed=1), 1.0 / DAY)
    with pytest.raises(dataclasses.FrozenInstanceError):
        opt.lambda0 = 1.0  # type: ignore[misc]


@pytest.mark.parametrize("budget_per_day", [3.0, 30.0])
def test_signals_beat_the_no_signal_optimum(budget_per_day: float) -> None:
    p = world(150, seed=9, signals=True)
    budget = budget_per_day / DAY
    opt = solve_optimum(p, budget)
    without = baseline(p, budget)
    assert opt.rates.sum() == pytest.approx(budget, rel=1e-12)
    assert opt.accuracy > without.accuracy
    check_kkt(p, opt, rtol=1e-9)
    crawled = np.isfinite(opt.thresholds)
    np.testing.assert_allclose(
        crawl_frequency(p.take(crawled), opt.thresholds[crawled]), opt.rates[crawled], rtol=1e-9
    )
    np.testing.assert_allclose(
        freshness_at_threshold(p, opt.thresholds), opt.freshness, rtol=1e-9, atol=1e-15
    )
    assert opt.accuracy == pytest.approx(float(p.weight @ opt.freshness / p.weight.sum()))


def test_solve_optimum_without_signals_is_baseline() -> None:
    p = world(300, seed=4)
    a, b = solve_optimum(p, 30.0 / DAY), baseline(p, 30.0 / DAY)
    assert a.accuracy == b.accuracy and a.lambda0 == b.lambda0
    np.testing.assert_array_equal(a.rates, b.rates)


@pytest.mark.parametrize("budget_per_day", [0.3, 30.0, 3000.0])
def test_uninformative_signals_give_baseline(budget_per_day: float) -> None:
    """recall = 0 with false signals: the signal code path (β = 0) must reproduce BASELINE."""
    rng = np.random.default_rng(4)
    p = UrlParams.create(
        weight=rng.uniform(0, 2, 200) / DAY,
        change_rate=rng.uniform(0, 1, 200) / DAY,
        false_signal_rate=rng.uniform(0, 1, 200) / DAY,
    )
    a, b = solve_optimum(p, budget_per_day / DAY), baseline(p, budget_per_day / DAY)
    assert a.lambda0 == pytest.approx(b.lambda0, rel=1e-9)
    assert a.accuracy == pytest.approx(b.accuracy, rel=1e-9)
    np.testing.assert_allclose(a.rates, b.rates, rtol=1e-9)
    np.testing.assert_allclose(a.thresholds, b.thresholds, rtol=1e-9)


def test_announced_changes_closed_forms() -> None:
    """GREEDY-CIS (ν = 0), W = Δ = 1, recall ½: γ = ½, and f(ι) ≥ γ for every finite ι."""
    p = UrlParams.create(weight=1.0, change_rate=1.0, recall=0.5)
    # Budget above γ: ψ = (1 − e^{−ι/2})/γ = 1/0.6 gives ι = 2 ln 6; w = 1 − e^{−ι}.
    opt = solve_optimum(p, 0.6)
    assert opt.thresholds[0] == pytest.approx(2 * math.log(6), rel=1e-9)
    assert opt.freshness[0] == pytest.approx(0.6 * 35 / 36, rel=1e-9)
    assert opt.lambda0 == pytest.approx(25 / 36, rel=1e-9)
    # Budget below γ: crawl on a share ξ/γ of the signals, each on a surely stale
    # copy worth 1/Δ fresh seconds, so freshness = ξ/Δ; λ₀ = W/Δ.
    opt = solve_optimum(p, 0.1)
    assert opt.rates[0] == pytest.approx(0.1, rel=1e-15)
    assert math.isinf(opt.thresholds[0])
    assert opt.freshness[0] == pytest.approx(0.1, rel=1e-12)
    assert opt.lambda0 == pytest.approx(1.0, rel=1e-15)
    assert opt.freshness[0] > baseline(p, 0.1).freshness[0]


@pytest.mark.parametrize("recall", [0.5, 0.999, 1.0])
def test_marginal_url_with_noisy_signals_gets_a_finite_threshold(recall: float) -> None:
    """Two URLs with W/Δ = 1 share a budget far inside their jumps (traps 3 and 4)."""
    p = UrlParams.create(
        weight=[1.0, 1.0, 0.5], change_rate=1.0, recall=[recall, 0.3, 0.9], false_signal_rate=0.1
    )
    opt = solve_optimum(p, 1e-3)
    assert opt.rates.sum() == pytest.approx(1e-3, rel=1e-12)
    assert opt.rates[2] == 0.0 and np.isfinite(opt.thresholds[:2]).all()
    assert opt.lambda0 == pytest.approx(1.0, rel=1e-12)
    check_kkt(p, opt, rtol=1e-12)
    # f crosses ξ at ι; with recall → 1 it steps there (crawl at the K-th signal).
    iota, rates = opt.thresholds[:2], opt.rates[:2]
    sub = p.take([0, 1])
    assert (crawl_frequency(sub, iota) <= rates).all()
    assert (crawl_frequency(sub, iota * (1 - 1e-12)) >= rates).all()
    # Each crawl of a copy this old gains W/Δ: freshness = ξ/Δ.
    np.testing.assert_allclose(opt.freshness[:2], rates, rtol=1e-9)


def test_truncated_sums_spend_the_budget_and_do_no_better() -> None:
    p = world(60, seed=7, signals=True)
    budget = 10.0 / DAY
    exact = solve_optimum(p, budget)
    for terms in (1, 3):
        opt = solve_optimum(p, budget, terms=terms)
        assert opt.rates.sum() == pytest.approx(budget, rel=1e-12)
        check_kkt(p, opt, rtol=1e-9, terms=terms)
        assert opt.accuracy <= exact.accuracy + 1e-12
