"""The heap freezer: a pass collects the unreachable cycles among the young objects
and moves every tracked object, the oldest generation's unwalked, out of every later
collection; the task runs passes on its interval and stops on its event."""

from __future__ import annotations

import asyncio
import gc
import weakref
from collections.abc import Iterator

import pytest

from service.heap import freeze_pass, run_heap_freezer


class _Node:
    def __init__(self) -> None:
        self.other: _Node | None = None


@pytest.fixture(autouse=True)
def _unfrozen() -> Iterator[None]:
    gc.unfreeze()
    yield
    gc.unfreeze()


def _tracked(obj: object) -> bool:
    return any(o is obj for o in gc.get_objects())


def test_a_pass_collects_garbage_cycles_and_freezes_the_live_heap() -> None:
    old = [_Node()]
    gc.collect()  # `old` is in the oldest generation now; the young ones are empty
    assert _tracked(old)
    a, b = _Node(), _Node()
    a.other, b.other = b, a  # a cycle: only the collector frees it
    dead = weakref.ref(a)
    del a, b
    live = [_Node()]
    assert dead() is not None and _tracked(live)
    frozen_before = gc.get_freeze_count()
    assert freeze_pass() >= 2  # the two nodes of the cycle (and their dicts)
    assert dead() is None
    assert not _tracked(live)  # in the permanent generation: no collection walks it
    assert not _tracked(old)
    assert gc.get_freeze_count() > frozen_before
    held = weakref.ref(live[0])
    live.clear()  # frozen, and still freed by reference counting
    assert held() is None


@pytest.mark.anyio
async def test_the_freezer_runs_on_its_interval_until_stopped() -> None:
    stop = asyncio.Event()
    task = asyncio.create_task(run_heap_freezer(0.01, stop))
    live = [_Node()]
    for _ in range(500):
        await asyncio.sleep(0.01)
        if not _tracked(live):
            break
    assert not _tracked(live)
    stop.set()
    await asyncio.wait_for(task, timeout=1.0)
