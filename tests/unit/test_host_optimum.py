"""The continuous optimum with host limits: KKT, limits, reductions to BASELINE, closed forms."""

from __future__ import annotations

import math

import numpy as np
import pytest
from numpy.typing import ArrayLike
from scipy.special import gammainc, gammaincinv

from scheduler_core.errors import ParameterError
from scheduler_core.host_optimum import HostOptimum, solve_host_optimum
from scheduler_core.optimal import Optimum, baseline, solve_optimum
from scheduler_core.params import UrlParams
from scheduler_core.value import crawl_frequency, crawl_value

DAY = 86_400.0
INF = math.inf


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


def hosts_and_limits(
    m: int, n_hosts: int, budget: float, seed: int
) -> tuple[np.ndarray, np.ndarray]:
    """Hosts of unequal size; limits R/40 … R/4, host 0 unlimited."""
    rng = np.random.default_rng(seed)
    host_of = np.minimum((rng.pareto(1.0, m) * 2).astype(np.int64), n_hosts - 1)
    limits = budget / rng.uniform(4, 40, n_hosts)
    limits[0] = INF
    return host_of, limits


def solve(
    p: UrlParams, host_of: ArrayLike, limits: ArrayLike, budget: float, signals: bool
) -> HostOptimum:
    return solve_host_optimum(p, host_of, limits, budget, signals=signals)


def check_kkt(
    p: UrlParams,
    host_of: ArrayLike,
    limits: ArrayLike,
    budget: float,
    opt: HostOptimum,
    *,
    signals: bool,
    rtol: float,
) -> None:
    """KKT of the host problem, checked with crawl_value / crawl_frequency."""
    host_of, limits = np.asarray(host_of), np.asarray(limits, dtype=float)
    model = p if signals else p.without_signals()
    level = opt.lambda0 + opt.host_lambdas[host_of]
    crawled = np.isfinite(opt.thresholds)
    assert (opt.rates[crawled] > 0).all()
    values = crawl_value(model.take(crawled), opt.thresholds[crawled])
    np.testing.assert_allclose(values, level[crawled], rtol=rtol)
    # Rates are f(ι) but for the marginal URL(s), whose threshold is where f crosses ξ.
    f = crawl_frequency(model.take(crawled), opt.thresholds[crawled])
    assert (np.abs(f / opt.rates[crawled] - 1) > 1e-9).sum() <= 2 + opt.binding.sum()
    idle = (opt.rates == 0) & (p.change_rate > 0) & (p.weight > 0)
    assert (p.max_value[idle] <= level[idle] * (1 + 1e-12)).all()
    # Limits and budget: λ_h > 0 only at the limit, λ₀ > 0 only with the budget spent.
    assert (opt.host_rates <= limits * (1 + 1e-12)).all()
    np.testing.assert_allclose(opt.host_rates, np.bincount(host_of, opt.rates, limits.size))
    assert (opt.host_lambdas >= 0).all()
    np.testing.assert_array_equal(opt.binding, opt.host_lambdas > 0)
    np.testing.assert_allclose(opt.host_rates[opt.binding], limits[opt.binding], rtol=1e-12)
    assert opt.rates.sum() <= budget * (1 + 1e-12)
    if opt.lambda0 > 0:
        assert opt.rates.sum() == pytest.approx(budget, rel=1e-12)
    assert opt.accuracy == pytest.approx(float(p.weight @ opt.freshness / p.weight.sum()))


def assert_same(a: HostOptimum, b: Optimum) -> None:
    assert a.lambda0 == b.lambda0 and a.accuracy == b.accuracy
    np.testing.assert_array_equal(a.rates, b.rates)
    np.testing.assert_array_equal(a.thresholds, b.thresholds)
    np.testing.assert_array_equal(a.freshness, b.freshness)


@pytest.mark.parametrize(("m", "budget_per_day", "seed"), [(300, 30.0, 1), (1000, 300.0, 2)])
def test_kkt_without_signals(m: int, budget_per_day: float, seed: int) -> None:
    p, budget = world(m, seed), budget_per_day / DAY
    host_of, limits = hosts_and_limits(m, 12, budget, seed)
    opt = solve(p, host_of, limits, budget, signals=False)
    assert 0 < opt.binding.sum() < limits.size - 1 and opt.lambda0 > 0
    check_kkt(p, host_of, limits, budget, opt, signals=False, rtol=1e-12)
    crawled = opt.rates > 0
    np.testing.assert_array_equal(opt.thresholds[crawled], 1.0 / opt.rates[crawled])


@pytest.mark.parametrize("budget", [1e-4, 1e-2, 1.0])
def test_kkt_with_widely_spread_values(budget: float) -> None:
    """Every search meets its jumps of Σξ (MATH.md trap 4); limits and budget still hold."""
    p = spread_world(400, seed=5)
    host_of, limits = hosts_and_limits(p.m, 10, budget, seed=6)
    opt = solve(p, host_of, limits, budget, signals=False)
    assert opt.binding.any()
    check_kkt(p, host_of, limits, budget, opt, signals=False, rtol=1e-12)


@pytest.mark.parametrize("budget_per_day", [3.0, 30.0])
def test_kkt_with_signals(budget_per_day: float) -> None:
    p, budget = world(50, seed=9, signals=True), budget_per_day / DAY
    host_of, limits = hosts_and_limits(p.m, 6, budget, seed=3)
    opt = solve(p, host_of, limits, budget, signals=True)
    assert opt.binding.any() and opt.lambda0 > 0
    check_kkt(p, host_of, limits, budget, opt, signals=True, rtol=1e-9)
    without = solve(p, host_of, limits, budget, signals=False)
    assert opt.accuracy > without.accuracy


def test_without_limits_it_is_the_optimum_without_hosts() -> None:
    p, q = world(300, seed=4), world(30, seed=4, signals=True)
    host_of = np.arange(300) % 7
    assert_same(solve(p, host_of, np.full(7, INF), 30.0 / DAY, False), baseline(p, 30.0 / DAY))
    assert_same(
        solve(q, host_of[:30], np.full(7, INF), 3.0 / DAY, True), solve_optimum(q, 3.0 / DAY)
    )
    # Limits that do not bind change nothing either.
    opt = solve(p, host_of, np.full(7, 1.0), 30.0 / DAY, False)
    assert not opt.binding.any() and (opt.host_lambdas == 0).all()
    assert_same(opt, baseline(p, 30.0 / DAY))


def test_free_hosts_share_what_the_bound_hosts_leave() -> None:
    """URLs on hosts with λ_h = 0 get BASELINE of their own with R − Σ_bound k_h."""
    p, budget = world(600, seed=8), 60.0 / DAY
    host_of, limits = hosts_and_limits(p.m, 10, budget, seed=8)
    opt = solve(p, host_of, limits, budget, signals=False)
    free = ~opt.binding[host_of]
    rest = baseline(p.take(free), budget - limits[opt.binding].sum())
    assert rest.lambda0 == pytest.approx(opt.lambda0, rel=1e-12)
    np.testing.assert_allclose(opt.rates[free], rest.rates, rtol=1e-9)
    # ... and each bound host is BASELINE of its own URLs with its limit k_h.
    for h in np.flatnonzero(opt.binding):
        alone = baseline(p.take(host_of == h), limits[h])
        assert alone.lambda0 == pytest.approx(opt.lambda0 + opt.host_lambdas[h], rel=1e-12)
        np.testing.assert_allclose(opt.rates[host_of == h], alone.rates, rtol=1e-9)


def greedy_rate(p: UrlParams, lam: float) -> float:
    """Σ_i 1/ι_i(Λ) of the no-signal model, from the closed form."""
    y = lam * p.change_rate / p.weight
    iota = np.where(y < 1, gammaincinv(2.0, np.minimum(y, 1.0)) / p.change_rate, np.inf)
    return float((1.0 / iota).sum())


def test_multipliers_are_located_to_float_resolution() -> None:
    """S_h(Λ_h) < k_h ≤ S_h(Λ_h⁻) on binding hosts, T(λ₀) < R ≤ T(λ₀⁻), Λ⁻ the double below."""
    p, budget = spread_world(300, seed=12), 1e-2
    host_of, limits = hosts_and_limits(p.m, 8, budget, seed=12)
    opt = solve(p, host_of, limits, budget, signals=False)
    hosts = [p.take(host_of == h) for h in range(limits.size)]

    def total(lam: float) -> float:
        return sum(min(greedy_rate(q, lam), float(k)) for q, k in zip(hosts, limits, strict=True))

    below = float(np.nextafter(opt.lambda0, 0.0))
    assert total(opt.lambda0) < budget <= total(below)
    assert opt.binding.sum() >= 2
    for h in np.flatnonzero(opt.binding):
        level = opt.lambda0 + opt.host_lambdas[h]
        assert (
            greedy_rate(hosts[h], level)
            < limits[h]
            <= greedy_rate(hosts[h], float(np.nextafter(level, 0.0)))
        )


def test_one_url_per_host_closed_form() -> None:
    """A URL alone on a binding host crawls at k_h; Λ_h = V(1/k_h) = (W/Δ)·P(2, Δ/k_h)."""
    w, d = np.array([1.0, 2.0, 3.0, 1.0]), np.array([1.0, 0.5, 1.0, 2.0])
    limits = np.array([0.1, 0.2, 0.3, INF])
    opt = solve(UrlParams.create(w, d), np.arange(4), limits, 1.0, False)
    np.testing.assert_allclose(opt.rates[:3], limits[:3], rtol=1e-15)
    assert opt.rates[3] == pytest.approx(0.4, rel=1e-15)
    np.testing.assert_allclose(
        opt.lambda0 + opt.host_lambdas[:3], w[:3] / d[:3] * gammainc(2, d[:3] / limits[:3])
    )
    assert opt.lambda0 == pytest.approx(0.5 * gammainc(2, 2 / 0.4), rel=1e-12)
    assert opt.binding.tolist() == [True, True, True, False]


@pytest.mark.parametrize("signals", [False, True])
def test_identical_urls_on_one_host_share_its_limit(signals: bool) -> None:
    p = UrlParams.create(
        weight=[1.0] * 5 + [2.0], change_rate=[0.5] * 5 + [1.0], recall=0.6, false_signal_rate=0.2
    )
    opt = solve(p, [0] * 5 + [1], [0.5, INF], 2.0, signals)
    np.testing.assert_allclose(opt.rates, [0.1] * 5 + [1.5], rtol=1e-12)
    model = p if signals else p.without_signals()
    assert opt.host_lambdas[0] > 0 and opt.host_lambdas[1] == 0.0
    level = crawl_value(model.take([0, 5]), opt.thresholds[[0, 5]])
    assert level.tolist() == pytest.approx([opt.lambda0 + opt.host_lambdas[0], opt.lambda0])
    if not signals:
        assert opt.thresholds[0] == pytest.approx(10.0, rel=1e-12)
        assert opt.freshness[0] == pytest.approx(0.2 * -math.expm1(-5.0), rel=1e-12)


@pytest.mark.parametrize("signals", [False, True])
def test_slack_budget(signals: bool) -> None:
    """One host whose limit is below R: λ₀ = 0 and the host alone is solve_optimum at k."""
    p = world(40, seed=2, signals=signals)
    opt = solve(p, np.zeros(40, dtype=np.int64), [1.0 / DAY], 5.0 / DAY, signals)
    assert opt.lambda0 == 0.0 and opt.binding.tolist() == [True]
    assert opt.host_rates[0] == pytest.approx(1.0 / DAY, rel=1e-12)
    alone = solve_optimum(p, 1.0 / DAY) if signals else baseline(p, 1.0 / DAY)
    assert opt.host_lambdas[0] == pytest.approx(alone.lambda0, rel=1e-12)
    np.testing.assert_allclose(opt.rates, alone.rates, rtol=1e-9, atol=1e-20)
    check_kkt(
        p, np.zeros(40, dtype=np.int64), [1.0 / DAY], 5.0 / DAY, opt, signals=signals, rtol=1e-9
    )


def test_slack_budget_over_many_hosts() -> None:
    p = spread_world(200, seed=3)
    host_of = np.arange(200) % 5
    limits = np.array([1e-3, 1e-2, 1e-4, 2e-3, 0.0])
    opt = solve(p, host_of, limits, 1.0, False)
    assert opt.lambda0 == 0.0 and opt.binding.all()
    np.testing.assert_allclose(opt.host_rates, limits, rtol=1e-12)
    check_kkt(p, host_of, limits, 1.0, opt, signals=False, rtol=1e-12)


def test_closed_host_and_hosts_without_crawlable_urls() -> None:
    """k_h = 0: no crawls, λ_h = max W/Δ − λ₀; a host of inert URLs has λ_h = 0."""
    p = UrlParams.create(weight=[1.0, 3.0, 1.0, 0.0, 1.0], change_rate=[1.0, 1.0, 1.0, 1.0, 0.0])
    opt = solve(p, [0, 0, 1, 2, 2], [0.0, INF, 1.0], 0.5, False)
    assert opt.rates.tolist() == [0.0, 0.0, 0.5, 0.0, 0.0]
    assert opt.binding.tolist() == [True, False, False]
    assert opt.host_lambdas[0] == pytest.approx(3.0 - opt.lambda0, rel=1e-15)
    assert opt.freshness[4] == 1.0 and opt.freshness[3] == 0.0
    free = solve(p, [0, 0, 1, 1, 1], [INF, INF], 1.0, False)
    inert = solve(p.take([3, 4]), [0, 0], [1.0], 1.0, False)
    assert inert.lambda0 == 0.0 and inert.rates.tolist() == [0.0, 0.0]
    assert inert.accuracy == 1.0 and not inert.binding.any()
    assert free.rates.sum() == pytest.approx(1.0)


def test_signals_false_ignores_the_signals() -> None:
    p = world(100, seed=6, signals=True)
    host_of, limits = hosts_and_limits(p.m, 5, 10.0 / DAY, seed=1)
    a = solve(p, host_of, limits, 10.0 / DAY, False)
    b = solve(p.without_signals(), host_of, limits, 10.0 / DAY, True)
    assert a.lambda0 == b.lambda0
    np.testing.assert_array_equal(a.rates, b.rates)
    np.testing.assert_array_equal(a.host_lambdas, b.host_lambdas)


def test_truncated_sums_meet_the_limits() -> None:
    p, budget = world(40, seed=7, signals=True), 10.0 / DAY
    host_of, limits = hosts_and_limits(p.m, 4, budget, seed=2)
    opt = solve_host_optimum(p, host_of, limits, budget, terms=2)
    assert opt.rates.sum() == pytest.approx(budget, rel=1e-12)
    assert (opt.host_rates <= limits * (1 + 1e-12)).all() and opt.binding.any()
    crawled = np.isfinite(opt.thresholds)
    level = (opt.lambda0 + opt.host_lambdas[host_of])[crawled]
    values = crawl_value(p.take(crawled), opt.thresholds[crawled], terms=2)
    np.testing.assert_allclose(values, level, rtol=1e-9)


@pytest.mark.parametrize(
    ("host_of", "limits", "budget", "name"),
    [
        ([0, 1], [1.0, 1.0], 0.0, "budget_per_s"),
        ([0, 1], [1.0, 1.0], -1.0, "budget_per_s"),
        ([0, 1], [1.0, 1.0], INF, "budget_per_s"),
        ([0, 1], [1.0, 1.0], math.nan, "budget_per_s"),
        ([0, 1], [1.0, -1.0], 1.0, "host_limit_per_s"),
        ([0, 1], [1.0, math.nan], 1.0, "host_limit_per_s"),
        ([0, 1], [[1.0, 1.0]], 1.0, "host_limit_per_s"),
        ([0, 1, 1], [1.0, 1.0], 1.0, "host_of"),
        ([0.0, 1.0], [1.0, 1.0], 1.0, "host_of"),
        ([0, 2], [1.0, 1.0], 1.0, "host_of"),
        ([-1, 0], [1.0, 1.0], 1.0, "host_of"),
    ],
)
def test_bad_arguments(host_of: list[float], limits: ArrayLike, budget: float, name: str) -> None:
    p = UrlParams.create(weight=1.0, change_rate=[1.0, 2.0])
    with pytest.raises(ParameterError, match=name):
        solve_host_optimum(p, host_of, limits, budget)


def test_bad_terms() -> None:
    p = world(4, seed=1, signals=True)
    with pytest.raises(ParameterError, match="terms"):
        solve_host_optimum(p, [0, 0, 1, 1], [1.0, 1.0], 1.0, terms=0)
