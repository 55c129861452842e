"""Online estimates of the Lagrange multipliers λ₀ (budget) and λ_h (politeness).

``MATH.md``, "Estimating the multipliers online" (blog 002; paper 004 §5): at the
optimum every crawled URL is dispatched when its crawl value reaches
Λ_h = λ₀ + λ_h.  The values observed at dispatch therefore estimate the
thresholds: λ₀ from URLs whose dispatch was not held back by their host's
politeness gate, λ_h from how far above λ₀ the gated dispatches of host h go.

Estimates are running means of log values: plain means for the first
``window`` observations, then an exponentially weighted mean with rate
``1/window``, each step clipped to ``clip`` (in log units) so that a single
signal-triggered dispatch, whose value jumps to W/Δ, cannot drag the estimate.
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from dataclasses import dataclass

from scheduler_core.errors import ParameterError

__all__ = ["LogMean", "TrackerConfig", "host_multiplier", "update_log_mean"]


@dataclass(frozen=True, slots=True)
class TrackerConfig:
    """How fast the multiplier estimates move.

    Attributes
    ----------
    window : float
        Effective number of dispatches in the exponential window (≥ 1).
    clip : float
        Largest change of the log estimate one observation may cause, before
        the rate is applied (> 0).
    """

    window: float = 64.0
    clip: float = 2.0

    def __post_init__(self) -> None:
        if not self.window >= 1.0:
            raise ParameterError("`window` must be >= 1")
        if not self.clip > 0.0:
            raise ParameterError("`clip` must be > 0")


@dataclass(frozen=True, slots=True)
class LogMean:
    """A running mean of log values: ``exp(log_mean)`` estimates a multiplier.

    ``count`` observations have been taken; ``log_mean`` is ``None`` before the
    first.
    """

    log_mean: float | None = None
    count: float = 0.0

    @property
    def value(self) -> float | None:
        """The estimate in value units (weighted fresh requests per crawl), or None."""
        return None if self.log_mean is None else math.exp(self.log_mean)


def update_log_mean(state: LogMean, log_values: Iterable[float], config: TrackerConfig) -> LogMean:
    """Fold observations (natural logs of crawl values) into a running log mean.

    Parameters
    ----------
    state : LogMean
        Current estimate.
    log_values : iterable of float
        ln V of dispatched URLs, in dispatch order; non-finite entries are skipped.
    config : TrackerConfig
        Window and clip.

    Returns
    -------
    LogMean
        The updated estimate.

    Examples
    --------
    >>> s = update_log_mean(LogMean(), [0.0, 2.0], TrackerConfig(window=4, clip=1))
    >>> s.log_mean, s.count
    (1.0, 2.0)
    """
    mean, count = state.log_mean, state.count
    for x in log_values:
        if not math.isfinite(x):
            continue
        count += 1.0
        if mean is None:
            mean = x
            continue
        step = x - mean
        if count > config.window:
            step = max(-config.clip, min(config.clip, step))
        mean += step / min(count, config.window)
    return LogMean(mean, count)


def host_multiplier(lambda0: float | None, host_estimate: LogMean) -> float:
    """λ_h = max(0, exp(host log mean) − λ₀): how far a host's threshold sits above λ₀.

    Returns 0 while either estimate is missing.

    Examples
    --------
    >>> round(host_multiplier(2.0, LogMean(math.log(5.0), 10)), 12)
    3.0
    >>> host_multiplier(2.0, LogMean(math.log(1.0), 10))
    0.0
    """
    if lambda0 is None or host_estimate.log_mean is None:
        return 0.0
    return max(0.0, math.exp(host_estimate.log_mean) - lambda0)
