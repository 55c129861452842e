"""When a URL becomes due: the threshold form of the crawl decision.

``MATH.md``, "From values to decisions" ("Due time"): with threshold
Λ = λ₀ + λ_h, a URL is due when its effective elapsed time reaches
ι(Λ) = V⁻¹(Λ), i.e. at ``t_last_crawl + ι − β·n``.  This is what a sorted set
indexes.
"""

from __future__ import annotations

import enum
import math

__all__ = ["DueCause", "due_time", "due_time_and_cause", "value_due_time"]


class DueCause(enum.StrEnum):
    """Which rule of :func:`due_time` set a URL's due time."""

    REGISTERED = "registered"  #: never crawled: due from its registration
    VALUE = "value"  #: its crawl value reaches the threshold, t_last + ι − β·n
    REVISIT_CAP = "revisit_cap"  #: the revisit cap comes before the value's due time
    NOT_WORTH = "not_worth"  #: ι = ∞ (W/Δ ≤ Λ): only the revisit cap brings it back


def due_time(
    *,
    last_crawl_at: float | None,
    registered_at: float,
    threshold_s: float,
    signal_time_equivalent_s: float,
    signals_since_crawl: int,
    last_signal_at: float | None,
    max_revisit_s: float,
) -> float:
    """Time (Unix s) at which a URL's crawl value reaches its threshold.

    Parameters
    ----------
    last_crawl_at : float or None
        Fetch time of the last successful crawl, s; ``None`` if never crawled
        (then the URL is due at ``registered_at``).
    registered_at : float
        Registration time, s.
    threshold_s : float
        ι = V⁻¹(Λ), s; ``inf`` when the optimum abandons the URL (W/Δ ≤ Λ).
    signal_time_equivalent_s : float
        β, s (0: signals carry no information; ``inf``: a signal proves a change).
    signals_since_crawl : int
        n, signals counted since the last crawl (after the delayed-signal rule).
    last_signal_at : float or None
        Event time of the latest counted signal, s.
    max_revisit_s : float
        Cap on the revisit interval, s: every URL is revisited at least this often
        (a product choice; the optimum would abandon pages with W/Δ ≤ Λ).

    Returns
    -------
    float
        The due time, s (may lie in the past: the URL is overdue).

    Examples
    --------
    >>> due_time(last_crawl_at=100.0, registered_at=0.0, threshold_s=50.0,
    ...          signal_time_equivalent_s=10.0, signals_since_crawl=2,
    ...          last_signal_at=120.0, max_revisit_s=1e6)
    130.0
    """
    return due_time_and_cause(
        last_crawl_at=last_crawl_at,
        registered_at=registered_at,
        threshold_s=threshold_s,
        signal_time_equivalent_s=signal_time_equivalent_s,
        signals_since_crawl=signals_since_crawl,
        last_signal_at=last_signal_at,
        max_revisit_s=max_revisit_s,
    )[0]


def due_time_and_cause(
    *,
    last_crawl_at: float | None,
    registered_at: float,
    threshold_s: float,
    signal_time_equivalent_s: float,
    signals_since_crawl: int,
    last_signal_at: float | None,
    max_revisit_s: float,
) -> tuple[float, DueCause]:
    """:func:`due_time` and the rule that set it (parameters as there).

    Returns
    -------
    due_at : float
        The due time, Unix s.
    cause : DueCause
        ``REGISTERED`` (never crawled), ``VALUE`` (t_last + ι − β·n, at or before
        the cap), ``REVISIT_CAP`` (the cap, before a finite value due time) or
        ``NOT_WORTH`` (the cap, ι = ∞).

    Examples
    --------
    >>> due_time_and_cause(last_crawl_at=100.0, registered_at=0.0, threshold_s=float("inf"),
    ...                    signal_time_equivalent_s=0.0, signals_since_crawl=0,
    ...                    last_signal_at=None, max_revisit_s=1e3)
    (1100.0, <DueCause.NOT_WORTH: 'not_worth'>)
    """
    if last_crawl_at is None:
        return registered_at, DueCause.REGISTERED
    uncapped = value_due_time(
        last_crawl_at=last_crawl_at,
        threshold_s=threshold_s,
        signal_time_equivalent_s=signal_time_equivalent_s,
        signals_since_crawl=signals_since_crawl,
        last_signal_at=last_signal_at,
    )
    cap = last_crawl_at + max_revisit_s
    if math.isinf(uncapped):
        return cap, DueCause.NOT_WORTH
    if uncapped <= cap:
        return uncapped, DueCause.VALUE
    return cap, DueCause.REVISIT_CAP


def value_due_time(
    *,
    last_crawl_at: float,
    threshold_s: float,
    signal_time_equivalent_s: float,
    signals_since_crawl: int,
    last_signal_at: float | None,
) -> float:
    """When a crawled URL's value reaches its threshold, ignoring the revisit cap (Unix s).

    ``t_last + ι − β·n``; the latest signal's time when β = ∞ and n > 0; ``inf``
    when ι = ∞.  Parameters as in :func:`due_time`.  A URL whose value due time
    lies beyond ``t_last + max_revisit_s`` is due by the cap alone.

    Examples
    --------
    >>> value_due_time(last_crawl_at=100.0, threshold_s=50.0, signal_time_equivalent_s=10.0,
    ...                signals_since_crawl=2, last_signal_at=120.0)
    130.0
    """
    if math.isinf(threshold_s):
        return math.inf
    if signals_since_crawl > 0 and math.isinf(signal_time_equivalent_s):
        return last_signal_at if last_signal_at is not None else last_crawl_at
    shift = signal_time_equivalent_s * signals_since_crawl if signals_since_crawl else 0.0
    return last_crawl_at + threshold_s - shift
