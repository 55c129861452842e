"""The due-time rule and the multiplier estimates."""

from __future__ import annotations

import math

import numpy as np
import pytest

from scheduler_core.due import due_time
from scheduler_core.errors import ParameterError
from scheduler_core.multipliers import (
    LogMean,
    TrackerConfig,
    dispatch_gated,
    drift_tolerance,
    host_multiplier,
    host_observation,
    update_log_mean,
)


def _due(**kw: object) -> float:
    base: dict[str, object] = {
        "last_crawl_at": 1000.0,
        "registered_at": 0.0,
        "threshold_s": 500.0,
        "signal_time_equivalent_s": 0.0,
        "signals_since_crawl": 0,
        "last_signal_at": None,
        "max_revisit_s": 1e9,
    }
    base.update(kw)
    return due_time(**base)  # type: ignore[arg-type]


def test_due_time_cases() -> None:
    assert _due() == 1500.0
    assert _due(last_crawl_at=None, registered_at=7.0) == 7.0
    assert _due(signal_time_equivalent_s=100.0, signals_since_crawl=3) == 1200.0
    assert _due(signal_time_equivalent_s=0.0, signals_since_crawl=3) == 1500.0  # β = 0: no news
    assert (
        _due(signal_time_equivalent_s=math.inf, signals_since_crawl=1, last_signal_at=1100.0)
        == 1100.0
    )
    assert _due(signal_time_equivalent_s=math.inf, signals_since_crawl=0) == 1500.0
    assert _due(threshold_s=math.inf) == 1000.0 + 1e9  # abandoned: revisit cap
    assert _due(threshold_s=math.inf, signal_time_equivalent_s=math.inf, signals_since_crawl=2,
                last_signal_at=1100.0, max_revisit_s=1e4) == 11000.0  # fmt: skip
    assert _due(max_revisit_s=100.0) == 1100.0


def test_log_mean_is_a_plain_mean_then_an_ewma() -> None:
    cfg = TrackerConfig(window=10, clip=100)
    xs = list(np.linspace(-1, 1, 10))
    s = update_log_mean(LogMean(), xs, cfg)
    assert s.log_mean == pytest.approx(np.mean(xs)) and s.count == 10
    s2 = update_log_mean(s, [5.0], cfg)
    assert s2.log_mean == pytest.approx(s.log_mean + (5.0 - s.log_mean) / 10)


def test_log_mean_clips_outliers_after_the_window() -> None:
    cfg = TrackerConfig(window=4, clip=1.0)
    s = update_log_mean(LogMean(), [0.0] * 4, cfg)
    s = update_log_mean(s, [50.0], cfg)  # a W/Δ jump after a signal
    assert s.log_mean == pytest.approx(0.25)
    assert update_log_mean(s, [math.nan, -math.inf], cfg) == s


def test_log_mean_converges_to_the_geometric_mean() -> None:
    rng = np.random.default_rng(3)
    cfg = TrackerConfig(window=200, clip=2.0)
    draws = rng.normal(math.log(7.0), 0.5, size=5000)
    s = update_log_mean(LogMean(), draws, cfg)
    # EWMA over ~window draws: standard error ≈ σ / sqrt(2·window)
    assert s.value == pytest.approx(7.0, rel=4 * 0.5 / math.sqrt(400))


def test_log_spread_is_the_variance_then_an_ewm_variance() -> None:
    """Over the first ``window`` observations the spread is their plain variance; after,
    it follows the exponentially weighted recurrence, so that in a stationary stream
    the standard error (var/(2w − 1)) matches the spread of the estimate itself."""
    rng = np.random.default_rng(12)
    cfg = TrackerConfig(window=50.0, clip=100.0)
    xs = rng.normal(1.0, 0.8, 50)
    s = update_log_mean(LogMean(), xs, cfg)
    assert s.var == pytest.approx(float(np.var(xs)), rel=1e-12)
    assert s.stderr(cfg) == pytest.approx(float(np.std(xs)) / math.sqrt(50), rel=1e-12)
    # stationary: the estimate's spread over many independent runs is its stderr
    means, errs = [], []
    for _ in range(400):
        r = update_log_mean(LogMean(), rng.normal(0.0, 1.0, 2000), cfg)
        assert r.log_mean is not None
        means.append(r.log_mean)
        errs.append(r.stderr(cfg))
    sd = float(np.std(means))
    # the s.d. of 400 draws is within ~3.5 % (1/√800) of its true value: 4 s.e.
    assert float(np.mean(errs)) == pytest.approx(sd, rel=4 / math.sqrt(800))


def test_drift_tolerance_is_the_setting_or_lambda0_noise() -> None:
    cfg = TrackerConfig(window=64.0)
    assert drift_tolerance(0.05, LogMean(), cfg) == 0.05
    assert drift_tolerance(0.05, LogMean(0.0, 1e6, 1e-6), cfg) == 0.05  # a quiet λ₀
    noisy = LogMean(0.0, 1e6, 2.0)  # ln V spread over ~3 decades
    assert drift_tolerance(0.05, noisy, cfg) == pytest.approx(
        math.expm1(2.0 * math.sqrt(2.0 / 127.0)), rel=1e-12
    )
    with pytest.raises(ParameterError):
        drift_tolerance(0.0, noisy, cfg)


def test_host_multiplier() -> None:
    assert host_multiplier(None, LogMean(1.0, 3)) == 0.0
    assert host_multiplier(1.0, LogMean()) == 0.0
    assert host_multiplier(1.0, LogMean(math.log(3.0), 3)) == pytest.approx(2.0)
    # the mean is ln(Λ_h / λ₀): λ_h scales with λ₀, and is 0 below λ₀
    assert host_multiplier(5.0, LogMean(math.log(3.0), 3)) == pytest.approx(10.0)
    assert host_multiplier(5.0, LogMean(math.log(0.5), 3)) == 0.0


@pytest.mark.parametrize("unit_s", [1e-6, 1.0, 86_400.0])
def test_dispatch_gated_holds_in_any_time_unit(unit_s: float) -> None:
    """The same dispatches, timed in µs, s or days, classify the same."""
    delay, gate = 10.0 * unit_s, 1_000.0 * unit_s
    for due, now, held in [
        (0.0, 1_000.0, True),  # at the opening
        (0.0, 1_004.9, True),  # 0.49 crawl delays after it
        (0.0, 1_005.1, False),  # 0.51: the budget held it, not the host
        (999.0, 1_003.0, True),
        (1_000.0, 1_003.0, False),  # due when the gate opened
        (1_002.0, 1_003.0, False),  # due after it
        (1_004.0, 1_003.0, False),  # not due yet (dispatched ahead)
    ]:
        assert dispatch_gated(due * unit_s, gate, now * unit_s, delay) is held, (due, now)


def test_host_observation() -> None:
    assert host_observation(math.log(6.0), True, math.log(2.0)) == pytest.approx(math.log(3.0))
    assert host_observation(math.log(6.0), False, math.log(2.0)) == 0.0
    assert host_observation(math.log(6.0), True, None) is None
    assert host_observation(-math.inf, True, 0.0) is None


def test_tracker_config_validates() -> None:
    with pytest.raises(ParameterError, match="window"):
        TrackerConfig(window=0.5)
    with pytest.raises(ParameterError, match="clip"):
        TrackerConfig(clip=0)
