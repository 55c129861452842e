"""Simulated worlds: specs, event counts against Poisson expectations, change queries."""

from __future__ import annotations

import math
from collections.abc import Callable

import numpy as np
import pytest

from scheduler_core.errors import ParameterError
from scheduler_core.params import UrlParams
from scheduler_core.sim import CHANGE, CLICK, DAY_S, SIGNAL, Dist, EventLog, World, WorldSpec

SPEC = WorldSpec(urls=400, hosts=20, duration_days=100, seed=5)


@pytest.fixture(scope="module")
def world() -> World:
    return World.generate(SPEC)


def poisson_close(observed: int, expected: float) -> bool:
    """Within 4 standard errors of a Poisson count."""
    return abs(observed - expected) < 4 * math.sqrt(expected) + 1


def test_shape_and_hosts(world: World) -> None:
    assert len(world.urls) == 400 and len(world.hosts) == 20
    counts = np.bincount(world.host_of, minlength=20)
    assert counts.min() >= 1 and counts.sum() == 400
    assert counts[0] > counts[-1]  # zipf: the first host is the biggest
    assert all(world.hosts[h] in u for u, h in zip(world.urls, world.host_of, strict=True))
    assert len(set(world.urls)) == 400
    assert world.crawl_delay_s.tolist() == [60.0] * 20
    assert world.budget_per_s == pytest.approx(100 / DAY_S)
    assert world.warmup_s == pytest.approx(0.1 * world.duration_s)
    assert world.spec == SPEC and world.seed == 5


def test_every_host_gets_a_url_even_when_zipf_is_steep() -> None:
    w = World.generate(WorldSpec(urls=30, hosts=30, host_size=Dist.of("zipf", s=3.0)))
    assert np.bincount(w.host_of).tolist() == [1] * 30


def test_same_seed_same_world() -> None:
    a, b = World.generate(SPEC), World.generate(SPEC)
    np.testing.assert_array_equal(a.events().time, b.events().time)
    np.testing.assert_array_equal(a.events().url, b.events().url)
    c = World.generate(SPEC.replace(seed=6))
    assert len(c.events()) != len(a.events())


def test_event_counts_match_the_rates(world: World) -> None:
    log, p, t = world.events(), world.params, world.duration_s
    assert (np.diff(log.time) >= 0).all()
    assert log.time.min() >= 0 and log.time.max() < t
    assert log.kind.dtype == np.int8 and log.url.dtype == np.int64
    assert poisson_close(int((log.kind == CLICK).sum()), p.weight.sum() * t)
    assert poisson_close(int((log.kind == CHANGE).sum()), p.change_rate.sum() * t)
    expected_signals = (p.recall * p.change_rate + p.false_signal_rate).sum() * t
    assert poisson_close(int((log.kind == SIGNAL).sum()), expected_signals)


def test_per_url_counts_follow_their_own_rates(world: World) -> None:
    """The busiest and the quietest URLs both get what their rates say."""
    log, t = world.events(), world.duration_s
    clicks = np.bincount(log.url[log.kind == CLICK], minlength=400)
    order = np.argsort(world.params.weight)
    for part in (order[:100], order[-100:]):
        assert poisson_close(int(clicks[part].sum()), world.params.weight[part].sum() * t)
    changes = np.array([world.change_times(i).size for i in range(400)])
    assert changes.sum() == int((log.kind == CHANGE).sum())


def test_signals_announce_changes_at_the_recall_rate(world: World) -> None:
    """With zero delay an announced change and its signal share a time stamp."""
    log = world.events()
    is_change, sig = log.kind == CHANGE, log.kind == SIGNAL
    change = set(zip(log.time[is_change].tolist(), log.url[is_change].tolist(), strict=True))
    announced = sum(
        (t, u) in change for t, u in zip(log.time[sig].tolist(), log.url[sig].tolist(), strict=True)
    )
    p, t = world.params, world.duration_s
    assert poisson_close(announced, (p.recall * p.change_rate).sum() * t)
    # the announced share of changes is the Δ-weighted mean recall, within 4 SE
    share = (p.recall * p.change_rate).sum() / p.change_rate.sum()
    n = int(is_change.sum())
    assert abs(announced / n - share) < 4 * math.sqrt(share * (1 - share) / n)
    assert poisson_close(int(sig.sum()) - announced, p.false_signal_rate.sum() * t)


def test_false_signal_rate_is_in_units_of_the_mean_change_rate(world: World) -> None:
    ratio = world.params.false_signal_rate / world.params.change_rate.mean()
    assert ratio.min() >= 0.1 and ratio.max() <= 0.6


@pytest.mark.parametrize("delay_s", [3600.0, 50 * DAY_S])
def test_signal_delays_shift_signals(delay_s: float) -> None:
    spec = SPEC.replace(
        signal_delay_s=Dist.of("const", value=delay_s),
        false_signal_rate=Dist.of("const", value=0.0),
    )
    w = World.generate(spec)
    log = w.events()
    is_change, sig = log.kind == CHANGE, log.kind == SIGNAL
    shifted = set(
        zip(log.url[is_change].tolist(), (log.time[is_change] + delay_s).tolist(), strict=True)
    )
    signals = list(zip(log.url[sig].tolist(), log.time[sig].tolist(), strict=True))
    assert all(s in shifted for s in signals)
    assert log.time[sig].min() >= delay_s and log.time.max() < w.duration_s
    p = w.params
    # signals at or after the end are dropped: only changes before D − delay are announced
    expected = (p.recall * p.change_rate).sum() * (w.duration_s - delay_s)
    assert poisson_close(len(signals), expected)


def test_random_signal_delays() -> None:
    spec = SPEC.replace(
        signal_delay_s=Dist.of("exponential", mean=600.0),
        false_signal_rate=Dist.of("const", value=0.0),
        recall=Dist.of("const", value=1.0),
    )
    log = World.generate(spec).events()
    assert (np.diff(log.time) >= 0).all()
    n_sig, n_change = int((log.kind == SIGNAL).sum()), int((log.kind == CHANGE).sum())
    assert n_change - 5 <= n_sig <= n_change  # recall 1: every change but the last few


def test_no_signals() -> None:
    w = World.generate(SPEC.replace(signals=False))
    assert not (w.events().kind == SIGNAL).any()
    assert (w.params.signal_rate == 0).all()


def test_changed_between_matches_brute_force(world: World) -> None:
    rng = np.random.default_rng(0)
    url = rng.integers(0, 400, 2000)
    t0 = rng.uniform(-DAY_S, world.duration_s, 2000)
    t1 = t0 + rng.exponential(5 * DAY_S, 2000)
    got = world.changed_between(url, t0, t1)
    brute = [
        bool(((world.change_times(u) > a) & (world.change_times(u) <= b)).any())
        for u, a, b in zip(url, t0, t1, strict=True)
    ]
    assert got.tolist() == brute
    assert (world.fresh_at(url, t0, t1) == ~got).all()
    first = world.first_change_after(url, t0)
    for u, a, f in zip(url[:300], t0[:300], first[:300], strict=True):
        later = world.change_times(u)[world.change_times(u) > a]
        assert f == (later[0] if later.size else math.inf)


def test_changed_between_at_change_times(world: World) -> None:
    """Half-open (t0, t1]: a change at t0 does not count, one at t1 does."""
    u = int(np.argmax([world.change_times(i).size for i in range(400)]))
    c = world.change_times(u)
    k = c.size
    close = int((np.diff(c) <= 1e-3).sum())  # changes within 1 ms of the previous one
    assert world.changed_between(np.full(k, u), c, c + 1e-3).sum() == close
    assert world.changed_between(np.full(k, u), c - 1e-3, c).all()
    assert not world.changed_between(np.full(k, u), c, c).any()


def test_changed_between_is_exact_with_many_urls() -> None:
    """Float keys url + t/D would lose ~1e-4 s at 2e5 URLs; integer ranks lose nothing."""
    m, t = 200_000, 1.2345678e7
    changes = [np.empty(0)] * (m - 1) + [np.array([t])]
    w = World.from_arrays(
        [f"https://h.example/{i}" for i in range(m)],
        ["h.example"],
        np.zeros(m, np.int64),
        UrlParams.create(np.zeros(m), np.zeros(m)),
        [0.0],
        1.0,
        2e7,
        0.0,
        change_times_by_url=changes,
    )
    u = np.array([m - 1] * 4)
    below, above = np.nextafter(t, 0.0), np.nextafter(t, np.inf)
    got = w.changed_between(u, [below, t, below, t], [t, above, below, t])
    assert got.tolist() == [True, False, False, False]
    assert w.first_change_after(u[:2], [below, t]).tolist() == [t, math.inf]
    assert not w.changed_between([m - 2], [0.0], [2e7]).any()


def test_changed_between_rejects_unknown_urls(world: World) -> None:
    with pytest.raises(ParameterError, match="url"):
        world.changed_between([400], [0.0], [1.0])


def test_window_is_half_open(world: World) -> None:
    log = world.events()
    t = float(log.time[10])
    got = log.window(t, float(log.time[20]))
    assert got.time[0] == t and (got.time < log.time[20]).all()
    assert len(log.window(0, t)) == int((log.time < t).sum())
    assert len(log.window(0, world.duration_s)) == len(log)
    assert len(log.window(5.0, 5.0)) == 0


def test_default_world_size() -> None:
    assert 2e5 < len(World.generate(WorldSpec()).events()) < 6e5


@pytest.mark.parametrize(
    ("time_", "kind", "url", "message"),
    [
        ([2.0, 1.0], [CLICK, CLICK], [0, 0], "sorted"),
        ([1.0, 100.0], [CLICK, CLICK], [0, 0], "duration"),
        ([-1.0], [CLICK], [0], ">= 0"),
        ([1.0], [7], [0], "kinds"),
        ([1.0], [CLICK], [3], "URLs"),
    ],
)
def test_world_rejects_bad_events(
    time_: list[float],
    kind: list[int],
    url: list[int],
    message: str,
    one_url_world: Callable[..., World],
) -> None:
    log = EventLog(np.array(time_), np.array(kind, np.int8), np.array(url, np.int64))
    with pytest.raises(ParameterError, match=message):
        one_url_world(log)


def test_from_arrays_takes_one_kind_of_events() -> None:
    with pytest.raises(ParameterError, match="exactly one"):
        World.from_arrays(
            ["https://a.example/"], ["a.example"], [0], UrlParams.create(1.0, 1.0), [0.0], 1, 9, 0
        )
    w = World.from_arrays(
        ["https://a.example/"],
        ["a.example"],
        [0],
        UrlParams.create(1.0, 1.0),
        [0.0],
        1.0,
        9.0,
        0.0,
        change_times_by_url=[[3.0, 1.0]],
    )
    assert w.change_times(0).tolist() == [1.0, 3.0]
    assert (w.events().kind == CHANGE).all()


@pytest.mark.parametrize(
    "dist",
    [
        Dist.of("const", value=2.5),
        Dist.of("uniform", low=1.0, high=3.0),
        Dist.of("beta", a=0.25, b=0.75),
        Dist.of("exponential", mean=2.0),
        Dist.of("lognormal", median=1.0, sigma=0.5),
        Dist.of("poisson", mean=3.0),
    ],
)
def test_dist_samples_have_the_stated_mean(dist: Dist) -> None:
    draws = dist.sample(np.random.default_rng(0), 20_000)
    assert draws.shape == (20_000,) and draws.dtype == np.float64
    assert draws.mean() == pytest.approx(dist.mean, abs=4 * draws.std() / math.sqrt(20_000) + 1e-12)
    assert Dist.from_mapping(dist.to_mapping()) == dist


def test_zipf_shapes_host_sizes_only() -> None:
    shares = Dist.of("zipf", s=1.0).shares(4)
    np.testing.assert_allclose(shares, np.array([1, 1 / 2, 1 / 3, 1 / 4]) / (25 / 12))
    with pytest.raises(ParameterError, match="host sizes"):
        Dist.of("zipf", s=1.0).sample(np.random.default_rng(0), 3)


@pytest.mark.parametrize(
    ("data", "message"),
    [
        ({"nonsense": 1}, "nonsense"),
        ({"urls": 0}, "urls"),
        ({"urls": 2.5}, "urls"),
        ({"hosts": 5, "urls": 2}, "hosts"),
        ({"recall": {"kind": "beta", "a": -1, "b": 1}}, "recall"),
        ({"recall": {"kind": "weird"}}, "weird"),
        ({"recall": {"low": 1}}, "kind"),
        ({"weight_per_day": {"kind": "uniform", "low": 0}}, "high"),
        ({"weight_per_day": {"kind": "uniform", "low": 2, "high": 1}}, "low <= high"),
        ({"weight_per_day": {"kind": "const", "value": True}}, "number"),
        ({"weight_per_day": {"kind": "zipf", "s": 1}}, "zipf"),
        ({"host_size": {"kind": "uniform", "low": 0, "high": 1}}, "host_size"),
        ({"budget_per_day": 0}, "budget"),
        ({"duration_days": -1}, "duration"),
        ({"signals": "yes"}, "signals"),
        ({"warmup_fraction": 1.0}, "warmup"),
        ({"seed": -1}, "seed"),
    ],
)
def test_bad_specs_name_the_problem(data: dict[str, object], message: str) -> None:
    with pytest.raises(ParameterError, match=message):
        WorldSpec.from_mapping(data)


def test_spec_round_trip_and_defaults() -> None:
    spec = WorldSpec(urls=10, hosts=3, recall=Dist.of("uniform", low=0.2, high=0.4))
    assert WorldSpec.from_mapping(spec.to_mapping()) == spec
    assert Dist.from_mapping(3.5) == Dist.of("const", value=3.5)
    d = WorldSpec()
    assert (d.urls, d.hosts, d.budget_per_day, d.duration_days) == (1000, 50, 100.0, 200.0)
    assert (d.warmup_fraction, d.seed, d.signals) == (0.1, 0, True)
    assert d.host_size == Dist.of("zipf", s=1.0)
    assert d.weight_per_day == Dist.of("uniform", low=0.0, high=2.0)
    assert d.change_rate_per_day == Dist.of("uniform", low=0.0, high=1.0)
    assert d.recall == Dist.of("beta", a=0.25, b=0.25)
    assert d.false_signal_rate == Dist.of("uniform", low=0.1, high=0.6)
    assert d.signal_delay_s == Dist.of("const", value=0.0)
    assert d.crawl_delay_s == Dist.of("const", value=60.0)
    assert WorldSpec.from_mapping({}) == d
    with pytest.raises(ParameterError, match="hosts"):
        d.replace(hosts=2000)
