"""The continuous optimum: budget, KKT conditions, closed forms, and beating simple rules."""

from __future__ import annotations

import math

import numpy as np
import pytest

from scheduler_core.errors import ParameterError
from scheduler_core.optimal import baseline, no_signal_freshness, solve_optimum
from scheduler_core.params import UrlParams
from scheduler_core.value import crawl_value

DAY = 86_400.0


def world(m: int, seed: int, signals: bool = False) -> UrlParams:
    rng = np.random.default_rng(seed)
    return UrlParams.create(
        weight=rng.uniform(0, 2, m) / DAY,
        change_rate=rng.uniform(0, 1, m) / DAY,
        recall=rng.beta(0.25, 0.25, m) if signals else 0.0,
        false_signal_rate=rng.uniform(0.1, 0.6, m) * 0.5 / DAY if signals else 0.0,
    )


def accuracy_of(params: UrlParams, rates: np.ndarray) -> float:
    fresh = no_signal_freshness(params, rates)
    return float(params.weight @ fresh / params.weight.sum())


@pytest.mark.parametrize(("m", "budget_per_day"), [(100, 10.0), (1000, 100.0), (500, 2000.0)])
def test_budget_is_spent_and_kkt_holds(m: int, budget_per_day: float) -> None:
    p = world(m, seed=m)
    opt = baseline(p, budget_per_day / DAY)
    assert opt.rates.sum() == pytest.approx(budget_per_day / DAY, rel=1e-9)
    crawled = np.isfinite(opt.thresholds)
    values = crawl_value(p.take(crawled), opt.thresholds[crawled])
    np.testing.assert_allclose(values, opt.lambda0, rtol=1e-9)
    assert (p.max_value[~crawled] <= opt.lambda0 * (1 + 1e-12)).all()
    assert opt.rates[~crawled & (opt.rates > 0)].size <= 2  # only the marginal URL(s)


def test_beats_uniform_and_change_proportional() -> None:
    p = world(1000, seed=3)
    budget = 100.0 / DAY
    opt = baseline(p, budget)
    uniform = accuracy_of(p, np.full(p.m, budget / p.m))
    proportional = accuracy_of(p, budget * p.change_rate / p.change_rate.sum())
    assert opt.accuracy > uniform
    assert opt.accuracy > proportional
    assert opt.accuracy == pytest.approx(accuracy_of(p, opt.rates), rel=1e-12)


def test_single_url_gets_the_whole_budget() -> None:
    p = UrlParams.create(weight=2.0, change_rate=0.5)
    opt = baseline(p, 0.25)
    assert opt.rates[0] == pytest.approx(0.25)
    assert opt.accuracy == pytest.approx((0.25 / 0.5) * (1 - math.exp(-2.0)), rel=1e-9)


def test_tiny_budget_crawls_only_the_best_url() -> None:
    p = UrlParams.create(weight=[1.0, 5.0, 2.0], change_rate=[1.0, 1.0, 1.0])
    opt = baseline(p, 1e-9)
    assert np.argmax(opt.rates) == 1
    assert opt.rates[1] == pytest.approx(1e-9)
    assert opt.rates.sum() == pytest.approx(1e-9)


def test_huge_budget_keeps_everything_fresh() -> None:
    p = world(200, seed=5)
    assert baseline(p, 1e6 / DAY * 200).accuracy > 0.999


def test_widely_spread_values_still_spend_the_budget() -> None:
    """MATH.md trap 4: Σξ(Λ) jumps where Λ crosses W/Δ; the budget must still be met."""
    rng = np.random.default_rng(11)
    p = UrlParams.create(
        weight=10 ** rng.uniform(-6, 2, 400), change_rate=10 ** rng.uniform(-6, 0, 400)
    )
    for budget in (1e-4, 1e-2, 1.0):
        assert baseline(p, budget).rates.sum() == pytest.approx(budget, rel=1e-9)


def test_inert_urls_get_no_crawls() -> None:
    p = UrlParams.create(weight=[0.0, 1.0, 1.0], change_rate=[1.0, 0.0, 1.0])
    opt = baseline(p, 0.5)
    assert opt.rates[:2].tolist() == [0.0, 0.0]
    assert opt.freshness[1] == 1.0


def test_bad_budget() -> None:
    p = world(10, seed=1)
    for budget in (0.0, -1.0, math.inf, math.nan):
        with pytest.raises(ParameterError, match="budget"):
            baseline(p, budget)


def test_signals_beat_the_no_signal_optimum() -> None:
    p = world(300, seed=9, signals=True)
    budget = 30.0 / DAY
    with_signals = solve_optimum(p, budget)
    without = baseline(p, budget)
    assert with_signals.rates.sum() == pytest.approx(budget, rel=1e-9)
    assert with_signals.accuracy > without.accuracy
    crawled = np.isfinite(with_signals.thresholds)
    values = crawl_value(p.take(crawled), with_signals.thresholds[crawled])
    np.testing.assert_allclose(values, with_signals.lambda0, rtol=1e-8)


def test_solve_optimum_without_signals_is_baseline() -> None:
    p = world(300, seed=4)
    a, b = solve_optimum(p, 30.0 / DAY), baseline(p, 30.0 / DAY)
    assert a.accuracy == b.accuracy
    np.testing.assert_array_equal(a.rates, b.rates)
