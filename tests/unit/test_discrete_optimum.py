"""The discrete-time optimum (LambdaCrawl): budget, KKT, closed forms, edge cases."""

from __future__ import annotations

import numpy as np
import pytest
from scipy.optimize import brentq

from scheduler_core.discrete_optimum import (
    CERTAIN_CHANGE,
    discrete_freshness,
    solve_discrete_optimum,
)
from scheduler_core.errors import ParameterError


def instance(m: int, seed: int) -> tuple[np.ndarray, np.ndarray]:
    """Weights over three decades, change probabilities over four, a few 0s and 1s."""
    rng = np.random.default_rng(seed)
    w = 10 ** rng.uniform(-2, 1, m) * (rng.random(m) < 0.9)
    d = 10 ** rng.uniform(-4, 0, m) * (rng.random(m) < 0.95)
    d[rng.random(m) < 0.05] = 1.0
    return w, d


def objective(w: np.ndarray, d: np.ndarray, p: np.ndarray) -> float:
    return float(w @ discrete_freshness(p, d))


def total_at(w: np.ndarray, d: np.ndarray, lam: float) -> float:
    """Σ p_i(λ) for URLs with 0 < Δ < 1, written out from MATH.md."""
    return float(np.clip((np.sqrt(w * d / lam) - d) / (1 - d), 0, 1).sum())


@pytest.mark.parametrize("seed", range(6))
def test_budget_is_spent_and_probabilities_are_probabilities(seed: int) -> None:
    w, d = instance(400, seed)
    useful = int(((w > 0) & (d > 0)).sum())
    for b in (0.5, 7.0, 0.3 * useful, useful - 0.5):
        opt = solve_discrete_optimum(w, d, b)
        p = opt.probabilities
        assert ((p >= 0) & (p <= 1)).all()
        assert p.sum() == pytest.approx(b, rel=1e-9)
        assert (p[(w == 0) | (d == 0)] == 0).all()


@pytest.mark.parametrize("seed", range(6))
def test_kkt_conditions(seed: int) -> None:
    """Marginal gain WΔ/(p + Δ − Δp)² equals λ inside, ≤ λ at p = 0, ≥ λ at p = 1."""
    w, d = instance(400, seed)
    opt = solve_discrete_optimum(w, d, 25.0)
    p, lam = opt.probabilities, opt.multiplier
    curved = (w > 0) & (d > 0) & (d < CERTAIN_CHANGE)
    inside = curved & (p > 1e-12) & (p < 1 - 1e-12)
    assert inside.sum() > 10
    p_in, w_in, d_in = p[inside], w[inside], d[inside]
    np.testing.assert_allclose(w_in * d_in / (p_in + d_in - d_in * p_in) ** 2, lam, rtol=1e-8)
    assert (w[curved & (p == 0)] / d[curved & (p == 0)] <= lam * (1 + 1e-12)).all()
    assert (w[curved & (p == 1)] * d[curved & (p == 1)] >= lam * (1 - 1e-12)).all()
    linear = (w > 0) & (d >= CERTAIN_CHANGE)  # gain W, constant in p
    assert (w[linear & (p == 1)] >= lam).all() and (w[linear & (p == 0)] <= lam).all()


def test_multiplier_is_the_root_scipy_finds() -> None:
    w, d = instance(300, 11)
    keep = (w > 0) & (d > 0) & (d < CERTAIN_CHANGE)
    w, d = w[keep], d[keep]
    b = 20.0
    lo, hi = float((w * d).min()) * 0.5, float((w / d).max())
    root = brentq(lambda lam: total_at(w, d, lam) - b, lo, hi, xtol=1e-300, rtol=1e-14)
    assert solve_discrete_optimum(w, d, b).multiplier == pytest.approx(root, rel=1e-10)


def test_identical_urls_share_the_budget() -> None:
    opt = solve_discrete_optimum(np.full(50, 2.0), np.full(50, 0.3), 7.0)
    np.testing.assert_allclose(opt.probabilities, 7.0 / 50, rtol=1e-12)


def test_han_et_al_closed_form_when_every_url_is_interior() -> None:
    """Table 2: λ = (Σ √(μΔ)/(1−Δ) / (b + Σ Δ/(1−Δ)))² when 0 < p_i < 1 for all i."""
    rng = np.random.default_rng(3)
    w, d = rng.uniform(1, 2, 30), rng.uniform(0.1, 0.2, 30)
    b = 6.0
    opt = solve_discrete_optimum(w, d, b)
    assert ((opt.probabilities > 0) & (opt.probabilities < 1)).all()
    lam = ((np.sqrt(w * d) / (1 - d)).sum() / (b + (d / (1 - d)).sum())) ** 2
    assert opt.multiplier == pytest.approx(lam, rel=1e-12)


@pytest.mark.parametrize("seed", range(3))
def test_no_feasible_perturbation_does_better(seed: int) -> None:
    w, d = instance(60, seed)
    opt = solve_discrete_optimum(w, d, 10.0)
    best = objective(w, d, opt.probabilities)
    rng = np.random.default_rng(seed)
    for _ in range(200):
        i, j = rng.choice(60, 2, replace=False)
        p = opt.probabilities.copy()
        step = rng.uniform(0, 0.05)
        step = min(step, p[i], 1 - p[j])
        p[i] -= step
        p[j] += step
        assert objective(w, d, p) <= best * (1 + 1e-12)
    assert best >= objective(w, d, np.full(60, 10.0 / 60)) - 1e-12


def test_certain_changes_are_linear_and_share_the_jump() -> None:
    """Δ = 1: gain W·p; with b = 1.5 the best URL gets 1 and the next 0.5."""
    opt = solve_discrete_optimum([3.0, 2.0, 1.0], 1.0, 1.5)
    np.testing.assert_allclose(opt.probabilities, [1.0, 0.5, 0.0])
    assert opt.multiplier == 2.0
    tied = solve_discrete_optimum([2.0, 2.0, 1.0], 1.0, 1.0)
    np.testing.assert_allclose(tied.probabilities, [0.5, 0.5, 0.0])


def test_urls_that_gain_nothing_get_nothing() -> None:
    w = np.array([1.0, 0.0, 1.0, 2.0])
    d = np.array([0.0, 0.5, 0.2, 0.4])  # never changes; no weight; two useful
    opt = solve_discrete_optimum(w, d, 1.0)
    assert opt.probabilities[0] == 0 and opt.probabilities[1] == 0
    assert opt.probabilities.sum() == pytest.approx(1.0)
    assert opt.freshness[0] == 1.0  # a URL that never changes stays fresh
    assert opt.freshness[1] == 0.0


def test_budgets_at_the_ends() -> None:
    w, d = np.array([1.0, 0.0, 2.0]), np.array([0.5, 0.5, 0.1])
    both = solve_discrete_optimum(w, d, 2.0)  # b ≥ useful URLs: each once per step
    np.testing.assert_array_equal(both.probabilities, [1.0, 0.0, 1.0])
    assert both.multiplier == 0.0
    big = solve_discrete_optimum(w, d, 10.0)  # b ≥ m
    np.testing.assert_array_equal(big.probabilities, [1.0, 0.0, 1.0])
    none = solve_discrete_optimum(w, d, 0.0)
    np.testing.assert_array_equal(none.probabilities, 0.0)
    assert none.multiplier == pytest.approx(20.0)  # max W/Δ
    empty = solve_discrete_optimum(np.empty(0), np.empty(0), 3.0)
    assert empty.probabilities.shape == (0,) and empty.accuracy == 1.0


def test_stationary_freshness_matches_a_simulation() -> None:
    """p/(p + Δ − Δp): after a step the copy is fresh iff crawled, or fresh and unchanged."""
    rng = np.random.default_rng(5)
    p, d = np.array([0.1, 0.5, 0.9, 0.02]), np.array([0.3, 0.05, 0.7, 0.01])
    copies = 20_000
    fresh = np.ones((copies, 4), dtype=bool)
    for _ in range(300):  # (1 − p)(1 − Δ) ≤ 0.97: 0.97^300 ≈ 1e-4 of the start remains
        fresh = (rng.random((copies, 4)) < p) | (fresh & (rng.random((copies, 4)) >= d))
    expected = discrete_freshness(p, d)
    tolerance = 5 * np.sqrt(expected * (1 - expected) / copies)
    assert (np.abs(fresh.mean(axis=0) - expected) <= tolerance).all()


@pytest.mark.parametrize(
    ("w", "d", "b", "match"),
    [
        ([-1.0], [0.5], 1.0, "weight"),
        ([np.inf], [0.5], 1.0, "weight"),
        ([1.0], [1.5], 1.0, "change_probability"),
        ([1.0], [np.nan], 1.0, "change_probability"),
        ([1.0], [0.5], -1.0, "budget"),
        ([1.0], [0.5], np.inf, "budget"),
        ([1.0, 2.0], [0.5, 0.5, 0.5], 1.0, "shape"),
    ],
)
def test_invalid_arguments(w: list[float], d: list[float], b: float, match: str) -> None:
    with pytest.raises(ParameterError, match=match):
        solve_discrete_optimum(w, d, b)
