"""What the service acknowledged to the load generator, event by event, per URL.

A durability check compares these counts with the store's per-URL counters: with
the client's exactly-once retries (:class:`service.client.CrawlschedClient`, an
idempotency key per batch) every event the service acknowledged is there exactly
once, and nothing else is.
"""

from __future__ import annotations

from collections import Counter, defaultdict
from collections.abc import Mapping, Sequence
from typing import Any, Literal

__all__ = ["EventKind", "EventLedger"]

#: Event kinds, as the service's ``crawlsched_events_total{kind}`` names them.
EventKind = Literal["click", "signal", "crawl_result"]
_ACCEPTED = "accepted"


class EventLedger:
    """Per kind, answer status (``accepted``, ``stale``, ``duplicate``,
    ``unknown_url``) and URL: how many events the service acknowledged so.

    Examples
    --------
    >>> ledger = EventLedger()
    >>> rows = [{"url": "https://a.example/1"}, {"url": "https://a.example/2"}]
    >>> ledger.record("signal", rows, {"accepted": 1, "ignored": [{"index": 1, "status": "stale"}]})
    >>> dict(ledger.acknowledged("signal"))
    {'https://a.example/1': 1}
    >>> dict(ledger.acknowledged("signal", "accepted", "stale"))
    {'https://a.example/1': 1, 'https://a.example/2': 1}
    """

    def __init__(self) -> None:
        self._counts: dict[tuple[EventKind, str], Counter[str]] = defaultdict(Counter)

    def record(
        self, kind: EventKind, rows: Sequence[Mapping[str, Any]], answer: Mapping[str, Any]
    ) -> None:
        """Count the events of one acknowledged batch by the status the service gave each.

        Parameters
        ----------
        kind : {"click", "signal", "crawl_result"}
            What the batch carried.
        rows : sequence of mapping
            The batch as posted (each event with its ``url``).
        answer : mapping
            The service's answer: ``{"accepted", "ignored": [{"index", "status"}]}``.
        """
        status = [_ACCEPTED] * len(rows)
        for item in answer.get("ignored", ()):
            status[int(item["index"])] = str(item["status"])
        for row, st in zip(rows, status, strict=True):
            self._counts[kind, st][str(row["url"])] += 1

    def acknowledged(self, kind: EventKind, *statuses: str) -> Counter[str]:
        """Per URL, the events of ``kind`` answered with one of ``statuses``
        (default: ``accepted``)."""
        total: Counter[str] = Counter()
        for st in statuses or (_ACCEPTED,):
            total.update(self._counts.get((kind, st), Counter()))
        return total

    def total(self, kind: EventKind, *statuses: str) -> int:
        """All events of ``kind`` answered with one of ``statuses`` (default: ``accepted``)."""
        return sum(self.acknowledged(kind, *statuses).values())
