"""Numbers for people: ISO 8601 times, durations like "3 h 12 min", rates per day.

The API keeps its numbers (Unix s, s, 1/s); these forms go beside them.
"""

from __future__ import annotations

import math
from datetime import UTC, datetime

__all__ = ["DAY_S", "duration", "iso_time", "per_day", "relative"]

DAY_S = 86_400.0
_UNITS = (("d", 86_400.0), ("h", 3_600.0), ("min", 60.0), ("s", 1.0))


def iso_time(t: float | None) -> str | None:
    """Unix s as ISO 8601 in UTC to the second (``2026-03-01T12:00:00Z``); None stays
    None, and a time no calendar holds (infinite, or past year 9999) reads ``never``.

    Examples
    --------
    >>> iso_time(1_700_000_000.4)
    '2023-11-14T22:13:20Z'
    >>> iso_time(float("inf"))
    'never'
    """
    if t is None:
        return None
    try:
        moment = datetime.fromtimestamp(round(t), tz=UTC)
    except (OverflowError, ValueError, OSError):
        return "never"
    return moment.strftime("%Y-%m-%dT%H:%M:%SZ")


def duration(seconds: float | None) -> str | None:
    """A non-negative duration in its two largest units: ``3 h 12 min``, ``2 d 4 h``,
    ``45 s``; below a second in ms; ``forever`` when infinite; None stays None.
    The sign is dropped (see :func:`relative`).

    Examples
    --------
    >>> duration(11_520.0), duration(187_200.0), duration(45.2), duration(0.25)
    ('3 h 12 min', '2 d 4 h', '45 s', '250 ms')
    >>> duration(3600.0), duration(float("inf"))
    ('1 h', 'forever')
    """
    if seconds is None:
        return None
    s = abs(seconds)
    if math.isinf(s):
        return "forever"
    if s < 1.0:
        return f"{s * 1e3:.0f} ms"
    whole = round(s)
    parts: list[tuple[int, str]] = []
    for name, size in _UNITS:
        count = int(whole // size)
        if count or parts:
            parts.append((count, name))
            whole -= int(count * size)
        if len(parts) == 2:
            break
    return " ".join(f"{count} {name}" for count, name in parts if count)


def relative(seconds: float) -> str:
    """A time ``seconds`` from now: ``in 3 h 12 min`` or ``5 min ago`` (``now``
    within a second).

    Examples
    --------
    >>> relative(11_520.0), relative(-300.0), relative(0.2)
    ('in 3 h 12 min', '5 min ago', 'now')
    """
    if abs(seconds) < 1.0:
        return "now"
    text = duration(seconds)
    return f"in {text}" if seconds > 0 else f"{text} ago"


def per_day(rate_per_s: float) -> float:
    """A rate per second as a rate per day.

    Examples
    --------
    >>> per_day(1 / 3600)
    24.0
    """
    return rate_per_s * DAY_S
