"""The lease coalescer on its own (service/store/coalesce.py): which calls go out
together, and that the next call goes out before the last answer is decoded.  The
store is a function that answers from a list of URLs; the Redis tests
(tests/redis/test_lease_calls.py) hold the same on a real server."""

from __future__ import annotations

import asyncio

import numpy as np
import pytest

from service.store.coalesce import Answered, LeaseCoalescer
from service.store.columns import URL_COLUMNS, LeaseColumns

pytestmark = pytest.mark.anyio


class _Frontier:
    """Hands out URLs u0, u1, ... in order, ``stock`` in all; logs each call as it goes
    out and each answer as it is decoded."""

    def __init__(self, stock: int) -> None:
        self.stock = stock
        self.given = 0
        self.log: list[str] = []

    async def lease(self, now: object, n: int, ttl: float, ahead: bool) -> Answered:
        k = len([e for e in self.log if e.startswith("send")]) + 1
        self.log.append(f"send {k} n={n}")
        await asyncio.sleep(0.01)  # the round trip
        take = min(n, self.stock - self.given)
        urls = [f"u{i}" for i in range(self.given, self.given + take)]
        self.given += take

        def decode() -> LeaseColumns:
            self.log.append(f"decode {k}")
            return LeaseColumns(
                0.0, urls, urls, ["h"] * take, np.zeros(take), np.zeros(take, bool),
                np.zeros(take), np.zeros(take, URL_COLUMNS), np.zeros(take, bool),
            )  # fmt: skip

        return Answered(take, decode)


async def test_the_next_call_goes_out_before_the_last_answer_is_decoded() -> None:
    frontier = _Frontier(100)
    coalescer = LeaseCoalescer(frontier.lease)
    first = asyncio.ensure_future(coalescer(0.0, 2, 60.0, False))
    await asyncio.sleep(0)  # the first is in flight: the next three wait, then go as one
    rest = [asyncio.ensure_future(coalescer(0.0, 3, 60.0, False)) for _ in range(3)]
    answers = [await first, *[await r for r in rest]]
    assert frontier.log == ["send 1 n=2", "send 2 n=9", "decode 1", "decode 2"]
    assert [a.urls for a in answers] == [
        ["u0", "u1"], ["u2", "u3", "u4"], ["u5", "u6", "u7"], ["u8", "u9", "u10"]
    ]  # fmt: skip


async def test_a_short_joint_answer_is_decoded_before_the_follow_up() -> None:
    """A joint call that comes back short is decoded first (its callers' shares decide
    the follow-up), then the callers not served in full go out again."""
    frontier = _Frontier(4)
    coalescer = LeaseCoalescer(frontier.lease)
    first = asyncio.ensure_future(coalescer(0.0, 1, 60.0, False))
    await asyncio.sleep(0)
    rest = [asyncio.ensure_future(coalescer(0.0, 2, 60.0, False)) for _ in range(2)]
    answers = [await first, *[await r for r in rest]]
    assert frontier.log == ["send 1 n=1", "send 2 n=4", "decode 1", "decode 2", "send 3 n=1",
                            "decode 3"]  # fmt: skip
    assert [a.urls for a in answers] == [["u0"], ["u1", "u2"], ["u3"]]
