"""Where "now" comes from: the system clock, a manual clock, or an accelerated one.

Timestamps are Unix seconds (float).  An accelerated clock runs ``speed`` clock
seconds per wall second, so that months of simulated web traffic replay in
minutes (ARCHITECTURE.md, "Time").

A store that decides with time (lease deadlines, lease reclaiming, politeness gates)
reads the clock itself, at the moment of the decision: it is given a
:data:`TimeSource`.  A store with a clock of its own (Redis: ``TIME``) asks the clock
for its :class:`WallMap` and applies it to its own wall time, so API processes whose
machines' clocks disagree still decide on one time line.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Protocol

__all__ = [
    "AcceleratedClock",
    "Clock",
    "ManualClock",
    "SystemClock",
    "TimeSource",
    "WallMap",
    "read_time",
    "wall_map_of",
]


@dataclass(frozen=True, slots=True)
class WallMap:
    """Clock time as an affine map of wall time: ``start + speed × (wall − epoch)``.

    ``speed`` 0 is a clock that stands still at ``start`` (a fixed reading).

    Attributes
    ----------
    start : float
        Clock time at the epoch, Unix s.
    speed : float
        Clock seconds per wall second (≥ 0).
    epoch : float
        Wall time the map counts from, Unix s.

    Examples
    --------
    >>> WallMap(start=100.0, speed=2.0, epoch=10.0).at(15.0)
    110.0
    >>> WallMap.fixed(7.0).at(1e9)
    7.0
    """

    start: float
    speed: float
    epoch: float

    @classmethod
    def fixed(cls, reading: float) -> WallMap:
        """A clock that reads ``reading`` (Unix s) whatever the wall time."""
        return cls(float(reading), 0.0, 0.0)

    def at(self, wall_s: float) -> float:
        """Clock time at wall time ``wall_s`` (Unix s)."""
        if self.speed == 0:
            return self.start
        return self.start + self.speed * (wall_s - self.epoch)


class Clock(Protocol):
    """A source of the current time."""

    @property
    def rate(self) -> float:
        """Clock seconds per wall second (1 for the system clock)."""
        ...

    def now(self) -> float:
        """Current time, Unix s."""
        ...

    def wall_map(self) -> WallMap | None:
        """How the clock follows wall time, for a store that reads its own wall clock;
        None for a clock that moves only when told (a store then uses :meth:`now`)."""
        ...


#: What a store reads "now" from: a fixed reading (Unix s) or a clock.
TimeSource = float | Clock


def read_time(source: TimeSource) -> float:
    """The current time of ``source``, Unix s: the reading itself, or the clock's now."""
    return float(source) if isinstance(source, int | float) else source.now()


def wall_map_of(source: TimeSource) -> WallMap:
    """``source`` as a map of wall time (a fixed reading, or a clock that moves only
    when told, stands still at its current reading)."""
    if isinstance(source, int | float):
        return WallMap.fixed(source)
    return source.wall_map() or WallMap.fixed(source.now())


class SystemClock:
    """The machine's wall clock."""

    rate = 1.0

    def now(self) -> float:
        """Current time, Unix s."""
        return time.time()

    def wall_map(self) -> WallMap:
        """Wall time itself (the store's wall clock stands in for this machine's)."""
        return WallMap(0.0, 1.0, 0.0)


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

    def wall_map(self) -> None:
        """None: the clock moves only when told."""
        return None

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
        self._wall0 = time.time() if epoch is None else float(epoch)
        self._start = self._wall0 if start is None else float(start)

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

    def wall_map(self) -> WallMap:
        """``start + speed × (wall − epoch)``; without an epoch, from the wall time at
        creation."""
        return WallMap(self._start, self._speed, self._wall0)
