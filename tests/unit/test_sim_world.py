"""Simulated worlds: specs, event counts against Poisson expectations, change queries."""

from __future__ import annotations

import math

import numpy as np
import pytest

from scheduler_core.errors import ParameterError
from scheduler_core.sim import CHANGE, CLICK, DAY_S, SIGNAL, Dist, World, WorldSpec

SPEC = WorldSpec(urls=400, hosts=20, duration_days=100, seed=5)


@pytest.fixture(scope="module")
def world() -> World:
    return World.generate(SPEC)


def poisson_close(observed: int, expected: float) -> bool:
    return abs(observed - expected) < 4 * math.sqrt(expected) + 1


def test_shape_and_hosts(world: World) -> None:
    assert len(world.urls) == 400 and len(world.hosts) == 20
    counts = np.bincount(world.host_of, minlength=20)
    assert counts.min() >= 1 and counts.sum() == 400
    assert counts[0] > counts[-1]  # zipf: the first host is the biggest
    assert all(world.hosts[h] in u for u, h in zip(world.urls, world.host_of, strict=True))
    assert world.crawl_delay_s.tolist() == [60.0] * 20
    assert world.budget_per_s == pytest.approx(100 / DAY_S)
    assert world.warmup_s == pytest.approx(0.1 * world.duration_s)


def test_same_seed_same_world() -> None:
    a, b = World.generate(SPEC), World.generate(SPEC)
    np.testing.assert_array_equal(a.events().time, b.events().time)
    c = World.generate(SPEC.replace(seed=6))
    assert len(c.events()) != len(a.events())


def test_event_counts_match_the_rates(world: World) -> None:
    log, p, t = world.events(), world.params, world.duration_s
    assert (np.diff(log.time) >= 0).all()
    assert poisson_close(int((log.kind == CLICK).sum()), p.weight.sum() * t)
    changes = int((log.kind == CHANGE).sum())
    assert poisson_close(changes, p.change_rate.sum() * t)
    expected_signals = (p.recall * p.change_rate + p.false_signal_rate).sum() * t
    assert poisson_close(int((log.kind == SIGNAL).sum()), expected_signals)


def test_signals_announce_changes_at_the_recall_rate(world: World) -> None:
    """With zero delay an announced change and its signal share a time stamp."""
    log = world.events()
    change = {
        (float(t), int(u))
        for t, u in zip(log.time[log.kind == CHANGE], log.url[log.kind == CHANGE], strict=True)
    }
    sig = log.kind == SIGNAL
    announced = sum(
        (float(t), int(u)) in change for t, u in zip(log.time[sig], log.url[sig], strict=True)
    )
    p, t = world.params, world.duration_s
    assert poisson_close(announced, (p.recall * p.change_rate).sum() * t)
    assert poisson_close(int(sig.sum()) - announced, p.false_signal_rate.sum() * t)


def test_false_signal_rate_is_in_units_of_the_mean_change_rate(world: World) -> None:
    ratio = world.params.false_signal_rate / world.params.change_rate.mean()
    assert ratio.min() >= 0.1 and ratio.max() <= 0.6


def test_signal_delays_shift_signals() -> None:
    spec = SPEC.replace(
        signal_delay_s=Dist.of("const", value=3600.0),
        false_signal_rate=Dist.of("const", value=0.0),
    )
    log = World.generate(spec).events()
    is_change, sig = log.kind == CHANGE, log.kind == SIGNAL
    changes = set(zip(log.url[is_change].tolist(), log.time[is_change].tolist(), strict=True))
    assert sig.sum() > 100
    for u, t in zip(log.url[sig].tolist(), log.time[sig].tolist(), strict=True):
        assert (u, t - 3600.0) in changes or any(
            uu == u and abs(c + 3600.0 - t) < 1e-6 for uu, c in changes
        )


def test_no_signals() -> None:
    w = World.generate(SPEC.replace(signals=False))
    assert not (w.events().kind == SIGNAL).any()
    assert (w.params.signal_rate == 0).all()


def test_changed_between_matches_brute_force(world: World) -> None:
    rng = np.random.default_rng(0)
    url = rng.integers(0, 400, 2000)
    t0 = rng.uniform(0, world.duration_s, 2000)
    t1 = t0 + rng.exponential(5 * DAY_S, 2000)
    got = world.changed_between(url, t0, t1)
    brute = [
        ((world.change_times(u) > a) & (world.change_times(u) <= b)).any()
        for u, a, b in zip(url, t0, t1, strict=True)
    ]
    assert got.tolist() == brute
    first = world.first_change_after(url, t0)
    for u, a, f in zip(url[:200], t0[:200], first[:200], strict=True):
        later = world.change_times(u)[world.change_times(u) > a]
        assert f == (later[0] if later.size else math.inf)


def test_window_is_half_open(world: World) -> None:
    log = world.events()
    t = float(log.time[10])
    assert log.window(t, t + 1e-9).time[0] == t
    assert len(log.window(0, t)) == 10 or log.time[9] == t
    assert len(log.window(0, world.duration_s)) == len(log)


@pytest.mark.parametrize(
    ("data", "message"),
    [
        ({"nonsense": 1}, "nonsense"),
        ({"urls": 0}, "urls"),
        ({"hosts": 5, "urls": 2}, "hosts"),
        ({"recall": {"kind": "beta", "a": -1, "b": 1}}, "recall"),
        ({"recall": {"kind": "weird"}}, "weird"),
        ({"weight_per_day": {"kind": "uniform", "low": 0}}, "high"),
        ({"budget_per_day": 0}, "budget"),
        ({"signals": "yes"}, "signals"),
        ({"warmup_fraction": 1.0}, "warmup"),
    ],
)
def test_bad_specs_name_the_problem(data: dict[str, object], message: str) -> None:
    with pytest.raises(ParameterError, match=message):
        WorldSpec.from_mapping(data)


def test_spec_round_trip() -> None:
    spec = WorldSpec(urls=10, hosts=3, recall=Dist.of("uniform", low=0.2, high=0.4))
    assert WorldSpec.from_mapping(spec.to_mapping()) == spec
    assert Dist.from_mapping(3.5) == Dist.of("const", value=3.5)
