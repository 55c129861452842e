"""The event routes' request bodies decoded by msgspec: the fast path of the schemas.

:mod:`service.schemas` (pydantic) states what ``POST /signal``, ``/click`` and
``/crawl-result`` accept and words every refusal.  Validating a batch of a thousand
events with it costs several µs per event; decoding it with msgspec and checking the
bounds on columns costs a fraction of that.  The decoders here accept a subset of what
the pydantic models accept, with the same values (canonical URLs, floats for times,
field order kept), and return None for anything else: the route then validates the
body with the models, so every refusal is theirs, word for word.  The equivalence is
tested on seeded mutations of valid bodies (``tests/security/test_event_bodies.py``).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

import msgspec
import numpy as np

from service.schemas import MAX_TIMESTAMP
from service.urls import MAX_URL_LENGTH, all_canonical, canonical_url

__all__ = [
    "ClickRow",
    "CrawlResultRow",
    "SignalRow",
    "decode_clicks",
    "decode_results",
    "decode_signals",
]

#: Longest ``source`` and ``lease_id`` the models accept, characters.
_SOURCE_CHARS = 128
_LEASE_CHARS = 64


class _Row(msgspec.Struct, forbid_unknown_fields=True, gc=False):
    """An event as decoded; its fields are the model's, in the model's order."""


class SignalRow(_Row):
    """:class:`~service.schemas.SignalIn`, decoded."""

    url: str
    time: float
    source: str | None = None


class ClickRow(_Row):
    """:class:`~service.schemas.ClickIn`, decoded."""

    url: str
    time: float


class CrawlResultRow(_Row):
    """:class:`~service.schemas.CrawlResultIn`, decoded."""

    url: str
    lease_id: str
    fetched_at: float
    status: int = 200
    changed: bool | None = None
    retry_after_s: float | None = None
    redirect_to: str | None = None
    refetch_after: float | None = None
    retire: bool = False


class _Signals(msgspec.Struct, forbid_unknown_fields=True, gc=False):
    signals: list[SignalRow]


class _Clicks(msgspec.Struct, forbid_unknown_fields=True, gc=False):
    clicks: list[ClickRow]


class _Results(msgspec.Struct, forbid_unknown_fields=True, gc=False):
    results: list[CrawlResultRow]


_SIGNALS = msgspec.json.Decoder(_Signals)
_CLICKS = msgspec.json.Decoder(_Clicks)
_RESULTS = msgspec.json.Decoder(_Results)


def _decode(decoder: msgspec.json.Decoder[Any], body: bytes) -> Any:
    try:
        return decoder.decode(body)
    except (msgspec.DecodeError, ValueError):  # ValueError: msgspec's own, on odd numbers
        return None


def _times_ok(times: np.ndarray) -> bool:
    """Every time a :data:`~service.schemas.Timestamp`: finite, in [0, 1e11]."""
    return bool(np.all((times >= 0) & (times <= MAX_TIMESTAMP)))  # NaN fails both


def _urls_ok(rows: Sequence[SignalRow | ClickRow | CrawlResultRow]) -> bool:
    """Every URL a :data:`~service.schemas.Url`; each row's URL made canonical."""
    if all_canonical([row.url for row in rows]):
        return True
    for row in rows:
        url = row.url
        if not 0 < len(url) <= MAX_URL_LENGTH:
            return False
        try:
            row.url = canonical_url(url)
        except ValueError:
            return False
    return True


def _events(rows: Sequence[SignalRow | ClickRow]) -> bool:
    if not rows or not _urls_ok(rows):
        return False
    times = np.fromiter((r.time for r in rows), dtype=np.float64, count=len(rows))
    return _times_ok(times)


def decode_signals(body: bytes) -> list[SignalRow] | None:
    """The signals of a ``POST /signal`` body, or None unless
    :class:`~service.schemas.SignalsIn` accepts it (the models then word why not).

    Examples
    --------
    >>> decode_signals(b'{"signals": [{"url": "HTTPS://A.example", "time": 5}]}')
    [SignalRow(url='https://a.example/', time=5.0, source=None)]
    >>> decode_signals(b'{"signals": [{"url": "https://a.example/", "time": -1}]}') is None
    True
    """
    decoded = _decode(_SIGNALS, body)
    if decoded is None:
        return None
    rows: list[SignalRow] = decoded.signals
    if not _events(rows):
        return None
    if any(r.source is not None and len(r.source) > _SOURCE_CHARS for r in rows):
        return None
    return rows


def decode_clicks(body: bytes) -> list[ClickRow] | None:
    """The clicks of a ``POST /click`` body, or None unless
    :class:`~service.schemas.ClicksIn` accepts it."""
    decoded = _decode(_CLICKS, body)
    if decoded is None:
        return None
    rows: list[ClickRow] = decoded.clicks
    return rows if _events(rows) else None


def _optional_in_range(values: Sequence[float | None]) -> bool:
    return all(
        v is None or (math.isfinite(v) and 0 <= v <= MAX_TIMESTAMP) for v in values
    )  # fmt: skip


def decode_results(body: bytes) -> list[CrawlResultRow] | None:
    """The results of a ``POST /crawl-result`` body, or None unless
    :class:`~service.schemas.CrawlResultsIn` accepts it."""
    decoded = _decode(_RESULTS, body)
    if decoded is None:
        return None
    rows: list[CrawlResultRow] = decoded.results
    if not rows or not _urls_ok(rows):
        return None
    fetched = np.fromiter((r.fetched_at for r in rows), dtype=np.float64, count=len(rows))
    if not _times_ok(fetched):
        return None
    for r in rows:
        if not (0 < len(r.lease_id) <= _LEASE_CHARS and 0 <= r.status <= 599):
            return None
        if r.redirect_to is not None:
            if not 0 < len(r.redirect_to) <= MAX_URL_LENGTH:
                return None
            try:
                r.redirect_to = canonical_url(r.redirect_to)
            except ValueError:
                return None
    if not _optional_in_range([r.retry_after_s for r in rows]):
        return None
    return rows if _optional_in_range([r.refetch_after for r in rows]) else None
