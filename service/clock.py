"""Where "now" comes from: the system clock, a manual clock, or an accelerated one.

Timestamps are Unix seconds (float).  An accelerated clock runs ``speed`` clock
seconds per wall second, so that months of simulated web traffic replay in
minutes (ARCHITECTURE.md, "Time").
"""

from __future__ import annotations

import time
from typing import Protocol

__all__ = ["AcceleratedClock", "Clock", "ManualClock", "SystemClock"]


class Clock(Protocol):
    """A source of the current time."""

    @property
    def rate(self) -> float:
        """Clock seconds per wall second (1 for the system clock)."""
        ...

    def now(self) -> float:
        """Current time, Unix s."""
        ...


class SystemClock:
    """The machine's wall clock."""

    rate = 1.0

    def now(self) -> float:
        """Current time, Unix s."""
        return time.time()


class ManualClock:
    """A clock that moves only when told to (tests).

    Examples
    --------
    >>> c = ManualClock(100.0)
    >>> c.advance(5.0)
    >>> c.now()
    105.0
    """

    rate = 1.0

    def __init__(self, start: float = 0.0) -> None:
        self._now = float(start)

    def now(self) -> float:
        """Current time, s."""
        return self._now

    def set(self, t: float) -> None:
        """Jump to ``t`` (s); the clock never goes backwards.

        Raises
        ------
        ValueError
            If ``t`` is earlier than the current time.
        """
        if t < self._now:
            raise ValueError("`t` must not be earlier than the current time")
        self._now = float(t)

    def advance(self, dt_s: float) -> None:
        """Move forward by ``dt_s`` seconds (≥ 0)."""
        self.set(self._now + dt_s)


class AcceleratedClock:
    """``start + speed × (wall seconds since the epoch)``.

    Parameters
    ----------
    speed : float
        Clock seconds per wall second (> 0).
    start : float, optional
        Clock time at the epoch, Unix s; defaults to the epoch itself.
    epoch : float, optional
        Wall time (Unix s) the clock counts from; defaults to the moment of creation
        (then the clock is monotonic).  Processes given one epoch, start and speed
        read the same time (replicated API processes).

    Raises
    ------
    ValueError
        If ``speed`` is not positive.
    """

    def __init__(
        self, speed: float, start: float | None = None, epoch: float | None = None
    ) -> None:
        if not speed > 0:
            raise ValueError("`speed` must be > 0")
        self._speed = float(speed)
        self._epoch = None if epoch is None else float(epoch)
        self._mono0 = time.monotonic()
        wall = time.time() if epoch is None else float(epoch)
        self._start = wall if start is None else float(start)

    @property
    def rate(self) -> float:
        """Clock seconds per wall second."""
        return self._speed

    def now(self) -> float:
        """Current accelerated time, s."""
        if self._epoch is None:
            elapsed = time.monotonic() - self._mono0
        else:
            elapsed = time.time() - self._epoch
        return self._start + elapsed * self._speed
