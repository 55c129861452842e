"""Online parameter estimation in the service (MATH.md, "Estimating parameters").

The stores keep each URL's bounded history (decayed click and signal counts, the
last ``outcome_window`` crawl outcomes); this module turns it into parameters:

- :func:`queue_relearn` after every event batch, :func:`flush_relearn` in each of
  the fold's rounds (or when ``relearn_batch`` URLs wait): :func:`relearn`
  estimates the queued URLs under their priors; a URL whose parameters moved by
  more than ``relearn_tolerance`` gets them and a new threshold at its host's
  Λ_h, so its due time moves.
- :func:`learn_pass`, in the background: host by host, the host's statistics
  (its URLs' own estimates, the pooled signal quality θ_h, its signal source's
  posterior) go to the store's groups; at the end of a pass the label and global
  sums follow, with the hosts' population of sources and the evidence that each
  host is one; each host's URLs are re-estimated under the refreshed priors.
- :func:`priors_of` builds a URL's priors: URL ← host ← label ← global, and the
  values given at registration (unless ``fixed``: then those are the parameters).
"""

from __future__ import annotations

import asyncio
import math
import struct
import time
from collections import OrderedDict, defaultdict
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from typing import Any, TypeVar

import numpy as np

from scheduler_core.estimate.hierarchy import GammaPrior, GroupStats
from scheduler_core.estimate.learn import (
    Estimates,
    History,
    Prior4,
    Priors,
    estimate,
    prior_chain,
)
from scheduler_core.estimate.members import members
from scheduler_core.estimate.rates import decayed_count, decayed_exposure
from scheduler_core.estimate.source import SourcePopulation
from scheduler_core.multipliers import drift_tolerance
from scheduler_core.params import UrlParams
from service.errors import StoreUnavailable
from service.scheduler.background import run_leading
from service.scheduler.context import Context
from service.scheduler.priors import stack_priors
from service.scheduler.scoring import freshness_at, params_of_table, thresholds
from service.settings import Settings
from service.store.base import ScoredParams, UrlPrior
from service.store.estimate_columns import EstimateColumns, estimate_table

__all__ = [
    "GLOBAL_KEY",
    "Learned",
    "history_of",
    "host_key",
    "label_key",
    "empty_history",
    "learn",
    "learn_once",
    "learn_pass",
    "priors_of",
    "relearn",
    "flush_relearn",
    "queue_relearn",
    "root_priors",
    "run_learner",
]


GLOBAL_KEY = "global"
#: Batches of at least this many URLs are computed off the event loop (numpy and
#: scipy release the GIL); smaller ones inline, where a thread hand-off costs more.
_THREAD_MIN = 512

T = TypeVar("T")


async def _compute(size: int, fn: Callable[..., T], *args: Any) -> T:
    if size >= _THREAD_MIN:
        return await asyncio.to_thread(fn, *args)
    return fn(*args)


def host_key(host: str) -> str:
    """The group key of a host's statistics."""
    return f"host:{host}"


def label_key(label: str) -> str:
    """The group key of a label's statistics."""
    return f"label:{label}"


def root_priors(s: Settings) -> Prior4:
    """The top of the hierarchy: the operator's defaults, weak (shape 0.5 for rates,
    1.5 for α and θ).  γ's root mean is the default change rate (a source that
    announces about every change); θ's is 1 (precision 0.63)."""
    delta = max(s.default_change_rate, 1e-12)
    return {
        "weight": GammaPrior.from_mean(max(s.default_weight, 1e-12), 0.5),
        "signal_rate": GammaPrior.from_mean(delta, 0.5),
        "alpha": GammaPrior.from_mean(delta, 1.5),
        "theta": GammaPrior.from_mean(1.0, 1.5),
    }


def history_of(cols: EstimateColumns, now: float, decay_s: float) -> History:
    """The estimators' view of URLs (:meth:`~service.store.base.Store.estimate_columns`)
    at ``now``."""
    clicks = decayed_count(cols.clicks[:, 0], cols.clicks[:, 1], now, decay_s)
    signals = decayed_count(cols.signals[:, 0], cols.signals[:, 1], now, decay_s)
    exposure = decayed_exposure(cols.params[:, 5], now, decay_s)
    return History.from_windows(
        clicks, signals, exposure, cols.outcome_tau, cols.outcome_n, cols.outcome_changed,
        cols.outcome_counts,
    )  # fmt: skip


async def _groups(ctx: Context, keys: Sequence[str]) -> dict[str, GroupStats]:
    unique = sorted(set(keys))
    got = await ctx.store.get_groups(unique)
    return {k: GroupStats.from_tuple(v) for k, v in zip(unique, got, strict=True)}


#: Prior chains by what they are computed from (:func:`_chain`), least recently used
#: first; at most ``_CHAINS_MAX`` (~1 kB each).
_CHAINS: OrderedDict[bytes, Prior4] = OrderedDict()
_CHAINS_MAX = 16_384


def _packed(values: Sequence[float] | None) -> bytes:
    """Group statistics as a cache key (NaN-safe: compared as bytes)."""
    return b"N" if values is None else struct.pack(f"<{len(values)}d", *values)


def _chain(
    root: Prior4,
    root_key: bytes,
    pseudo_urls: float,
    global_stats: tuple[float, ...] | None,
    label_stats: tuple[float, ...] | None,
    host_stats: tuple[float, ...] | None,
    *,
    labelled: bool,
) -> Prior4:
    """:func:`prior_chain` of the groups' stored statistics (``label_stats`` only when
    ``labelled``), memoised: it is a pure function of them, and many URLs share a host
    (all hosts without statistics share one chain).  The result is shared: not to be
    changed."""
    label_part = b"L" + _packed(label_stats) if labelled else b"-"
    key = b"|".join(
        (root_key, struct.pack("<d", pseudo_urls), _packed(global_stats), label_part,
         _packed(host_stats))
    )  # fmt: skip
    chain = _CHAINS.get(key)
    if chain is not None:
        _CHAINS.move_to_end(key)
        return chain
    label = GroupStats.from_tuple(label_stats) if labelled else None
    chain = _CHAINS[key] = prior_chain(
        root, GroupStats.from_tuple(global_stats), label, GroupStats.from_tuple(host_stats),
        pseudo_urls,
    )  # fmt: skip
    if len(_CHAINS) > _CHAINS_MAX:
        _CHAINS.popitem(last=False)
    return chain


async def _chains_of(
    ctx: Context, hosts: Sequence[str], labels: Sequence[str | None]
) -> list[Prior4]:
    """Each URL's prior chain: its host's statistics ← its label's ← the global ones ←
    the root (one object per host and label)."""
    s = ctx.settings
    keys = [GLOBAL_KEY, *(host_key(h) for h in hosts)]
    keys += [label_key(x) for x in labels if x is not None]
    unique = sorted(set(keys))
    groups = dict(zip(unique, await ctx.store.get_groups(unique), strict=True))
    root = root_priors(s)
    root_key = struct.pack("<8d", *(x for q in root.values() for x in (q.shape, q.rate)))
    out = []
    chains: dict[tuple[str, str | None], Prior4] = {}
    for host, label in zip(hosts, labels, strict=True):
        chain = chains.get((host, label))
        if chain is None:
            stats = None if label is None else groups[label_key(label)]
            chain = chains[host, label] = _chain(
                root, root_key, s.prior_pseudo_urls, groups[GLOBAL_KEY], stats,
                groups[host_key(host)], labelled=label is not None,
            )  # fmt: skip
        out.append(chain)
    return out


async def priors_of(ctx: Context, hosts: Sequence[str], given: Sequence[UrlPrior]) -> Priors:
    """The URLs' priors, (m,) arrays: each host's statistics ← its label's ← the
    global ones ← the root, then the values given at registration (paper 003 §4.2)."""
    chains = await _chains_of(ctx, hosts, [p.label for p in given])
    return stack_priors(chains, given, ctx.settings.prior_strength)


@dataclass(frozen=True, slots=True)
class Learned:
    """Estimates of stored URLs (the non-fixed rows of what was read) with the priors
    they came from."""

    columns: EstimateColumns
    priors: Priors
    estimates: Estimates


def empty_history(m: int) -> History:
    """The history of m URLs never observed."""
    return History.create([0.0] * m, [0.0] * m, [0.0] * m, [()] * m)


async def learn(ctx: Context, cols: EstimateColumns, outcomes: bool = True) -> Learned:
    """Estimate the (non-fixed) URLs of ``cols`` at the clock's now; without
    ``outcomes`` only W and γ (α and θ stay as stored: clicks and signals bring no
    crawl outcome)."""
    fixed = cols.fixed
    if fixed.any():
        cols = cols.take(np.flatnonzero(~fixed))
    priors = await priors_of(ctx, cols.hosts, cols.priors)
    history = history_of(cols, ctx.clock.now(), ctx.settings.estimate_decay_s)
    known = None
    if not outcomes and len(cols):
        p = params_of_table(cols.params)
        precision = np.minimum(p.precision, 1.0 - 1e-16)
        known = (p.unsignalled_change_rate, -np.log1p(-precision))
    est = await _compute(len(cols), estimate, history, priors, known)
    return Learned(cols, priors, est)


def _moved(cols: EstimateColumns, est: Estimates, tolerance: float) -> np.ndarray:
    """True where any parameter moved by more than ``tolerance`` (relative; recall
    in absolute terms)."""
    p = est.params
    old = cols.params[:, :4]
    new = np.stack([p.weight, p.change_rate, p.recall, p.false_signal_rate], axis=1)
    rel = np.abs(new - old) / np.maximum(np.maximum(np.abs(old), np.abs(new)), 1e-300)
    rel[:, 2] = np.abs(new[:, 2] - old[:, 2])
    return np.asarray((rel > tolerance).any(axis=1))


@dataclass(frozen=True, slots=True)
class _Scores:
    """What a write-back compares a URL's scored Λ with: its host's Λ_h now (W·s) and
    the rescorer's drift tolerance (relative;
    :func:`~scheduler_core.multipliers.drift_tolerance`)."""

    lam_of: dict[str, float]
    tolerance: float


async def _scores(ctx: Context, hosts: Sequence[str]) -> _Scores:
    """:class:`_Scores` of ``hosts``: two reads of the store."""
    lam_of = await ctx.store.host_thresholds(sorted(set(hosts)))
    lam0 = await ctx.store.lambda0_tracker()
    return _Scores(lam_of, drift_tolerance(ctx.settings.rescore_tolerance, lam0, ctx.tracker))


def _stale(cols: EstimateColumns, scores: _Scores) -> np.ndarray:
    """True where a URL ever crawled holds a threshold computed for a Λ that drifted from
    its host's Λ_h now by more than the tolerance (``scores``), as a rescoring pass
    would find its host: a pass leaves out the URLs never crawled (due at their
    registration whatever their threshold), so a URL's first crawl brings it here with
    the Λ of its registration."""
    lambdas = np.array([scores.lam_of[h] for h in cols.hosts], dtype=np.float64)
    scored = cols.params[:, 6]
    crawled = ~np.isnan(cols.params[:, 7])
    with np.errstate(divide="ignore", invalid="ignore"):
        drift = np.abs(np.log(lambdas / scored))
    off = ~(drift <= math.log1p(scores.tolerance)) & (lambdas > 0)  # NaN scored: never
    return np.asarray(crawled & off)


async def apply(
    ctx: Context, learned: Learned, force: bool = False, scores: _Scores | None = None
) -> int:
    """Write the estimates that moved (all with ``force``), and those of URLs whose
    threshold went stale (:func:`_stale`), with thresholds at their hosts' Λ_h
    (``scores``, read here when not given); returns how many URLs were re-scored."""
    cols, est = learned.columns, learned.estimates
    if not len(cols):
        return 0
    if scores is None:
        scores = await _scores(ctx, cols.hosts)
    moved = np.ones(len(cols), dtype=bool)
    if not force:
        moved = _moved(cols, est, ctx.settings.relearn_tolerance) | _stale(cols, scores)
    idx = np.flatnonzero(moved)
    return await _rescore_rows(ctx, cols, idx, est.params.take(idx), scores.lam_of)


async def _rescore_fixed(ctx: Context, cols: EstimateColumns, scores: _Scores) -> int:
    """The URLs of ``cols`` whose parameters are fixed (not estimated) and whose
    threshold went stale (:func:`_stale`: a URL's first crawl, after passes that left
    it out) get one at their host's Λ_h; returns how many."""
    rows = np.flatnonzero(cols.fixed)
    if rows.size == 0:
        return 0
    sub = cols.take(rows)
    idx = np.flatnonzero(_stale(sub, scores))
    return await _rescore_rows(ctx, sub, idx, params_of_table(sub.params[idx]), scores.lam_of)


async def _rescore_rows(
    ctx: Context,
    cols: EstimateColumns,
    idx: np.ndarray,
    params: UrlParams,
    lam_of: dict[str, float],
) -> int:
    """Write ``params`` (those of rows ``idx`` of ``cols``) with thresholds at their
    hosts' Λ_h (``lam_of``); returns how many URLs."""
    if idx.size == 0:
        return 0
    rows = idx.tolist()
    hosts = [cols.hosts[i] for i in rows]
    lambdas = np.array([lam_of[h] for h in hosts])
    previous = cols.params[idx, 4]
    terms = ctx.settings.value_terms
    thr = await _compute(int(idx.size), thresholds, params, lambdas, terms, previous)
    columns = (
        params.weight, params.change_rate, params.recall, params.false_signal_rate,
        params.signal_time_equivalent, thr,
    )  # fmt: skip
    values = zip(*(np.asarray(c, dtype=np.float64).tolist() for c in columns), strict=True)
    by_host: dict[str, dict[str, ScoredParams]] = defaultdict(dict)
    for i, host, row in zip(rows, hosts, values, strict=True):
        by_host[host][cols.urls[i]] = ScoredParams(*row)
    await ctx.store.set_params_many([(h, items, lam_of[h]) for h, items in by_host.items()])
    ctx.metrics.relearned.inc(int(idx.size))
    return int(idx.size)


async def relearn(ctx: Context, urls: Sequence[str], outcomes: bool = True) -> int:
    """Re-estimate the named URLs from their stored history (W and γ only without
    ``outcomes``); re-score those whose parameters moved, and those whose threshold
    went stale (fixed ones too: :func:`_rescore_fixed`).  Returns how many were
    re-scored."""
    if not urls:
        return 0
    cols = await ctx.store.estimate_columns(sorted(set(urls)))
    if not len(cols):
        return 0
    scores = await _scores(ctx, cols.hosts)  # once, for the estimated and the fixed rows
    learned = await learn(ctx, cols, outcomes)
    return await apply(ctx, learned, scores=scores) + await _rescore_fixed(ctx, cols, scores)


async def flush_relearn(ctx: Context, budget_s: float | None = None) -> int:
    """Relearn every queued URL, in batches of ``relearn_batch``; returns URLs re-scored.

    Events queue the URLs whose history they added to
    (:class:`~service.scheduler.context.RelearnQueue`); batching them keeps the
    numerics vectorised at high event rates.  With ``budget_s`` (wall s), no batch
    starts once that much has passed: the URLs not done stay queued.  If the store
    fails midway, the URLs not yet done go back to the queue and the error propagates.
    """
    queue = ctx.relearn_queue
    with_outcomes, without, since = queue.take()
    step = ctx.settings.relearn_batch
    stop_at = math.inf if budget_s is None else time.monotonic() + budget_s
    n = 0
    for urls, outcomes in ((with_outcomes, True), (without, False)):
        for k in range(0, len(urls), step):
            try:
                if time.monotonic() >= stop_at:
                    raise _OutOfTime
                n += await relearn(ctx, urls[k : k + step], outcomes)
            except BaseException as exc:
                queue.put_back(urls[k:], outcomes, since)
                if outcomes:
                    queue.put_back(without, False, since)
                if isinstance(exc, _OutOfTime):
                    return n
                raise
    return n


class _OutOfTime(Exception):
    """The budget of a :func:`flush_relearn` call is spent."""


async def queue_relearn(
    ctx: Context, urls: Sequence[str], outcomes: bool, since: float = math.inf
) -> None:
    """Queue ``urls`` for :func:`flush_relearn`; flush now when the queue is full
    (``relearn_batch``).  The events are stored already: a store failure while
    flushing leaves the URLs queued for the background task, it does not fail the
    request.  ``since``: when the oldest event behind them was appended (store's clock)."""
    ctx.relearn_queue.add(urls, outcomes, since)
    if len(ctx.relearn_queue) >= ctx.settings.relearn_batch:
        try:
            await flush_relearn(ctx)
        except StoreUnavailable:
            pass


async def learn_pass(ctx: Context) -> int:
    """One background pass of the learner's cycle over the hosts: for up to
    ``learn_batch`` URLs, host by host, refresh the host's statistics in the store
    and re-estimate its URLs under them; when the cycle has seen every host,
    publish the label and global sums and start over.  Along the way it sums the
    model's freshness estimate Σ W·P(fresh) / Σ W over the URLs it reads, reported
    to the metrics at the end of each cycle.  Returns URLs re-scored."""
    s = ctx.settings
    now = ctx.clock.now()
    cycle = ctx.learn_cycle
    if cycle.done:
        hosts = [h.host for h in (await ctx.store.stats(ctx.clock, 1 << 30)).top_hosts]
        old_global = (await _groups(ctx, [GLOBAL_KEY]))[GLOBAL_KEY]
        root = root_priors(s)
        chained = prior_chain(root, old_global, None, GroupStats(), s.prior_pseudo_urls)["theta"]
        cycle.start(
            hosts, GammaPrior.from_mean((chained.shape - 1.0) / chained.rate, 1.5),
            SourcePopulation.from_tuple(old_global.population), old_global.sources_shared > 0,
        )  # fmt: skip
    assert cycle.theta_prior is not None
    rescored = seen = 0
    while not cycle.done and seen < s.learn_batch:
        host = cycle.next_host()
        states = await ctx.store.host_urls(host)
        if not states:
            continue
        seen += len(states)
        cycle.add_freshness(np.array([u.weight for u in states]), freshness_at(states, now))
        cols = estimate_table(states)
        history = history_of(cols, now, s.estimate_decay_s)
        # off the event loop (a pass is background work), one host at a time
        mem = await asyncio.to_thread(members, history, cycle.theta_prior, s.estimate_decay_s)
        source = await asyncio.to_thread(cycle.source.add, history)
        own = mem.stats()
        if source is not None:
            own = replace(own, source=source.to_tuple())
        await ctx.store.put_groups({host_key(host): own.to_tuple()})
        cycle.total = cycle.total + own
        names = np.array([u.prior.label or "" for u in states])
        for label in set(names.tolist()) - {""}:
            cycle.labels[label] = cycle.labels.get(label, GroupStats()) + mem.stats(names == label)
        learned = await learn(ctx, cols)
        await asyncio.sleep(0)  # serve what waits, then write back (in process: one loop)
        rescored += await apply(ctx, learned)
    if cycle.done:
        # the sums: W, γ, α and θ over the URLs of every host (of each label)
        groups = {label_key(k): v.to_tuple() for k, v in cycle.labels.items()}
        fit = await asyncio.to_thread(cycle.source.finish)
        total = cycle.total
        if fit.population is not None:
            total = replace(
                total, population=fit.population.to_tuple(), evidence=fit.evidence,
                sources_shared=float(fit.shared),
            )  # fmt: skip
        groups[GLOBAL_KEY] = total.to_tuple()
        await ctx.store.put_groups(groups)
        duration_s = time.monotonic() - cycle.started_at
        ctx.metrics.learner_cycle_done(cycle.freshness, duration_s, cycle.urls, total.evidence)
    return rescored


async def learn_once(ctx: Context) -> int:
    """:func:`learn_pass`, counted in the metrics (with the time it ended)."""
    n = await learn_pass(ctx)
    ctx.metrics.learn_passes.inc()
    ctx.metrics.learner_pass_done()
    return n


async def run_learner(ctx: Context, stop: asyncio.Event | None = None) -> None:
    """A :func:`learn_pass` every ``learn_interval_s`` wall seconds (one process of
    several: the ``learner`` role's holder)."""
    await run_leading(ctx, "learner", ctx.settings.learn_interval_s, learn_once, stop)
