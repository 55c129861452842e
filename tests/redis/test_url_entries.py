"""The stored URL entry (lib.lua unpack_entry / entry_url / pack_url) run directly on a
real Redis, against records.unpack_entry and the layout written out here (:func:`_entry`:
a form byte, then each optional part only when it does not hold its defaults): every
combination of default and non-default parts reads back whole, and the table view
packs to the same bytes."""

from __future__ import annotations

import itertools
import math
import random
import struct
from collections.abc import Iterator
from importlib import resources

import pytest
import redis

from service.store.redis.local import LocalRedis
from service.store.redis.records import URL, URL_CTL, URL_FULL, unpack_entry

pytestmark = pytest.mark.redis

_LIB = (resources.files("service.store.redis") / "lua" / "lib.lua").read_text()
# ARGV[1] a stored entry: what unpack_entry reads from it, and pack_url of entry_url of it
_ROUND_TRIP = """
local rec, est = unpack_entry(ARGV[1])
return {rec, est, pack_url(entry_url(ARGV[1]))}
"""
NAN = math.nan
_DEFAULT_TIMES = struct.pack("<3d", NAN, NAN, NAN)
_DEFAULT_TAIL = URL_CTL.pack(NAN, NAN, 0, 0)


def _entry(rec: bytes, est: bytes) -> bytes:
    """The stored entry of a full record and an estimator state, as lib.lua lays it out:
    the times (bytes 65-88), the counts (97-124) and the controls' tail (125-145) are
    there only when they differ from their defaults (form bits 1, 2, 4)."""
    times, counts, tail = rec[64:88], rec[96:124], rec[124:145]
    form = (times != _DEFAULT_TIMES) + 2 * any(counts) + 4 * (tail != _DEFAULT_TAIL)
    return (
        bytes([form]) + rec[:64] + (times if form & 1 else b"") + rec[88:96]
        + (counts if form & 2 else b"") + (tail if form & 4 else b"") + est
    )  # fmt: skip


@pytest.fixture(scope="module")
def raw() -> Iterator[redis.Redis]:
    with LocalRedis() as server, redis.Redis(port=server.port) as client:
        yield client


def _record(rng: random.Random, times: bool, counts: bool, tail: bool) -> bytes:
    """A full record whose optional parts hold their defaults unless asked otherwise."""
    head = [rng.uniform(0, 1e-3) for _ in range(7)] + [1.7e9 + rng.random()]
    last = [1.7e9 + rng.random(), NAN, NAN] if times else [NAN, NAN, NAN]
    due = [1.7e9 + 100 * rng.random()]
    ints = [0] * 6 + [rng.randrange(1, 2**32)] if counts else [0] * 7
    ctl = (NAN, 1.8e9, rng.randrange(1, 5), 1) if tail else (NAN, NAN, 0, 0)
    return URL.pack(*head, *last, *due, *ints) + URL_CTL.pack(*ctl)


def test_entries_round_trip_and_leave_out_the_defaults(raw: redis.Redis) -> None:
    sha = raw.script_load(f"{_LIB}\n{_ROUND_TRIP}")
    rng = random.Random(7)
    states = [b"", struct.pack("<B2d", 16 | 32, 1e-5, 2e-6), bytes([8]) + struct.pack("<H", 3)]
    for times, counts, tail in itertools.product((False, True), repeat=3):
        for est in states + [states[2] + b"abc"]:
            rec = _record(rng, times, counts, tail)
            entry = _entry(rec, est)
            back, est_back, repacked = raw.evalsha(sha, 0, entry)
            assert len(rec) == URL_FULL
            assert entry[0] == times + 2 * counts + 4 * tail
            assert len(entry) == 1 + 72 + 24 * times + 28 * counts + 21 * tail + len(est)
            assert (back, est_back) == (rec, est) == unpack_entry(entry)
            assert repacked == entry


def test_a_nan_of_another_bit_pattern_is_a_default(raw: redis.Redis) -> None:
    """A NaN with a payload in an optional part reads back bit for bit; written again
    (pack_url), it is a NaN like any other: the part holds its defaults and is left out."""
    sha = raw.script_load(f"{_LIB}\n{_ROUND_TRIP}")
    rec = bytearray(_record(random.Random(1), False, False, False))
    rec[64:72] = struct.pack("<Q", 0x7FF8000000000001)  # a quiet NaN with a payload
    entry = _entry(bytes(rec), b"")
    back, _, repacked = raw.evalsha(sha, 0, entry)
    assert entry[0] == 1 and back == bytes(rec) == unpack_entry(entry)[0]
    assert repacked[0] == 0 and math.isnan(
        struct.unpack_from("<d", unpack_entry(repacked)[0], 64)[0]
    )
