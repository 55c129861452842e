"""Use cases of the URL frontier's membership: register, drop, explain."""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np

from scheduler_core.estimate.hierarchy import GroupStats
from scheduler_core.estimate.learn import estimate
from scheduler_core.params import UrlParams
from service.error_bodies import quote
from service.errors import NotFound
from service.scheduler.context import Context
from service.scheduler.learning import (
    empty_history,
    flush_relearn,
    history_of,
    host_key,
    priors_of,
    relearn,
)
from service.scheduler.scoring import effective_elapsed, params_of, thresholds, values_at
from service.schemas import (
    EstimateOut,
    HostOut,
    LearningOut,
    RegisterOut,
    UrlExplanation,
    UrlIn,
)
from service.store.base import UrlPrior, UrlRecord, UrlState
from service.urls import host_of

__all__ = ["explain_host", "explain_url", "register", "unregister"]


def _or(value: float | None, default: float) -> float:
    return default if value is None else value


async def register(ctx: Context, items: Sequence[UrlIn]) -> RegisterOut:
    """Register or update URLs; each gets its threshold at its host's current Λ_h.

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
    created = await ctx.store.upsert_urls(records, now)
    # a URL registered again keeps its history: estimate from it under the new priors
    await relearn(ctx, [i.url for i, new in zip(items, created, strict=True) if not new])
    n_new = sum(created)
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


async def unregister(ctx: Context, urls: Sequence[str]) -> int:
    """Drop URLs and their leases; returns how many were registered."""
    ctx.check_batch("urls", len(urls))
    return await ctx.store.remove_urls(urls)


def _finite(x: float) -> float | None:
    return x if math.isfinite(x) else None


async def explain_url(ctx: Context, url: str) -> UrlExplanation:
    """Everything that decides when ``url`` is crawled, and the decision in words.

    Raises
    ------
    NotFound
        If the URL is not registered.
    """
    await flush_relearn(ctx)  # read your writes: estimates include every accepted event
    now = ctx.clock.now()
    (state,) = await ctx.store.get_urls([url])
    if state is None:
        raise NotFound(f"URL not registered: {quote(url)}")
    host = await ctx.store.get_host(state.host, now)
    assert host is not None, "a registered URL has a host"
    stats_lambda0 = (await ctx.store.stats(now, 0)).lambda0
    p = params_of([state])
    value = float(values_at([state], now, ctx.settings.value_terms)[0])
    tau_eff = float(effective_elapsed([state], now)[0])
    alpha = float(p.unsignalled_change_rate[0])
    fresh_p = 1.0 if alpha == 0 else (0.0 if math.isinf(tau_eff) else math.exp(-alpha * tau_eff))
    return UrlExplanation(
        url=state.url,
        host=state.host,
        weight=state.weight,
        change_rate=state.change_rate,
        recall=state.recall,
        false_signal_rate=state.false_signal_rate,
        signal_rate=float(p.signal_rate[0]),
        precision=float(p.precision[0]),
        unsignalled_change_rate=alpha,
        signal_time_equivalent_s=_finite(state.signal_time_equivalent_s),
        now=now,
        registered_at=state.registered_at,
        last_crawl_at=state.last_crawl_at,
        elapsed_s=None if state.last_crawl_at is None else now - state.last_crawl_at,
        signals_since_crawl=state.signals_since_crawl,
        effective_elapsed_s=_finite(tau_eff),
        crawl_value=value,
        max_value=float(p.max_value[0]),
        threshold=host.threshold,
        lambda0=stats_lambda0,
        lambda_h=host.lambda_h,
        scored_threshold=state.scored_lambda,
        threshold_s=_finite(state.threshold_s),
        due_at=state.due_at,
        due_in_s=state.due_at - now,
        freshness_probability=fresh_p,
        lease_id=state.lease_id,
        lease_deadline=state.lease_deadline,
        host_gate_at=_finite(host.gate_at),
        clicks=state.clicks,
        signals=state.signals,
        crawls=state.crawls,
        changes=state.changes,
        fetch_errors=state.fetch_errors,
        learning=await _learning(ctx, state),
        decision=_decision(ctx, state, value, host.threshold, host.gate_at, now),
    )


async def _learning(ctx: Context, state: UrlState) -> LearningOut:
    """Estimate, prior and evidence of each learned quantity (the stored parameters
    are the estimates as of the URL's last re-score)."""
    p = params_of([state])
    used = {
        "weight": state.weight,
        "signal_rate": float(p.signal_rate[0]),
        "alpha": float(p.unsignalled_change_rate[0]),
        "theta": -math.log1p(-float(p.precision[0])) if p.precision[0] < 1 else math.inf,
    }
    h = history_of([state], ctx.clock.now(), ctx.settings.estimate_decay_s)
    evidence = {
        "weight": float(h.clicks[0]),
        "signal_rate": float(h.signals[0]),
        "alpha": float(h.mask.sum()),
        "theta": float(h.mask.sum()),
    }
    priors = None
    if not state.prior.fixed:
        priors = (await priors_of(ctx, [state.host], [state.prior])).row(0)

    def out(q: str) -> EstimateOut:
        prior = None if priors is None else priors[q]
        return EstimateOut(
            estimate=used[q] if math.isfinite(used[q]) else None,
            prior_mean=None if prior is None else prior.mean,
            prior_shape=None if prior is None else prior.shape,
            observations=evidence[q],
        )

    return LearningOut(
        fixed=state.prior.fixed, label=state.prior.label, weight=out("weight"),
        signal_rate=out("signal_rate"), unsignalled_change_rate=out("alpha"),
        signal_quality=out("theta"),
    )  # fmt: skip


def _decision(
    ctx: Context, s: UrlState, value: float, threshold: float, gate_at: float, now: float
) -> str:
    if s.lease_id is not None:
        return f"leased until {s.lease_deadline:.0f}: a worker is fetching it"
    if s.last_crawl_at is None:
        why = "never crawled: due since registration"
    elif s.due_at > now and math.isinf(s.threshold_s):
        return (
            f"not worth a crawl at threshold {threshold:.4g} (its most, W/Δ, is below); "
            f"revisited at the {ctx.settings.max_revisit_s:.0f} s cap, in {s.due_at - now:.0f} s"
        )
    elif s.due_at > now:
        return (
            f"due in {s.due_at - now:.0f} s, when its crawl value ({value:.4g} now) reaches "
            f"the threshold {s.scored_lambda:.4g}"
        )
    elif value >= threshold:
        why = f"due: crawl value {value:.4g} >= threshold {threshold:.4g}"
    else:
        why = f"due: revisit cap reached (crawl value {value:.4g} < threshold {threshold:.4g})"
    if gate_at > now:
        return f"{why}; host politeness holds it until {gate_at:.0f}"
    return f"{why}; waiting for a worker to ask /next"


async def explain_host(ctx: Context, host: str) -> HostOut:
    """A host's politeness gate, queue and multiplier.

    Raises
    ------
    NotFound
        If no URL of the host was ever registered.
    """
    h = await ctx.store.get_host(host, ctx.clock.now())
    if h is None:
        raise NotFound(f"host not known: {quote(host)}")
    (stats,) = await ctx.store.get_groups([host_key(host)])
    group = GroupStats.from_tuple(stats)
    theta = group.pooled_theta
    return HostOut(
        host=h.host,
        crawl_delay_s=h.crawl_delay_s,
        gate_at=_finite(h.gate_at),
        urls=h.urls,
        queued=h.queued,
        due=h.due,
        next_due_at=h.next_due_at,
        lambda_h=h.lambda_h,
        threshold=h.threshold,
        scored_threshold=h.scored_lambda,
        signal_precision=None if not theta > 0 else -math.expm1(-theta),
        signal_outcomes=group.pooled_outcomes,
    )
