"""The refetch schedulers of Apache Nutch and Apache StormCrawler, as reference policies.

Each is a :class:`~scheduler_core.policies.frontier.RefetchPolicy` (due URLs
served most overdue first, idle capacity when none is due, our politeness,
signals make a URL due) with the scheduler's own rule for the next refetch
date, its defaults as shipped, in seconds:

``nutch-adaptive`` — Nutch 1.x ``AdaptiveFetchSchedule`` (``nutch-default.xml``:
    ``db.fetch.interval.default`` 30 days, ``db.fetch.schedule.adaptive.*``:
    inc_rate 0.4, dec_rate 0.2, min_interval 60 s, max_interval 365 days,
    sync_delta true, sync_delta_rate 0.3).  After a fetch that found the page
    changed the interval shrinks by (1 − dec_rate) and the change time
    becomes the fetch time; unchanged, it grows by (1 + inc_rate).  With sync
    delta, δ = fetch time − last change time: the interval is at least δ and
    the next fetch is counted from fetch time − sync_delta_rate·δ.  The
    interval is then clamped to [min, max].  A failed fetch is retried a day
    later (``setPageRetrySchedule``); after ``db.fetch.retry.max`` = 3 in a
    row the page-gone schedule applies (interval × 1.5, at most 0.9 ×
    ``db.fetch.interval.max`` = 90 days).
``stormcrawler-adaptive`` — StormCrawler ``AdaptiveScheduler`` (rate.incr and
    rate.decr 0.5, fetchInterval.min 60 min, fetchInterval.max 2 weeks,
    fetchInterval.default 1 day).  Changed: interval ← (1 − dec)·interval +
    dec·min (it approaches the minimum); unchanged: interval ← min(max,
    interval·(1 + inc)).  A failed fetch is ``FETCH_ERROR``: retried after
    ``fetchInterval.fetch.error`` = 2 hours with the adaptive state reset (the
    next successful fetch starts again from the default interval, as the
    scheduler drops its metadata); the third in a row makes it ``ERROR``,
    never fetched again (``fetchInterval.error`` = −1).
``fixed-interval`` — StormCrawler's ``DefaultScheduler`` (URLFrontier's plain
    use): every fetch is followed by another ``fetchInterval.default`` = 1 day
    later; errors as above.

``-tuned`` variants start every URL (and StormCrawler's default interval) at
URLs ÷ budget, m / R, the best single fixed interval.

Simplifications, each in the anchors' favour or without effect here: intervals
are real numbers (StormCrawler keeps whole minutes, Nutch whole seconds);
Nutch's forced refetch of pages whose interval passes ``db.fetch.interval.max``
(90 days) is left out (from the 30-day start it takes four unchanged fetches,
at least 213 days); an offset of the sync delta beyond the maximum interval is
scaled to sync_delta_rate × max (Nutch's integer arithmetic makes it 0; it
needs δ > 3 years).

References
----------
Apache Nutch ``src/java/org/apache/nutch/crawl/AdaptiveFetchSchedule.java``,
``AbstractFetchSchedule.java``, ``CrawlDbReducer.java``, ``conf/nutch-default.xml``;
Apache StormCrawler ``core/.../persistence/AdaptiveScheduler.java``,
``DefaultScheduler.java``, ``AbstractStatusUpdaterBolt.java``,
``crawler-default.yaml``; ``docs/worlds.md``, "The anchors".
"""

from __future__ import annotations

import numpy as np

from scheduler_core.errors import ParameterError
from scheduler_core.params import FloatArray
from scheduler_core.policies.base import BoolArray, IntArray
from scheduler_core.policies.frontier import RefetchPolicy

__all__ = [
    "FixedIntervalPolicy",
    "NutchAdaptivePolicy",
    "StormCrawlerAdaptivePolicy",
    "nutch_adaptive_update",
    "stormcrawler_adaptive_update",
]

_MINUTE_S, _HOUR_S, _DAY_S = 60.0, 3_600.0, 86_400.0


def nutch_adaptive_update(
    now: float,
    interval_s: FloatArray,
    modified_s: FloatArray,
    changed: BoolArray,
    *,
    inc_rate: float = 0.4,
    dec_rate: float = 0.2,
    min_interval_s: float = 60.0,
    max_interval_s: float = 365 * _DAY_S,
    sync_delta: bool = True,
    sync_delta_rate: float = 0.3,
) -> tuple[FloatArray, FloatArray, FloatArray]:
    """Nutch's ``AdaptiveFetchSchedule.setFetchSchedule`` after fetches at ``now``.

    Parameters
    ----------
    now : float
        Fetch time, s.
    interval_s : ndarray, shape (k,)
        Refetch intervals before the fetch, s.
    modified_s : ndarray, shape (k,)
        Time of the last fetch that found each page changed, s (NaN: none yet,
        Nutch's modified time 0, which counts as the fetch time).
    changed : ndarray of bool, shape (k,)
        Whether the fetch found the page changed (signature comparison).
    inc_rate, dec_rate, min_interval_s, max_interval_s, sync_delta, sync_delta_rate
        ``db.fetch.schedule.adaptive.*`` (intervals in s).

    Returns
    -------
    interval_s, next_fetch_s, modified_s : ndarray, shape (k,)
        New intervals (s), refetch dates (s) and last-change times (s).

    Examples
    --------
    >>> day = 86_400.0
    >>> i, due, mod = nutch_adaptive_update(
    ...     100 * day, np.array([30 * day, 30 * day]), np.array([np.nan, 90 * day]),
    ...     np.array([False, False]))
    >>> (i / day).round(2).tolist(), (due / day).round(2).tolist()
    ([42.0, 42.0], [142.0, 139.0])
    """
    interval = np.where(changed, interval_s * (1.0 - dec_rate), interval_s * (1.0 + inc_rate))
    modified = np.where(changed, now, modified_s)
    reference = np.full(interval.shape, float(now))
    if sync_delta:
        delta = np.where(np.isnan(modified), 0.0, now - modified)
        interval = np.maximum(interval, delta)
        offset = sync_delta_rate * delta
        offset = np.where(offset > max_interval_s, sync_delta_rate * max_interval_s, offset)
        reference = now - offset
    interval = np.clip(interval, min_interval_s, max_interval_s)
    return interval, reference + interval, modified


def stormcrawler_adaptive_update(
    interval_s: FloatArray,
    changed: BoolArray,
    *,
    inc_rate: float = 0.5,
    dec_rate: float = 0.5,
    min_interval_s: float = 60 * _MINUTE_S,
    max_interval_s: float = 14 * _DAY_S,
) -> FloatArray:
    """StormCrawler's ``AdaptiveScheduler`` interval after a fetch, shape (k,), s.

    Changed: (1 − dec)·interval + dec·min; unchanged: min(max, (1 + inc)·interval).
    The next fetch is the fetch time plus this interval.

    Examples
    --------
    >>> hour = 3_600.0
    >>> (stormcrawler_adaptive_update(np.array([24 * hour, 24 * hour]),
    ...                               np.array([True, False])) / hour).tolist()
    [12.5, 36.0]
    """
    grown = np.minimum(interval_s * (1.0 + inc_rate), max_interval_s)
    shrunk = (1.0 - dec_rate) * interval_s + dec_rate * min_interval_s
    return np.asarray(np.where(changed, shrunk, grown), dtype=np.float64)


def _positive(**values: float) -> None:
    for name, value in values.items():
        if not (np.isfinite(value) and value > 0):
            raise ParameterError(f"`{name}` must be finite and > 0")


def _rates(inc_rate: float, dec_rate: float, sync_delta_rate: float = 0.0) -> None:
    if not (np.isfinite(inc_rate) and inc_rate >= 0):
        raise ParameterError("`inc_rate` must be finite and >= 0")
    if not 0 <= dec_rate <= 1:
        raise ParameterError("`dec_rate` must lie in [0, 1]")
    if not 0 <= sync_delta_rate <= 1:
        raise ParameterError("`sync_delta_rate` must lie in [0, 1]")


class NutchAdaptivePolicy(RefetchPolicy):
    """Nutch 1.x ``AdaptiveFetchSchedule`` on a URL frontier (module docstring).

    Parameters
    ----------
    seed : int
        Seed of the first refetch dates.
    tuned : bool
        Start every URL at m / R instead of ``initial_interval_s``.
    initial_interval_s : float
        ``db.fetch.interval.default``, s (30 days).
    inc_rate, dec_rate : float
        0.4 and 0.2.
    min_interval_s, max_interval_s : float
        60 s and 365 days.
    sync_delta : bool
        True.
    sync_delta_rate : float
        0.3.
    retry_delay_s : float
        Wait after a failed fetch, s (a day).
    retry_max : int
        Failures in a row before the page-gone schedule (3).
    gone_interval_max_s : float
        ``db.fetch.interval.max``, s (90 days): the page-gone interval stays
        below 0.9 × this.
    signals_make_due : bool
        Whether a signal makes its URL due at once.

    Raises
    ------
    ParameterError
        On a non-positive interval, a rate out of range or min > max.
    """

    base_name = "nutch-adaptive"

    def __init__(
        self,
        *,
        seed: int = 0,
        tuned: bool = False,
        initial_interval_s: float = 30 * _DAY_S,
        inc_rate: float = 0.4,
        dec_rate: float = 0.2,
        min_interval_s: float = 60.0,
        max_interval_s: float = 365 * _DAY_S,
        sync_delta: bool = True,
        sync_delta_rate: float = 0.3,
        retry_delay_s: float = _DAY_S,
        retry_max: int = 3,
        gone_interval_max_s: float = 90 * _DAY_S,
        signals_make_due: bool = True,
    ) -> None:
        super().__init__(
            seed=seed,
            initial_interval_s=initial_interval_s,
            tuned=tuned,
            signals_make_due=signals_make_due,
        )
        _positive(
            min_interval_s=min_interval_s,
            max_interval_s=max_interval_s,
            retry_delay_s=retry_delay_s,
            gone_interval_max_s=gone_interval_max_s,
        )
        _rates(inc_rate, dec_rate, sync_delta_rate)
        if min_interval_s > max_interval_s:
            raise ParameterError("`min_interval_s` must be <= `max_interval_s`")
        if retry_max < 1:
            raise ParameterError("`retry_max` must be >= 1")
        self.inc_rate, self.dec_rate = float(inc_rate), float(dec_rate)
        self.min_interval_s, self.max_interval_s = float(min_interval_s), float(max_interval_s)
        self.sync_delta, self.sync_delta_rate = bool(sync_delta), float(sync_delta_rate)
        self.retry_delay_s = float(retry_delay_s)
        self.retry_max = int(retry_max)
        self.gone_interval_max_s = float(gone_interval_max_s)
        self.modified_s: FloatArray = np.empty(0)
        self.failures: IntArray = np.empty(0, dtype=np.int64)

    def start_state(self, m: int) -> None:
        self.modified_s = np.full(m, np.nan)
        self.failures = np.zeros(m, dtype=np.int64)

    def reschedule(self, url: IntArray, now: float, changed: BoolArray) -> None:
        interval, due, modified = nutch_adaptive_update(
            now,
            self.interval_s[url],
            self.modified_s[url],
            changed,
            inc_rate=self.inc_rate,
            dec_rate=self.dec_rate,
            min_interval_s=self.min_interval_s,
            max_interval_s=self.max_interval_s,
            sync_delta=self.sync_delta,
            sync_delta_rate=self.sync_delta_rate,
        )
        self.interval_s[url], self.due_s[url], self.modified_s[url] = interval, due, modified
        self.failures[url] = 0

    def retry(self, url: IntArray, now: float) -> None:
        self.failures[url] += 1
        gone = url[self.failures[url] >= self.retry_max]
        retry = url[self.failures[url] < self.retry_max]
        self.due_s[retry] = now + self.retry_delay_s
        longer = self.interval_s[gone] * 1.5
        cap = 0.9 * self.gone_interval_max_s
        self.interval_s[gone] = np.where(longer < self.gone_interval_max_s, longer, cap)
        self.due_s[gone] = now + self.interval_s[gone]


class _StormCrawlerPolicy(RefetchPolicy):
    """StormCrawler's error handling: FETCH_ERROR retries, ERROR after ``max_fetch_errors``."""

    def __init__(
        self,
        *,
        seed: int,
        tuned: bool,
        default_interval_s: float,
        fetch_error_interval_s: float,
        max_fetch_errors: int,
        signals_make_due: bool,
    ) -> None:
        super().__init__(
            seed=seed,
            initial_interval_s=default_interval_s,
            tuned=tuned,
            signals_make_due=signals_make_due,
        )
        _positive(fetch_error_interval_s=fetch_error_interval_s)
        if max_fetch_errors < 1:
            raise ParameterError("`max_fetch_errors` must be >= 1")
        self.fetch_error_interval_s = float(fetch_error_interval_s)
        self.max_fetch_errors = int(max_fetch_errors)
        self.errors: IntArray = np.empty(0, dtype=np.int64)

    def start_state(self, m: int) -> None:
        self.errors = np.zeros(m, dtype=np.int64)

    def retry(self, url: IntArray, now: float) -> None:
        self.errors[url] += 1
        dropped = self.errors[url] >= self.max_fetch_errors
        self.due_s[url] = np.where(dropped, np.inf, now + self.fetch_error_interval_s)


class StormCrawlerAdaptivePolicy(_StormCrawlerPolicy):
    """StormCrawler's ``AdaptiveScheduler`` on a URL frontier (module docstring).

    Parameters
    ----------
    seed : int
        Seed of the first refetch dates.
    tuned : bool
        Default interval m / R instead of ``default_interval_s``.
    default_interval_s : float
        ``fetchInterval.default``, s (1 day).
    inc_rate, dec_rate : float
        ``scheduler.adaptive.fetchInterval.rate.incr`` / ``.decr`` (0.5, 0.5).
    min_interval_s, max_interval_s : float
        ``scheduler.adaptive.fetchInterval.min`` / ``.max``, s (1 hour, 2 weeks).
    fetch_error_interval_s : float
        ``fetchInterval.fetch.error``, s (2 hours).
    max_fetch_errors : int
        ``max.fetch.errors`` (3): then ``ERROR``, never refetched.
    signals_make_due : bool
        Whether a signal makes its URL due at once.
    """

    base_name = "stormcrawler-adaptive"

    def __init__(
        self,
        *,
        seed: int = 0,
        tuned: bool = False,
        default_interval_s: float = _DAY_S,
        inc_rate: float = 0.5,
        dec_rate: float = 0.5,
        min_interval_s: float = _HOUR_S,
        max_interval_s: float = 14 * _DAY_S,
        fetch_error_interval_s: float = 2 * _HOUR_S,
        max_fetch_errors: int = 3,
        signals_make_due: bool = True,
    ) -> None:
        super().__init__(
            seed=seed,
            tuned=tuned,
            default_interval_s=default_interval_s,
            fetch_error_interval_s=fetch_error_interval_s,
            max_fetch_errors=max_fetch_errors,
            signals_make_due=signals_make_due,
        )
        _positive(min_interval_s=min_interval_s, max_interval_s=max_interval_s)
        _rates(inc_rate, dec_rate)
        if min_interval_s > max_interval_s:
            raise ParameterError("`min_interval_s` must be <= `max_interval_s`")
        self.inc_rate, self.dec_rate = float(inc_rate), float(dec_rate)
        self.min_interval_s, self.max_interval_s = float(min_interval_s), float(max_interval_s)

    def reschedule(self, url: IntArray, now: float, changed: BoolArray) -> None:
        interval = stormcrawler_adaptive_update(
            self.interval_s[url],
            changed,
            inc_rate=self.inc_rate,
            dec_rate=self.dec_rate,
            min_interval_s=self.min_interval_s,
            max_interval_s=self.max_interval_s,
        )
        # After an error the scheduler dropped its metadata: no signature to compare,
        # so the DefaultScheduler's interval applies (and is recorded).
        reset = self.errors[url] > 0
        interval = np.where(reset, self.start_interval_s, interval)
        self.interval_s[url] = interval
        self.due_s[url] = now + interval
        self.errors[url] = 0


class FixedIntervalPolicy(_StormCrawlerPolicy):
    """StormCrawler's ``DefaultScheduler`` (URLFrontier's plain use): refetch every interval.

    Parameters
    ----------
    seed : int
        Seed of the first refetch dates.
    tuned : bool
        Interval m / R instead of ``default_interval_s``.
    default_interval_s : float
        ``fetchInterval.default``, s (1 day).
    fetch_error_interval_s : float
        ``fetchInterval.fetch.error``, s (2 hours).
    max_fetch_errors : int
        ``max.fetch.errors`` (3): then ``ERROR``, never refetched.
    signals_make_due : bool
        Whether a signal makes its URL due at once.
    """

    base_name = "fixed-interval"

    def __init__(
        self,
        *,
        seed: int = 0,
        tuned: bool = False,
        default_interval_s: float = _DAY_S,
        fetch_error_interval_s: float = 2 * _HOUR_S,
        max_fetch_errors: int = 3,
        signals_make_due: bool = True,
    ) -> None:
        super().__init__(
            seed=seed,
            tuned=tuned,
            default_interval_s=default_interval_s,
            fetch_error_interval_s=fetch_error_interval_s,
            max_fetch_errors=max_fetch_errors,
            signals_make_due=signals_make_due,
        )

    def reschedule(self, url: IntArray, now: float, changed: BoolArray) -> None:
        self.due_s[url] = now + self.start_interval_s
        self.errors[url] = 0
