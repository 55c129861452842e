"""Paging over host snapshots (``GET /hosts``), the same for every store."""

from __future__ import annotations

import math

from service.store.base import HostOrder, HostPage, HostState

__all__ = ["host_sort_key", "is_blocked", "page_of"]


def host_sort_key(order: HostOrder, s: HostState, now: float) -> tuple[float, str]:
    """Sort key of a host snapshot in ``order`` (both stores page with it)."""
    if order is HostOrder.LAMBDA:
        return (-s.lambda_h, s.host)
    if order is HostOrder.BLOCKED:
        return (-(s.blocked_until or now), s.host)
    ready = math.inf if s.next_due_at is None else max(s.next_due_at, s.gate_at)
    if s.blocked_until is not None:
        ready = max(ready, s.blocked_until)
    return (ready, s.host)


def is_blocked(s: HostState, now: float) -> bool:
    """Paused, or blocked past ``now``."""
    return s.paused or (s.blocked_until is not None and s.blocked_until > now)


def page_of(
    states: list[HostState], now: float, order: HostOrder, limit: int, cursor: str | None
) -> HostPage:
    """One page of ``states`` in ``order``; the cursor is the offset of the next page.

    Raises
    ------
    ValueError
        If ``cursor`` is not a non-negative decimal offset.
    """
    start = 0
    if cursor is not None:
        if not (cursor.isascii() and cursor.isdigit()):
            raise ValueError("not a cursor of this listing")
        start = int(cursor)
    if order is HostOrder.BLOCKED:
        states = [s for s in states if is_blocked(s, now)]
    states.sort(key=lambda s: host_sort_key(order, s, now))
    page = states[start : start + limit]
    end = start + len(page)
    return HostPage(page, str(end) if end < len(states) else None)
