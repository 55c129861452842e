"""Whether a fetch found new content, and what "now" is on the service's clock."""

from __future__ import annotations

import hashlib
import time
from collections import OrderedDict
from dataclasses import dataclass

__all__ = ["ChangeDetector", "ServiceClock", "Validators"]


@dataclass(frozen=True, slots=True)
class Validators:
    """What identifies a copy: its ETag, Last-Modified and content digest (SHA-256)."""

    etag: str | None
    last_modified: str | None
    digest: bytes


class ChangeDetector:
    """Per URL, the validators of the last copy fetched; decides "changed" for the next.

    A fetch answered ``304 Not Modified`` is unchanged.  A 2xx answer is compared
    with the previous copy by ETag when both have one, else by Last-Modified when
    both have one, else by content digest; with no previous copy (the first fetch
    this process sees) the answer is None: unknown.  Other statuses say nothing.
    At most ``size`` URLs are remembered (least recently fetched forgotten first).

    Examples
    --------
    >>> d = ChangeDetector()
    >>> d.observe("https://a.example/", 200, '"v1"', None, b"one") is None
    True
    >>> d.conditional_headers("https://a.example/")
    {'If-None-Match': '"v1"'}
    >>> d.observe("https://a.example/", 304, None, None, b""), d.observe(
    ...     "https://a.example/", 200, '"v2"', None, b"two")
    (False, True)
    """

    def __init__(self, size: int = 1_000_000) -> None:
        if size < 1:
            raise ValueError("`size` must be >= 1")
        self._size = size
        self._copies: OrderedDict[str, Validators] = OrderedDict()

    def conditional_headers(self, url: str) -> dict[str, str]:
        """``If-None-Match`` / ``If-Modified-Since`` for a refetch of ``url``."""
        copy = self._copies.get(url)
        if copy is None:
            return {}
        headers = {}
        if copy.etag is not None:
            headers["If-None-Match"] = copy.etag
        if copy.last_modified is not None:
            headers["If-Modified-Since"] = copy.last_modified
        return headers

    def observe(
        self, url: str, status: int, etag: str | None, last_modified: str | None, body: bytes
    ) -> bool | None:
        """Record a fetch of ``url``; return whether its content changed (None: unknown)."""
        previous = self._copies.get(url)
        if status == 304:
            if previous is not None:
                self._copies.move_to_end(url)
            return False
        if not 200 <= status < 300:
            return None
        copy = Validators(etag, last_modified, hashlib.sha256(body).digest())
        self._copies[url] = copy
        self._copies.move_to_end(url)
        if len(self._copies) > self._size:
            self._copies.popitem(last=False)
        if previous is None:
            return None
        if copy.etag is not None and previous.etag is not None:
            return copy.etag != previous.etag
        if copy.last_modified is not None and previous.last_modified is not None:
            return copy.last_modified != previous.last_modified
        return copy.digest != previous.digest


class ServiceClock:
    """The service's clock as seen from here: its reading at a known moment and its rate.

    ``now()`` extrapolates from the last :meth:`anchor` (a ``/healthz`` or ``/next``
    answer's ``now``, tied to the moment the answer arrived, so that the estimate
    never leads the service's clock: it lags by the answer's trip times the rate).
    """

    def __init__(self, now: float, rate: float, received_at: float | None = None) -> None:
        if not rate > 0:
            raise ValueError("`rate` must be > 0")
        self.rate = rate
        self._now = now
        self._at = time.monotonic() if received_at is None else received_at

    def anchor(self, now: float, received_at: float) -> None:
        """The service read ``now`` before its answer arrived at ``received_at``
        (monotonic s)."""
        self._now, self._at = now, received_at

    def now(self) -> float:
        """The service's clock now, estimated (Unix s)."""
        return self._now + (time.monotonic() - self._at) * self.rate
