"""Decayed event counts (importance W, signal rate γ): unbiased, order-free, two floats.

A Poisson process of rate λ observed from ``start`` to ``now`` gives a decayed count
C = Σ_k exp(−(now − t_k)/T) with E[C] = λ·E and Var[C] = λ·(T/2)(1 − exp(−2S/T)),
where E = T(1 − exp(−S/T)) is the decayed exposure and S = now − start (Campbell's
theorem).  So C/E is unbiased for λ, and under a Gamma(a, b) prior the posterior
mean (a + C)/(b + E) has expectation (a + λE)/(b + E) exactly.
"""

from __future__ import annotations

import math

import numpy as np
import pytest

from scheduler_core.errors import ParameterError
from scheduler_core.estimate.rates import (
    add_event,
    decayed_count,
    decayed_exposure,
    rate_posterior,
)
from scheduler_core.params import FloatArray

DAY = 86_400.0
DECAY_S = 30 * DAY


def fold(times: FloatArray, decay_s: float = DECAY_S) -> tuple[float, float]:
    """The (mass, ref) state after folding ``times`` (at least one) in the given order."""
    mass, ref = 0.0, None
    for t in times.tolist():
        mass, ref = add_event(mass, ref, t, decay_s)
    assert ref is not None
    return mass, ref


def poisson_times(
    rng: np.random.Generator, rate_per_s: float, start: float, end: float
) -> FloatArray:
    """Event times of a Poisson process on [start, end), sorted."""
    k = rng.poisson(rate_per_s * (end - start))
    return np.sort(rng.uniform(start, end, k))


def simulate_streams(
    order: str, seed: int = 7
) -> tuple[FloatArray, FloatArray, float, FloatArray, float]:
    """400 independent URLs observed from their own start (0–60 days) to day 150,
    λ = 2/day; returns (C, E, λ, starts, now) with C folded in the given event order."""
    rng = np.random.default_rng(seed)
    rate = 2.0 / DAY
    now = 150 * DAY
    starts = rng.uniform(0.0, 60 * DAY, 400)
    mass, ref = np.zeros(starts.size), np.full(starts.size, np.nan)
    for i, s in enumerate(starts):
        times = poisson_times(rng, rate, s, now)
        if order == "shuffled":
            times = rng.permutation(times)
        elif order == "reversed":
            times = times[::-1]
        mass[i], ref[i] = fold(times)
    count = decayed_count(mass, ref, now, DECAY_S)
    exposure = decayed_exposure(starts, now, DECAY_S)
    return count, exposure, rate, starts, now


@pytest.mark.parametrize("order", ["sorted", "shuffled", "reversed"])
def test_decayed_rate_is_unbiased(order: str) -> None:
    count, exposure, rate, starts, now = simulate_streams(order)
    ratio = count / exposure / rate  # each URL's C/E is unbiased for λ: E[ratio] = 1
    # 4 standard errors of the mean, the SE from the sample's own spread
    se = ratio.std(ddof=1) / math.sqrt(ratio.size)
    assert abs(ratio.mean() - 1.0) < 4 * se
    # the spread itself is the theory's: Var[C/E] = λ(T/2)(1 − e^{−2S/T})/E², averaged;
    # a wrong decay (or exposure) changes it.  SE of a sample variance ≈ var·√(2/(n−1))
    # (C is a sum of ~100–300 terms, near normal); allow 4 of them.
    span = now - starts
    var_theory = (
        np.mean(rate * DECAY_S / 2 * -np.expm1(-2 * span / DECAY_S) / exposure**2) / rate**2
    )
    sample_var = np.mean((ratio - 1.0) ** 2)  # about the known mean 1
    assert abs(sample_var / var_theory - 1.0) < 4 * math.sqrt(2.0 / ratio.size)


def test_posterior_mean_has_the_gamma_poisson_expectation() -> None:
    count, exposure, rate, _, _ = simulate_streams("shuffled", seed=11)
    a, b = 2.0, 2.0 / (0.5 / DAY)  # prior mean 0.5/day, far from λ = 2/day
    mean, shape = rate_posterior(count, exposure, np.full(count.size, a), np.full(count.size, b))
    np.testing.assert_allclose(shape, a + count, rtol=1e-15)
    expected = (a + rate * exposure) / (b + exposure)  # E[(a + C)/(b + E)], exactly
    err = mean / expected - 1.0
    assert abs(err.mean()) < 4 * err.std(ddof=1) / math.sqrt(err.size)
    # and the prior's pull is visible, not hidden inside the tolerance
    assert np.all(expected < rate)


def test_order_does_not_matter() -> None:
    rng = np.random.default_rng(3)
    times = poisson_times(rng, 5.0 / DAY, 0.0, 400 * DAY)  # ~2000 events over 13 T
    now = 401 * DAY
    reference = fold(times)
    counts = [decayed_count(reference[0], reference[1], now, DECAY_S)[0]]
    for order in (times[::-1], rng.permutation(times), rng.permutation(times)):
        mass, ref = fold(order)
        assert ref == reference[1]  # the latest event, whatever the order
        counts.append(decayed_count(mass, ref, now, DECAY_S)[0])
    # the direct sum at `now`, correctly rounded
    direct = math.fsum(math.exp(-(now - t) / DECAY_S) for t in times.tolist())
    np.testing.assert_allclose(counts, direct, rtol=1e-12)


def test_state_is_two_floats_whatever_the_number_of_events() -> None:
    rng = np.random.default_rng(5)
    times = rng.uniform(0.0, 100 * DAY, 10_000)  # out of order
    state = add_event(0.0, None, float(times[0]), DECAY_S)
    for t in times[1:].tolist():
        state = add_event(state[0], state[1], t, DECAY_S)
    assert len(state) == 2
    assert all(isinstance(x, float) for x in state)
    assert state[1] == times.max()
    assert math.isfinite(state[0]) and 0 < state[0] <= times.size


def test_add_event_examples_and_errors() -> None:
    assert add_event(0.0, None, 10.0, 5.0) == (1.0, 10.0)
    mass, ref = add_event(1.0, 10.0, 15.0, 5.0)  # later event: decay the old mass, add 1
    assert mass == pytest.approx(math.exp(-1.0) + 1.0, rel=1e-15) and ref == 15.0
    mass, ref = add_event(1.0, 10.0, 5.0, 5.0)  # older event: add its decayed weight
    assert mass == pytest.approx(1.0 + math.exp(-1.0), rel=1e-15) and ref == 10.0
    for bad in (0.0, -1.0, math.nan):
        with pytest.raises(ParameterError, match="decay_s"):
            add_event(0.0, None, 1.0, bad)


def test_decayed_count_without_events_and_ahead_of_the_clock() -> None:
    got = decayed_count([0.0, 3.0, 3.0], [np.nan, 100.0, 130.0], 110.0, 10.0)
    # no event yet: 0; 10 s old: 3/e; an event ahead of now counts as now
    np.testing.assert_allclose(got, [0.0, 3.0 * math.exp(-1.0), 3.0], rtol=1e-15)


def test_decayed_exposure() -> None:
    got = decayed_exposure([0.0, 90.0, 100.0, 200.0], 100.0, 10.0)
    # T(1 − e^{−S/T}); nothing observed yet (S ≤ 0) is 0; long spans tend to T
    np.testing.assert_allclose(got, [10.0 * -math.expm1(-10.0), 10.0 * -math.expm1(-1.0), 0, 0])
    assert decayed_exposure([0.0], 1e9, 10.0)[0] == pytest.approx(10.0, rel=1e-15)


@pytest.mark.parametrize(("shape", "rate"), [(0.0, 1.0), (1.0, 0.0), (-1.0, 1.0), (1.0, -2.0)])
def test_rate_posterior_rejects_bad_priors(shape: float, rate: float) -> None:
    with pytest.raises(ParameterError, match="prior"):
        rate_posterior([1.0], [1.0], [shape], [rate])
