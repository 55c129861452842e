"""How long a host asked to be left alone: the ``Retry-After`` header of a response.

Source: RFC 9110, section 10.2.3 ("Retry-After"): either a delay in seconds or an
HTTP date.
"""

from __future__ import annotations

import time
from email.utils import parsedate_to_datetime

__all__ = ["retry_after_s"]


def retry_after_s(value: bytes | None, now: float | None = None) -> float | None:
    """The delay a ``Retry-After`` header asks for, in wall seconds (≥ 0).

    Parameters
    ----------
    value : bytes or None
        The header's raw value (``None`` when absent).
    now : float, optional
        The current Unix time (s) an HTTP date is measured from; ``time.time()``
        when not given.

    Returns
    -------
    float or None
        Seconds to wait, or None when the header is absent or unreadable (the
        service then backs the host off exponentially).

    Examples
    --------
    >>> retry_after_s(b"120")
    120.0
    >>> retry_after_s(b"Wed, 21 Oct 2015 07:28:00 GMT", now=1445412470.0)
    10.0
    >>> retry_after_s(b"Wed, 21 Oct 2015 07:28:00 GMT", now=1445412490.0)
    0.0
    >>> retry_after_s(b"soon") is None, retry_after_s(None) is None
    (True, True)
    """
    if value is None:
        return None
    text = value.decode("latin-1").strip()
    if text.isdigit():
        return float(text)
    try:
        when = parsedate_to_datetime(text)
    except (TypeError, ValueError):
        return None
    if when.tzinfo is None:  # RFC 9110 dates are GMT
        return None
    return max(0.0, when.timestamp() - (time.time() if now is None else now))
