"""The events of a simulated web: clicks, signals and changes, in time order.

:class:`EventLog` holds every event of a world sorted by time; :class:`ChangeIndex`
the change times by URL, with exact integer search keys (see
:mod:`scheduler_core.sim.world`).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
from numpy.typing import ArrayLike, NDArray

from scheduler_core.errors import ParameterError
from scheduler_core.params import FloatArray

__all__ = ["CHANGE", "CLICK", "DAY_S", "KINDS", "SIGNAL", "ChangeIndex", "EventLog", "IntArray"]

#: Seconds per day.
DAY_S = 86_400.0
#: Event kinds of :class:`EventLog` (``kind`` codes).
CLICK, SIGNAL, CHANGE = 0, 1, 2
KINDS = (CLICK, SIGNAL, CHANGE)

IntArray = NDArray[np.int64]


@dataclass(frozen=True, slots=True)
class EventLog:
    """Events sorted by time.

    Attributes
    ----------
    time : ndarray of float64, shape (n,)
        Event times, s from the start of the world, nondecreasing.
    kind : ndarray of int8, shape (n,)
        :data:`CLICK`, :data:`SIGNAL` or :data:`CHANGE`.
    url : ndarray of int64, shape (n,)
        Index of the URL the event concerns.
    """

    time: FloatArray
    kind: NDArray[np.int8]
    url: IntArray

    def __len__(self) -> int:
        return int(self.time.shape[0])

    def window(self, t0: float, t1: float) -> EventLog:
        """The events with ``t0 <= time < t1``: views found by binary search, O(log n)."""
        i, j = np.searchsorted(self.time, [t0, t1], side="left")
        return EventLog(self.time[i:j], self.kind[i:j], self.url[i:j])

    @classmethod
    def merge(cls, parts: Sequence[tuple[ArrayLike, int, ArrayLike]]) -> EventLog:
        """Merge ``(time (k,), kind, url (k,))`` groups into one log sorted by time.

        The sort is stable: at equal times, earlier groups come first.

        Raises
        ------
        ParameterError
            If a group's times and URLs differ in length or a kind is unknown.
        """
        times, kinds, urls = [], [], []
        for t, k, u in parts:
            t_arr = np.asarray(t, dtype=np.float64).ravel()
            u_arr = np.asarray(u, dtype=np.int64).ravel()
            if t_arr.shape != u_arr.shape or k not in KINDS:
                raise ParameterError("each event group needs (time, kind, url) of one length")
            times.append(t_arr)
            urls.append(u_arr)
            kinds.append(np.full(t_arr.size, k, dtype=np.int8))
        if not times:
            return cls(np.empty(0), np.empty(0, np.int8), np.empty(0, np.int64))
        time = np.concatenate(times)
        order = np.argsort(time, kind="stable")
        return cls(time[order], np.concatenate(kinds)[order], np.concatenate(urls)[order])


@dataclass(frozen=True, slots=True)
class ChangeIndex:
    """Change times in CSR layout, URL by URL, with exact integer search keys.

    Attributes
    ----------
    keys : ndarray of int64, shape (k,)
        ``url · stride + rank(change time)``, sorted.
    times : ndarray of float64, shape (k,)
        Change times, s, by URL then time.
    offsets : ndarray of int64, shape (m + 1,)
        URL i's changes are ``times[offsets[i]:offsets[i + 1]]``.
    stride : int
        ``2n + 1`` for an event log of n events (ranks lie in [0, 2n]).
    """

    keys: IntArray
    times: FloatArray
    offsets: IntArray
    stride: int
