"""Online estimates of the Lagrange multipliers λ₀ (budget) and λ_h (politeness).

``MATH.md``, "Estimating the multipliers online" (blog 002; paper 004 §5): at the
optimum every crawled URL is dispatched when its crawl value reaches
Λ_h = λ₀ + λ_h.  The values observed at dispatch therefore estimate the
thresholds: λ₀ from URLs whose dispatch was not held back by their host's
politeness gate, λ_h from how far above λ₀ the gated dispatches of host h go.

A dispatch counts as held back by politeness (*gated*, :func:`dispatch_gated`) only
when its URL was due before the host's gate opened and it went out within
``BOUND_SLACK`` crawl delays of that opening: the host was busy all along.  A URL
that waited longer than that after the gate opened waited for the global budget,
and its value is evidence about λ₀.

A host's estimate is the running mean of ln(Λ_h / λ₀), the excess of its
threshold over λ₀ (a gated dispatch gives ln V − ln λ₀, any other dispatch of the
host 0), and λ_h = λ₀ · max(0, e^mean − 1) (:func:`host_multiplier`): λ_h moves
with λ₀ at once, where a mean of ln Λ_h would lag it by a host's window.

Estimates are running means of log values: plain means for the first
``window`` observations, then an exponentially weighted mean with rate
``1/window``, each step clipped to ``clip`` (in log units) so that a single
signal-triggered dispatch, whose value jumps to W/Δ, cannot drag the estimate.
Beside the mean, the same weights give the spread of the (clipped) observations,
and so the estimate's own noise: a threshold that moved by less than that
(:func:`drift_tolerance`) is not worth recomputing.
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from dataclasses import dataclass
from typing import NamedTuple

from scheduler_core.errors import ParameterError

__all__ = [
    "BOUND_SLACK",
    "LogMean",
    "TrackerConfig",
    "NOISE_Z",
    "dispatch_gated",
    "drift_tolerance",
    "host_multiplier",
    "host_observation",
    "update_log_mean",
]

#: A dispatch is held back by politeness if it goes out within this many crawl delays
#: of its host's gate opening (and its URL was due before that).  The Redis store's
#: ``lease.lua`` holds the same constant.
BOUND_SLACK = 0.5
#: A drift of Λ within this many standard errors of λ₀'s estimate is its noise
#: (:func:`drift_tolerance`).
NOISE_Z = 2.0


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


class LogMean(NamedTuple):
    """A running mean of log values: ``exp(log_mean)`` estimates a multiplier.

    ``count`` observations have been taken; ``log_mean`` is ``None`` before the
    first.  ``var`` is the observations' spread around the mean under the same
    weights (log units squared; 0 before the second).  Immutable; a named tuple, as
    one is made per dispatched URL (its host's estimate) and a tuple is the cheapest
    immutable record to make.
    """

    log_mean: float | None = None
    count: float = 0.0  # type: ignore[assignment]  # (shadows tuple.count, unused here)
    var: float = 0.0

    @property
    def value(self) -> float | None:
        """The estimate in value units (weighted fresh requests per crawl), or None."""
        return None if self.log_mean is None else math.exp(self.log_mean)

    def stderr(self, config: TrackerConfig) -> float:
        """Standard error of ``log_mean`` (log units): var/n for the plain mean of the
        first n ≤ window observations, var/(2·window − 1) for the exponentially
        weighted one after; 0 before any.

        Examples
        --------
        >>> LogMean(0.0, 4.0, 1.0).stderr(TrackerConfig(window=64))
        0.5
        >>> round(LogMean(0.0, 1000.0, 1.27).stderr(TrackerConfig(window=64)), 6)
        0.1
        """
        if self.count <= 0:
            return 0.0
        if self.count <= config.window:
            return math.sqrt(self.var / self.count)
        return math.sqrt(self.var / (2.0 * config.window - 1.0))


def update_log_mean(state: LogMean, log_values: Iterable[float], config: TrackerConfig) -> LogMean:
    """Fold observations (natural logs of crawl values) into a running log mean.

    Each observation x moves the mean by a = 1/min(count, window) of its step
    d = x − mean (clipped to ``clip`` once past the window) and the spread to
    (1 − a)(var + a·d²): the plain mean and variance over the first ``window``
    observations, exponentially weighted ones after.

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
    >>> s.log_mean, s.count, s.var
    (1.0, 2.0, 1.0)
    """
    mean, count, var = state
    window, clip, isfinite = config.window, config.clip, math.isfinite
    for x in log_values:
        if not isfinite(x):
            continue
        count += 1.0
        if mean is None:
            mean = x
            continue
        step = x - mean
        if count > window:  # clipped to [−clip, clip]
            step = clip if step > clip else -clip if step < -clip else step
        w = count if count < window else window
        mean += step / w
        var = (1.0 - 1.0 / w) * (var + step * step / w)  # as lib.lua's fold
    return LogMean(mean, count, var)


def drift_tolerance(tolerance: float, lambda0: LogMean, config: TrackerConfig) -> float:
    """The relative drift of a threshold Λ worth recomputing its URLs for: ``tolerance``
    (> 0), or λ₀'s own noise when that is larger, exp(NOISE_Z · stderr) − 1.

    λ₀ is a running mean of ln V at dispatch; when values span decades and many URLs
    go out between passes, it moves by more than a fixed tolerance from pass to pass
    on noise alone, and every host's thresholds would be recomputed every pass for
    nothing.  Unit-free: it depends on log values and counts only.

    Parameters
    ----------
    tolerance : float
        The operator's least relative drift (``rescore_tolerance``).
    lambda0 : LogMean
        λ₀'s estimate (:func:`update_log_mean`).
    config : TrackerConfig
        Its window.

    Returns
    -------
    float
        Relative drift (> 0).

    Raises
    ------
    ParameterError
        If ``tolerance`` is not positive.

    References
    ----------
    MATH.md, "Estimating the multipliers online"; docs/operations.md, "The rescorer".

    Examples
    --------
    >>> drift_tolerance(0.05, LogMean(0.0, 10.0, 0.0), TrackerConfig(window=64))
    0.05
    >>> round(drift_tolerance(0.05, LogMean(0.0, 1000.0, 1.27), TrackerConfig(window=64)), 4)
    0.2214
    """
    if not tolerance > 0:
        raise ParameterError("`tolerance` must be > 0")
    return max(tolerance, math.expm1(NOISE_Z * lambda0.stderr(config)))


def dispatch_gated(url_due: float, gate_at: float, now: float, crawl_delay: float) -> bool:
    """Whether a dispatch was held back by its host's politeness gate.

    Parameters
    ----------
    url_due : float
        When the URL became due (any time unit, the same for all four arguments).
    gate_at : float
        When the host's gate opened, before this dispatch moved it (≤ ``now``).
    now : float
        The dispatch time.
    crawl_delay : float
        The host's crawl delay (> 0).

    Returns
    -------
    bool
        True when the URL was due before the gate opened and goes out within
        ``BOUND_SLACK`` crawl delays of the opening: its host, not the budget,
        held it back, and its value at dispatch measures Λ_h = λ₀ + λ_h.

    References
    ----------
    MATH.md, "Estimating the multipliers online".

    Examples
    --------
    >>> dispatch_gated(0.0, 10.0, 10.4, 1.0), dispatch_gated(0.0, 10.0, 10.6, 1.0)
    (True, False)
    >>> dispatch_gated(10.0, 10.0, 10.0, 1.0)  # due when the gate opened: not held back
    False
    """
    return url_due <= now and url_due < gate_at and now - gate_at <= BOUND_SLACK * crawl_delay


def host_observation(log_value: float, gated: bool, log_lambda0: float | None) -> float | None:
    """What a dispatch adds to its host's mean of ln(Λ_h / λ₀).

    Parameters
    ----------
    log_value : float
        ln V of the dispatched URL (V in value units).
    gated : bool
        Whether the dispatch was held back by politeness (:func:`dispatch_gated`).
    log_lambda0 : float or None
        ln λ₀ after this batch's ungated values were folded in; None before any.

    Returns
    -------
    float or None
        ln V − ln λ₀ for a gated dispatch, 0 for any other (the host's threshold is
        λ₀'s), None when there is nothing to add (no λ₀ yet, or a non-finite value).

    Examples
    --------
    >>> x = host_observation(math.log(8.0), True, math.log(2.0))
    >>> round(math.exp(x or 0.0), 12)
    4.0
    >>> host_observation(math.log(8.0), False, math.log(2.0)), host_observation(1.0, True, None)
    (0.0, None)
    """
    if log_lambda0 is None or not math.isfinite(log_lambda0):
        return None
    if not gated:
        return 0.0
    x = log_value - log_lambda0
    return x if math.isfinite(x) else None


def host_multiplier(lambda0: float | None, host_estimate: LogMean) -> float:
    """λ_h = λ₀ · max(0, exp(host log mean) − 1): how far a host's threshold sits above λ₀.

    The host's estimate is the mean of ln(Λ_h / λ₀) (:func:`host_observation`).
    Returns 0 while either estimate is missing.

    Examples
    --------
    >>> round(host_multiplier(2.0, LogMean(math.log(2.5), 10)), 12)
    3.0
    >>> host_multiplier(2.0, LogMean(math.log(0.5), 10))
    0.0
    """
    if lambda0 is None or host_estimate.log_mean is None:
        return 0.0
    return lambda0 * max(0.0, math.expm1(host_estimate.log_mean))
