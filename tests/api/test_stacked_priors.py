"""``stack_priors`` (the relearn path's column-wise priors, ``given_priors_many``) is
``given_priors`` per URL, bit for bit, and the memoised prior chains are ``prior_chain``'s."""

from __future__ import annotations

import math
import random

import numpy as np
import pytest

from scheduler_core.errors import ParameterError
from scheduler_core.estimate.hierarchy import QUANTITIES, GammaPrior, GroupStats, Moments
from scheduler_core.estimate.learn import (
    History,
    Prior4,
    Priors,
    estimate,
    given_priors,
    prior_chain,
)
from scheduler_core.estimate.rates import decayed_count, decayed_exposure
from service.clock import ManualClock
from service.metrics import Metrics
from service.scheduler import learning
from service.scheduler.context import Context
from service.scheduler.events import ingest_clicks, ingest_signals
from service.scheduler.fold import fold_now
from service.scheduler.learning import (
    _chain,
    learn,
    learn_pass,
    root_priors,
)
from service.scheduler.priors import stack_priors
from service.scheduler.registry import register
from service.schemas import ClickIn, SignalIn, UrlIn
from service.settings import Settings
from service.store.base import UrlPrior, UrlState
from service.store.memory import MemoryStore

DAY_S = 86_400.0


def _random_chain(rng: random.Random) -> Prior4:
    def prior(mean: float, low_shape: float) -> GammaPrior:
        return GammaPrior.from_mean(mean, rng.uniform(low_shape, 20.0))

    return {
        "weight": prior(rng.uniform(0.01, 3.0) / DAY_S, 0.5),
        "signal_rate": prior(rng.uniform(0.01, 2.0) / DAY_S, 0.5),
        "alpha": prior(rng.uniform(0.01, 1.0) / DAY_S, 1.01),
        "theta": prior(rng.uniform(0.05, 5.0), 1.01),
    }


def _random_given(rng: random.Random) -> UrlPrior:
    def maybe(draw: float) -> float | None:
        roll = rng.random()
        return None if roll < 0.4 else (0.0 if roll < 0.5 else draw)

    return UrlPrior(
        label=None,
        weight=maybe(rng.uniform(0.0, 2.0) / DAY_S),
        change_rate=maybe(rng.uniform(0.0, 1.0) / DAY_S),
        recall=maybe(rng.choice([rng.random(), 1.0])),
        false_signal_rate=maybe(rng.uniform(0.0, 0.6) / DAY_S),
    )


def _reference(chains: list[Prior4], given: list[UrlPrior], strength: float) -> Priors:
    return Priors.stack(
        [
            given_priors(
                c,
                weight=p.weight,
                change_rate=p.change_rate,
                recall=p.recall,
                false_signal_rate=p.false_signal_rate,
                strength=strength,
            )  # fmt: skip
            for c, p in zip(chains, given, strict=True)
        ]
    )


def _assert_identical(got: Priors, want: Priors) -> None:
    for q in QUANTITIES:
        assert got.shape[q].tobytes() == want.shape[q].tobytes(), q
        assert got.rate[q].tobytes() == want.rate[q].tobytes(), q


@pytest.mark.parametrize("strength", [0.5, 2.0, 7.0])
def test_stack_priors_is_given_priors_bit_for_bit(strength: float) -> None:
    rng = random.Random(int(strength * 10))
    pool = [_random_chain(rng) for _ in range(40)]
    chains = [rng.choice(pool) for _ in range(3_000)]
    given = [_random_given(rng) for _ in chains]
    given[0] = UrlPrior()  # nothing given: the chain itself
    given[1] = UrlPrior(weight=1e-5)  # W only
    given[2] = UrlPrior(weight=1e-5, change_rate=2e-6)  # as the benchmark registers
    given[3] = UrlPrior(change_rate=2e-6, recall=1.0, false_signal_rate=0.0)  # γp only
    _assert_identical(stack_priors(chains, given, strength), _reference(chains, given, strength))


def test_stack_priors_with_the_service_chains() -> None:
    s = Settings()
    root = root_priors(s)
    stats = GroupStats(
        (Moments(12, 12e-5, 2e-9, 1e-10), Moments(12, 6e-5, 5e-10, 1e-10),
         Moments(12, 5e-5, 4e-10, 1e-10), Moments(12, 9.0, 9.0, 1.0)),
        0.8, 40.0,
    )  # fmt: skip
    chains = [prior_chain(root, GroupStats(), None, GroupStats(), 5.0)]
    chains.append(prior_chain(root, stats, stats, stats, 5.0))
    rng = random.Random(3)
    picks = [chains[rng.randrange(2)] for _ in range(500)]
    given = [_random_given(rng) for _ in picks]
    _assert_identical(stack_priors(picks, given, 2.0), _reference(picks, given, 2.0))
    assert stack_priors([], [], 2.0).shape["weight"].shape == (0,)


def test_stack_priors_fails_where_given_priors_does() -> None:
    chain = _random_chain(random.Random(1))
    bad = UrlPrior(weight=math.inf)
    with pytest.raises(ParameterError):
        given_priors(chain, weight=math.inf, change_rate=None, recall=None,
                     false_signal_rate=None, strength=2.0)  # fmt: skip
    with pytest.raises(ParameterError):
        stack_priors([chain, chain], [UrlPrior(weight=1e-5), bad], 2.0)
    # a given change rate whose γ overflows, and a NaN (the memory store keeps it)
    odd = [
        UrlPrior(change_rate=1e308, recall=0.5, false_signal_rate=1e308),
        UrlPrior(recall=math.nan),
    ]
    for p in odd:
        try:
            want: Priors | None = _reference([chain], [p], 2.0)
        except ParameterError:
            want = None
        if want is None:
            with pytest.raises(ParameterError):
                stack_priors([chain], [p], 2.0)
        else:
            got = stack_priors([chain], [p], 2.0)
            for q in QUANTITIES:
                assert np.array_equal(got.shape[q], want.shape[q], equal_nan=True)
                assert np.array_equal(got.rate[q], want.rate[q], equal_nan=True)


def test_memoised_chains_are_prior_chain() -> None:
    s = Settings()
    root = root_priors(s)
    key = b"root"
    stats = (1.0, 2e-5, 5e-10, 1e-11) * 4 + (math.nan, 0.0)
    other = (3.0, 9e-5, 4e-9, 1e-10) * 4 + (0.7, 12.0)
    for glob, label, host, labelled in [
        (None, None, None, False),
        (stats, None, None, True),  # a label without statistics differs from no label
        (stats, other, stats, True),
        (other, None, stats, False),
    ]:
        want = prior_chain(
            root, GroupStats.from_tuple(glob),
            GroupStats.from_tuple(label) if labelled else None,
            GroupStats.from_tuple(host), s.prior_pseudo_urls,
        )  # fmt: skip
        for _ in range(2):  # computed, then from the memo (NaN-safe keys)
            got = _chain(root, key, s.prior_pseudo_urls, glob, label, host, labelled=labelled)
            assert got == want
    unlabelled = _chain(root, key, 5.0, stats, None, None, labelled=False)
    assert unlabelled is _chain(root, key, 5.0, stats, None, None, labelled=False)
    assert unlabelled is not _chain(root, key, 5.0, stats, None, None, labelled=True)  # own key


@pytest.mark.anyio
async def test_learn_is_the_per_url_composition(
    app_store: MemoryStore, clock: ManualClock, settings: Settings
) -> None:
    """``learn`` (memoised chains, stacked priors) estimates exactly what the chains
    with ``given_priors`` per URL, ``Priors.stack`` and ``estimate`` give, on URLs with
    and without labels, given values, history and host statistics."""
    ctx = Context(app_store, clock, settings, Metrics())
    rng = random.Random(7)
    urls = [f"https://h{k % 7}.example/p/{k}" for k in range(300)]
    items = []
    for k, url in enumerate(urls):
        given = _random_given(rng)
        items.append(
            UrlIn(
                url=url,
                weight=given.weight,
                change_rate=given.change_rate,
                recall=given.recall,
                false_signal_rate=given.false_signal_rate,
                label=rng.choice([None, "shoes", "hats"]),
                fixed=k % 50 == 0,
            )  # fmt: skip
        )
    await register(ctx, items)
    t = clock.now()
    for k in range(600):
        url = rng.choice(urls)
        if k % 2:
            await ingest_clicks(ctx, [ClickIn(url=url, time=t)])
        else:
            await ingest_signals(ctx, [SignalIn(url=url, time=t)])
        await fold_now(ctx)  # applied as the fold loop would
        clock.advance(60.0)
        t = clock.now()
    await learn_pass(ctx)  # host, label and global statistics
    clock.advance(3_600.0)
    states = [s for s in await app_store.get_urls(urls) if s is not None]
    got = await learn(ctx, await app_store.estimate_columns(urls))
    learnable = [s for s in states if not s.prior.fixed]
    chains = await learning._chains_of(ctx, [s.host for s in learnable],
                                       [s.prior.label for s in learnable])  # fmt: skip
    want_priors = _reference(chains, [s.prior for s in learnable], settings.prior_strength)
    _assert_identical(got.priors, want_priors)
    history = _history(learnable, clock.now(), settings.estimate_decay_s)
    want = estimate(history, want_priors)
    for name in ("weight", "signal_rate", "alpha", "theta"):
        assert getattr(got.estimates, name).tobytes() == getattr(want, name).tobytes(), name


def _history(states: list[UrlState], now: float, decay_s: float) -> History:
    """The estimators' view of snapshots, per URL (the reference for the columns)."""
    obs = [s.observations for s in states]

    def ref(t: float | None) -> float:
        return math.nan if t is None else t

    clicks = decayed_count([o.click_mass for o in obs], [ref(o.click_ref) for o in obs], now,
                           decay_s)  # fmt: skip
    signals = decayed_count([o.signal_mass for o in obs], [ref(o.signal_ref) for o in obs],
                            now, decay_s)  # fmt: skip
    exposure = decayed_exposure([s.registered_at for s in states], now, decay_s)
    return History.create(clicks, signals, exposure, [o.outcomes for o in obs])


def test_the_chain_memo_is_bounded(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(learning, "_CHAINS", learning.OrderedDict())
    monkeypatch.setattr(learning, "_CHAINS_MAX", 3)
    root = root_priors(Settings())
    hosts = [(float(k), 1e-5, 1e-10, 0.0) * 4 + (math.nan, 0.0) for k in range(1, 6)]
    first = _chain(root, b"r", 5.0, None, None, hosts[0], labelled=False)
    for host in hosts[1:3]:
        _chain(root, b"r", 5.0, None, None, host, labelled=False)
    assert _chain(root, b"r", 5.0, None, None, hosts[0], labelled=False) is first  # used again
    for host in hosts[3:]:
        _chain(root, b"r", 5.0, None, None, host, labelled=False)
    assert len(learning._CHAINS) == 3
    assert _chain(root, b"r", 5.0, None, None, hosts[0], labelled=False) is first  # kept
    again = _chain(root, b"r", 5.0, None, None, hosts[1], labelled=False)  # evicted: new
    assert again == prior_chain(root, GroupStats(), None, GroupStats.from_tuple(hosts[1]), 5.0)
