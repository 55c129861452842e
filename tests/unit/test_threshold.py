"""The threshold search ι(Λ) = V⁻¹(Λ): Newton on ln ι against the bracketing search,
warm starts, truncated sums, bad guesses."""

from __future__ import annotations

import numpy as np
import pytest

import scheduler_core.threshold as threshold
from scheduler_core.errors import ParameterError
from scheduler_core.params import UrlParams
from scheduler_core.threshold import threshold_for_value
from scheduler_core.value import THRESHOLD_SPAN, _Model, crawl_value

RNG = np.random.default_rng(11)
M = 400
# the default world's parameters (paper 004 §6.1), in 1/s, and rates spread over decades
WORLD = UrlParams.create(
    weight=RNG.uniform(0.0, 2.0, M) / 86_400,
    change_rate=RNG.uniform(0.0, 1.0, M) / 86_400,
    recall=RNG.beta(0.25, 0.25, M),
    false_signal_rate=RNG.uniform(0.05, 0.3, M) / 86_400,
)
SPREAD = UrlParams.create(
    weight=10.0 ** RNG.uniform(-3, 1, M),
    change_rate=10.0 ** RNG.uniform(-7, 0, M),
    recall=RNG.uniform(0.0, 1.0, M),
    false_signal_rate=10.0 ** RNG.uniform(-8, 0, M),
)


def _lam(p: UrlParams) -> np.ndarray:
    """Λ between 0.1% and 99.9% of each URL's largest value W/Δ (finite thresholds)."""
    return np.nan_to_num(p.max_value) * RNG.uniform(0.001, 0.999, p.m)


def _bracketed(p: UrlParams, lam: np.ndarray, terms: int | None = None) -> np.ndarray:
    """The same inverse by the bracketing search alone (growth by 8, Chandrupatla)."""
    model = _Model.of(p)
    out = threshold_for_value(p, lam, terms=terms)  # GREEDY and edge rows as they are
    rows = np.flatnonzero(~model.greedy & ~model.inert & np.isfinite(out) & (out > 0))
    start = np.full(rows.size, 1e4)
    out[rows] = threshold._bracket_and_search(model.take(rows), lam[rows], terms, start)
    return out


@pytest.mark.parametrize("params", [WORLD, SPREAD], ids=["world", "spread"])
@pytest.mark.parametrize("terms", [None, 3])
def test_newton_matches_the_bracketing_search(params: UrlParams, terms: int | None) -> None:
    lam = _lam(params)
    newton = threshold_for_value(params, lam, terms=terms)
    reference = _bracketed(params, lam, terms)
    assert (np.isinf(newton) == np.isinf(reference)).all()
    fin = np.isfinite(reference)
    np.testing.assert_allclose(newton[fin], reference[fin], rtol=1e-10)
    live = fin & (reference > 0)
    value = crawl_value(params, newton, terms=terms)
    np.testing.assert_allclose(value[live], lam[live], rtol=1e-9)


@pytest.mark.parametrize("params", [WORLD, SPREAD], ids=["world", "spread"])
def test_a_guess_changes_the_work_not_the_result(params: UrlParams) -> None:
    m = 100  # far-off guesses cost evaluations at huge ι
    params = params.take(np.arange(m))
    lam = _lam(params)
    cold = threshold_for_value(params, lam)
    for guess in (
        cold * RNG.uniform(0.7, 1.4, m),  # parameters moved a little
        cold * 10.0 ** RNG.uniform(-6, 6, m),  # far off
        np.full(m, np.nan),
        np.where(RNG.random(m) < 0.5, np.inf, -1.0),  # ignored: from the no-signal threshold
        0.0,
        1e30,
    ):
        warm = threshold_for_value(params, lam, guess=guess)
        assert (np.isinf(warm) == np.isinf(cold)).all()
        fin = np.isfinite(cold)
        np.testing.assert_allclose(warm[fin], cold[fin], rtol=1e-11)


def _count_evaluations(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """The rows of every evaluation of V the threshold search makes from now on."""
    rows: list[int] = []
    evaluate = threshold._value_and_interval

    def counted(model: _Model, iota: np.ndarray, terms: int | None) -> tuple:
        rows.append(iota.size)
        return evaluate(model, iota, terms)

    monkeypatch.setattr(threshold, "_value_and_interval", counted)
    return rows


def _searched(p: UrlParams, thr: np.ndarray) -> int:
    """URLs the Newton search takes (not GREEDY's closed form, finite and > 0)."""
    return int((~_Model.of(p).greedy & np.isfinite(thr) & (thr > 0)).sum())


def test_an_exact_guess_settles_in_one_evaluation(monkeypatch: pytest.MonkeyPatch) -> None:
    lam = _lam(WORLD)
    exact = threshold_for_value(WORLD, lam)
    rows = _count_evaluations(monkeypatch)
    again = threshold_for_value(WORLD, lam, guess=exact)
    searched = _searched(WORLD, exact)
    assert rows and rows[0] == searched
    assert sum(rows) <= 1.2 * searched  # a few rows need a second step at rounding level
    np.testing.assert_array_equal(np.isfinite(again), np.isfinite(exact))


def test_a_warm_start_settles_without_a_confirming_evaluation(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Λ moved by 5% from the previous thresholds (a rescoring pass): Newton's quadratic
    convergence predicts the last step, so the evaluation that would only confirm the
    root is left out (about 4.2 evaluations per row without the prediction, 3.4 with
    it), and the result keeps the search's precision."""
    lam = _lam(WORLD)
    before = threshold_for_value(WORLD, lam)
    rows = _count_evaluations(monkeypatch)
    warm = threshold_for_value(WORLD, lam * 1.05, guess=before)
    searched = _searched(WORLD, before)
    assert sum(rows) <= 3.6 * searched
    monkeypatch.undo()
    cold = _bracketed(WORLD, lam * 1.05)
    fin = np.isfinite(cold)
    np.testing.assert_allclose(warm[fin], cold[fin], rtol=2e-12)


def test_guess_shape_is_checked() -> None:
    with pytest.raises(ParameterError, match="guess"):
        threshold_for_value(WORLD, 1.0, guess=np.ones(M + 1))
    with pytest.raises(ParameterError, match="guess"):
        threshold_for_value(WORLD, 1.0, guess=np.ones((2, M)))


def test_floor_row() -> None:
    """V ≥ Λ already at the smallest threshold searched, 1/(SPAN²·(Δ + ν)): that threshold."""
    p = UrlParams.create([1.0, 1.0], [0.5, 0.5], [0.5, 0.9], [0.2, 0.01])
    out = threshold_for_value(p, [1e-60, 1e-60])
    np.testing.assert_array_equal(out, 1.0 / (THRESHOLD_SPAN**2 * np.array([0.7, 0.51])))


@pytest.mark.parametrize("per_unit_s", [1e-12, 1e-6, 86_400.0, 3.2e13])
@pytest.mark.parametrize("terms", [None, 2])
def test_no_time_unit_is_assumed(per_unit_s: float, terms: int | None) -> None:
    """The same URLs with time counted in another unit (rates × c, W × c): thresholds ÷ c,
    to the search's precision, also where ι would fall below a microsecond or beyond 1e15."""
    lam = _lam(WORLD)
    base = threshold_for_value(WORLD, lam, terms=terms)
    c = per_unit_s
    scaled = UrlParams(WORLD.weight * c, WORLD.change_rate * c, WORLD.recall,
                       WORLD.false_signal_rate * c)  # fmt: skip
    out = threshold_for_value(scaled, lam, terms=terms)
    assert (np.isinf(out) == np.isinf(base)).all()
    fin = np.isfinite(base)
    np.testing.assert_allclose(out[fin] * c, base[fin], rtol=1e-9)
