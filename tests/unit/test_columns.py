"""The columnar dispatch path computes exactly what the per-object path computes: crawl
values, the revisit-cap test, and the round trip objects -> columns -> objects."""

from __future__ import annotations

import math

import numpy as np

from scheduler_core.due import value_due_time
from service.scheduler.scoring import due_by_revisit_cap, values_at, values_of_columns
from service.store.base import LeaseGrant, UrlState
from service.store.columns import columns_of, grants_of

T0 = 1_000_000.0
CAP_S = 5_000.0


def _states(seed: int, m: int) -> list[UrlState]:
    rng = np.random.default_rng(seed)
    out = []
    for i in range(m):
        crawled = rng.random() < 0.8
        n = int(rng.choice([0, 0, 1, 3]))
        out.append(
            UrlState(
                url=f"https://h{i % 7}.example/{i}",
                host=f"h{i % 7}.example",
                weight=float(rng.random()),
                change_rate=float(rng.choice([1e-4, 0.01, 0.0])),
                recall=float(rng.random()),
                false_signal_rate=float(rng.choice([0.0, 1e-3])),
                signal_time_equivalent_s=float(rng.choice([0.0, 30.0, math.inf])),
                threshold_s=float(rng.choice([50.0, 9_000.0, math.inf])),
                scored_lambda=1.0,
                registered_at=T0 - 1e4,
                last_crawl_at=T0 - float(rng.random() * 1e4) if crawled else None,
                signals_since_crawl=n,
                last_signal_at=T0 - 5.0 if n and rng.random() < 0.7 else None,
                due_at=T0,
                lease_id=f"l{i}",
                lease_deadline=T0 + 60.0,
                clicks=i,
                signals=n,
                crawls=int(crawled),
                changes=0,
                fetch_errors=0,
                last_click_at=None,
            )  # fmt: skip
        )
    return out


def _by_cap(s: UrlState) -> bool:
    if s.last_crawl_at is None:
        return False
    due = value_due_time(
        last_crawl_at=s.last_crawl_at, threshold_s=s.threshold_s,
        signal_time_equivalent_s=s.signal_time_equivalent_s,
        signals_since_crawl=s.signals_since_crawl, last_signal_at=s.last_signal_at,
    )  # fmt: skip
    return due > s.last_crawl_at + CAP_S


def test_columns_give_the_same_values_and_cap_test_as_objects() -> None:
    for seed in range(5):
        states = _states(seed, 200)
        grants = [LeaseGrant(s.lease_id or "", T0 + 60.0, s, False, 1.0) for s in states]
        cols = columns_of(T0, grants)
        expected = values_at(states, T0, None)
        got = values_of_columns(cols.state, T0, None)
        assert got.tolist() == expected.tolist()  # bit for bit
        assert due_by_revisit_cap(cols.state, CAP_S).tolist() == [_by_cap(s) for s in states]


def test_objects_survive_the_round_trip() -> None:
    states = _states(9, 50)
    grants = [LeaseGrant(s.lease_id or "", T0 + 60.0, s, i % 2 == 0, 1.5) for i, s in
              enumerate(states)]  # fmt: skip
    assert grants_of(columns_of(T0, grants)) == grants


def test_an_empty_batch() -> None:
    cols = columns_of(T0, [])
    assert len(cols) == 0 and values_of_columns(cols.state, T0, None).shape == (0,)
    assert grants_of(cols) == []


def test_memory_snapshot_copies_every_field_of_the_record() -> None:
    from dataclasses import fields

    from service.store.base import Observations, RetireReason, UrlPrior
    from service.store.memory_base import MemoryBase
    from service.store.memory_records import Url

    names = [f.name for f in fields(UrlState) if f.name != "observations"]
    u = Url("https://a.example/x", "a.example", *(float(k) for k in range(1, 9)))
    for k, name in enumerate(names[8:], start=100):  # every other field its own value
        setattr(
            u,
            name,
            {"prior": UrlPrior(weight=7.0), "retire_reason": RetireReason.GONE}.get(
                name, k if name.endswith(("count", "since_crawl", "s", "errors")) else float(k)
            ),
        )
    u.lease_id = "L1"
    u.click_mass, u.click_ref, u.signal_mass, u.signal_ref = 1.5, 2.5, 3.5, 4.5
    u.outcomes = [(1.0, 2, True)]
    state = MemoryBase._snapshot(u)
    assert {n: getattr(state, n) for n in names} == {n: getattr(u, n) for n in names}
    assert state.observations == Observations(1.5, 2.5, 3.5, 4.5, ((1.0, 2, True),))


def test_memory_due_times_at_once_match_one_by_one() -> None:
    from scheduler_core.due import due_time
    from service.store.controls import NO_LIMITS, ControlRules
    from service.store.memory_base import MemoryBase
    from service.store.memory_records import Url

    rng = np.random.default_rng(5)
    us = []
    for i in range(400):
        crawled = rng.random() < 0.8
        n = int(rng.choice([0, 0, 1, 3]))
        u = Url(
            f"https://a.example/{i}", "a.example", 1.0, 0.01, 0.5, 0.01,
            float(rng.choice([0.0, 30.0, math.inf])), float(rng.choice([50.0, 9e5, math.inf])),
            1.0, T0 - float(rng.random() * 1e4),
        )  # fmt: skip
        u.last_crawl_at = T0 - float(rng.random() * 1e4) if crawled else None
        u.signals_since_crawl = n
        u.last_signal_at = T0 - float(rng.random() * 10) if n and rng.random() < 0.7 else None
        u.refetch_after = T0 + float(rng.random() * 1e3) if rng.random() < 0.3 else None
        us.append(u)
    for controls in (NO_LIMITS, ControlRules(min_revisit_s=600.0)):
        store = MemoryBase(max_revisit_s=CAP_S, controls=controls)
        one_by_one = [
            max(
                due_time(
                    last_crawl_at=u.last_crawl_at,
                    registered_at=u.registered_at,
                    threshold_s=u.threshold_s,
                    signal_time_equivalent_s=u.signal_time_equivalent_s,
                    signals_since_crawl=u.signals_since_crawl,
                    last_signal_at=u.last_signal_at,
                    max_revisit_s=CAP_S,
                ),
                store._floor(u),
            )  # fmt: skip
            for u in us
        ]
        assert store._dues(us).tolist() == one_by_one
