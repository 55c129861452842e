"""Bounds on the crawl value from one base point and the slope of V: they hold, and
they are exact without signals."""

from __future__ import annotations

import numpy as np
import pytest

from scheduler_core.params import FloatArray, UrlParams
from scheduler_core.policies.base import IntArray
from scheduler_core.policies.value_bounds import ANCHORS, MARGIN, ValueBounds, _r1_over
from scheduler_core.value import crawl_value, crawl_value_and_interval

RNG = np.random.default_rng(5)
M = 600
DAY = 86_400.0
NOISY = UrlParams.create(
    weight=RNG.uniform(0.0, 2.0, M) / DAY,
    change_rate=RNG.uniform(0.0, 1.0, M) / DAY,
    recall=RNG.beta(0.25, 0.25, M),
    false_signal_rate=RNG.uniform(0.05, 0.3, M) / DAY,
)
# rates over decades, per second, some URLs without signals or without false ones
SPREAD = UrlParams.create(
    weight=10.0 ** RNG.uniform(-3, 1, M),
    change_rate=10.0 ** RNG.uniform(-4, 1, M),
    recall=np.where(RNG.uniform(size=M) < 0.2, 0.0, RNG.uniform(0.0, 1.0, M)),
    false_signal_rate=np.where(RNG.uniform(size=M) < 0.2, 0.0, 10.0 ** RNG.uniform(-5, 0, M)),
)


def bounds_of(params: UrlParams, terms: int | None) -> ValueBounds:
    cap = crawl_value(params, np.full(params.m, np.inf), terms=terms)

    def evaluate(urls: IntArray, tau: FloatArray) -> tuple[FloatArray, FloatArray]:
        return crawl_value_and_interval(params.take(urls), tau, terms=terms)

    return ValueBounds(params, cap, evaluate)


@pytest.mark.parametrize("params", [NOISY, SPREAD], ids=["default-world", "spread"])
@pytest.mark.parametrize("terms", [None, 2])
def test_the_bounds_hold_from_any_base_point(params: UrlParams, terms: int | None) -> None:
    vb = bounds_of(params, terms)
    scale = 1.0 / np.maximum(params.change_rate, 1e-12)
    urls = np.arange(params.m)
    for _ in range(4):
        base = scale * 10.0 ** RNG.uniform(-3, 1, params.m)
        v, psi = crawl_value_and_interval(params, base, terms=terms)
        vb.record(urls, base, v, psi)
        for grow in (1e-4, 1e-2, 0.3, 3.0, 100.0):
            tau = base + scale * grow * RNG.uniform(0.0, 1.0, params.m)
            exact = crawl_value(params, tau, terms=terms)
            lower, upper = vb.bounds(tau)
            assert (lower <= exact).all() and (exact <= upper).all()


def test_without_signals_the_bounds_are_the_value() -> None:
    params = SPREAD.without_signals()
    vb = bounds_of(params, None)
    tau = 10.0 ** RNG.uniform(-3, 1, params.m) / params.change_rate
    exact = crawl_value(params, tau)
    lower, upper = vb.bounds(tau)  # from the base point (0, 0, 0) of a fresh crawl
    np.testing.assert_allclose(lower, exact, rtol=2 * MARGIN)
    np.testing.assert_allclose(upper, exact, rtol=2 * MARGIN)


def test_anchors_take_over_after_signals_and_crawls_reset() -> None:
    vb = bounds_of(NOISY, None)
    beta = NOISY.signal_time_equivalent
    anchored = np.flatnonzero(np.isfinite(beta) & (beta > 0) & (vb.cap > 0))
    assert vb.evaluated == anchored.size * ANCHORS
    urls = anchored[:50]
    vb.signalled(urls, np.full(urls.size, 2))
    np.testing.assert_array_equal(vb.at[urls], 2 * beta[urls])
    tau = 2 * beta[urls] + 3600.0  # an hour after the crawl, two signals
    exact = crawl_value(NOISY.take(urls), tau)
    full = np.zeros(NOISY.m)
    full[urls] = tau
    lower, upper = vb.bounds(full)
    assert (lower[urls] <= exact).all() and (exact <= upper[urls]).all()
    assert (lower[urls] >= 0.5 * exact).all()  # the anchor, not V(0) = 0, bounds from below
    vb.crawled(urls)
    assert (vb.at[urls] == 0).all() and (vb.value[urls] == 0).all()


def test_a_copy_known_stale_is_worth_its_cap_exactly() -> None:
    vb = bounds_of(NOISY, None)
    tau = np.full(NOISY.m, np.inf)
    lower, upper = vb.bounds(tau)
    np.testing.assert_array_equal(lower, vb.cap)
    np.testing.assert_array_equal(upper, vb.cap)


def test_r1_over_y_matches_its_closed_form_everywhere() -> None:
    from scipy.special import gammainc

    y = np.concatenate([[0.0], np.geomspace(1e-12, 1e3, 5000)])
    expected = np.concatenate([[0.0], gammainc(2.0, y[1:]) / y[1:]])
    np.testing.assert_allclose(_r1_over(y), expected, rtol=1e-12, atol=0.0)
