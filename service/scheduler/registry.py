"""Use cases of the URL frontier's membership: register, drop, explain (a URL:
:mod:`service.scheduler.explain`; a host: here)."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from scheduler_core.estimate.learn import estimate
from scheduler_core.params import UrlParams
from service.scheduler import hosts
from service.scheduler.context import Context
from service.scheduler.explain import explain_url
from service.scheduler.idempotency import batch_key
from service.scheduler.learning import empty_history, priors_of, relearn
from service.scheduler.scoring import thresholds
from service.schemas import HostOut, RegisterOut, UrlIn
from service.store.base import UrlPrior, UrlRecord
from service.urls import host_of

__all__ = ["explain_host", "explain_url", "purge", "register", "unregister"]


def _or(value: float | None, default: float) -> float:
    return default if value is None else value


async def register(
    ctx: Context, items: Sequence[UrlIn], key: str | None = None, *, keep_known: bool = False
) -> RegisterOut:
    """Register or update URLs; each gets its threshold at its host's current Λ_h.
    ``key``: the batch's idempotency key (a repeat answers as the first time).

    With ``keep_known`` the URLs already registered are left as they are (their
    ``crawl_delay_s``, if given, still sets their host's politeness) and counted as kept.

    Raises
    ------
    InvalidInput
        Batch too large, or ``last_crawled_at`` in the future (nothing changed).
    """
    ctx.check_batch("urls", len(items))
    now = ctx.clock.now()
    ctx.check_times("urls", "last_crawled_at", (i.last_crawled_at for i in items), now)
    hosts = [host_of(i.url) for i in items]
    lambda_of = await ctx.store.host_thresholds(sorted(set(hosts)))
    given = [_prior(i) for i in items]
    params = await _initial_params(ctx, hosts, given)
    lambdas = np.array([lambda_of[h] for h in hosts])
    thr = thresholds(params, lambdas, ctx.settings.value_terms)
    beta = params.signal_time_equivalent
    records = [
        UrlRecord(
            url=item.url,
            host=host,
            weight=float(params.weight[k]),
            change_rate=float(params.change_rate[k]),
            recall=float(params.recall[k]),
            false_signal_rate=float(params.false_signal_rate[k]),
            signal_time_equivalent_s=float(beta[k]),
            threshold_s=float(thr[k]),
            scored_lambda=float(lambdas[k]),
            last_crawled_at=item.last_crawled_at,
            crawl_delay_s=item.crawl_delay_s,
            prior=given[k],
        )
        for k, (item, host) in enumerate(zip(items, hosts, strict=True))
    ]
    once = batch_key(ctx, "urls", key, items)
    created = await ctx.store.upsert_urls(records, now, once, keep_known=keep_known)
    n_new = sum(created)
    if keep_known:
        return RegisterOut(created=n_new, updated=0, kept=len(created) - n_new)
    # a URL registered again keeps its history: estimate from it under the new priors
    await relearn(ctx, [i.url for i, new in zip(items, created, strict=True) if not new])
    return RegisterOut(created=n_new, updated=len(created) - n_new)


def _prior(item: UrlIn) -> UrlPrior:
    return UrlPrior(
        label=item.label, weight=item.weight, change_rate=item.change_rate, recall=item.recall,
        false_signal_rate=item.false_signal_rate, fixed=item.fixed,
    )  # fmt: skip


async def _initial_params(
    ctx: Context, hosts: Sequence[str], given: Sequence[UrlPrior]
) -> UrlParams:
    """Parameters of URLs as registered: fixed ones as given (missing values from
    the settings' defaults); the others the estimate of a URL with no history under
    its priors (its host's and label's behaviour, or the values given)."""
    s = ctx.settings
    fixed = UrlParams.create(
        weight=[_or(p.weight, s.default_weight) for p in given],
        change_rate=[_or(p.change_rate, s.default_change_rate) for p in given],
        recall=[_or(p.recall, s.default_recall) for p in given],
        false_signal_rate=[_or(p.false_signal_rate, s.default_false_signal_rate) for p in given],
    )
    learned = [k for k, p in enumerate(given) if not p.fixed]
    if not learned:
        return fixed
    priors = await priors_of(ctx, [hosts[k] for k in learned], [given[k] for k in learned])
    est = estimate(empty_history(len(learned)), priors).params
    arrays = {
        name: getattr(fixed, name).copy()
        for name in ("weight", "change_rate", "recall", "false_signal_rate")
    }
    for name, values in arrays.items():
        values[learned] = getattr(est, name)
    return UrlParams.create(**arrays)


async def purge(ctx: Context, retired_before: float) -> int:
    """Delete the URLs retired before ``retired_before`` (Unix s); how many."""
    return await ctx.store.purge_retired(retired_before)


async def unregister(ctx: Context, urls: Sequence[str]) -> int:
    """Drop URLs and their leases; returns how many were registered."""
    ctx.check_batch("urls", len(urls))
    return await ctx.store.remove_urls(urls)


async def explain_host(ctx: Context, host: str) -> HostOut:
    """A host's politeness gate, block, queue and multiplier
    (:func:`service.scheduler.hosts.explain_host`).

    Raises
    ------
    NotFound
        If no URL of the host was ever registered.
    """
    return await hosts.explain_host(ctx, host)
