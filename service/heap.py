"""The embedded store's records kept out of the garbage collector's full passes.

With the memory store the API process holds every URL's record: about 3.2 million
objects the cyclic garbage collector tracks at 1,000,000 URLs, and a full collection
walks them all (0.78 s here; ``docs/operations.md``, "The embedded store's heap").
CPython runs one whenever the objects that reached the oldest generation since the
last exceed a quarter of it: at steady load, every few hundred thousand leases,
and every request waiting then waits the whole pass.

Every ``heap_freeze_interval_s`` wall seconds :func:`freeze_pass` collects the two
young generations (a few thousand objects at most) and freezes every object tracked
(:func:`gc.freeze`): they move to the permanent generation, which no collection walks
again, and the oldest generation is never walked at all (right after a bulk
registration it holds millions of records: a full collection then would be the very
pause this avoids).  A frozen object is still freed by reference counting as soon as
nothing refers to it; only a reference cycle that is garbage in the oldest generation
when frozen, or becomes garbage later, stays in memory (the store's records form
none; ``python bench/heap.py`` counts the frozen heap under churn).
"""

from __future__ import annotations

import asyncio
import gc

__all__ = ["freeze_pass", "run_heap_freezer"]


def freeze_pass() -> int:
    """Collect the two young generations, then freeze every object tracked (the oldest
    generation unscanned: scanning it is the pause this avoids); returns the objects
    the collection found unreachable."""
    found = gc.collect(1)
    gc.freeze()
    return found


async def run_heap_freezer(interval_s: float, stop: asyncio.Event) -> None:
    """A :func:`freeze_pass` every ``interval_s`` wall seconds (> 0) until ``stop`` is
    set or the task is cancelled."""
    while not stop.is_set():
        try:
            await asyncio.wait_for(stop.wait(), timeout=interval_s)
        except TimeoutError:
            freeze_pass()
