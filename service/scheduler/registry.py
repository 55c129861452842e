"""Use cases of the URL frontier's membership: register, drop, explain."""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np

from scheduler_core.params import UrlParams
from service.errors import NotFound
from service.scheduler.context import Context
from service.scheduler.scoring import effective_elapsed, params_of, thresholds, values_at
from service.schemas import HostOut, RegisterOut, UrlExplanation, UrlIn
from service.store.base import UrlRecord, UrlState
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
    s = ctx.settings
    hosts = [host_of(i.url) for i in items]
    lambda_of = await ctx.store.host_thresholds(sorted(set(hosts)))
    params = UrlParams.create(
        weight=[_or(i.weight, s.default_weight) for i in items],
        change_rate=[_or(i.change_rate, s.default_change_rate) for i in items],
        recall=[_or(i.recall, s.default_recall) for i in items],
        false_signal_rate=[_or(i.false_signal_rate, s.default_false_signal_rate) for i in items],
    )
    lambdas = np.array([lambda_of[h] for h in hosts])
    thr = thresholds(params, lambdas, s.value_terms)
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
        )
        for k, (item, host) in enumerate(zip(items, hosts, strict=True))
    ]
    created = await ctx.store.upsert_urls(records, now)
    n_new = sum(created)
    return RegisterOut(created=n_new, updated=len(created) - n_new)


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
    now = ctx.clock.now()
    (state,) = await ctx.store.get_urls([url])
    if state is None:
        raise NotFound(f"URL not registered: {url}")
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
        decision=_decision(ctx, state, value, host.threshold, host.gate_at, now),
    )


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
        raise NotFound(f"host not known: {host}")
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
    )
