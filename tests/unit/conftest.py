"""Shared fixtures of the core's unit tests."""

from __future__ import annotations

from collections.abc import Callable

import pytest

from scheduler_core.params import UrlParams
from scheduler_core.sim import EventLog, World

OneUrlWorld = Callable[..., World]


@pytest.fixture
def one_url_world() -> OneUrlWorld:
    """Build a world of one URL (W = Δ = 1/s, budget 1/s) around an event log."""

    def build(events: EventLog, *, duration: float = 100.0, warmup: float = 0.0) -> World:
        return World.from_arrays(
            ["https://a.example/"],
            ["a.example"],
            [0],
            UrlParams.create(1.0, 1.0),
            [0.0],
            1.0,
            duration,
            warmup,
            events=events,
        )

    return build
